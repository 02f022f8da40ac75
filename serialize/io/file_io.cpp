#include "serialize/io/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <mutex>
#include <random>
#include <system_error>
#include <thread>

#include "ptepack/error.h"

#if defined(__linux__)  // tmpfs detection and splice (not in the WebAssembly build)
#include <linux/magic.h>
#include <sys/statfs.h>
#define PTEPACK_HAVE_SPLICE 1
#endif

// Emscripten's libc (the browser viewer's build, which never writes files) has no
// SEEK_DATA/SEEK_HOLE; lseek refuses Linux's values there, and CopyExtents copies on.
#ifndef SEEK_DATA
#define SEEK_DATA 3
#define SEEK_HOLE 4
#endif

namespace ptepack {
namespace {

std::atomic<uint64_t> g_fail_after{UINT64_MAX};
std::atomic<bool> g_kernel_copy{true};

[[noreturn]] void ThrowErrno(const std::string& code, const std::string& what, const std::string& path) {
  throw Error(code, what + ": " + std::strerror(errno), path);
}

// A mapped source file got shorter while we copied from it.
[[noreturn]] void ThrowSourceEnded(const std::string& path) {
  throw Error("input-changed", "a source file ended early (was it truncated while writing?)", path);
}

// ---- Interrupts: temp files registered for the signal handler.
constexpr int kSlots = 64;
constexpr size_t kSlotPath = 4096;
struct TempSlot {
  std::atomic<bool> used{false};
  char path[kSlotPath] = {};
};
TempSlot g_slots[kSlots];
std::atomic<int> g_writing{0};
volatile std::sig_atomic_t g_signal = 0;

int RegisterTemp(const std::string& path) {
  if (path.size() >= kSlotPath) return -1;
  for (int i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (!g_slots[i].used.load() && g_slots[i].used.compare_exchange_strong(expected, true)) {
      // Marked used before the path is complete: the handler only unlinks
      // slots whose path is non-empty, and the path is written before
      // its terminating byte is set.
      g_slots[i].path[0] = '\0';
      std::memcpy(g_slots[i].path + 1, path.c_str() + 1, path.size());
      std::atomic_signal_fence(std::memory_order_seq_cst);
      g_slots[i].path[0] = path[0];
      return i;
    }
  }
  return -1;
}

void UnregisterTemp(int slot) {
  if (slot < 0) return;
  g_slots[slot].path[0] = '\0';
  std::atomic_signal_fence(std::memory_order_seq_cst);
  g_slots[slot].used.store(false);
}

extern "C" void OnInterrupt(int sig) {
  if (g_writing.load() > 0 && g_signal == 0) {
    g_signal = sig;
    return;
  }
  for (auto& s : g_slots) {
    if (s.used.load() && s.path[0] != '\0') ::unlink(s.path);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

[[noreturn]] void ThrowErrorAt(const std::string& code, const std::string& path, const std::string& message) {
  throw Error(code, message, path);
}

}  // namespace

void InstallInterruptHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocked write returns EINTR and sees the flag
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGHUP, &sa, nullptr);
}

void ThrowIfInterrupted() {
  if (g_signal != 0) {
    Finding f;
    f.code = "interrupted";
    f.message = std::string("interrupted by ") +
                (g_signal == SIGINT    ? "SIGINT"
                 : g_signal == SIGTERM ? "SIGTERM"
                                       : "a signal") +
                "; temporary files removed, existing outputs unchanged";
    throw Error(std::move(f));
  }
}

void ReraiseInterrupt() {
  int sig = g_signal;
  if (sig == 0) return;
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// The source descriptor of the last finished AtomicFile, kept while writing
// goes on (another AtomicFile or a WritingScope is alive): the next output
// read from the same file (device, inode and size) takes it instead of
// reopening the file. extract writes 10,000 files from one input this way.
namespace {
struct ParkedSource {
  uint64_t dev = 0, ino = 0, size = 0;
  int fd = -1;
  bool may_have_holes = true;
};
std::mutex g_parked_mu;
ParkedSource g_parked;

void CloseParkedSource() {
  std::lock_guard<std::mutex> lock(g_parked_mu);
  if (g_parked.fd >= 0) ::close(g_parked.fd);
  g_parked = ParkedSource{};
}
}  // namespace

WritingScope::WritingScope() { ++g_writing; }
WritingScope::~WritingScope() {
  if (--g_writing == 0) CloseParkedSource();
}

StagedFiles::~StagedFiles() {
  for (const auto& f : files_) ::unlink(f.first.c_str());
}

std::string StagedFiles::NameFor(const std::string& target) {
  return target + ".tmp-staged-" + std::to_string(::getpid());
}

void StagedFiles::RenameAll() {
  RenameAllOrNothing(files_);
  files_.clear();
}

void RenameAllOrNothing(const std::vector<std::pair<std::string, std::string>>& staged) {
  ThrowIfInterrupted();
  struct Backup {
    std::string path;  // empty: the target did not exist (or could not be linked)
    bool existed = false;
  };
  std::vector<Backup> backups(staged.size());
  auto drop_backups = [&] {
    for (const auto& b : backups) {
      if (!b.path.empty()) ::unlink(b.path.c_str());
    }
  };
  for (size_t i = 0; i < staged.size(); ++i) {
    const std::string& target = staged[i].second;
    struct stat st {};
    if (::lstat(target.c_str(), &st) != 0) continue;
    backups[i].existed = true;
    std::string b = target + ".tmp-old-" + std::to_string(::getpid());
    ::unlink(b.c_str());
    if (::link(target.c_str(), b.c_str()) == 0) backups[i].path = b;
  }
  for (size_t i = 0; i < staged.size(); ++i) {
    if (::rename(staged[i].first.c_str(), staged[i].second.c_str()) == 0) continue;
    const int err = errno;
    for (size_t j = 0; j < i; ++j) {
      if (!backups[j].path.empty()) {
        if (::rename(backups[j].path.c_str(), staged[j].second.c_str()) == 0) backups[j].path.clear();
      } else if (!backups[j].existed) {
        ::unlink(staged[j].second.c_str());
      }
    }
    drop_backups();
    errno = err;
    ThrowErrno("write-failed",
               "cannot rename " + staged[i].first + " into place (earlier outputs of this run restored)",
               staged[i].second);
  }
  drop_backups();
}

namespace {

// "a directory", "a FIFO" or "a special file", for messages about st_mode.
const char* FileKind(mode_t mode) {
  return S_ISDIR(mode) ? "a directory" : S_ISFIFO(mode) ? "a FIFO" : "a special file";
}

// Opens a regular file for reading and fills `st`; refuses anything else
// without blocking (O_NONBLOCK: opening a FIFO must not wait for a writer).
int OpenRegularFile(const std::string& path, struct stat& st) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) ThrowErrno("open-failed", "cannot open file", path);
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    ThrowErrno("open-failed", "cannot stat file", path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    ThrowErrorAt("not-regular-file", path,
                 std::string("not a regular file (") + FileKind(st.st_mode) + "); ptepack reads only regular files");
  }
  return fd;
}

// An output could not be created: say why in terms of the output's directory (which may
// not exist), not of the temporary file's name.
[[noreturn]] void ThrowCannotCreate(const std::string& path) {
  const int err = errno;
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    ThrowErrorAt("create-failed", path,
                 "cannot write the output: directory " + dir +
                     (errno == ENOENT ? " does not exist" : std::string(": ") + std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode))
    ThrowErrorAt("create-failed", path, "cannot write the output: " + dir + " is not a directory");
  ThrowErrorAt("create-failed", path, "cannot create a file in directory " + dir + ": " + std::strerror(err));
}

}  // namespace

void CheckInputFile(const std::string& path) {
  struct stat st {};
  ::close(OpenRegularFile(path, st));
}

void CheckOutputPath(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;  // does not exist yet
  if (S_ISLNK(st.st_mode)) {
    std::string target(4096, '\0');
    ssize_t n = ::readlink(path.c_str(), target.data(), target.size() - 1);
    target.resize(n > 0 ? static_cast<size_t>(n) : 0);
    ThrowErrorAt("output-symlink", path,
                 "output is a symbolic link (to " + target +
                     "); ptepack does not write through links: give the link's target as the output");
  }
  if (!S_ISREG(st.st_mode)) {
    ThrowErrorAt("output-not-regular", path,
                 std::string("output exists and is not a regular file (") + FileKind(st.st_mode) + ")");
  }
}

std::string ReadSmallFile(const std::string& path, uint64_t max_bytes) {
  struct stat st {};
  int fd = OpenRegularFile(path, st);
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    ThrowErrorAt("file-too-large", path,
                 "file is " + std::to_string(st.st_size) + " bytes; at most " + std::to_string(max_bytes) +
                     " are accepted here");
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t r = ::read(fd, out.data() + got, out.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      ::close(fd);
      errno = e;
      ThrowErrno("read-failed", "cannot read file", path);
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

Bytes Bytes::Zeros(uint64_t n) {
  if (n > kMaxZeros) {
    throw Error("zeros-too-large",
                "zeros of " + std::to_string(n) + " bytes; at most " + std::to_string(kMaxZeros) + " are supported");
  }
  Bytes b;
  detail::BytesSource::SetZeros(b);
  b.size = static_cast<size_t>(n);
  if (n == 0) return b;
  void* p = ::mmap(nullptr, b.size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) ThrowErrno("mmap-failed", "cannot reserve address space for zeros", "");
  const size_t len = b.size;
  b.owner = std::shared_ptr<const void>(p, [len](const void* q) { ::munmap(const_cast<void*>(q), len); });
  b.data = static_cast<const uint8_t*>(p);
  return b;
}

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
    throw Error("internal-range", "byte range [" + std::to_string(off) + ", +" + std::to_string(n) +
                                      ") outside a view of " + std::to_string(size) + " bytes");
  }
  Bytes b = View(data + off, n, owner);
  detail::BytesSource::SetMapping(b, MappingOf(*this));
  if (IsZeros(*this)) detail::BytesSource::SetZeros(b);
  return b;
}

bool Bytes::Equals(const Bytes& o) const {
  return size == o.size && (size == 0 || std::memcmp(data, o.data, size) == 0);
}

std::shared_ptr<MappedFile> MappedFile::Open(const std::string& path) {
  struct stat st {};
  int fd = OpenRegularFile(path, st);
  std::shared_ptr<MappedFile> m(new MappedFile());
  m->path_ = path;
  m->size_ = static_cast<size_t>(st.st_size);
  m->dev_ = static_cast<uint64_t>(st.st_dev);
  m->ino_ = static_cast<uint64_t>(st.st_ino);
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
  detail::BytesSource::SetMapping(b, this);
  return b;
}

int MappedFile::Reopen() const {
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_dev) != dev_ || static_cast<uint64_t>(st.st_ino) != ino_ ||
      static_cast<uint64_t>(st.st_size) != size_) {
    ::close(fd);
    return -1;
  }
  return fd;
}

const uint8_t* ReadWindow::Get(int fd, uint64_t off, size_t n) {
  if (n > kMaxPiece || fd < 0) return nullptr;
  if (fd == fd_ && off >= off_ && off - off_ <= len_ && n <= len_ - (off - off_)) return buf_.get() + (off - off_);
  if (!buf_) buf_.reset(new uint8_t[kSize]);
  fd_ = -1;
  size_t got = 0;
  while (got < kSize) {
    const ssize_t r = ::pread(fd, buf_.get() + got, kSize - got, static_cast<off_t>(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  if (got < n) return nullptr;
  fd_ = fd;
  off_ = off;
  len_ = got;
  return buf_.get();
}

MappedReader::~MappedReader() {
  if (fd_ >= 0) ::close(fd_);
}

int MappedReader::Open(const Bytes& b) {
  const MappedFile* m = MappingHolding(b);
  if (m == nullptr || IsZeros(b)) return -1;
  if (m != mapping_ || owner_.expired() || fd_ < 0) {
    window_.Forget();
    if (fd_ >= 0) ::close(fd_);
    fd_ = m->Reopen();
    mapping_ = m;
    owner_ = b.owner;
  }
  return fd_;
}

void MappedReader::Read(const Bytes& b, uint64_t from, size_t n, uint8_t* out) {
  const uint64_t off = static_cast<uint64_t>(b.data - MappingOf(b)->data()) + from;
  if (const uint8_t* w = window_.Get(fd_, off, n)) {
    std::memcpy(out, w, n);
    return;
  }
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd_, out + got, n - got, static_cast<off_t>(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      throw Error("read-failed",
                  r < 0 ? std::string("cannot read input: ") + std::strerror(errno)
                        : std::string("input ended early (was it truncated?)"),
                  MappingOf(b)->path(), off + got);
    }
    got += static_cast<size_t>(r);
  }
}

void MappedFile::DropPages(const uint8_t* p, size_t n) const {
  if (data_ == nullptr || n == 0) return;
  static const uintptr_t kPage = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data_), end = begin + size_;
  uintptr_t a = std::max(reinterpret_cast<uintptr_t>(p), begin);
  uintptr_t e = std::min(reinterpret_cast<uintptr_t>(p) + n, end);
  if (a >= e) return;
  // Rounded out to whole 2 MiB windows: a fault maps the faulting page's
  // whole folio (the page cache keeps large files in folios of up to 2 MiB)
  // and resident neighbours, so pages just outside [p, p+n) were mapped by
  // faults inside it. Dropped only to its own pages, a range leaves them
  // mapped for good when their own range was dropped before (two threads
  // hashing 1 GiB in 256 KiB pieces left 54 MB resident). Dropping a
  // neighbour's pages costs it a fault; the mapping starts on a page boundary
  // and owns its last partial page.
  constexpr uintptr_t kWindow = kDropWindow;
  a = std::max(a & ~(kWindow - 1), begin);
  e = std::min((e + kWindow - 1) & ~(kWindow - 1), (end + kPage - 1) & ~(kPage - 1));
  ::madvise(reinterpret_cast<void*>(a), e - a, MADV_DONTNEED);
}

namespace {
constexpr size_t kBufSize = 1 << 20;
// Zero runs at least this long become holes instead of written zeros.
constexpr uint64_t kHoleMin = 1 << 20;
// copy_file_range per call; bounded so the injected-fault check stays exact.
constexpr uint64_t kCopyChunk = 1ull << 30;
// Mapped data at least this long may be copied in the kernel; shorter
// pieces (small tensors) are pread into the buffer.
constexpr size_t kDirectMin = 16 << 10;
// ...and pieces at least this long are copied in the kernel even when the
// offsets are not congruent modulo the page size.
constexpr uint64_t kUnalignedCopyMin = 1 << 20;
// Reading through a mapping maps more than it reads (fault-around, large
// folios): the range dropped afterwards is widened by this much each side.
constexpr uintptr_t kDropSlack = 2 << 20;
// Pages read through a mapping are dropped once a range this long built up.
constexpr size_t kDropBatch = 8 << 20;
// Writeback of the output is started every this many bytes, so the disk
// works while data is still being copied instead of all of it at Commit's
// fsync (the kernel would otherwise wait for 10% of RAM to be dirty).
constexpr uint64_t kWritebackChunk = 32 << 20;
// Unbuffered (O_DIRECT) writing: this many buffers of this size (16 MiB in
// all), written by one thread while the next is filled.
constexpr size_t kUnbufferedBuf = 8 << 20;
constexpr int kUnbufferedBufs = 2;
std::atomic<uint64_t> g_unbuffered_after{AtomicFile::kUnbufferedAfter};
std::atomic<bool> g_refuse_direct{false};  // test hook: O_DIRECT writes fail with EINVAL
std::atomic<uint64_t> g_last_unbuffered{0};
}  // namespace

// Long runs of output data written with O_DIRECT. The caller fills aligned
// buffers (pread from a source file, or copies from memory); a writer
// thread writes each full one at its aligned offset while the caller fills
// the next. The output's bytes are then copied once (source page cache to
// the buffer) instead of twice (to the output's page cache, and from there
// to the disk at writeback), and the disk works while the next buffer is
// read (issue 16; the numbers are in docs/performance.md). Where the file
// system refuses O_DIRECT for a write (EINVAL), the thread writes the rest
// with plain pwrite on the output's own descriptor: same bytes, buffered.
class AtomicFile::Unbuffered {
 public:
  // `fd` is the output, opened for reading and writing; `tmp_path` names it
  // (reopened with O_DIRECT and checked to be the same file). Returns
  // nullptr when O_DIRECT, the buffers or the thread are not available.
  static std::unique_ptr<Unbuffered> Create(int fd, const std::string& tmp_path, const std::string& path) {
    size_t align = 4096;
#ifdef STATX_DIOALIGN
    struct statx sx {};
    if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN) != 0) {
      if (sx.stx_dio_offset_align == 0) return nullptr;  // the file system has no O_DIRECT
      align = std::max<size_t>({align, sx.stx_dio_offset_align, sx.stx_dio_mem_align});
    }
#endif
    if ((align & (align - 1)) != 0 || align > kBufSize) return nullptr;
    int dfd = ::open(tmp_path.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC | O_NOFOLLOW);
    if (dfd < 0) return nullptr;
    struct stat a {
    }, b{};
    if (::fstat(fd, &a) != 0 || ::fstat(dfd, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
      ::close(dfd);
      return nullptr;
    }
    void* mem =
        ::mmap(nullptr, kUnbufferedBuf * kUnbufferedBufs, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
      ::close(dfd);
      return nullptr;
    }
    std::unique_ptr<Unbuffered> u(new Unbuffered(fd, dfd, align, static_cast<uint8_t*>(mem), path));
    // The thread blocks every signal: SIGINT and friends go to the caller,
    // whose loops check for them.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    try {
      u->thread_ = std::thread([p = u.get()] { p->Run(); });
    } catch (const std::system_error&) {
      pthread_sigmask(SIG_SETMASK, &old, nullptr);
      return nullptr;  // the destructor frees the buffers and closes dfd
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return u;
  }

  ~Unbuffered() {
    if (thread_.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;  // queued buffers are dropped: the output is being removed
      }
      cv_.notify_all();
      thread_.join();
    }
    ::munmap(mem_, kUnbufferedBuf * kUnbufferedBufs);
    ::close(dfd_);
  }
  Unbuffered(const Unbuffered&) = delete;
  Unbuffered& operator=(const Unbuffered&) = delete;

  bool active() const { return active_; }

  // Starts a run at file offset `at`: the run begins at `at` rounded down to
  // the alignment, so the bytes of the output before `at` in that block are
  // read back first (zeros where the file is shorter). Returns false if they
  // cannot be read (then nothing was started).
  bool Begin(uint64_t at) {
    pos_ = at & ~static_cast<uint64_t>(align_ - 1);
    const size_t head = static_cast<size_t>(at - pos_);
    uint8_t* b = Buf(cur_);
    std::memset(b, 0, head);
    for (size_t got = 0; got < head;) {
      ssize_t r = ::pread(fd_, b + got, head - got, static_cast<off_t>(pos_ + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return false;
      if (r == 0) break;  // beyond the end of the file: zeros
      got += static_cast<size_t>(r);
    }
    fill_ = head;
    active_ = true;
    return true;
  }

  // Room in the current buffer (never empty); fill it, then call Filled.
  uint8_t* Space(size_t* room) {
    if (fill_ == kUnbufferedBuf) Submit(kUnbufferedBuf);
    *room = kUnbufferedBuf - fill_;
    return Buf(cur_) + fill_;
  }
  void Filled(size_t n) { fill_ += n; }

  // Ends the run: writes every whole block, waits for the thread and
  // returns the file offset of the last partial block, whose bytes (fewer
  // than the alignment, at most kBufSize) are copied to `rest`. Throws if a
  // write failed.
  uint64_t End(uint8_t* rest, size_t* rest_len) {
    uint8_t* b = Buf(cur_);
    const size_t whole = fill_ & ~(align_ - 1);
    const size_t tail = fill_ - whole;
    if (whole > 0) Submit(whole);
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return queued_ == 0; });
      ThrowIfFailed();
    }
    std::memcpy(rest, b + whole, tail);
    *rest_len = tail;
    fill_ = 0;
    active_ = false;
    return pos_;
  }

  // Bytes written with O_DIRECT so far (read after End).
  uint64_t direct_bytes() const { return direct_bytes_; }

 private:
  Unbuffered(int fd, int dfd, size_t align, uint8_t* mem, const std::string& path)
      : fd_(fd), dfd_(dfd), align_(align), mem_(mem), path_(path) {}

  uint8_t* Buf(int i) const { return mem_ + static_cast<size_t>(i) * kUnbufferedBuf; }

  // Hands the first `n` bytes of the current buffer (a multiple of the
  // alignment) to the thread and waits until the next buffer is free.
  void Submit(size_t n) {
    const uint64_t limit = g_fail_after.load();
    if (limit != UINT64_MAX && pos_ + n > limit) {
      errno = ENOSPC;
      ThrowErrno("write-failed", "cannot write output (injected fault)", path_);
    }
    std::unique_lock<std::mutex> lock(mu_);
    ThrowIfFailed();
    jobs_[cur_] = Job{pos_, n};
    ++queued_;
    cv_.notify_all();
    pos_ += n;
    fill_ = 0;
    cur_ = (cur_ + 1) % kUnbufferedBufs;
    // FIFO: the next buffer is busy only while every buffer is queued.
    cv_.wait(lock, [&] { return queued_ < kUnbufferedBufs || failed_ != 0; });
    ThrowIfFailed();
  }

  void ThrowIfFailed() {
    if (failed_ != 0) {
      errno = failed_;
      ThrowErrno("write-failed", "cannot write output", path_);
    }
  }

  void Run() {
    int next = 0;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return queued_ > 0 || stop_; });
      if (stop_) return;
      const Job job = jobs_[next];
      const bool skip = failed_ != 0;
      lock.unlock();
      const int err = skip ? 0 : WriteJob(Buf(next), job);
      lock.lock();
      if (err != 0 && failed_ == 0) failed_ = err;
      --queued_;
      next = (next + 1) % kUnbufferedBufs;
      cv_.notify_all();
    }
  }

  struct Job {
    uint64_t pos = 0;
    size_t n = 0;
  };

  // Returns 0 or an errno.
  int WriteJob(const uint8_t* b, const Job& job) {
    for (size_t done = 0; done < job.n;) {
      ssize_t w = direct_ && g_refuse_direct.load()
                      ? (errno = EINVAL, -1)
                      : ::pwrite(direct_ ? dfd_ : fd_, b + done, job.n - done, static_cast<off_t>(job.pos + done));
      if (w < 0) {
        if (errno == EINTR) continue;
        if (direct_ && (errno == EINVAL || errno == EOPNOTSUPP || errno == ENOTSUP)) {
          direct_ = false;  // refused for this file or these offsets: buffered from here on
          continue;
        }
        return errno;
      }
      if (w == 0) return EIO;
      done += static_cast<size_t>(w);
      if (direct_) direct_bytes_ += static_cast<uint64_t>(w);
    }
    return 0;
  }

  const int fd_;   // the output (plain), for reading back and the fallback
  const int dfd_;  // the output opened with O_DIRECT
  const size_t align_;
  uint8_t* const mem_;  // kUnbufferedBufs buffers of kUnbufferedBuf
  const std::string path_;
  bool active_ = false;
  uint64_t pos_ = 0;  // file offset of the current buffer's first byte
  size_t fill_ = 0;   // bytes in the current buffer
  int cur_ = 0;       // the buffer being filled
  // Shared with the thread, under mu_.
  std::mutex mu_;
  std::condition_variable cv_;
  Job jobs_[kUnbufferedBufs];
  int queued_ = 0;  // buffers handed to the thread, not written yet
  int failed_ = 0;  // errno of the first failed write
  bool stop_ = false;
  // The thread's own (read by the caller after End's wait).
  bool direct_ = true;
  uint64_t direct_bytes_ = 0;
  std::thread thread_;
};

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa {};
  struct stat sb {};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

void RefuseOverwriteInput(const std::string& path, const std::vector<std::string>& inputs) {
  for (const auto& in : inputs) {
    if (!SameFile(in, path)) continue;
    Finding f;
    f.code = "overwrite-input";
    f.file = path;
    f.message =
        "output is the same file as input " + in + "; refusing to overwrite it in place (use --in-place to allow)";
    throw Error(std::move(f));
  }
}

AtomicFile::AtomicFile(const std::string& path, const Options& options)
    : path_(path), sync_(options.sync), direct_(options.direct) {
  if (direct_) {
    OpenDirect();
    return;
  }
  CheckOutputPath(path);
  if (!options.allow_overwrite_input) RefuseOverwriteInput(path, options.inputs);
  std::random_device rd;
  for (int attempt = 0; attempt < 16 && fd_ < 0; ++attempt) {
    tmp_path_ = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rd() & 0xffffff);
    // Read and write: unbuffered writing reads back the start of a block.
    fd_ = ::open(tmp_path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0 && errno != EEXIST) break;
  }
  if (fd_ < 0) ThrowCannotCreate(path);
  slot_ = RegisterTemp(tmp_path_);
  ++g_writing;
  buf_.reset(new uint8_t[kBufSize]);
  NoteFileSystem();
  // The output keeps the mode (and, where permitted, the owner) of the file
  // it replaces.
  const std::string& like = options.replaces.empty() ? path : options.replaces;
  struct stat old {};
  if (::stat(like.c_str(), &old) == 0 && S_ISREG(old.st_mode)) {
    (void)::fchmod(fd_, old.st_mode & 07777);
    if (old.st_uid != ::geteuid() || old.st_gid != ::getegid()) {
      if (::fchown(fd_, old.st_uid, old.st_gid) != 0) (void)::fchown(fd_, static_cast<uid_t>(-1), old.st_gid);
      (void)::fchmod(fd_, old.st_mode & 07777);  // chown clears set-id bits
    }
  }
}

// Options::direct: the target itself, created new.
void AtomicFile::OpenDirect() {
  tmp_path_ = path_;
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0) {
    tmp_path_.clear();  // not ours: never removed
    if (errno == EEXIST) ThrowErrno("create-failed", "cannot create output", path_);
    ThrowCannotCreate(path_);
  }
  slot_ = RegisterTemp(tmp_path_);
  ++g_writing;
  buf_.reset(new uint8_t[kBufSize]);
  NoteFileSystem();
}

// An output on a tmpfs is memory: O_DIRECT there is the buffered path under
// another name (or refused), and the data is best spliced in (SpliceFrom).
void AtomicFile::NoteFileSystem() {
#ifdef PTEPACK_HAVE_SPLICE
  struct statfs fs {};
  in_memory_ = ::fstatfs(fd_, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
  if (in_memory_) unbuffered_refused_ = true;
#endif
}

AtomicFile::~AtomicFile() {
  unbuffered_.reset();  // stops its thread before fd_ is closed
  for (int& p : pipe_) {
    if (p >= 0) ::close(p);
  }
  DropTouched();
  ReleaseSource();
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_path_.empty()) ::unlink(tmp_path_.c_str());
  UnregisterTemp(slot_);
  if (--g_writing == 0) CloseParkedSource();
}

// Parks the source descriptor for the next AtomicFile while other writing
// goes on (g_writing counts this one too), else closes it.
void AtomicFile::ReleaseSource() {
  if (src_.fd < 0) return;
  src_window_.Forget();
  std::lock_guard<std::mutex> lock(g_parked_mu);
  if (g_writing.load() > 1) {
    if (g_parked.fd >= 0) ::close(g_parked.fd);
    g_parked = ParkedSource{src_.dev, src_.ino, src_.size, src_.fd, src_.may_have_holes};
  } else {
    ::close(src_.fd);
  }
  src_.fd = -1;
}

void AtomicFile::SetFailAfterBytesForTesting(uint64_t n) { g_fail_after = n; }
void AtomicFile::SetKernelCopyForTesting(bool enabled) { g_kernel_copy = enabled; }
void AtomicFile::SetUnbufferedAfterForTesting(uint64_t n, bool refuse_direct) {
  g_unbuffered_after = n;
  g_refuse_direct = refuse_direct;
}
uint64_t AtomicFile::LastUnbufferedBytesForTesting() { return g_last_unbuffered.load(); }

void AtomicFile::CheckInjectedFault(uint64_t n) {
  uint64_t limit = g_fail_after.load();
  if (limit != UINT64_MAX && fd_pos_ + n > limit) {
    errno = ENOSPC;
    ThrowErrno("write-failed", "cannot write output (injected fault)", path_);
  }
}

void AtomicFile::RawWrite(const uint8_t* p, size_t n) {
  CheckInjectedFault(n);
  while (n > 0) {
    ThrowIfInterrupted();
    ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      ThrowErrno("write-failed", "cannot write output", path_);
    }
    p += w;
    n -= static_cast<size_t>(w);
    fd_pos_ += static_cast<uint64_t>(w);
  }
  StartWriteback();
}

void AtomicFile::StartWriteback() {
  if (fd_pos_ - writeback_started_ < kWritebackChunk) return;
  // Asynchronous and only a hint: errors surface at fsync.
  ::sync_file_range(fd_, static_cast<off_t>(writeback_started_), static_cast<off_t>(fd_pos_ - writeback_started_),
                    SYNC_FILE_RANGE_WRITE);
  writeback_started_ = fd_pos_;
}

void AtomicFile::Skip(uint64_t n) {
  if (n == 0) return;
  Flush();
  CheckInjectedFault(n);
  if (n > static_cast<uint64_t>(INT64_MAX) - fd_pos_ ||
      ::lseek(fd_, static_cast<off_t>(fd_pos_ + n), SEEK_SET) == static_cast<off_t>(-1)) {
    ThrowErrno("write-failed", "cannot seek in output", path_);
  }
  fd_pos_ += n;
  offset_ += n;
}

// True while unbuffered writing runs; starts a run once this output has
// taken enough bytes from source files.
bool AtomicFile::Unbuffering() {
  if (unbuffered_ && unbuffered_->active()) return true;
  if (unbuffered_refused_ || source_bytes_ < g_unbuffered_after.load()) return false;
  StartUnbuffered();
  return unbuffered_ && unbuffered_->active();
}

// Everything written from here on goes through the unbuffered writer, until
// a hole, a kernel copy or Commit ends the run (Flush).
void AtomicFile::StartUnbuffered() {
  Flush();
  if (!unbuffered_) unbuffered_ = Unbuffered::Create(fd_, tmp_path_, path_);
  if (!unbuffered_ || !unbuffered_->Begin(offset_)) {
    unbuffered_.reset();
    unbuffered_refused_ = true;  // not tried again for this output
  }
}

// Writes out the run; its last partial block goes back to buf_.
void AtomicFile::EndUnbuffered() {
  size_t rest = 0;
  const uint64_t at = unbuffered_->End(buf_.get(), &rest);
  unbuffered_bytes_ = unbuffered_->direct_bytes();
  if (::lseek(fd_, static_cast<off_t>(at), SEEK_SET) == static_cast<off_t>(-1)) {
    ThrowErrno("write-failed", "cannot seek in output", path_);
  }
  fd_pos_ = at;
  buf_len_ = rest;
  writeback_started_ = std::max(writeback_started_, at);
}

uint64_t AtomicFile::CopyFrom(int src_fd, uint64_t src_off, uint64_t n) {
  if (n == 0 || copy_unsupported_) return 0;
  Flush();
  uint64_t done = 0;
  while (done < n) {
    ThrowIfInterrupted();
    uint64_t chunk = std::min<uint64_t>(n - done, kCopyChunk);
    CheckInjectedFault(chunk);
    loff_t in = static_cast<loff_t>(src_off + done);
    ssize_t r = ::copy_file_range(src_fd, &in, fd_, nullptr, static_cast<size_t>(chunk), 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP || errno == EBADF ||
          errno == EPERM || errno == ETXTBSY) {
        // Not possible between these files: the caller falls back to write().
        // Some kernels report this only after copying part of the range.
        copy_unsupported_ = true;
        break;
      }
      ThrowErrno("write-failed", "cannot copy data into output", path_);
    }
    if (r == 0) {
      ThrowSourceEnded(path_);
    }
    done += static_cast<uint64_t>(r);
    fd_pos_ += static_cast<uint64_t>(r);
    StartWriteback();
  }
  offset_ += done;
  return done;
}

void AtomicFile::Flush() {
  if (unbuffered_ && unbuffered_->active()) EndUnbuffered();
  if (buf_len_ > 0) {
    RawWrite(buf_.get(), buf_len_);
    buf_len_ = 0;
  }
}

void AtomicFile::Write(const void* p, size_t n) {
  if (n == 0) return;
  const uint8_t* b = static_cast<const uint8_t*>(p);
  if (unbuffered_ && unbuffered_->active()) {
    while (n > 0) {
      size_t room = 0;
      uint8_t* to = unbuffered_->Space(&room);
      const size_t c = std::min(room, n);
      std::memcpy(to, b, c);
      unbuffered_->Filled(c);
      b += c;
      n -= c;
      offset_ += c;
    }
    return;
  }
  if (buf_len_ + n > kBufSize) Flush();
  if (n >= kBufSize) {
    RawWrite(b, n);
  } else {
    std::memcpy(buf_.get() + buf_len_, b, n);
    buf_len_ += n;
  }
  offset_ += n;
}

int AtomicFile::SourceFd(const MappedFile& m) {
  if (src_.fd >= 0 && src_.dev == m.dev() && src_.ino == m.ino() && src_.size == m.size()) return src_.fd;
  src_window_.Forget();
  if (src_.fd >= 0) ::close(src_.fd);
  src_ = Source{m.dev(), m.ino(), m.size(), -1, true};
  {
    std::lock_guard<std::mutex> lock(g_parked_mu);
    if (g_parked.fd >= 0 && g_parked.dev == m.dev() && g_parked.ino == m.ino() && g_parked.size == m.size()) {
      src_.fd = g_parked.fd;
      src_.may_have_holes = g_parked.may_have_holes;
      g_parked = ParkedSource{};
      return src_.fd;
    }
  }
  src_.fd = m.Reopen();
  struct stat st {};
  if (src_.fd >= 0 && ::fstat(src_.fd, &st) == 0) {
    // A fully allocated file has no holes to look for (saves two lseeks per piece).
    src_.may_have_holes = static_cast<uint64_t>(st.st_blocks) * 512 < static_cast<uint64_t>(st.st_size);
  }
  return src_.fd;
}

void AtomicFile::Write(const Bytes& b) {
  if (b.size == 0) return;
  if (IsZeros(b)) {
    WriteZeros(b.size);
    return;
  }
  const MappedFile* m = MappingHolding(b);
  if (m == nullptr) {
    Write(b.data, b.size);
    return;
  }
  int fd = g_kernel_copy.load() ? SourceFd(*m) : -1;
  if (fd < 0) {
    WriteMapped(b);
    return;
  }
  const uint64_t off = static_cast<uint64_t>(b.data - m->data());
  source_bytes_ += b.size;
  if (b.size >= kDirectMin) {
    CopyExtents(fd, off, b.size, src_.may_have_holes);
  } else {
    Unbuffering();
    if (const uint8_t* w = src_window_.Get(fd, off, b.size)) {
      Write(w, b.size);
    } else {
      ReadFrom(fd, off, b.size);
    }
  }
}

// Copies data extents in the kernel and turns holes into holes.
void AtomicFile::CopyExtents(int fd, uint64_t start, uint64_t n, bool may_have_holes) {
  const uint64_t end = start + n;
  uint64_t pos = start;
  while (pos < end) {
    uint64_t data_end = end;
    if (may_have_holes) {
      off_t data = ::lseek(fd, static_cast<off_t>(pos), SEEK_DATA);
      uint64_t data_at = data < 0 ? (errno == ENXIO ? end : pos) : std::min<uint64_t>(static_cast<uint64_t>(data), end);
      if (data_at > pos) {
        Skip(data_at - pos);
        pos = data_at;
        continue;
      }
      off_t hole = ::lseek(fd, static_cast<off_t>(pos), SEEK_HOLE);
      data_end = hole < 0 ? end : std::min<uint64_t>(static_cast<uint64_t>(hole), end);
      if (data_end <= pos) data_end = end;
    }
    const uint64_t len = data_end - pos;
    // copy_file_range: whole pages move (or are shared, on filesystems that
    // reflink) when source and destination offsets are congruent modulo the
    // page size. Across other offsets the kernel still copies without the
    // trip through user memory: on Linux 6.18/ext4 here, 1 GiB took 1.6-2.4 s
    // that way against 3.3-4.4 s for read + write (dd) and 0.7-0.9 s for cp;
    // the write() copy into new page-cache folios dominated (perf: 77% in
    // copy_folio_from_iter_atomic). Short pieces are pread + written.
    // While unbuffered writing runs (see Unbuffered), only congruent pieces
    // are copied in the kernel, where the file system may share them.
    static const uint64_t kPage = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const bool congruent = ((pos ^ offset_) & (kPage - 1)) == 0;
    const bool unbuffered = !congruent && Unbuffering();
    uint64_t copied = 0;
    if (congruent || (!unbuffered && len >= kUnalignedCopyMin)) copied = CopyFrom(fd, pos, len);
    if (copied < len && in_memory_) copied += SpliceFrom(fd, pos + copied, len - copied);
    if (copied < len) ReadFrom(fd, pos + copied, len - copied);
    pos = data_end;
  }
}

// Moves [src_off, src_off + n) of src_fd to the output through a pipe: the
// source's page-cache pages go into the pipe by reference and are copied
// once, into the output's pages, where pread + write copies twice (an
// output on a tmpfs, where copy_file_range from another file system is
// refused: EXDEV). Returns the bytes moved: fewer when the source cannot be
// spliced (then the caller reads the rest).
uint64_t AtomicFile::SpliceFrom(int src_fd, uint64_t src_off, uint64_t n) {
#ifndef PTEPACK_HAVE_SPLICE
  (void)src_fd, (void)src_off, (void)n;
  splice_unsupported_ = true;  // no splice here: the caller reads
  return 0;
#else
  if (n == 0 || splice_unsupported_) return 0;
  Flush();
  if (pipe_[0] < 0) {
    if (::pipe2(pipe_, O_CLOEXEC) != 0) {
      splice_unsupported_ = true;
      return 0;
    }
    (void)::fcntl(pipe_[1], F_SETPIPE_SZ, static_cast<int>(kBufSize));  // fewer calls; the default 64 KiB works too
  }
  const long pipe_size = ::fcntl(pipe_[1], F_GETPIPE_SZ);
  const size_t chunk = pipe_size > 0 ? static_cast<size_t>(pipe_size) : (64 << 10);
  uint64_t done = 0;
  while (done < n) {
    ThrowIfInterrupted();
    const size_t want = static_cast<size_t>(std::min<uint64_t>(n - done, chunk));
    CheckInjectedFault(want);
    loff_t in = static_cast<loff_t>(src_off + done);
    ssize_t got = ::splice(src_fd, &in, pipe_[1], nullptr, want, SPLICE_F_MOVE);
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP) {
        splice_unsupported_ = true;  // the pipe is empty: the caller reads the rest
        break;
      }
      ThrowErrno("read-failed", "cannot read a source file", path_);
    }
    if (got == 0) ThrowSourceEnded(path_);
    for (size_t left = static_cast<size_t>(got); left > 0;) {
      ssize_t w = ::splice(pipe_[0], nullptr, fd_, nullptr, left, SPLICE_F_MOVE);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        if (w == 0) errno = EIO;
        ThrowErrno("write-failed", "cannot write output", path_);
      }
      left -= static_cast<size_t>(w);
      fd_pos_ += static_cast<uint64_t>(w);
    }
    done += static_cast<uint64_t>(got);
  }
  offset_ += done;
  return done;
#endif
}

// pread into the buffer (no mapping involved), or into the unbuffered
// writer's buffer while it runs.
void AtomicFile::ReadFrom(int fd, uint64_t off, uint64_t n) {
  while (n > 0 && unbuffered_ && unbuffered_->active()) {
    ThrowIfInterrupted();
    size_t room = 0;
    uint8_t* to = unbuffered_->Space(&room);
    ssize_t r = ::pread(fd, to, static_cast<size_t>(std::min<uint64_t>(n, room)), static_cast<off_t>(off));
    if (r < 0) {
      if (errno == EINTR) continue;
      ThrowErrno("read-failed", "cannot read a source file", path_);
    }
    if (r == 0) ThrowSourceEnded(path_);
    unbuffered_->Filled(static_cast<size_t>(r));
    offset_ += static_cast<uint64_t>(r);
    off += static_cast<uint64_t>(r);
    n -= static_cast<uint64_t>(r);
  }
  while (n > 0) {
    if (buf_len_ == kBufSize) Flush();
    ThrowIfInterrupted();
    size_t want = static_cast<size_t>(std::min<uint64_t>(n, kBufSize - buf_len_));
    ssize_t r = ::pread(fd, buf_.get() + buf_len_, want, static_cast<off_t>(off));
    if (r < 0) {
      if (errno == EINTR) continue;
      ThrowErrno("read-failed", "cannot read a source file", path_);
    }
    if (r == 0) {
      ThrowSourceEnded(path_);
    }
    buf_len_ += static_cast<size_t>(r);
    offset_ += static_cast<uint64_t>(r);
    off += static_cast<uint64_t>(r);
    n -= static_cast<uint64_t>(r);
  }
}

// Reads through the mapping, dropping what was mapped afterwards.
void AtomicFile::WriteMapped(const Bytes& b) {
  for (size_t off = 0; off < b.size; off += kDropBatch) {
    Bytes part = b.Sub(off, std::min(kDropBatch, b.size - off));
    Write(part.data, part.size);
    NoteTouched(part);
  }
}

void AtomicFile::NoteTouched(const Bytes& b) {
  Touched& t = touched_;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(b.data), hi = lo + b.size;
  const uintptr_t wlo = lo > kDropSlack ? lo - kDropSlack : 0, whi = hi + kDropSlack;
  if (t.mapping != MappingOf(b) || whi < t.lo || wlo > t.hi) {
    DropTouched();
    t.owner = b.owner;
    t.mapping = MappingOf(b);
    t.lo = wlo;
    t.hi = whi;
  } else {
    t.lo = std::min(t.lo, wlo);
    t.hi = std::max(t.hi, whi);
  }
  if (t.hi - t.lo >= kDropBatch + 2 * kDropSlack) DropTouched();
}

void AtomicFile::DropTouched() {
  Touched& t = touched_;
  if (t.mapping != nullptr) t.mapping->DropPages(reinterpret_cast<const uint8_t*>(t.lo), t.hi - t.lo);
  t = Touched{};
}

void AtomicFile::WriteZeros(uint64_t n) {
  if (n >= kHoleMin) {
    Skip(n);
    return;
  }
  static const uint8_t kZeros[4096] = {};
  while (n > 0) {
    size_t c = n > sizeof kZeros ? sizeof kZeros : static_cast<size_t>(n);
    Write(kZeros, c);
    n -= c;
  }
}

void AtomicFile::PadTo(uint64_t off) {
  if (off < offset_) {
    throw Error("internal-layout",
                "cannot pad backwards from " + std::to_string(offset_) + " to " + std::to_string(off) + " in " + path_);
  }
  WriteZeros(off - offset_);
}

void AtomicFile::Commit() {
  Flush();
  g_last_unbuffered = unbuffered_bytes_;
  unbuffered_.reset();
  DropTouched();
  ReleaseSource();
  // A file that ends in a hole: set its size.
  struct stat st {};
  if (::fstat(fd_, &st) != 0) ThrowErrno("write-failed", "cannot stat output", path_);
  if (static_cast<uint64_t>(st.st_size) < offset_ && ::ftruncate(fd_, static_cast<off_t>(offset_)) != 0) {
    ThrowErrno("write-failed", "cannot set output size", path_);
  }
  ThrowIfInterrupted();
  if (sync_ && ::fsync(fd_) != 0) ThrowErrno("write-failed", "cannot sync output", path_);
  // Not synced now (SyncTree makes it durable later): start writing back
  // what is left, so that the fdatasync there finds it written.
  if (!sync_) ::sync_file_range(fd_, static_cast<off_t>(writeback_started_), 0, SYNC_FILE_RANGE_WRITE);
  if (::close(fd_) != 0) {
    fd_ = -1;
    ThrowErrno("write-failed", "cannot close output", path_);
  }
  fd_ = -1;
  ThrowIfInterrupted();
  if (direct_) {
    committed_ = true;
    return;
  }
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    ThrowErrno("write-failed", "cannot rename temporary output into place", path_);
  }
  committed_ = true;
}

namespace {

// The first failure of several threads: the errno and the path.
struct SyncError {
  std::mutex mu;
  int err = 0;
  std::string path;
  void Set(int e, const std::string& p) {
    std::lock_guard<std::mutex> lock(mu);
    if (err) return;
    err = e;
    path = p;
  }
};

// fdatasync of each of `names` (in directory `dirfd`), from several threads
// at once: the journal commit and the disk cache flush each one waits for
// are shared by the calls in flight, instead of one after the other
// (extract of 10,000 files: one by one 3.5 s of fdatasync, 1.22-1.43x
// syncfs's wall time; 16 threads 1.16x; 64 threads 0.97x -- docs/performance.md).
void DataSyncAll(int dirfd, const std::string& dir, const std::vector<std::string>& names, SyncError& error) {
  constexpr size_t kThreads = 64;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < names.size(); i = next++) {
      const int f = ::openat(dirfd, names[i].c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      if (f < 0 || ::fdatasync(f) != 0) error.Set(errno, dir + "/" + names[i]);
      if (f >= 0) ::close(f);
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 1; t < std::min(kThreads, names.size()); ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
}

// fdatasync of every regular file under `dir` (recursively), then fsync of
// each directory. Only these files: syncfs() would flush the whole
// filesystem (every other program's dirty data too).
void SyncDirectory(const std::string& dir, SyncError& error) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) ThrowErrno("write-failed", "cannot open directory to sync it", dir);
  DIR* d = ::fdopendir(fd);
  if (!d) {
    const int e = errno;
    ::close(fd);
    errno = e;
    ThrowErrno("write-failed", "cannot read directory to sync it", dir);
  }
  std::vector<std::string> files, subdirs;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(st.st_mode)) subdirs.push_back(dir + "/" + name);
    if (S_ISREG(st.st_mode)) files.push_back(name);
  }
  DataSyncAll(fd, dir, files, error);
  for (const auto& sub : subdirs) SyncDirectory(sub, error);
  if (::fsync(fd) != 0) error.Set(errno, dir);
  ::closedir(d);  // closes fd
}

}  // namespace

void SyncTree(const std::string& dir) {
  // Writeback of each file was started when it was committed
  // (sync_file_range), so the waits below are for I/O already under way.
  SyncError error;
  SyncDirectory(dir, error);
  if (error.err) {
    errno = error.err;
    ThrowErrno("write-failed", "cannot sync output", error.path);
  }
}

}  // namespace ptepack
