#include "serialize/io/hash.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY  // XXH3_generateSecret_fromSeed
#include <xxhash.h>
#if defined(__x86_64__) && !defined(__EMSCRIPTEN__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "ptepack/error.h"
#include "serialize/io/bytes_source.h"
#include "serialize/io/file_io.h"
#include "serialize/io/mapped_reads.h"

// libxxhash's runtime-dispatched XXH3 (x86 builds have it, see
// xxh_x86dispatch.h); weak, so a library without it still links and the
// portable entry point is used.
extern "C" XXH_errorcode XXH3_64bits_update_dispatch(XXH3_state_t* state, const void* input, size_t len)
    __attribute__((weak));
extern "C" XXH64_hash_t XXH3_64bits_dispatch(const void* input, size_t len) __attribute__((weak));

namespace ptepack {
namespace {

// Large enough to amortize the syscall, small enough to stay in L2 while
// XXH3 reads it back.
constexpr size_t kBlock = 256 << 10;

// XXH3_64bits, runtime-dispatched where libxxhash has it.
uint64_t Xxh3OneShot(const void* p, size_t n) {
  return XXH3_64bits_dispatch != nullptr ? XXH3_64bits_dispatch(p, n) : XXH3_64bits(p, n);
}

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

// Feeds memory to `state`, dropping mapped pages after use (a mapped file
// cut short while it is read is a read-failed error: mapped_reads.h).
void FeedMemory(const Bytes& b, Xxh3Stream* state) {
  constexpr size_t kChunk = 4 << 20;
  for (size_t off = 0; off < b.size; off += kChunk) {
    const uint8_t* p = b.data + off;
    const size_t n = std::min(kChunk, b.size - off);
    ReadMappedPages(b, [&] { state->Update(p, n); });
    if (MappingOf(b)) MappingOf(b)->DropPages(p, n);
  }
}

// Mapped files are hashed from their file, read with pread into a buffer
// (1 MiB a thread), not through the mapping: the copy runs through the
// kernel's own mapping of memory, while reading the page cache through ours
// takes a fault per folio and a TLB miss per 4 KiB page, which on a VM walks
// two page tables. On this project's VM (2026-12, Linux 6.18) `verify
// --checksum` of 1 GiB in the page cache took 0.07 s that way and 0.25-0.27 s
// through the mapping (8,000 faults; 0.06-0.07 s right after the file was
// written, in large folios), against xxhsum's 0.13 s. (The VM before it had
// the opposite: 0.28 s with pread and 0.105 s through the mapping on one
// core; docs/performance.md, Rounds 6 and 9.) The mapping is read only when
// the file cannot be opened again.

// Runs `work` on the calling thread and, where the machine has a second
// core and a thread can be made, on a helper too (each call returns when
// its share is done). The helper blocks every signal but faults: SIGINT and
// friends go to the caller, as for the writer thread of file_io.cpp, while a
// SIGBUS of a mapped file cut short still reaches mapped_reads' guard.
void OnTwoThreads(const std::function<void()>& work) {
  std::thread helper;
  sigset_t all, old;
  sigfillset(&all);
  for (int fault : {SIGBUS, SIGSEGV, SIGFPE, SIGILL}) sigdelset(&all, fault);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    helper = std::thread(work);
  } catch (const std::system_error&) {
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  work();
  if (helper.joinable()) helper.join();
}

// ---- XXH3-64 of one long range on two threads ------------------------------
//
// XXH3-64 of more than 240 bytes keeps 8 64-bit lanes. Each 1 KiB block adds
// to them a sum over its 16 stripes that does not depend on the lanes, then
// scrambles them; the last (partial) block, the last stripe and the merge
// finish the digest (xxhash.h, XXH3_hashLong_64b_internal). So the block sums
// of a long range are found on both cores, a chunk at a time, and the
// scrambles, a few instructions a block, are applied in order: the digest is
// the one XXH3_64bits gives for the same bytes (tested against it and
// against xxhsum).
namespace par {

constexpr size_t kStripe = 64;
constexpr size_t kStripesPerBlock = 16;  // (secret size 192 - 64) / 8
constexpr size_t kBlockBytes = kStripe * kStripesPerBlock;
constexpr size_t kSecretSize = 192;
// Blocks a thread reads at a time: 1 MiB, one chunk of work. Each pread of
// the page cache is a syscall, which on this project's VM (a PVM guest) goes
// through the host: 1 GiB in 256 KiB reads (4,096 of them, Round 16) took
// `verify --checksum` 0.073 s, in 1 MiB reads 0.062 s (median of 40
// alternating runs each; 512 KiB 0.067 s, 2 MiB 0.065 s; docs/performance.md,
// Round 17). 1 MiB is also what one core's L2 holds while XXH3 reads it back.
constexpr size_t kReadBlocks = (1 << 20) / kBlockBytes;
constexpr size_t kChunkBlocks = kReadBlocks;  // blocks a thread takes at a time
// Chunks summed ahead of the scrambles. A thread that stops (another process
// on its core, the host taking the vCPU) holds the next chunk to scramble;
// the other goes on until it is this far ahead. Read from a file, 64 chunks
// (64 MiB of data, 4 MiB of block sums): with a busy loop on one core,
// `verify --checksum` of 1 GiB took 0.101 s with 4, 0.098 s with 32 and
// 0.086 s with 64 (medians of 30 alternating runs; alone, 0.054 s with 4 or
// 64). From a mapping, 4: each chunk ahead keeps its mapped pages (DropBehind).
constexpr size_t kRingFromFile = 64;
constexpr size_t kRingFromMapping = 4;

constexpr uint64_t kPrime32_1 = 0x9E3779B1u, kPrime32_2 = 0x85EBCA77u, kPrime32_3 = 0xC2B2AE3Du;
constexpr uint64_t kPrime64_1 = 0x9E3779B185EBCA87ull, kPrime64_2 = 0xC2B2AE3D27D4EB4Full,
                   kPrime64_3 = 0x165667B19E3779F9ull, kPrime64_4 = 0x85EBCA77C2B2AE63ull,
                   kPrime64_5 = 0x27D4EB2F165667C5ull;  // xxhash.h's XXH_PRIME*

struct Lanes {
  uint64_t v[8];
};

uint64_t Read64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;  // little-endian hosts only (x86-64, wasm, aarch64 Linux)
}

const uint8_t* Secret() {
  static const auto* secret = [] {
    static uint8_t s[kSecretSize];
    XXH3_generateSecret_fromSeed(s, 0);  // seed 0: the default secret
    return s;
  }();
  return secret;
}

void Accumulate512(uint64_t* acc, const uint8_t* in, const uint8_t* key) {
  for (size_t i = 0; i < 8; ++i) {
    const uint64_t d = Read64(in + 8 * i), k = d ^ Read64(key + 8 * i);
    acc[i ^ 1] += d;
    acc[i] += (k & 0xffffffffu) * (k >> 32);
  }
}

void BlockSumsPortable(const uint8_t* p, size_t blocks, const uint8_t* secret, Lanes* out) {
  for (size_t b = 0; b < blocks; ++b, p += kBlockBytes) {
    uint64_t acc[8] = {};
    for (size_t s = 0; s < kStripesPerBlock; ++s) Accumulate512(acc, p + kStripe * s, secret + 8 * s);
    std::memcpy(out[b].v, acc, sizeof acc);
  }
}

void ScramblePortable(uint64_t* acc, const Lanes* sums, size_t blocks, const uint8_t* secret) {
  const uint8_t* key = secret + kSecretSize - kStripe;
  for (size_t b = 0; b < blocks; ++b) {
    for (size_t i = 0; i < 8; ++i) {
      uint64_t a = acc[i] + sums[b].v[i];
      a ^= a >> 47;
      a ^= Read64(key + 8 * i);
      acc[i] = a * kPrime32_1;
    }
  }
}

#if defined(__x86_64__) && !defined(__EMSCRIPTEN__)
__attribute__((target("avx2"))) void BlockSumsAvx2(const uint8_t* p, size_t blocks, const uint8_t* secret, Lanes* out) {
  for (size_t b = 0; b < blocks; ++b, p += kBlockBytes) {
    __m256i acc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (size_t s = 0; s < kStripesPerBlock; ++s) {
      for (size_t j = 0; j < 2; ++j) {
        const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kStripe * s + 32 * j));
        const __m256i k =
            _mm256_xor_si256(d, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(secret + 8 * s + 32 * j)));
        const __m256i product = _mm256_mul_epu32(k, _mm256_shuffle_epi32(k, _MM_SHUFFLE(0, 3, 0, 1)));
        const __m256i swapped = _mm256_shuffle_epi32(d, _MM_SHUFFLE(1, 0, 3, 2));
        acc[j] = _mm256_add_epi64(acc[j], _mm256_add_epi64(product, swapped));
      }
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].v), acc[0]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].v + 4), acc[1]);
  }
}

__attribute__((target("avx2"))) void ScrambleAvx2(uint64_t* lanes, const Lanes* sums, size_t blocks,
                                                  const uint8_t* secret) {
  const uint8_t* key = secret + kSecretSize - kStripe;
  __m256i acc[2], keys[2];
  for (size_t j = 0; j < 2; ++j) {
    acc[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lanes + 4 * j));
    keys[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(key + 32 * j));
  }
  const __m256i prime = _mm256_set1_epi32(static_cast<int>(kPrime32_1));
  for (size_t b = 0; b < blocks; ++b) {
    for (size_t j = 0; j < 2; ++j) {
      __m256i a = _mm256_add_epi64(acc[j], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums[b].v + 4 * j)));
      a = _mm256_xor_si256(_mm256_xor_si256(a, _mm256_srli_epi64(a, 47)), keys[j]);
      const __m256i lo = _mm256_mul_epu32(a, prime);
      const __m256i hi = _mm256_mul_epu32(_mm256_shuffle_epi32(a, _MM_SHUFFLE(0, 3, 0, 1)), prime);
      acc[j] = _mm256_add_epi64(lo, _mm256_slli_epi64(hi, 32));
    }
  }
  for (size_t j = 0; j < 2; ++j) _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes + 4 * j), acc[j]);
}

bool HaveAvx2() {
  static const bool have = __builtin_cpu_supports("avx2");
  return have;
}
#endif

void BlockSums(const uint8_t* p, size_t blocks, Lanes* out) {
#if defined(__x86_64__) && !defined(__EMSCRIPTEN__)
  if (HaveAvx2()) return BlockSumsAvx2(p, blocks, Secret(), out);
#endif
  BlockSumsPortable(p, blocks, Secret(), out);
}

void Scramble(uint64_t* acc, const Lanes* sums, size_t blocks) {
#if defined(__x86_64__) && !defined(__EMSCRIPTEN__)
  if (HaveAvx2()) return ScrambleAvx2(acc, sums, blocks, Secret());
#endif
  ScramblePortable(acc, sums, blocks, Secret());
}

uint64_t Mix2(const uint64_t* acc, const uint8_t* key) {
  const unsigned __int128 m =
      static_cast<unsigned __int128>(acc[0] ^ Read64(key)) * static_cast<unsigned __int128>(acc[1] ^ Read64(key + 8));
  return static_cast<uint64_t>(m) ^ static_cast<uint64_t>(m >> 64);
}

// The digest from the lanes after the full blocks and `tail`: the last
// (1..1024) bytes of the range, preceded by the 64 bytes before them.
uint64_t Finish(uint64_t* acc, const uint8_t* tail, size_t tail_size, uint64_t len) {
  const uint8_t* secret = Secret();
  const uint8_t* start = tail + kStripe;
  const size_t stripes = (tail_size - 1) / kStripe;
  for (size_t s = 0; s < stripes; ++s) Accumulate512(acc, start + kStripe * s, secret + 8 * s);
  Accumulate512(acc, start + tail_size - kStripe, secret + kSecretSize - kStripe - 7);  // the last stripe
  uint64_t h = len * kPrime64_1;
  for (size_t i = 0; i < 4; ++i) h += Mix2(acc + 2 * i, secret + 11 + 16 * i);
  h ^= h >> 37;
  h *= 0x165667919E3779F9ULL;
  return h ^ (h >> 32);
}

// Reads [offset, offset + n) of the range's source into `buf` (pread), or
// points at it (memory). `done` drops mapped pages once hashed.
struct Source {
  int fd = -1;
  const Bytes* mem = nullptr;
  uint64_t base = 0;  // file offset (fd) or offset in mem of the range
  const uint8_t* Get(uint64_t offset, size_t n, uint8_t* buf) const {
    if (fd < 0) return mem->data + base + offset;
    uint8_t* p = buf;
    uint64_t at = base + offset;
    while (n > 0) {
      ssize_t r = ::pread(fd, p, n, static_cast<off_t>(at));
      if (r < 0) {
        if (errno == EINTR) continue;
        ReadFailed("cannot read input");
      }
      if (r == 0) throw Error("read-failed", "input ended early (was it truncated?)");
      p += r;
      at += static_cast<uint64_t>(r);
      n -= static_cast<size_t>(r);
    }
    return buf;
  }
  const MappedFile* Mapping() const { return fd < 0 ? MappingOf(*mem) : nullptr; }
  // BlockSums of `blocks` blocks at `offset` (read-failed if a mapped file
  // was cut short under us).
  void Sums(uint64_t offset, size_t blocks, uint8_t* buf, Lanes* out) const {
    const uint8_t* p = Get(offset, blocks * kBlockBytes, buf);
    auto sums = [&] { BlockSums(p, blocks, out); };
    if (fd >= 0) {
      sums();
    } else {
      ReadMappedPages(*mem, sums);
    }
  }
};

// Drops a mapped range's pages behind the scrambles. Every chunk below the
// scrambled ones is summed, and a fault maps neighbours only within its own
// window (MappedFile::kDropWindow), so the windows wholly below the one
// holding the scrambled chunks' end are never touched again. Dropped by each
// chunk as it was summed instead, a chunk's window (rounded out) took the
// pages the other thread was reading (1 GiB: ~1,600 faults more and ~10 % of
// the time).
class DropBehind {
 public:
  // The range read from `src`, when it is a mapping (else this does nothing).
  explicit DropBehind(const Source& src)
      : mapping_(src.Mapping()), range_(mapping_ ? src.mem->data + src.base : nullptr), dropped_(range_) {}
  // Everything below offset `end` of the range has been read.
  void ReadUpTo(uint64_t end) {
    constexpr size_t kWindow = MappedFile::kDropWindow;
    if (mapping_ == nullptr || range_ + end < dropped_ + 2 * kWindow) return;  // no whole window behind yet
    // The start of the window holding `end` (DropPages rounds out: an end on
    // a window's boundary stays there).
    const uint8_t* upto = reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(range_ + end) & ~(kWindow - 1));
    mapping_->DropPages(dropped_, static_cast<size_t>(upto - dropped_));
    dropped_ = upto;
  }
  // The rest, once nothing reads the range any more; [from, end) was read
  // last (the tail, which may reach into a window dropped before).
  void Rest(uint64_t from, uint64_t end) {
    if (mapping_ == nullptr) return;
    const uint8_t* first = std::min(range_ + from, dropped_);
    if (range_ + end > first) mapping_->DropPages(first, static_cast<size_t>(range_ + end - first));
  }

 private:
  const MappedFile* mapping_;
  const uint8_t* range_;
  const uint8_t* dropped_;
};

uint64_t HashOnTwoThreads(const Source& src, uint64_t size) {
  const uint64_t blocks = (size - 1) / kBlockBytes;  // scrambled ones; the rest is the tail
  const uint64_t chunks = (blocks + kChunkBlocks - 1) / kChunkBlocks;
  uint64_t acc[8] = {kPrime32_3, kPrime64_1, kPrime64_2, kPrime64_3, kPrime64_4, kPrime32_2, kPrime64_5, kPrime32_1};
  // No deeper than the range's chunks; filled before it is read, so not zeroed.
  const size_t ring_chunks = static_cast<size_t>(
      std::min<uint64_t>(src.fd >= 0 ? kRingFromFile : kRingFromMapping, std::max<uint64_t>(chunks, 1)));
  std::unique_ptr<Lanes[]> ring(new Lanes[ring_chunks * kChunkBlocks]);
  std::mutex mu;
  std::condition_variable cv;
  uint64_t next = 0;       // next chunk to sum
  uint64_t scrambled = 0;  // chunks scrambled into acc
  bool scrambling = false, failed = false;
  std::vector<bool> ready(ring_chunks, false);
  std::exception_ptr error;
  DropBehind drop(src);  // by the scrambling thread only

  auto work = [&] {
    std::vector<uint8_t> buf(src.fd >= 0 ? kReadBlocks * kBlockBytes : 0);
    try {
      for (;;) {
        uint64_t k;
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return failed || next >= chunks || next < scrambled + ring_chunks; });
          if (failed || next >= chunks) return;
          k = next++;
        }
        const uint64_t first = k * kChunkBlocks;
        const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunkBlocks, blocks - first));
        // A read buffer's worth at a time from a file; memory (a mapping: its
        // pages dropped once summed) a chunk at a time.
        const size_t step = src.fd >= 0 ? kReadBlocks : kChunkBlocks;
        for (size_t i = 0; i < n; i += step) {
          const size_t m = std::min(step, n - i);
          src.Sums((first + i) * kBlockBytes, m, buf.data(), &ring[(k % ring_chunks) * kChunkBlocks + i]);
        }
        // Scramble every chunk that is ready, in order; one thread at a time.
        std::unique_lock<std::mutex> lock(mu);
        ready[k % ring_chunks] = true;
        while (!scrambling && scrambled < chunks && ready[scrambled % ring_chunks]) {
          const uint64_t c = scrambled;
          scrambling = true;
          lock.unlock();
          const size_t cn = static_cast<size_t>(std::min<uint64_t>(kChunkBlocks, blocks - c * kChunkBlocks));
          Scramble(acc, &ring[(c % ring_chunks) * kChunkBlocks], cn);
          drop.ReadUpTo((c * kChunkBlocks + cn) * kBlockBytes);
          lock.lock();
          ready[c % ring_chunks] = false;
          scrambling = false;
          ++scrambled;
          cv.notify_all();
        }
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
      failed = true;
      cv.notify_all();
    }
  };
  OnTwoThreads(work);  // without a second core or thread, the caller does all
  if (error) std::rethrow_exception(error);
  // The last 1..1024 bytes and the 64 before them (the last stripe may reach back).
  const uint64_t tail_at = blocks * kBlockBytes;
  const size_t tail = static_cast<size_t>(size - tail_at);
  std::vector<uint8_t> buf(kStripe + kBlockBytes);
  const uint8_t* p = src.Get(tail_at - kStripe, kStripe + tail, buf.data());
  if (src.fd < 0) {  // the tail into buf, so that Finish reads no mapped page
    const uint8_t* from = p;
    ReadMappedPages(*src.mem, [&] { std::memcpy(buf.data(), from, kStripe + tail); });
    p = buf.data();
  }
  const uint64_t h = Finish(acc, p, tail, size);
  drop.Rest(tail_at - kStripe, size);
  return h;
}

bool TwoThreads(uint64_t size) {
#if defined(__EMSCRIPTEN__)
  (void)size;
  return false;
#else
  static const bool cores = std::thread::hardware_concurrency() > 1;
  return cores && size >= kHashTwoThreadsFrom;  // below it, a thread costs more than it saves
#endif
}

}  // namespace par

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
  if (par::TwoThreads(size)) return par::HashOnTwoThreads(par::Source{fd, nullptr, offset}, size);
  Xxh3Stream s;
  std::vector<uint8_t> buf(kBlock);
  Feed(fd, offset, size, &s, buf);
  return s.Digest();
}

uint64_t HashBytes(const Bytes& b) {
  if (const MappedFile* m = MappingHolding(b)) {
    Fd fd{m->Reopen()};
    if (fd.fd >= 0) return HashFileRange(fd.fd, static_cast<uint64_t>(b.data - m->data()), b.size);
  }
  if (par::TwoThreads(b.size)) return par::HashOnTwoThreads(par::Source{-1, &b, 0}, b.size);
  Xxh3Stream s;
  FeedMemory(b, &s);
  return s.Digest();
}

BytesHasher::~BytesHasher() = default;

// One thread, whatever the size: callers hash thousands of pieces (a model's
// constants), and a helper thread per piece waits for the scheduler of a busy
// machine more than it saves (split of 256 x 4 MiB constants at load 12:
// 2.40 s with one per constant, 1.27 s before it).
uint64_t BytesHasher::Hash(const Bytes& b) {
  const int fd = reader_.Open(b);
  if (fd < 0) return HashBytes(b);
  if (buf_.size() < kBlock) buf_.resize(kBlock);
  if (b.size <= kBlock) {
    // One read and the one-shot hash (the same value as the stream's).
    reader_.Read(b, 0, b.size, buf_.data());
    return Xxh3OneShot(buf_.data(), b.size);
  }
  Xxh3Stream s;
  Feed(fd, static_cast<uint64_t>(b.data - MappingOf(b)->data()), b.size, &s, buf_);
  return s.Digest();
}

namespace {

// Reads ranges of a file (in offset order; they may overlap) with few preads:
// ranges closer than kJoinGap to the ones before are read with them, up to
// kSpan bytes a read; a range longer than kSpan is read alone, kSpan at a
// time. `fn(i, piece, n, last)` gets range i whole (a range of up to kSpan
// bytes) or piece by piece. A .ptd of 300,000 small tensors took 600,032
// preads to checksum, one per region and one per gap (0.89 s, xxhsum 0.013 s).
class RangeReader {
 public:
  struct Range {
    uint64_t offset, size;
  };
  static constexpr uint64_t kSpan = 1 << 20;
  static constexpr uint64_t kJoinGap = 64 << 10;  // about what one more pread costs here, in copied bytes

  RangeReader(int fd, uint64_t base) : fd_(fd), base_(base), buf_(kSpan) {}

  template <class F>
  void Read(const std::vector<Range>& ranges, size_t from, size_t to, F&& fn) {
    par::Source src{fd_, nullptr, base_};
    for (size_t i = from; i < to;) {
      const Range& first = ranges[i];
      if (first.size > kSpan) {  // alone, a span at a time
        for (uint64_t at = 0; at < first.size;) {
          const size_t n = static_cast<size_t>(std::min<uint64_t>(kSpan, first.size - at));
          fn(i, src.Get(first.offset + at, n, buf_.data()), n, at + n == first.size);
          at += n;
        }
        ++i;
        continue;
      }
      uint64_t end = first.offset + first.size;
      size_t j = i + 1;
      for (; j < to; ++j) {
        const Range& r = ranges[j];
        const uint64_t r_end = std::max(end, r.offset + r.size);
        if (r.offset > end + kJoinGap || r_end - first.offset > kSpan) break;
        end = r_end;
      }
      const uint8_t* p = src.Get(first.offset, static_cast<size_t>(end - first.offset), buf_.data());
      for (size_t k = i; k < j; ++k) {
        fn(k, p + (ranges[k].offset - first.offset), static_cast<size_t>(ranges[k].size), true);
      }
      i = j;
    }
  }

 private:
  int fd_;
  uint64_t base_;
  std::vector<uint8_t> buf_;
};

// The regions under kHashTwoThreadsFrom, each whole on one thread: both
// threads take the next batch of neighbouring regions (about 4 MiB of them)
// and read it through a RangeReader (a .ptd of 512 tensors of 2 MiB was
// hashed on one thread, 0.8x xxhsum).
void HashShortRegions(int fd, uint64_t base, std::vector<RegionSum>& regions, const std::vector<size_t>& order) {
  std::vector<RangeReader::Range> ranges;
  ranges.reserve(order.size());
  uint64_t bytes = 0;
  for (size_t i : order) {
    ranges.push_back({regions[i].offset, regions[i].size});
    bytes += regions[i].size;
  }
  constexpr uint64_t kBatchBytes = 4 << 20;
  std::vector<size_t> batches = {0};  // where each batch starts in `ranges`
  for (size_t i = 0, n = 0; i < ranges.size(); ++i) {
    n += ranges[i].size;
    if (n >= kBatchBytes && i + 1 < ranges.size()) {
      batches.push_back(i + 1);
      n = 0;
    }
  }
  batches.push_back(ranges.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::exception_ptr error;
  auto work = [&] {
    try {
      RangeReader reader(fd, base);
      std::unique_ptr<Xxh3Stream> stream;  // a region read in pieces (over 1 MiB)
      for (size_t b; !failed && (b = next++) + 1 < batches.size();) {
        reader.Read(ranges, batches[b], batches[b + 1], [&](size_t k, const uint8_t* p, size_t n, bool last) {
          RegionSum& r = regions[order[k]];
          if (last && !stream) {  // whole: the one-shot hash (the stream's value)
            r.xxh3 = Xxh3OneShot(p, n);
            return;
          }
          if (!stream) stream = std::make_unique<Xxh3Stream>();
          stream->Update(p, n);
          if (last) {
            r.xxh3 = stream->Digest();
            stream.reset();
          }
        });
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
      failed = true;
    }
  };
  if (batches.size() > 2 && par::TwoThreads(bytes)) {
    OnTwoThreads(work);
  } else {
    work();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace

void HashRegions(const Bytes& file, std::vector<RegionSum>* regions) {
  for (const auto& r : *regions) {
    if (r.offset > file.size || r.size > file.size - r.offset) {
      throw Error("internal-range", r.name + " lies outside the file");
    }
  }
  Fd fd;
  uint64_t base = 0;
  if (const MappedFile* m = MappingHolding(file)) {
    fd.fd = m->Reopen();
    base = static_cast<uint64_t>(file.data - m->data());
    if (fd.fd >= 0)
      ::posix_fadvise(fd.fd, static_cast<off_t>(base), static_cast<off_t>(file.size), POSIX_FADV_SEQUENTIAL);
  }
  // In file order; bytes not covered by any region go to the padding stream.
  std::vector<size_t> order(regions->size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return (*regions)[a].offset < (*regions)[b].offset; });
  std::vector<RangeReader::Range> gaps;
  std::vector<size_t> shorter;  // from a file: hashed together, after the padding
  uint64_t covered = 0;         // end of the bytes handled so far
  for (size_t i : order) {
    RegionSum& r = (*regions)[i];
    if (r.offset > covered) gaps.push_back({covered, r.offset - covered});
    if (par::TwoThreads(r.size)) {
      r.xxh3 = par::HashOnTwoThreads(
          fd.fd >= 0 ? par::Source{fd.fd, nullptr, base + r.offset} : par::Source{-1, &file, r.offset}, r.size);
    } else if (fd.fd >= 0) {
      shorter.push_back(i);
    } else {
      Xxh3Stream s;
      FeedMemory(file.Sub(static_cast<size_t>(r.offset), static_cast<size_t>(r.size)), &s);
      r.xxh3 = s.Digest();
    }
    covered = std::max(covered, r.offset + r.size);
  }
  if (file.size > covered) gaps.push_back({covered, file.size - covered});
  Xxh3Stream pad;
  uint64_t pad_size = 0;
  if (fd.fd >= 0) {
    RangeReader(fd.fd, base).Read(gaps, 0, gaps.size(), [&](size_t, const uint8_t* p, size_t n, bool) {
      pad.Update(p, n);
    });
  } else {
    for (const auto& g : gaps) {
      FeedMemory(file.Sub(static_cast<size_t>(g.offset), static_cast<size_t>(g.size)), &pad);
    }
  }
  for (const auto& g : gaps) pad_size += g.size;
  if (!shorter.empty()) HashShortRegions(fd.fd, base, *regions, shorter);
  regions->push_back(RegionSum{"padding", 0, pad_size, pad.Digest()});
}

}  // namespace ptepack
