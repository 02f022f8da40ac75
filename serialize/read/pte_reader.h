// Reading and checking .pte files.
//
// PteFile maps a file (or wraps bytes), parses the optional extended header,
// runs the FlatBuffers verifier over the program and then checks every
// segment reference, index, alignment and string it can see. Nothing here
// reads outside the file: every offset is range-checked before use, and the
// typed FlatBuffers accessors are only used after the verifier accepted the
// buffer. Segment data is never copied.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "program_generated.h"
#include "serialize/format/pte_format.h"
#include "serialize/io/file_io.h"
#include "serialize/io/report.h"

namespace ptepack {

class PtdFile;

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

class PteFile {
 public:
  // Maps `path`. I/O errors throw ptepack::Error; content problems are
  // collected in report().
  static std::unique_ptr<PteFile> Open(const std::string& path, const ReadOptions& opts = {});
  static std::unique_ptr<PteFile> FromBytes(Bytes data, std::string name, const ReadOptions& opts = {});
  // Judges a file from its leading bytes (LeadingBytesNeeded in
  // serialize/read/leading_bytes.h says how many) and its total size, as
  // FromBytes would judge the whole file: the checks read only headers and the
  // flatbuffer. Segment data is not there: SegmentData() throws "not-loaded".
  static std::unique_ptr<PteFile> FromLeadingBytes(Bytes head, uint64_t file_size, std::string name,
                                                   const ReadOptions& opts = {});

  const Report& report() const { return report_; }
  Report& mutable_report() { return report_; }
  bool ok() const { return report_.ok(); }
  const std::string& name() const { return name_; }

  // The verified program, or nullptr when the flatbuffer could not be trusted.
  const executorch_flatbuffer::Program* program() const { return program_; }
  const std::optional<ExtendedHeader>& header() const { return header_; }
  // Sizes, one definition each (README, "Sizes"): the program is [0, program_size()), the
  // header its first header_size() bytes (root offset and file identifier, then the eh00
  // extended header of header()->length bytes when there is one), the flatbuffer the rest.
  uint64_t program_size() const { return program_size_; }
  uint64_t header_size() const { return 8 + (header_ ? header_->length : 0); }
  uint64_t flatbuffer_size() const { return program_size_ > header_size() ? program_size_ - header_size() : 0; }
  uint64_t segment_base_offset() const { return segment_base_offset_; }
  // The bytes in memory: the whole file, or its leading bytes (FromLeadingBytes).
  const Bytes& file() const { return file_; }
  uint64_t file_size() const { return file_size_; }
  bool whole() const { return file_.size == file_size_; }
  Bytes flatbuffer() const { return file_.Sub(0, program_size_); }
  const std::vector<SegmentSpan>& segments() const { return segments_; }
  // Data of segment i; throws if it does not lie within the file, or was not
  // read ("not-loaded").
  Bytes SegmentData(size_t i) const;

  // Checks this program against the .ptd files it will be loaded with, as
  // ExecuTorch's runtime does: every external tensor key is in one of `ptds`
  // (this file's named_data does not count), with the same dtype, shape,
  // dim order and byte size; no key is in two of them or also in this file's
  // named_data. Adds findings to report().
  void CheckExternalKeys(const std::vector<const PtdFile*>& ptds);
  // Keys of the external tensors, in program order, without repeats.
  std::vector<std::string> ExternalKeys() const;

 private:
  PteFile() = default;
  // Parse's steps; each returns false when reading cannot go on.
  void Parse(const ReadOptions& opts);
  bool CheckIdentifier();
  bool ParseExtendedHeader();
  void CheckSegmentBase(const ExtendedHeader& h);
  bool VerifyProgram(const ReadOptions& opts);

  std::string name_;
  Bytes file_;
  uint64_t file_size_ = 0;
  Report report_;
  std::optional<ExtendedHeader> header_;
  uint64_t program_size_ = 0;
  uint64_t segment_base_offset_ = 0;
  std::vector<SegmentSpan> segments_;
  const executorch_flatbuffer::Program* program_ = nullptr;
};

// Bytes of a tensor with this type and shape, or nullopt on overflow/unknown,
// computed as ExecuTorch's runtime does (signed element count).
std::optional<uint64_t> TensorNbytes(const executorch_flatbuffer::Tensor& t);
std::optional<uint64_t> RuntimeNbytes(const int32_t* sizes, size_t rank, int scalar_type);

// Element size of a ScalarType the runtime accepts (0: the runtime rejects it).
size_t RuntimeElementSize(int scalar_type);

// Limits ExecuTorch's runtime applies when it loads a program.
inline constexpr size_t kRuntimeMaxRank = 16;             // kTensorDimensionLimit
inline constexpr size_t kRuntimeOperatorNameLimit = 100;  // "name.overload" + NUL must fit

// True if s is valid UTF-8.
bool IsValidUtf8(const char* s, size_t n);

// Largest power of two dividing v (v == 0 gives 2^63).
uint64_t AlignmentOf(uint64_t v);

}  // namespace ptepack
