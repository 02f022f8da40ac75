// Byte views, memory-mapped inputs and atomic (temp file + rename) outputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ptepack {

// A read-only byte range. `owner` keeps the memory alive (a mapping, a
// vector, ...); it may be null when the caller guarantees the lifetime.
struct Bytes {
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> owner;
  bool file_backed = false;  // points into a MappedFile (pages can be dropped)

  static Bytes Copy(const void* p, size_t n);
  static Bytes Own(std::vector<uint8_t> v);
  static Bytes View(const void* p, size_t n, std::shared_ptr<const void> owner = nullptr);
  Bytes Sub(size_t off, size_t n) const;  // bounds-checked
  bool empty() const { return size == 0; }
  bool Equals(const Bytes& o) const;
};

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

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::weak_ptr<const MappedFile> self_;
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
  };
  AtomicFile(const std::string& path, const Options& options);
  explicit AtomicFile(const std::string& path) : AtomicFile(path, Options{}) {}
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void Write(const void* p, size_t n);
  void Write(const Bytes& b) { Write(b.data, b.size); }
  void WriteZeros(uint64_t n);
  // Pads with zeros up to absolute file offset `off` (must not go backwards).
  void PadTo(uint64_t off);
  uint64_t offset() const { return offset_; }
  void Commit();
  const std::string& path() const { return path_; }

  // Test hook: when set, the write that would take the file past this many
  // bytes fails as if the disk were full. Reset with UINT64_MAX.
  static void SetFailAfterBytesForTesting(uint64_t n);

 private:
  void Flush();
  void RawWrite(const uint8_t* p, size_t n);
  std::string path_;
  std::string tmp_path_;
  int fd_ = -1;
  uint64_t offset_ = 0;
  std::vector<uint8_t> buf_;
  bool committed_ = false;
};

// Optional progress reporting for long operations: (bytes done, bytes total).
using ProgressFn = std::function<void(uint64_t, uint64_t)>;

}  // namespace ptepack
