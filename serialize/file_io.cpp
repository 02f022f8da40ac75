#include "serialize/file_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>

#include "serialize/error.h"

namespace ptepack {
namespace {

std::atomic<uint64_t> g_fail_after{UINT64_MAX};

[[noreturn]] void ThrowErrno(const std::string& code, const std::string& what,
                             const std::string& path) {
  Finding f;
  f.code = code;
  f.file = path;
  f.message = what + ": " + std::strerror(errno);
  throw Error(std::move(f));
}

}  // namespace

Bytes Bytes::Copy(const void* p, size_t n) {
  std::vector<uint8_t> v(static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
  return Own(std::move(v));
}

Bytes Bytes::Own(std::vector<uint8_t> v) {
  auto holder = std::make_shared<std::vector<uint8_t>>(std::move(v));
  Bytes b;
  b.data = holder->data();
  b.size = holder->size();
  b.owner = holder;
  return b;
}

Bytes Bytes::View(const void* p, size_t n, std::shared_ptr<const void> owner) {
  Bytes b;
  b.data = static_cast<const uint8_t*>(p);
  b.size = n;
  b.owner = std::move(owner);
  return b;
}

Bytes Bytes::Sub(size_t off, size_t n) const {
  if (off > size || n > size - off) {
    throw Error("internal-range", "byte range [" + std::to_string(off) + ", +" +
                                      std::to_string(n) + ") outside a view of " +
                                      std::to_string(size) + " bytes");
  }
  Bytes b = View(data + off, n, owner);
  b.file_backed = file_backed;
  return b;
}

bool Bytes::Equals(const Bytes& o) const {
  return size == o.size && (size == 0 || std::memcmp(data, o.data, size) == 0);
}

std::shared_ptr<MappedFile> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) ThrowErrno("open-failed", "cannot open file", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    ThrowErrno("open-failed", "cannot stat file", path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    Finding f;
    f.code = "open-failed";
    f.file = path;
    f.message = "not a regular file";
    throw Error(std::move(f));
  }
  std::shared_ptr<MappedFile> m(new MappedFile());
  m->path_ = path;
  m->size_ = static_cast<size_t>(st.st_size);
  if (m->size_ > 0) {
    void* p = ::mmap(nullptr, m->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      ThrowErrno("mmap-failed", "cannot map file", path);
    }
    m->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  m->self_ = m;
  return m;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

Bytes MappedFile::View(size_t off, size_t n) const {
  if (off > size_ || n > size_ - off) {
    throw Error("internal-range", "view outside mapped file " + path_);
  }
  Bytes b = Bytes::View(data_ == nullptr ? nullptr : data_ + off, n, self_.lock());
  b.file_backed = true;
  return b;
}

namespace {
constexpr size_t kBufSize = 1 << 20;
}

AtomicFile::AtomicFile(const std::string& path, const Options& options) : path_(path) {
  struct stat target {};
  if (::stat(path.c_str(), &target) == 0 && !options.allow_overwrite_input) {
    for (const auto& in : options.inputs) {
      struct stat s {};
      if (::stat(in.c_str(), &s) == 0 && s.st_dev == target.st_dev && s.st_ino == target.st_ino) {
        Finding f;
        f.code = "overwrite-input";
        f.file = path;
        f.message = "output is the same file as input " + in +
                    "; refusing to overwrite it in place (use --in-place to allow)";
        throw Error(std::move(f));
      }
    }
  }
  std::random_device rd;
  for (int attempt = 0; attempt < 16 && fd_ < 0; ++attempt) {
    tmp_path_ = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rd() & 0xffffff);
    fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0 && errno != EEXIST) break;
  }
  if (fd_ < 0) ThrowErrno("create-failed", "cannot create temporary output " + tmp_path_, path);
  buf_.reserve(kBufSize);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_path_.empty()) ::unlink(tmp_path_.c_str());
}

void AtomicFile::SetFailAfterBytesForTesting(uint64_t n) { g_fail_after = n; }

void AtomicFile::RawWrite(const uint8_t* p, size_t n) {
  uint64_t limit = g_fail_after.load();
  while (n > 0) {
    size_t chunk = n;
    if (limit != UINT64_MAX) {
      // Bytes on disk so far = file position of fd.
      off_t pos = ::lseek(fd_, 0, SEEK_CUR);
      if (static_cast<uint64_t>(pos) + chunk > limit) {
        errno = ENOSPC;
        ThrowErrno("write-failed", "cannot write output (injected fault)", path_);
      }
    }
    ssize_t w = ::write(fd_, p, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      ThrowErrno("write-failed", "cannot write output", path_);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void AtomicFile::Flush() {
  if (!buf_.empty()) {
    RawWrite(buf_.data(), buf_.size());
    buf_.clear();
  }
}

void AtomicFile::Write(const void* p, size_t n) {
  if (n == 0) return;
  const uint8_t* b = static_cast<const uint8_t*>(p);
  if (buf_.size() + n <= kBufSize) {
    buf_.insert(buf_.end(), b, b + n);
  } else {
    Flush();
    if (n >= kBufSize) {
      RawWrite(b, n);
    } else {
      buf_.insert(buf_.end(), b, b + n);
    }
  }
  offset_ += n;
}

void AtomicFile::WriteZeros(uint64_t n) {
  static const uint8_t kZeros[4096] = {};
  while (n > 0) {
    size_t c = n > sizeof kZeros ? sizeof kZeros : static_cast<size_t>(n);
    Write(kZeros, c);
    n -= c;
  }
}

void AtomicFile::PadTo(uint64_t off) {
  if (off < offset_) {
    throw Error("internal-layout", "cannot pad backwards from " + std::to_string(offset_) +
                                       " to " + std::to_string(off) + " in " + path_);
  }
  WriteZeros(off - offset_);
}

void AtomicFile::Commit() {
  Flush();
  if (::fsync(fd_) != 0) ThrowErrno("write-failed", "cannot sync output", path_);
  if (::close(fd_) != 0) {
    fd_ = -1;
    ThrowErrno("write-failed", "cannot close output", path_);
  }
  fd_ = -1;
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    ThrowErrno("write-failed", "cannot rename temporary output into place", path_);
  }
  committed_ = true;
}

}  // namespace ptepack
