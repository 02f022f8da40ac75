// What PteFile and PtdFile share: the read options, opening a file (mapped) or
// bytes, judging its leading bytes, the name, bytes, report and segments each
// holds, and a segment's data. One implementation for both (CRTP: File is the
// reader, which runs its own Parse).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "serialize/io/file_io.h"
#include "serialize/io/report.h"
#include "serialize/read/leading_bytes.h"

namespace ptepack {

struct ReadOptions {
  // Segments must start at a multiple of this (0: do not check).
  uint64_t segment_alignment = 0;
  // Constant tensors in the constant segment must start at a multiple of this
  // (0: only check the element-size alignment each tensor type needs).
  uint64_t tensor_alignment = 0;
  // Limits handed to the FlatBuffers verifier.
  uint32_t max_depth = 64;
  // .ptd files in the FlatTensor layout of before June 2025: a warning when
  // true, an error when false (current runtimes cannot load them).
  bool allow_legacy_ptd = true;
  uint32_t max_tables = 1'000'000;  // the runtime's verifier default
  // Check the memory plan (serialize/read/plan_checks.h) once the tables are
  // sound. Off only to measure what it costs (micro_bench); the environment
  // variable PTEPACK_SKIP_PLAN_CHECK turns it off for a whole process.
  bool check_memory_plan = true;
};

struct SegmentSpan {
  uint64_t offset = 0;  // relative to segment_base_offset
  uint64_t size = 0;
  uint64_t file_offset = 0;
  bool in_file = false;  // offset+size lie within the file
};

template <typename File>
class CheckedFile {
 public:
  // Maps `path`. I/O errors throw ptepack::Error; content problems are
  // collected in report().
  static std::unique_ptr<File> Open(const std::string& path, const ReadOptions& opts = {}) {
    auto m = MappedFile::Open(path);
    return FromBytes(m->All(), path, opts);
  }
  static std::unique_ptr<File> FromBytes(Bytes data, std::string name, const ReadOptions& opts = {}) {
    const uint64_t size = data.size;
    return FromLeadingBytes(std::move(data), size, std::move(name), opts);
  }
  // Judges a file from its leading bytes (LeadingBytesNeeded in
  // serialize/read/leading_bytes.h says how many) and its total size, as
  // FromBytes would judge the whole file: the checks read only headers and the
  // flatbuffer. Segment data is not there: SegmentData() throws "not-loaded".
  static std::unique_ptr<File> FromLeadingBytes(Bytes head, uint64_t file_size, std::string name,
                                                const ReadOptions& opts = {}) {
    CheckLeadingBytes(head, file_size, name);
    std::unique_ptr<File> f(new File());
    CheckedFile& c = *f;
    c.name_ = name;
    c.file_ = std::move(head);
    c.file_size_ = file_size;
    c.report_ = Report(std::move(name));
    f->Parse(opts);
    return f;
  }

  const Report& report() const { return report_; }
  bool ok() const { return report_.ok(); }
  const std::string& name() const { return name_; }
  // The bytes in memory: the whole file, or its leading bytes (FromLeadingBytes).
  const Bytes& file() const { return file_; }
  uint64_t file_size() const { return file_size_; }
  const std::vector<SegmentSpan>& segments() const { return segments_; }
  // Data of segment i; throws if it does not lie within the file, or was not
  // read ("not-loaded").
  Bytes SegmentData(size_t i) const {
    if (i >= segments_.size() || !segments_[i].in_file) {
      throw Error("segment-out-of-range", name_ + ": segment " + std::to_string(i) + " is not in the file");
    }
    if (segments_[i].file_offset + segments_[i].size > file_.size) throw NotLoaded(name_, i, file_.size);
    return file_.Sub(segments_[i].file_offset, segments_[i].size);
  }

 protected:
  CheckedFile() = default;

  std::string name_;
  Bytes file_;
  uint64_t file_size_ = 0;
  Report report_;
  std::vector<SegmentSpan> segments_;
};

}  // namespace ptepack
