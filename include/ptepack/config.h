// ptepack's counterpart of ExecuTorch's ExecutorchBackendConfig: every field
// that changes the bytes of a .pte/.ptd, with the same defaults, plus the
// few ptepack settings needed to reproduce older files byte for byte.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ptepack/export.h"
#include "ptepack/scalar_type.h"

namespace ptepack {

// What a tagging callback sees of a constant tensor.
struct ConstantTensorInfo {
  std::string method;        // execution plan name
  uint32_t value_index = 0;  // index in the plan's values
  std::string name;          // fully qualified name if the program has one, else ""
  ScalarType scalar_type = ScalarType::kByte;
  std::vector<int32_t> sizes;
  uint64_t nbytes = 0;
  bool mutable_weight = false;  // a mutable (trainable) tensor with an initial state
};

// Returns the .ptd tag (file stem) a tensor goes to, or nullopt to keep it
// in the .pte. Counterpart of ExecuTorch's Callable[[Node], Optional[str]].
using ExternalTagFn = std::function<std::optional<std::string>(const ConstantTensorInfo&)>;

// Which producer's flatbuffer byte layout the encoder reproduces: flatc
// (ExecuTorch's C++/flatc path), flatc before FlatBuffers 24 ("flatc-legacy"),
// ExecuTorch's Python object-API serializer ("python", with the Python
// flatbuffers package before 25.12.19, which shares a vtable between tables
// of different sizes), or the same serializer with flatbuffers >= 25.12.19
// ("python-2026": a vtable is shared only when the object size matches too).
enum class FlatbufferOrder { kFlatc, kFlatcLegacy, kPythonObjectApi, kPythonObjectApi2026 };
// "flatc", "flatc-legacy", "python", "python-2026"
PTEPACK_API const char* FlatbufferOrderName(FlatbufferOrder o);
PTEPACK_API bool ParseFlatbufferOrder(const std::string& name, FlatbufferOrder* out);

enum class DynamicMemoryPlanningMode { kUpperBound = 0, kSymbolic = 1 };

struct PTEPACK_API BackendConfig {
  // --- ExecutorchBackendConfig fields that affect the file ---
  bool extract_delegate_segments = true;
  uint64_t segment_alignment = 128;
  std::optional<uint64_t> constant_tensor_alignment;  // schema default 16
  std::optional<uint64_t> delegate_alignment;         // schema default 16
  // external_constants: false, true (every constant to "<external_tag>.ptd"),
  // or a callback choosing a tag per tensor.
  bool external_constants = false;
  ExternalTagFn external_constants_fn;
  bool external_mutable_weights = false;
  bool emit_mutable_buffer_names = false;
  bool emit_stacktrace = false;
  // Recorded for reference: how dynamic shapes were memory planned. The
  // program's tensors carry the outcome (shape_dynamism, planned sizes).
  DynamicMemoryPlanningMode dynamic_memory_planning_mode = DynamicMemoryPlanningMode::kUpperBound;

  // --- ptepack settings ---
  // Tag used when external_constants is true (ExecuTorch's default is "model").
  std::string external_tag = "model";
  // Segment alignment of the .ptd files (FlatTensorConfig.segment_alignment).
  uint64_t ptd_segment_alignment = 128;
  // Flatbuffer byte layout: which producer to reproduce.
  FlatbufferOrder flatbuffer_order = FlatbufferOrder::kFlatc;
  // Keep constants inside the flatbuffer (Program.constant_buffer), as
  // ExecuTorch did before the constant segment existed (before 2024-09).
  bool inline_constants = false;
  // Write the 24-byte eh00 header of files from before ExecuTorch 1.0
  // (without segment_data_size).
  bool legacy_extended_header = false;
  // With extract_delegate_segments false: store equal delegate payloads in
  // one backend_delegate_data entry. ExecuTorch's serializer keeps the
  // entries it is given (today's emitter already gives one per distinct
  // payload, as ProgramBuilder does; older emitters gave one per delegate), so
  // the default keeps a program's entries as they are. Extracted payloads are
  // always stored once per distinct content, as ExecuTorch does.
  bool dedup_inline_delegate_data = false;

  uint64_t tensor_alignment() const { return constant_tensor_alignment.value_or(16); }
  uint64_t delegate_data_alignment() const { return delegate_alignment.value_or(16); }

  // Throws ptepack::Error ("bad-config") naming the field at fault.
  void Validate() const;

  // JSON form (keys are the ExecuTorch field names, as in a config file).
  std::string ToJsonString(int indent = 2) const;
  static BackendConfig FromJsonString(const std::string& json);  // validates; Error("bad-config")
};

}  // namespace ptepack
