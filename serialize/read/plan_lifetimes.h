// Lifetimes of a program's memory-planned tensors, derived from the emitted
// program alone (no Python, no graph): which instructions write and read each
// planned tensor, which values share bytes by design, and over which
// instructions each piece of planned memory holds data that is still needed.
// Pure code over a verified executorch_flatbuffer::Program; no I/O.
//
// `verify` checks a plan with it (serialize/read/plan_checks.h); `plan`,
// `size`, `inspect` and `map --memory` read PlanViews() below. Every rule
// cites the upstream file it follows; docs/memory-plan.md has the whole list.
//
// Instruction indices are global: a method's chains run one after the other
// (runtime/executor/method.cpp, Method::step), so chain c's instruction i is
// index chain_starts[c] + i. Live runs are inclusive at both ends, like
// ExecuTorch's planner's lifetimes (exir/memory_planning.py,
// update_tensor_lifetime; Verifier.has_overlap).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "layout/memory_plan.h"
#include "program_generated.h"
#include "support/small_vec.h"

namespace ptepack {

// Instructions first..last, both inclusive.
struct LiveRun {
  uint32_t first = 0;
  uint32_t last = 0;
};

// Where a planned tensor's bytes get their contents.
enum class PlanOrigin : uint8_t {
  kWritten,      // an instruction writes it (a temporary, or an output an instruction computes)
  kInput,        // a method input: the runtime copies the caller's data in before instruction 0
  kState,        // mutable state, kept between calls: initial data, a mutable-buffer name, the self of
                 // aten::copy_, read before written and written back, or read at bytes nothing wrote earlier
  kSharedState,  // read and never written here, at the bytes another method's state has (share_mutable_buffers)
  kView,         // written by no instruction, at the bytes of a value written earlier (a static view)
  kMoveTarget,   // re-pointed by a MoveCall or et_view before any use: its own bytes are never used
  kUnwritten,    // named by instructions but written by none, over bytes tensors written earlier used: a kernel's
                 // workspace (or a view moved off its base: plan-read-before-write)
  kUnused,       // no instruction names it and it is not an output
  kEmpty,        // no bytes (a size-0 tensor): nothing to keep apart
};
const char* PlanOriginName(PlanOrigin o);

// One planned tensor (a Tensor value with allocation_info). 40 bytes: a
// large program has many (verify of 330,000 values: 247,500 at once). The
// instructions that write and read it are in MethodLifetimes::writers and
// readers, filled only with detail: two empty std::vectors here were 48 of
// 88 bytes, 11.9 MB there.
struct PlannedTensor {
  uint32_t value = 0;
  uint32_t memory_id = 0;
  uint64_t offset = 0;
  uint64_t nbytes = 0;   // the runtime's size: sizes as written (DYNAMIC_BOUND: the upper bounds)
  uint32_t storage = 0;  // index in MethodLifetimes::storages
  PlanOrigin origin = PlanOrigin::kWritten;
  bool input = false;
  bool output = false;
  const executorch_flatbuffer::Tensor* tensor = nullptr;  // dtype, shape, name, allocation_info
};

// A list of instructions for each planned tensor of a method, one list after
// the other: tensor k's (index in MethodLifetimes::tensors) are list[start[k]]
// up to list[start[k + 1]]; every list is empty while `start` is.
struct TensorInstructions {
  std::vector<size_t> start;
  std::vector<uint32_t> list;

  struct Range {
    const uint32_t* first = nullptr;
    const uint32_t* last = nullptr;
    const uint32_t* begin() const { return first; }
    const uint32_t* end() const { return last; }
    size_t size() const { return static_cast<size_t>(last - first); }
    bool empty() const { return first == last; }
    uint32_t operator[](size_t i) const { return first[i]; }
    std::vector<uint32_t> ToVector() const { return {first, last}; }
  };
  Range Of(size_t tensor) const {
    if (tensor + 1 >= start.size()) return {};
    return {list.data() + start[tensor], list.data() + start[tensor + 1]};
  }
};

// Bytes that one or more values use by design: a tensor, the static views of
// it, and the MoveCall/et_view targets while they point at it.
//
// A large program has about one per planned tensor (verify of 330,000
// values: 247,500 at once), so it is kept small: 64 bytes, with no
// allocation for one value and one live run, as nearly all have. It was 152
// bytes with a 32-byte malloc chunk for `values` and one each for `live` and
// `direct` once live: 39.9 MB of capacity and 10 MB of chunks there
// (heaptrack), now 16.8 MB in all. What MoveCall/et_view targets add is kept
// apart (PlanThrough), for the few storages they may point to.
struct PlanStorage {
  uint64_t offset = 0;
  uint64_t nbytes = 0;  // the largest member
  uint32_t memory_id = 0;
  uint32_t through = kNoThrough;       // index in MethodLifetimes::through, for a storage targets may point to
  bool persistent = false;             // state: live from the first to the last instruction, and between calls
  bool shared_across_methods = false;  // state in a buffer other methods share: its offset is fixed
  SmallVec<uint32_t> values;           // member value indices; the first is the one whose bytes these are
  SmallVec<LiveRun> live;              // where the bytes hold needed data: ascending, disjoint
  // first..last of `live` (nullopt when never live).
  std::optional<LiveRun> Interval() const;

  static constexpr uint32_t kNoThrough = UINT32_MAX;
};

// What MoveCall/et_view targets add to a storage they may point to.
struct PlanThrough {
  std::vector<uint32_t> pointed_by;  // MoveCall/et_view targets that may point here
  // `live` split by reason: through the members themselves, and through
  // each MoveCall/et_view target while it may point here. Two storages one
  // target may point to at an instruction are alternatives there (each
  // path picks one): not a conflict when that target is their only reason.
  SmallVec<LiveRun> direct;
  std::vector<std::pair<uint32_t, std::vector<LiveRun>>> runs;  // (target value, runs)
};

// A MoveCall (the target EValue becomes the source's tensor) or an et_view
// (the out tensor's data pointer becomes self's).
struct PlanAlias {
  uint32_t instruction = 0;
  uint32_t from = 0;
  uint32_t to = 0;
  bool et_view = false;
};

// A problem the model found: a located error.
struct PlanProblem {
  std::string code;             // plan-read-before-write, plan-loop-no-exit, plan-move-cycle
  std::string message;          // what happened, without the method's name
  const void* where = nullptr;  // the table in the flatbuffer it is about
  std::string expected;
  std::string found;
};

struct MethodLifetimes {
  size_t plan_index = 0;
  std::string name;
  uint32_t instruction_count = 0;
  std::vector<uint32_t> chain_starts;    // global index of each chain's first instruction
  std::vector<PlannedTensor> tensors;    // ascending value index
  std::vector<int32_t> tensor_of_value;  // value index -> index in `tensors`, or -1
  std::vector<PlanStorage> storages;
  std::vector<PlanThrough> through;  // of the storages MoveCall/et_view targets may point to
  // With detail (MethodLifetimesDeriver; DeriveLifetimes has it): the
  // instructions that write / read each planned tensor by its own index
  // (directly or as an item of a TensorList), ascending and unique. A value
  // both read and written by one instruction (an in-place op) is in both.
  TensorInstructions writers, readers;
  std::vector<PlanAlias> aliases;
  std::vector<PlanProblem> problems;
  // Set when lifetimes could not be derived (then no storage has live runs):
  // why, in one sentence. Never a guess.
  std::string not_checked;
  // Which delegate arguments were taken as outputs (DelegateCall args do not
  // say): an argument nothing has written on any path to the call.
  std::vector<std::pair<uint32_t, uint32_t>> delegate_outputs;  // (instruction, value)

  // A loop with no exit or a MoveCall cycle (in `problems`): the program's
  // control flow makes lifetimes meaningless, so none were derived.
  bool blocked = false;

  const PlannedTensor* Tensor(uint32_t value) const;
  // A planned tensor's writers / readers.
  TensorInstructions::Range Writers(const PlannedTensor& t) const;
  TensorInstructions::Range Readers(const PlannedTensor& t) const;
  // A storage's PlanThrough lists, empty when no target points to it; its
  // direct runs are its `live` then.
  const std::vector<uint32_t>& PointedBy(const PlanStorage& s) const;
  const SmallVec<LiveRun>& Direct(const PlanStorage& s) const;
  const std::vector<std::pair<uint32_t, std::vector<LiveRun>>>& Through(const PlanStorage& s) const;
  // Lifetimes were derived (neither not_checked nor blocked).
  bool derived() const { return not_checked.empty() && !blocked; }
};

// State that several methods share in one buffer (share_mutable_buffers,
// exir/passes/memory_planning_pass.py run_multimethod): each method's storage
// of one named mutable buffer.
struct SharedState {
  uint32_t memory_id = 0;
  std::string name;  // fully qualified name; empty for unnamed state found at the same bytes
  struct Use {
    size_t method = 0;  // index in ProgramLifetimes::methods
    uint32_t storage = 0;
  };
  std::vector<Use> uses;
};

struct ProgramLifetimes {
  std::vector<MethodLifetimes> methods;  // one per execution plan, in order
  std::vector<SharedState> shared;
};

// Derives every method's lifetimes. `program` must have passed the FlatBuffers
// verifier; anything else odd (indices out of range, unknown instructions)
// makes that method not_checked rather than failing.
ProgramLifetimes DeriveLifetimes(const executorch_flatbuffer::Program& program);

// Derives one method at a time, reusing its working memory from method to
// method: what `verify` does (the lifetimes of a method are gone once the
// next one is derived). DeriveLifetimes is this, keeping each method.
class MethodLifetimesDeriver {
 public:
  // `detail`: fill MethodLifetimes::writers and readers (the checks and
  // PlanViews do not need them).
  MethodLifetimesDeriver(const executorch_flatbuffer::Program& program, bool detail);
  ~MethodLifetimesDeriver();
  MethodLifetimesDeriver(const MethodLifetimesDeriver&) = delete;
  MethodLifetimesDeriver& operator=(const MethodLifetimesDeriver&) = delete;
  // Execution plan `plan_index`'s lifetimes, valid until the next call.
  const MethodLifetimes& Derive(size_t plan_index);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A storage of a method in a buffer where that method keeps state: what is
// kept of each method to find, and check, state several methods share.
struct StateBufferEntry {
  size_t method = 0;
  uint32_t storage = 0;
  uint32_t memory_id = 0;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  bool persistent = false;
  bool live = false;            // live somewhere in its method
  bool state_only = false;      // its method keeps nothing but state in this buffer
  bool apart = false;           // state_only, and its method plans other tensors, all in other buffers
  std::string name;             // persistent: its fully qualified name ("" when the file has none)
  uint32_t initial = 0;         // persistent: its data_buffer_idx (initial data in the mutable segment; 0: none)
  const void* where = nullptr;  // the allocation_info of its first value
};
// Appends the entries of method `method` (only buffers holding state); with
// `persistent_only`, only those of state (all a program of one method needs:
// nothing is shared without a second method, and what AnalyzeSharedState can
// still say, that it stopped at its limit, it finds among the state alone).
// An entry's text for messages is DescribeStorage(m, m.storages[e.storage]),
// built only for what is reported.
void AddStateBufferEntries(const MethodLifetimes& m, size_t method, std::vector<StateBufferEntry>& out,
                           bool persistent_only = false);

// Two persistent entries (of two methods) are the same state: the same name
// when both have one; otherwise the same buffer, offset and size, and not two
// different initial data (the emitter stores equal initial data once:
// _emitter.py cached_spec_mutable_hash_values).
bool SameState(const StateBufferEntry& a, const StateBufferEntry& b);

// State several methods share (share_mutable_buffers,
// exir/passes/memory_planning_pass.py run_multimethod: every mutable buffer of
// every method in memory_id 2, one offset per name, everything else in 1), as
// docs/memory-plan.md states the rule. A buffer is shared when
//  - a method keeps its state apart there (nothing but state in it, its other
//    tensors in other buffers) and another method keeps state there too, or
//    keeps a copy of state kept there elsewhere (the same name; unnamed: the
//    same initial data and size); or
//  - two methods keep nothing but state there, with the same state in common.
struct SharedStateGroup {
  uint32_t memory_id = 0;
  std::string name;             // "" when unnamed
  std::vector<size_t> entries;  // indices in the entries given: one state, at least two methods
};
struct SharedStateAnalysis {
  std::vector<uint32_t> buffers;         // the shared memory_ids, ascending
  std::vector<SharedStateGroup> groups;  // state kept in a shared buffer by several methods
  std::vector<size_t> fixed;             // persistent entries in a shared buffer: their bytes stay put
  // `entry` is state that must be at `reference`'s bytes and is not: the same
  // name elsewhere, or (unnamed) a copy of it outside the shared buffers in a
  // method that keeps no such state in the shared buffer.
  struct Mismatch {
    size_t entry = 0;
    size_t reference = 0;
  };
  std::vector<Mismatch> mismatches;
  // `entry` (any live storage of a method keeping state in a shared buffer)
  // meets the bytes of `state`, another method's state that it is not (two
  // states meeting: listed once).
  struct Overlap {
    size_t entry = 0;
    size_t state = 0;
  };
  std::vector<Overlap> overlaps;  // at most one per entry, at most max_overlaps in all (0: not looked for)
  bool more_overlaps = false;     // some were left out
  // The analysis gave up (more steps than the lifetimes' limit): what it
  // found so far, incomplete.
  bool not_checked = false;
};
SharedStateAnalysis AnalyzeSharedState(const std::vector<StateBufferEntry>& entries, size_t max_overlaps);

// For tests: true makes every method go through the general dataflow, not
// the straight-line fast path (they must agree).
extern bool g_plan_lifetimes_general_only;

// "aten::add.out", "delegate XnnpackBackend", "MoveCall", "JumpFalseCall",
// "FreeCall" for a global instruction index.
std::string InstructionLabel(const executorch_flatbuffer::Program& program, const MethodLifetimes& m,
                             uint32_t instruction);

// "values[7] \"fqn\" (FLOAT[1, 4])"
std::string DescribePlannedValue(const MethodLifetimes& m, uint32_t value);
// "values[3] (FLOAT[2]) with its view values[9], also used through values[12] (MoveCall/et_view)"
std::string DescribeStorage(const MethodLifetimes& m, const PlanStorage& s);

// ---- What `plan`, `size`, `inspect` and `map --memory` need, per method and
// planned buffer, ready to hand to layout/memory_plan.h.
struct PlanBufferView {
  uint32_t memory_id = 0;
  int64_t size = 0;         // non_const_buffer_sizes[memory_id] now
  uint64_t used_end = 0;    // the end of the last byte any planned tensor uses now
  uint64_t alignment = 16;  // InferPlanAlignment of the current offsets
  // One block per storage that is live somewhere: its size, its live
  // interval (first..last instruction; fixed_offset for state other methods
  // share), the storage it came from, and where it is now.
  std::vector<PlanBlock> blocks;
  std::vector<uint32_t> block_storage;  // index in MethodLifetimes::storages
  std::vector<uint64_t> offsets;        // current offset of each block
  // Planned tensors of this buffer that are never live (unused, or
  // MoveCall/et_view targets whose own bytes nothing uses): any offset inside
  // the buffer keeps the runtime's bounds check happy.
  std::vector<uint32_t> idle_values;
  uint64_t lower_bound = 0;             // PlanLowerBound(blocks, alignment)
  std::optional<uint32_t> device_type;  // non_const_buffer_device's DeviceType, when the file says
};

struct MethodPlanView {
  size_t method = 0;  // index in ProgramLifetimes::methods
  std::string name;
  std::vector<PlanBufferView> buffers;  // memory_id 1.. (those with planned tensors)
  std::string not_checked;              // copied from the method: no blocks then
};

std::vector<MethodPlanView> PlanViews(const executorch_flatbuffer::Program& program, const ProgramLifetimes& lt);

}  // namespace ptepack
