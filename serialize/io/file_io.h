// Memory-mapped inputs (byte views into them: ptepack/bytes.h) and atomic (temp file + rename) outputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ptepack/bytes.h"
#include "serialize/io/bytes_source.h"

namespace ptepack {

// A whole file mapped read-only. Works for empty files (data() == nullptr).
class MappedFile {
 public:
  static std::shared_ptr<MappedFile> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // A view of [off, off+n) that keeps the mapping alive.
  Bytes View(size_t off, size_t n) const;
  Bytes All() const { return View(0, size_); }
  // True if [p, p+n) lies in this mapping.
  bool Contains(const uint8_t* p, size_t n) const {
    return data_ != nullptr && p >= data_ && p <= data_ + size_ && n <= static_cast<size_t>(data_ + size_ - p);
  }
  // Opens the mapped file again for reading (copy_file_range, pread). Returns
  // -1 if it cannot be opened or the path no longer names the mapped file
  // (device, inode or size changed). The caller closes the descriptor.
  int Reopen() const;
  uint64_t dev() const { return dev_; }
  uint64_t ino() const { return ino_; }
  // Drops the resident pages of [p, p+n), rounded out to whole windows of
  // kDropWindow bytes (file_io.cpp says why) and clipped to the mapping.
  // They are clean pages of a read-only file mapping: the next access maps
  // them again from the page cache.
  void DropPages(const uint8_t* p, size_t n) const;
  // A page table's reach on x86-64 and arm64 (4 KiB pages): a fault maps
  // neighbouring pages only within its own window.
  static constexpr size_t kDropWindow = 2 << 20;

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  uint64_t dev_ = 0;
  uint64_t ino_ = 0;
  std::weak_ptr<const MappedFile> self_;
};

// The mapped file whose mapping holds all of `b`, or null (`b` is not a view
// of a mapped file, or runs past its mapping).
inline const MappedFile* MappingHolding(const Bytes& b) {
  const MappedFile* m = MappingOf(b);
  return m != nullptr && m->Contains(b.data, b.size) ? m : nullptr;
}

// Small reads of one open file served from a window read ahead: pieces
// asked for in file order (a split of 300,000 constants of 16 bytes reads
// each for its hash, for the .ptd's content index and for the write) cost one
// pread a window instead of one each (900,000 preads were about half of that
// split's time). Not thread-safe.
class ReadWindow {
 public:
  static constexpr size_t kSize = 256 << 10;
  // Larger reads go to the file directly (one pread is as good).
  static constexpr size_t kMaxPiece = 16 << 10;
  // The bytes [off, off + n) of `fd`, n <= kMaxPiece: from the window, or
  // from a new window read at `off`. Null when n is larger, or when the file
  // does not hold them (a read error, or the file ends first): the caller's
  // own read of them reports that.
  const uint8_t* Get(int fd, uint64_t off, size_t n);
  // Call before `fd` is closed or stands for another file.
  void Forget() { fd_ = -1; }

 private:
  std::unique_ptr<uint8_t[]> buf_;
  int fd_ = -1;
  uint64_t off_ = 0;  // the window holds [off_, off_ + len_) of fd_
  size_t len_ = 0;
};

// Reads bytes that view a MappedFile with pread, on a descriptor kept open
// while consecutive reads come from the same file, instead of through the
// mapping (whose pages would stay resident, and fault-around maps their
// neighbours too). Not thread-safe.
class MappedReader {
 public:
  MappedReader() = default;
  ~MappedReader();
  MappedReader(const MappedReader&) = delete;
  MappedReader& operator=(const MappedReader&) = delete;
  // A descriptor open on the file `b` views, or -1 when `b` is not a view of
  // a mapped file or the file cannot be opened again (read the memory then).
  // Valid until the next call.
  int Open(const Bytes& b);
  // Bytes [from, from + n) of `b` into `out`; Open(b) must have given a
  // descriptor. Throws read-failed (located) if the file cannot be read or
  // ended early.
  void Read(const Bytes& b, uint64_t from, size_t n, uint8_t* out);

 private:
  const MappedFile* mapping_ = nullptr;
  std::weak_ptr<const void> owner_;  // while alive, mapping_ is that file
  int fd_ = -1;
  ReadWindow window_;  // small reads of fd_
};

// Writes a file atomically: bytes go to a temporary file in the target
// directory, Commit() fsyncs and renames it over the target. If the object is
// destroyed without Commit() (error, exception), the temp file is removed and
// any existing target is left untouched.
class AtomicFile {
 public:
  struct Options {
    // Refuse to replace a target that is also one of these inputs (same
    // device and inode), unless allow_overwrite_input is set.
    std::vector<std::string> inputs;
    bool allow_overwrite_input = false;
    // The file whose mode (and, where permitted, owner) the output takes:
    // default the target itself when it exists. New files get 0644 (umask
    // applies).
    std::string replaces = {};
    // false: Commit() renames without fsync. Only for files the caller makes
    // durable together afterwards (SyncTree), before anything refers to them.
    bool sync = true;
    // true: the target is a new file in a directory that only this writer
    // fills and that is renamed into place as a whole afterwards (extract's
    // temporary directory). The file is created under its own name (O_EXCL:
    // an existing one is an error) and Commit() does not rename it; `inputs`
    // and `replaces` are not consulted. Saves a temporary name, the checks of
    // an existing target and a rename per file. Without Commit() the file is
    // removed, as a temporary would be.
    bool direct = false;
  };
  AtomicFile(const std::string& path, const Options& options);
  explicit AtomicFile(const std::string& path) : AtomicFile(path, Options{}) {}
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void Write(const void* p, size_t n);
  // Data of a MappedFile view is read from the file, not the mapping: large
  // views are copied in the kernel (copy_file_range; holes in the source
  // stay holes), small ones pread into the buffer. Only if the file cannot
  // be reopened is the mapping read, and its pages are dropped again. So
  // writing does not make source data resident in this process. Once an
  // output has taken 8 MiB from source files, what follows (until a hole or
  // a page-congruent copy) is pread into aligned buffers that a writer
  // thread writes with O_DIRECT, where the file system allows it: the
  // output does not go through the page cache (see docs/performance.md).
  void Write(const Bytes& b);
  // Zeros; long runs become a hole (the file is new, so a hole reads back
  // as zeros just the same).
  void WriteZeros(uint64_t n);
  // Pads with zeros up to absolute file offset `off` (must not go backwards).
  void PadTo(uint64_t off);
  // Leaves a hole of n bytes (reads back as zeros).
  void Skip(uint64_t n);
  // Appends n bytes of `src_fd` from `src_off` with copy_file_range, without
  // passing the data through user memory. Returns how many bytes it copied:
  // fewer than n when the kernel cannot copy between these two files (the
  // caller writes the rest itself). Throws on I/O errors and if the source
  // ends before src_off + n.
  uint64_t CopyFrom(int src_fd, uint64_t src_off, uint64_t n);
  uint64_t offset() const { return offset_; }
  void Commit();
  const std::string& path() const { return path_; }

  // Test hook: when set, the write that would take the file past this many
  // bytes fails as if the disk were full. Reset with UINT64_MAX.
  static void SetFailAfterBytesForTesting(uint64_t n);
  // Test hook: with false, mapped data is always read through the mapping
  // (the fallback when the source file cannot be reopened).
  static void SetKernelCopyForTesting(bool enabled);
  // Unbuffered (O_DIRECT) writing starts once this many bytes of source
  // files went into one output.
  static constexpr uint64_t kUnbufferedAfter = uint64_t{8} << 20;
  // Test hook: that threshold instead (UINT64_MAX: never).
  // With refuse_direct, every O_DIRECT write fails with EINVAL, as on a file
  // system that refuses it (the writer then falls back to buffered writes).
  static void SetUnbufferedAfterForTesting(uint64_t n, bool refuse_direct = false);
  // Test hook: how many bytes of the last committed output were written
  // with O_DIRECT (0 if the file system refused it).
  static uint64_t LastUnbufferedBytesForTesting();

 private:
  void OpenDirect();
  void NoteFileSystem();
  void ReleaseSource();
  void Flush();
  void RawWrite(const uint8_t* p, size_t n);
  void CheckInjectedFault(uint64_t n);
  int SourceFd(const MappedFile& m);
  void CopyExtents(int fd, uint64_t off, uint64_t n, bool may_have_holes);
  void ReadFrom(int fd, uint64_t off, uint64_t n);
  uint64_t SpliceFrom(int src_fd, uint64_t src_off, uint64_t n);
  void WriteMapped(const Bytes& b);
  void NoteTouched(const Bytes& b);
  void DropTouched();
  void StartWriteback();
  bool Unbuffering();
  void StartUnbuffered();
  void EndUnbuffered();
  class Unbuffered;  // O_DIRECT writer of long runs of data (file_io.cpp)
  std::unique_ptr<Unbuffered> unbuffered_;
  uint64_t source_bytes_ = 0;      // bytes of source files written so far
  uint64_t unbuffered_bytes_ = 0;  // of which were written with O_DIRECT
  bool unbuffered_refused_ = false;
  std::string path_;
  std::string tmp_path_;
  int fd_ = -1;
  uint64_t offset_ = 0;
  uint64_t fd_pos_ = 0;            // position of fd_: offset_ minus what is buffered
  bool copy_unsupported_ = false;  // copy_file_range refused (EXDEV, EINVAL, ...)
  bool in_memory_ = false;         // the output is on a tmpfs: no O_DIRECT, data spliced in
  bool splice_unsupported_ = false;
  int pipe_[2] = {-1, -1};          // for SpliceFrom
  uint64_t writeback_started_ = 0;  // writeback was started for [0, this)
  // The source file last read from, reopened from a MappedFile.
  struct Source {
    uint64_t dev = 0, ino = 0, size = 0;
    int fd = -1;
    bool may_have_holes = true;  // fewer blocks allocated than its size
  } src_;
  ReadWindow src_window_;  // small pieces of src_.fd
  // Address range of a mapping read through memory, not dropped yet.
  struct Touched {
    std::shared_ptr<const void> owner;  // keeps the mapping alive until dropped
    const MappedFile* mapping = nullptr;
    uintptr_t lo = 0, hi = 0;
  } touched_;
  std::unique_ptr<uint8_t[]> buf_;
  size_t buf_len_ = 0;
  bool committed_ = false;
  bool sync_ = true;
  bool direct_ = false;
  int slot_ = -1;  // registration for the signal handler
};

// Renames each (staged file, target) pair, all or nothing: existing targets
// are first hard-linked to backup names; if a rename fails, the targets
// renamed so far are restored from their backups (or removed when they did
// not exist before) and Error("write-failed") is thrown. Backups are removed
// in every case; staged files that were not renamed are left to the caller.
void RenameAllOrNothing(const std::vector<std::pair<std::string, std::string>>& staged);

// Outputs written under staging names beside their targets, then renamed
// into place together (RenameAllOrNothing). Staged files that were not
// renamed are removed when this goes out of scope (every error path).
class StagedFiles {
 public:
  StagedFiles() = default;
  StagedFiles(const StagedFiles&) = delete;
  StagedFiles& operator=(const StagedFiles&) = delete;
  ~StagedFiles();
  // The staging name of `target`: beside it, so the rename stays on one
  // filesystem, and never the name of an input.
  static std::string NameFor(const std::string& target);
  void Add(std::string staged_name, std::string target) {
    files_.emplace_back(std::move(staged_name), std::move(target));
  }
  // (staging name, target), in the order added.
  const std::vector<std::pair<std::string, std::string>>& files() const { return files_; }
  // Renames every staged file into place, all or nothing.
  void RenameAll();

 private:
  std::vector<std::pair<std::string, std::string>> files_;
};

// Makes the files of a directory written with AtomicFile::Options::sync =
// false durable (fdatasync of each regular file under it), and then the
// directory itself. Their writeback started at Commit() (sync_file_range),
// so this costs about one journal commit, not one per file; unlike syncfs()
// it touches only these files, not the rest of the filesystem.
// Throws Error("write-failed").
void SyncTree(const std::string& dir);

// The one "same file" rule: two paths name one file when both exist with
// the same device and inode (a link, another spelling, ./x).
bool SameFile(const std::string& a, const std::string& b);
// Refuses to write `path` when it is the same file as one of `inputs`:
// Error("overwrite-input") located at `path`, naming the input.
void RefuseOverwriteInput(const std::string& path, const std::vector<std::string>& inputs);

// Outputs that are symbolic links are refused (never followed, never
// replaced): the message names the link's target. Outputs that exist and are
// not regular files (directories, FIFOs, devices) are refused too.
// Throws Error("output-symlink" / "output-not-regular").
void CheckOutputPath(const std::string& path);

// An input the caller will read: throws what opening it would (Error("open-failed") for a
// missing or unreadable file, "not-regular-file" for a directory, FIFO or device, never
// waiting on a FIFO), naming the file.
void CheckInputFile(const std::string& path);

// Reads a whole small file (JSON specs, configs, manifests) after checking it
// is a regular file no larger than `max_bytes`: a FIFO or device is refused
// instead of blocking. Throws Error("open-failed" / "not-regular-file" /
// "file-too-large").
std::string ReadSmallFile(const std::string& path, uint64_t max_bytes = uint64_t{256} << 20);

// SIGINT/SIGTERM while an output is being written: the handler only records
// the signal; the next write, copy or commit throws Error("interrupted"), so
// every temporary file and directory is removed by the normal unwinding, and
// the caller then calls ReraiseInterrupt() to die of the signal. A signal
// that arrives while nothing is being written, or a second signal, kills the
// process at once after unlinking the registered temporary files.
void InstallInterruptHandlers();
// Throws Error("interrupted") if a signal was recorded.
void ThrowIfInterrupted();
// Re-raises a recorded signal with the default action (does not return if
// one was recorded).
void ReraiseInterrupt();
// Counts an operation that writes outputs (AtomicFile does this itself; use
// for longer sequences such as a directory being filled).
class WritingScope {
 public:
  WritingScope();
  ~WritingScope();
  WritingScope(const WritingScope&) = delete;
  WritingScope& operator=(const WritingScope&) = delete;
};

// Optional progress reporting for long operations: (bytes done, bytes total).
using ProgressFn = std::function<void(uint64_t, uint64_t)>;

}  // namespace ptepack
