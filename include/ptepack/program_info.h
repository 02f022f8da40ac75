// A typed, read-only description of a .pte (or a .ptd): what `ptepack inspect`
// shows, as values instead of JSON text.
//
//   ptepack::ProgramInfo info = ptepack::Describe("model.pte");
//   for (const auto& m : info.methods)
//     for (const auto& v : m.values)
//       if (v.tensor && v.tensor->location == ptepack::TensorLocation::kPlanned)
//         std::cout << m.name << " #" << v.index << " at " << v.tensor->planned->offset << "\n";
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ptepack/error.h"
#include "ptepack/export.h"
#include "ptepack/program_builder.h"
#include "ptepack/reader.h"
#include "ptepack/scalar_type.h"

namespace ptepack {

// Where a tensor's memory comes from when ExecuTorch's runtime loads it
// (runtime/executor/tensor_parser_exec_aten.cpp, getTensorDataPtr):
enum class TensorLocation {
  kNone,      // no data and no plan: the caller supplies it (an input)
  kConstant,  // read-only bytes stored in the .pte (constant segment or constant_buffer)
  kExternal,  // bytes stored under `key` in a .ptd (or the program's named data)
  kPlanned,   // a slot in a planned buffer (`planned`), maybe with an initial state
};

struct TensorInfo {
  ScalarType dtype = ScalarType::kByte;
  std::vector<int32_t> shape;
  std::vector<uint8_t> dim_order;
  std::optional<uint64_t> nbytes;  // as the runtime computes it; nullopt: unknown type or overflow
  ShapeDynamism shape_dynamism = ShapeDynamism::kStatic;
  TensorLocation location = TensorLocation::kNone;
  // Tensor.data_buffer_idx: the constant buffer (kConstant) or the mutable
  // data subsegment of the initial state (kPlanned); 0 for none.
  uint32_t data_buffer = 0;
  std::string key;                         // fully qualified name (the external key), "" if none
  std::optional<PlannedLocation> planned;  // memory_id and offset in that planned buffer
  bool external_initial_state = false;     // kPlanned, loaded from the external `key`
};

enum class ValueKind {
  kNull,
  kInt,
  kBool,
  kDouble,
  kTensor,
  kString,
  kIntList,
  kDoubleList,
  kBoolList,
  kTensorList,
  kOptionalTensorList,
  kUnknown,  // a tag this version does not know
};

struct ValueInfo {
  uint32_t index = 0;  // in the method's values
  ValueKind kind = ValueKind::kNull;
  std::optional<TensorInfo> tensor;  // kTensor only
};

struct DelegateInfo {
  std::string backend_id;
  bool in_segment = false;  // the payload is a segment (else inline, in backend_delegate_data)
  uint32_t index = 0;       // the segment's or the backend_delegate_data entry's index
  uint64_t size = 0;        // payload bytes (0 when the index is out of range)
  size_t compile_specs = 0;
};

// One planned (non-constant) buffer of a method: its size, and the tensors
// planned in it (value indices, in order).
struct PlannedBufferInfo {
  uint32_t memory_id = 0;  // index in non_const_buffer_sizes (0 is reserved by the runtime)
  uint64_t size = 0;
  std::vector<uint32_t> tensors;
};

struct MethodInfo {
  std::string name;
  std::vector<ValueInfo> values;
  std::vector<int32_t> inputs;         // value indices
  std::vector<int32_t> outputs;        // value indices
  std::vector<std::string> operators;  // "name" or "name.overload"
  std::vector<DelegateInfo> delegates;
  size_t num_instructions = 0;
  std::vector<PlannedBufferInfo> memory_plan;  // memory ids 1.. (non_const_buffer_sizes[0] is not a buffer)
};

struct SegmentInfo {
  uint64_t offset = 0;       // from the segment base
  uint64_t file_offset = 0;  // from the start of the file
  uint64_t size = 0;
};

struct NamedDataInfo {
  std::string key;
  uint32_t segment = 0;
  // .ptd entries only: the tensor layout, when the entry has one.
  std::optional<ScalarType> dtype;
  std::vector<int32_t> shape;
  uint64_t offset = 0;  // .ptd entries only: in the segment
  uint64_t size = 0;
};

struct ProgramInfo {
  std::string file;
  std::string format;  // "pte" or "ptd"
  bool valid = false;  // what Verify says (ExecuTorch's runtime would load it)
  std::vector<Finding> findings;
  std::string file_identifier;  // "ET12", "FT01", ...
  uint64_t size = 0;            // of the file
  uint64_t segment_base_offset = 0;
  std::vector<SegmentInfo> segments;
  std::vector<MethodInfo> methods;        // .pte only
  std::vector<NamedDataInfo> named_data;  // the .pte's named data, or the .ptd's entries
};

// Opens and describes `path` (a .pte, or a .ptd on its own), checked as
// Verify checks it (options.ptd: the .pte's data files). Throws ptepack::Error
// when the file cannot be read at all, or is a BundledProgram (.bpte:
// Error("bpte-not-described"), InspectJson describes it); a malformed file is described as far as
// it could be read (methods empty when the program could not be trusted), with
// its findings.
PTEPACK_API ProgramInfo Describe(const std::string& path, const VerifyOptions& options = {});

}  // namespace ptepack
