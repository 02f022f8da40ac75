// Everything `ptepack inspect` shows about a .pte (with its .ptd files) or a
// .ptd, read once from the checked file(s): a superset of the public typed
// description (ptepack/program_info.h). DescribeFile is the one function that
// reads it; ptepack::Describe's ProgramInfo is a copy of its public part
// (PublicView), and inspect's JSON and text (serialize/read/describe.h) are
// rendered from it alone.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ptepack/program_info.h"
#include "serialize/format/pte_format.h"

namespace ptepack {

class PteFile;
class PtdFile;

// A non-tensor value (what a metadata method such as get_max_seq_len returns).
struct ScalarValueInfo {
  ValueKind kind = ValueKind::kNull;  // kNull, kInt, kBool, kDouble, kString or a list of them
  int64_t int_val = 0;
  bool bool_val = false;
  double double_val = 0;
  std::string string_val;
  std::vector<int64_t> ints;
  std::vector<double> doubles;
  std::vector<uint8_t> bools;  // as stored: one byte each
};

struct StackFrameInfo {
  std::string filename;
  int32_t lineno = 0;
  std::string name;
  std::string context;
};

// The first instruction that has a stack trace: up to three innermost frames.
struct StackTraceSampleInfo {
  uint32_t chain = 0;
  uint32_t instruction = 0;
  std::vector<StackFrameInfo> frames;
};

struct CompileSpecInfo {
  std::string key;
  std::vector<uint8_t> value;
};

struct DelegateDescription {
  DelegateInfo info;
  bool has_processed = false;           // the delegate names its payload (location and index)
  std::optional<uint64_t> size;         // payload bytes, when the index is in range
  std::optional<uint64_t> file_offset;  // where the payload starts in the file, when known
  std::vector<CompileSpecInfo> compile_specs;
};

struct MethodDescription {
  MethodInfo info;
  bool has_name = false;                               // info.name is "" without one
  std::map<uint32_t, std::string> unknown_kind_names;  // kUnknown values: the raw tag's schema name
  uint32_t num_chains = 0;
  bool stacktraces = false;                     // some chain has stack traces
  std::vector<int64_t> non_const_buffer_sizes;  // as stored, the reserved entry 0 included
  // Names stored with the planned tensors that are not external (present ones, "" included).
  std::vector<std::string> mutable_buffer_names;
  std::vector<DelegateDescription> delegates;
  std::optional<std::vector<ScalarValueInfo>> returns;  // a metadata method's constant outputs
  std::optional<StackTraceSampleInfo> stacktrace_sample;
};

struct NamedDataDescription {
  std::string key;
  bool has_key = false;
  uint32_t segment = 0;
  std::optional<uint64_t> size;  // the segment's, when the index is in range
};

struct PtdEntryDescription {
  std::string key;
  uint32_t segment = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
  bool has_layout = false;
  int scalar_type = 0;  // as stored
  std::vector<int32_t> sizes;
  std::vector<uint8_t> dim_order;
};

struct PtdDescription {
  std::string file;
  uint64_t size = 0;
  bool valid = false;
  std::vector<Finding> findings;
  std::string file_identifier;  // "" for a file shorter than 8 bytes
  FlatTensorHeader header;
  bool legacy = false;
  std::vector<SegmentInfo> segments;
  std::vector<PtdEntryDescription> entries;  // empty from DescribePtdHead
};

struct FileDescription {
  std::string file;
  uint64_t size = 0;
  bool valid = false;  // the program's own report (Verify judges all files)
  std::vector<Finding> findings;
  std::optional<std::string> file_identifier;  // none for a file shorter than 8 bytes
  std::optional<ExtendedHeader> extended_header;
  uint64_t program_size = 0;
  uint64_t header_size = 0;
  uint64_t flatbuffer_size = 0;
  uint64_t segment_base_offset = 0;
  std::vector<SegmentInfo> segments;
  bool has_program = false;  // the flatbuffer could be trusted; nothing below is set otherwise
  uint32_t version = 0;
  std::vector<MethodDescription> methods;
  uint32_t constant_segment = 0;           // its segment index
  std::vector<uint64_t> constant_offsets;  // in the constant segment, per buffer
  size_t constant_buffers = 0;             // entries of the legacy inline constant_buffer
  std::vector<uint32_t> mutable_data_segments;
  std::vector<NamedDataDescription> named_data;
  std::vector<PtdDescription> ptds;
};

// The one reader of the description: from the checked program and its .ptd files.
FileDescription DescribeFile(const PteFile& pte, const std::vector<const PtdFile*>& ptds);
// A .ptd: DescribePtdHead leaves `entries` empty (DescribePtdEntry makes each,
// for output that does not grow with the number of keys).
PtdDescription DescribePtdFile(const PtdFile& ptd);
PtdDescription DescribePtdHead(const PtdFile& ptd);
size_t PtdEntryCount(const PtdFile& ptd);
PtdEntryDescription DescribePtdEntry(const PtdFile& ptd, size_t i);

// The public part (ptepack::Describe's ProgramInfo, before its verdict and findings).
ProgramInfo PublicView(const FileDescription& d);
ProgramInfo PublicView(const PtdDescription& d);

// The name `inspect` prints for a value's kind: the schema's KernelTypes name
// ("" for kUnknown: MethodDescription.unknown_kind_names has the raw tag's).
const char* ValueKindName(ValueKind kind);

// The schema's name of a shape dynamism as stored ("" for a value it does not name).
const char* ShapeDynamismName(ShapeDynamism d);

}  // namespace ptepack
