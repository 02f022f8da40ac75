// The runtime oracle's clobbering mode (`et_runtime_oracle FILE --clobber`): every operator
// without a real prim-op kernel gets a stub that hashes what it is given, records one trace
// entry per call and fills its outputs with bytes derived from that hash; delegates get a stub
// backend that does the same. A planned tensor whose bytes another tensor overwrites while it
// is still to be read then changes every later trace entry and the method's outputs, which is
// how a bad memory plan shows up in a run (issue 23).
//
// Which arguments are outputs follows ExecuTorch's emitter (exir/emit/_emitter.py):
//  - `_emit_operator`: the schema arguments (an out-variant's `out` kwargs among them), then the
//    return value appended: one Tensor, or a TensorList of the outs when there are several (a
//    Int/Double/Bool for symbolic ops). So the last argument names the outputs; an earlier
//    argument that is the same tensor is its `out` kwarg, written, not read (except `self` of
//    an in-place op, `name_`, which is read and written).
//  - `_emit_delegate`: the inputs, then the flattened returns. How many returns is not in the
//    program: a delegate of ours says so in its payload (kDelegateMagic below); for others see
//    DelegateOutputs in clobber.cpp.
// Test-only code: the library and the CLI never link it.
#pragma once

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/span.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/kernel/kernel_runtime_context.h>
#include <executorch/schema/program_generated.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace clobber {

// A delegate payload that starts with these bytes says how many of its call's arguments are
// outputs: "ptepack-clobber-delegate outputs=N\n" (N in decimal), anything after is ignored.
constexpr char kDelegateMagic[] = "ptepack-clobber-delegate outputs=";

// What a stub delegate's init() kept: its backend id and the number of outputs its payload
// declares (-1: the payload does not say).
struct DelegateInfo {
  std::string backend;
  int64_t outputs = -1;
};

// Reads kDelegateMagic's count from a payload; -1 when absent or malformed.
int64_t DelegateOutputsFromPayload(const void* data, size_t size);

// The stub kernel registered for every operator without a real kernel in --clobber mode.
void StubKernel(executorch::runtime::KernelRuntimeContext& ctx,
                executorch::runtime::Span<executorch::runtime::EValue*> args);

// A stub backend's execute() in --clobber mode.
executorch::runtime::Error StubDelegate(const DelegateInfo& info,
                                        executorch::runtime::Span<executorch::runtime::EValue*> args);

// Owned memory for inputs and unplanned outputs of one method.
struct Storage {
  std::deque<std::vector<uint8_t>> bytes;
  std::deque<std::vector<executorch::aten::SizesType>> sizes;
  std::deque<std::vector<executorch::aten::DimOrderType>> dim_orders;
  std::deque<std::vector<executorch::aten::StridesType>> strides;
  std::deque<executorch::aten::TensorImpl> impls;
};

// Gives every tensor input deterministic bytes through Method::set_input (copied into planned
// memory, or shared when the input is not planned) and gives every unplanned tensor output
// memory through Method::set_output_data_ptr. Element k of input i: Float ((k*7 + i*3) % 11 - 5) / 4
// (as --run), Bool (k + i) % 2, any other dtype bytes of a splitmix64 stream seeded with i.
// Returns [{"index", "xxh64"}] of the inputs as given; failures go to *status_error.
nlohmann::ordered_json SetInputsAndOutputs(executorch::runtime::Method& method, Storage* storage,
                                           executorch::runtime::Error* status_error);

// Executes `method` one instruction at a time (Method::step), keeping the instruction index so
// that each trace entry names it. Returns {"status", "steps", "trace": [...], "outputs": [...]}
// (and "error" when the harness could not follow the run). At most `max_steps` instructions.
// Planned tensors in `shared_buffers` hold state from other methods (they count as written).
nlohmann::ordered_json ExecuteTraced(executorch::runtime::Method& method,
                                     const executorch_flatbuffer::ExecutionPlan* plan, size_t max_steps,
                                     const std::set<uint32_t>& shared_buffers);

}  // namespace clobber
