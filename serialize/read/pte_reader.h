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
#include "serialize/read/checked_file.h"

namespace ptepack {

class PtdFile;

// Open, FromBytes, FromLeadingBytes, report(), name(), file(), segments() and
// SegmentData() are CheckedFile's (serialize/read/checked_file.h).
class PteFile : public CheckedFile<PteFile> {
 public:
  Report& mutable_report() { return report_; }

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
  bool whole() const { return file_.size == file_size_; }
  Bytes flatbuffer() const { return file_.Sub(0, program_size_); }

  // Checks this program against the .ptd files it will be loaded with, as
  // ExecuTorch's runtime does: every external tensor key is in one of `ptds`
  // (this file's named_data does not count), with the same dtype, shape,
  // dim order and byte size; no key is in two of them or also in this file's
  // named_data. Adds findings to report().
  void CheckExternalKeys(const std::vector<const PtdFile*>& ptds);
  // Keys of the external tensors, in program order, without repeats.
  std::vector<std::string> ExternalKeys() const;

 private:
  friend class CheckedFile<PteFile>;
  PteFile() = default;
  // Parse's steps; each returns false when reading cannot go on.
  void Parse(const ReadOptions& opts);
  bool CheckIdentifier();
  bool ParseExtendedHeader();
  void CheckSegmentBase(const ExtendedHeader& h);
  bool VerifyProgram(const ReadOptions& opts);

  std::optional<ExtendedHeader> header_;
  uint64_t program_size_ = 0;
  uint64_t segment_base_offset_ = 0;
  const executorch_flatbuffer::Program* program_ = nullptr;
};

// Bytes of a verified tensor: TensorNbytes of its type and shape
// (serialize/format/pte_format.h, the runtime's rules), nullopt on overflow or
// an unknown type.
std::optional<uint64_t> TensorNbytes(const executorch_flatbuffer::Tensor& t);

// Limits ExecuTorch's runtime applies when it loads a program.
inline constexpr size_t kRuntimeMaxRank = 16;             // kTensorDimensionLimit
inline constexpr size_t kRuntimeOperatorNameLimit = 100;  // "name.overload" + NUL must fit

// True if s is valid UTF-8.
bool IsValidUtf8(const char* s, size_t n);

}  // namespace ptepack
