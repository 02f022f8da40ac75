#include "serialize/io/hash.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "ptepack/error.h"
#include "serialize/io/bytes_source.h"

// libxxhash's runtime-dispatched XXH3 (x86 builds have it, see
// xxh_x86dispatch.h); weak, so a library without it still links and the
// portable entry point is used.
extern "C" XXH_errorcode XXH3_64bits_update_dispatch(XXH3_state_t* state, const void* input, size_t len)
    __attribute__((weak));

namespace ptepack {
namespace {

// Large enough to amortize the syscall, small enough to stay in L2 while
// XXH3 reads it back.
constexpr size_t kBlock = 256 << 10;

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

[[noreturn]] void ReadFailed(const std::string& what) {
  throw Error("read-failed", what + ": " + std::strerror(errno));
}

// Feeds [offset, offset + size) of fd to `state`.
void Feed(int fd, uint64_t offset, uint64_t size, Xxh3Stream* state, std::vector<uint8_t>& buf) {
  while (size > 0) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(size, buf.size()));
    ssize_t r = ::pread(fd, buf.data(), want, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      ReadFailed("cannot read input");
    }
    if (r == 0) throw Error("read-failed", "input ended early (was it truncated?)");
    state->Update(buf.data(), static_cast<size_t>(r));
    offset += static_cast<uint64_t>(r);
    size -= static_cast<uint64_t>(r);
  }
}

// Feeds memory to `state`, dropping mapped pages after use.
void FeedMemory(const Bytes& b, Xxh3Stream* state) {
  constexpr size_t kChunk = 8 << 20;
  for (size_t off = 0; off < b.size; off += kChunk) {
    size_t n = std::min(kChunk, b.size - off);
    state->Update(b.data + off, n);
    if (MappingOf(b)) MappingOf(b)->DropPages(b.data + off, n);
  }
}

}  // namespace

Xxh3Stream::Xxh3Stream() : state_(XXH3_createState()) {
  if (state_ == nullptr) throw std::bad_alloc();
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}

Xxh3Stream::~Xxh3Stream() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void Xxh3Stream::Update(const void* p, size_t n) {
  auto* st = static_cast<XXH3_state_t*>(state_);
  if (XXH3_64bits_update_dispatch != nullptr) {
    XXH3_64bits_update_dispatch(st, p, n);
  } else {
    XXH3_64bits_update(st, p, n);
  }
}

uint64_t Xxh3Stream::Digest() const { return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(state_)); }

std::string HexDigest(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

uint64_t HashFileRange(int fd, uint64_t offset, uint64_t size) {
  Xxh3Stream s;
  std::vector<uint8_t> buf(kBlock);
  Feed(fd, offset, size, &s, buf);
  return s.Digest();
}

uint64_t HashBytes(const Bytes& b) {
  if (MappingOf(b) && MappingOf(b)->Contains(b.data, b.size)) {
    Fd fd{MappingOf(b)->Reopen()};
    if (fd.fd >= 0) return HashFileRange(fd.fd, static_cast<uint64_t>(b.data - MappingOf(b)->data()), b.size);
  }
  Xxh3Stream s;
  FeedMemory(b, &s);
  return s.Digest();
}

BytesHasher::~BytesHasher() = default;

uint64_t BytesHasher::Hash(const Bytes& b) {
  const int fd = reader_.Open(b);
  if (fd < 0) return HashBytes(b);
  if (b.size <= kBlock) {
    // One read and the one-shot hash (the same value as the stream's).
    if (buf_.size() < kBlock) buf_.resize(kBlock);
    reader_.Read(b, 0, b.size, buf_.data());
    return XXH3_64bits(buf_.data(), b.size);
  }
  return HashFileRange(fd, static_cast<uint64_t>(b.data - MappingOf(b)->data()), b.size);
}

void HashRegions(const Bytes& file, std::vector<RegionSum>* regions) {
  for (const auto& r : *regions) {
    if (r.offset > file.size || r.size > file.size - r.offset) {
      throw Error("internal-range", r.name + " lies outside the file");
    }
  }
  Fd fd;
  uint64_t base = 0;
  if (MappingOf(file) && MappingOf(file)->Contains(file.data, file.size)) {
    fd.fd = MappingOf(file)->Reopen();
    base = static_cast<uint64_t>(file.data - MappingOf(file)->data());
    if (fd.fd >= 0)
      ::posix_fadvise(fd.fd, static_cast<off_t>(base), static_cast<off_t>(file.size), POSIX_FADV_SEQUENTIAL);
  }
  std::vector<uint8_t> buf(fd.fd >= 0 ? kBlock : 0);
  auto feed = [&](uint64_t off, uint64_t n, Xxh3Stream* st) {
    if (fd.fd >= 0) {
      Feed(fd.fd, base + off, n, st, buf);
    } else {
      FeedMemory(file.Sub(static_cast<size_t>(off), static_cast<size_t>(n)), st);
    }
  };
  // In file order; bytes not covered by any region go to the padding stream.
  std::vector<size_t> order(regions->size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return (*regions)[a].offset < (*regions)[b].offset; });
  Xxh3Stream pad;
  uint64_t covered = 0, pad_size = 0;  // end of the bytes handled so far
  for (size_t i : order) {
    RegionSum& r = (*regions)[i];
    if (r.offset > covered) {
      feed(covered, r.offset - covered, &pad);
      pad_size += r.offset - covered;
    }
    Xxh3Stream s;
    feed(r.offset, r.size, &s);
    r.xxh3 = s.Digest();
    covered = std::max(covered, r.offset + r.size);
  }
  if (file.size > covered) {
    feed(covered, file.size - covered, &pad);
    pad_size += file.size - covered;
  }
  regions->push_back(RegionSum{"padding", 0, pad_size, pad.Digest()});
}

}  // namespace ptepack
