#include "serialize/read/plan_lifetimes.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "serialize/format/pte_format.h"
#include "serialize/read/pte_reader.h"

namespace ptepack {

namespace efb = executorch_flatbuffer;

bool g_plan_lifetimes_general_only = false;

const char* PlanOriginName(PlanOrigin o) {
  switch (o) {
    case PlanOrigin::kWritten:
      return "written";
    case PlanOrigin::kInput:
      return "input";
    case PlanOrigin::kState:
      return "state";
    case PlanOrigin::kSharedState:
      return "shared-state";
    case PlanOrigin::kView:
      return "view";
    case PlanOrigin::kMoveTarget:
      return "move-target";
    case PlanOrigin::kUnwritten:
      return "unwritten";
    case PlanOrigin::kUnused:
      return "unused";
    case PlanOrigin::kEmpty:
      return "empty";
  }
  return "?";
}

// One per planned tensor in a large program (plan_lifetimes.h, PlanStorage).
static_assert(sizeof(void*) != 8 || sizeof(PlanStorage) == 64, "PlanStorage grew");
static_assert(sizeof(void*) != 8 || sizeof(PlannedTensor) == 40, "PlannedTensor grew");

std::optional<LiveRun> PlanStorage::Interval() const {
  if (live.empty()) return std::nullopt;
  return LiveRun{live.front().first, live.back().last};
}

const PlannedTensor* MethodLifetimes::Tensor(uint32_t value) const {
  if (value >= tensor_of_value.size() || tensor_of_value[value] < 0) return nullptr;
  return &tensors[static_cast<size_t>(tensor_of_value[value])];
}

TensorInstructions::Range MethodLifetimes::Writers(const PlannedTensor& t) const {
  return writers.Of(static_cast<size_t>(tensor_of_value.at(t.value)));
}

TensorInstructions::Range MethodLifetimes::Readers(const PlannedTensor& t) const {
  return readers.Of(static_cast<size_t>(tensor_of_value.at(t.value)));
}

const std::vector<uint32_t>& MethodLifetimes::PointedBy(const PlanStorage& s) const {
  static const std::vector<uint32_t> kNone;
  return s.through == PlanStorage::kNoThrough ? kNone : through[s.through].pointed_by;
}

const SmallVec<LiveRun>& MethodLifetimes::Direct(const PlanStorage& s) const {
  return s.through == PlanStorage::kNoThrough ? s.live : through[s.through].direct;
}

const std::vector<std::pair<uint32_t, std::vector<LiveRun>>>& MethodLifetimes::Through(const PlanStorage& s) const {
  static const std::vector<std::pair<uint32_t, std::vector<LiveRun>>> kNone;
  return s.through == PlanStorage::kNoThrough ? kNone : through[s.through].runs;
}

namespace {

constexpr uint32_t kNone = UINT32_MAX;

// Work limits: a method whose control flow needs more than this is
// not_checked (with the reason), never analysed for minutes.
constexpr uint64_t kMaxBlockCells = uint64_t{1} << 24;   // blocks x storages (bits per bit matrix)
constexpr uint64_t kMaxTargetCells = uint64_t{1} << 20;  // blocks x MoveCall/et_view targets
constexpr uint64_t kMaxWork = uint64_t{1} << 26;         // steps of the view search and of the dataflow

std::string Idx(uint32_t v) { return "values[" + std::to_string(v) + "]"; }

std::string DimsOf(const efb::Tensor* t) {
  std::string s = "[";
  if (t && t->sizes()) {
    for (flatbuffers::uoffset_t i = 0; i < t->sizes()->size(); ++i) {
      s += (i ? ", " : "") + std::to_string(t->sizes()->Get(i));
    }
  }
  return s + "]";
}

std::string NameOf(const efb::Tensor* t) {
  if (!t || !t->extra_tensor_info() || !t->extra_tensor_info()->fully_qualified_name()) return "";
  return t->extra_tensor_info()->fully_qualified_name()->str();
}

// ---- What an instruction does to the values it names.
//
// Rules, with the upstream code they follow:
// - KernelCall: exir/emit/_emitter.py `_emit_operator` emits the schema's
//   arguments and then appends the return value(s): the last argument is the
//   return, a Tensor, or a TensorList of the out tensors. The call writes the
//   return; it reads the other arguments. An out variant also passes its out
//   tensor(s) as the schema's last argument(s), just before the return: those
//   are the return again, not reads. A returned tensor that appears anywhere
//   else in the arguments is read and written (an in-place op: its earlier
//   contents stay live).
// - executorch_prim::et_view.default(self, size, out): the out tensor's data
//   pointer becomes self's (kernels/prim_ops/et_view.cpp); no bytes move.
// - executorch_prim::et_copy_index.tensor(copy_to, copy_from, index): writes
//   one slice of copy_to (kernels/prim_ops/et_copy_index.cpp, emitted by
//   `_emit_map`); the other slices stay live.
// - aten::copy_(self, src, ...) -> self: the write-back of a mutable buffer
//   (exir/passes/insert_write_back_for_buffers_pass.py); self is written,
//   not read.
// - DelegateCall: `_emit_delegate` emits the inputs, then the flattened
//   returns; the file does not say where one ends. An argument that some
//   path to the call has written (or an input, or state) is taken as read;
//   one that nothing has written on any path is taken as an output (written).
//   Every argument is live at the call either way.
// - MoveCall: the target EValue becomes the source's (runtime/executor/method.cpp,
//   execute_instruction): from then on, and in every later call, the target
//   uses the source's bytes (upstream bug 21490).
// - JumpFalseCall: reads its condition.
// - FreeCall: names the value (live at the call); it releases only
//   DYNAMIC_UNBOUND tensors (exir/memory_planning.py insert_calls_to_free),
//   which are never planned.
enum class Role : uint8_t {
  kRead,
  kWrite,      // the whole tensor: earlier contents are dead
  kReadWrite,  // in place
  kWriteKeep,  // part of it, or into state: earlier contents stay live
  kTouch,      // named, bytes neither read nor written
  kDelegate,   // read or written: decided by what was written before
  kAlias,      // `value` now uses the bytes `aux` uses
};

struct Event {
  uint32_t instr = 0;
  uint32_t value = 0;
  Role role = Role::kRead;
  uint32_t aux = 0;
};

// What a delegate argument turned out to be.
enum class Resolved : uint8_t { kNo, kRead, kOutput, kMaybe };

class BitMatrix {
 public:
  BitMatrix() = default;
  BitMatrix(size_t rows, size_t bits) : words_((bits + 63) / 64), data_(rows * words_, 0) {}
  void Reset(size_t rows, size_t bits) {
    words_ = (bits + 63) / 64;
    data_.assign(rows * words_, 0);
  }
  uint64_t* row(size_t r) { return data_.data() + r * words_; }
  const uint64_t* row(size_t r) const { return data_.data() + r * words_; }
  size_t words() const { return words_; }

 private:
  size_t words_ = 0;
  std::vector<uint64_t> data_;
};

inline bool GetBit(const uint64_t* w, size_t i) { return (w[i >> 6] >> (i & 63)) & 1; }
inline void SetBit(uint64_t* w, size_t i) { w[i >> 6] |= uint64_t{1} << (i & 63); }

// Sorts and merges runs in place (adjacent runs join).
template <typename Runs>
void CoalesceInPlace(Runs& r) {
  std::sort(r.begin(), r.end(), [](const LiveRun& a, const LiveRun& b) { return a.first < b.first; });
  size_t n = 0;
  for (size_t k = 0; k < r.size(); ++k) {
    if (n > 0 && r[k].first <= r[n - 1].last + 1) {
      r[n - 1].last = std::max(r[n - 1].last, r[k].last);
    } else {
      r[n++] = r[k];
    }
  }
  r.resize(n);
}

// Sorted, merged runs (adjacent runs join).
std::vector<LiveRun> Coalesce(std::vector<LiveRun> r) {
  std::sort(r.begin(), r.end(), [](const LiveRun& a, const LiveRun& b) { return a.first < b.first; });
  std::vector<LiveRun> out;
  for (const LiveRun& x : r) {
    if (!out.empty() && x.first <= out.back().last + 1) {
      out.back().last = std::max(out.back().last, x.last);
    } else {
      out.push_back(x);
    }
  }
  return out;
}

// MoveCall/et_view targets: which storages a target may use here, and whether
// the bytes are written on every path that reaches here pointing there.
using RefSet = std::vector<std::pair<uint32_t, bool>>;  // sorted by storage

// What the dataflow's recording pass collects: storage events of plain
// values (a value's own storage), and target events (uses of a
// MoveCall/et_view target, whose storage depends on the path).
struct TargetEvent {
  uint32_t instr;
  uint32_t target;
  uint8_t kind;   // 0 use, 1 kill (a full write through a single storage), 2 write, 3 re-pointed
  uint32_t keys;  // kind 3: index in `alias_keys` of the storages it may use from here
};
struct Emit {
  bool on = false;
  std::vector<std::tuple<uint32_t, uint32_t, uint8_t>> sev;  // (instr, storage, 0 use / 1 kill / 2 write)
  std::vector<TargetEvent> tev;
  std::vector<std::vector<uint32_t>> alias_keys;
};

// The dataflow's working memory, kept from method to method.
struct DataflowScratch {
  std::vector<size_t> block_ev;
  std::vector<uint32_t> entry_defined;
  BitMatrix must_in, may_in, ue, kill, evin, live_in, live_out;
  std::vector<std::vector<RefSet>> refs_in;
  std::vector<uint8_t> visited, queued, input_storage;
  std::vector<uint64_t> must, may, entry_must, entry_may, exit_must, exit_may, exit_bits;
  std::vector<RefSet> refs, entry_refs, exit_refs;
  Emit emit;
  std::vector<uint32_t> sorted_storages;  // by (memory_id, offset), built when a coverage test needs it
  std::vector<uint64_t> longest;          // per memory_id
  std::vector<uint32_t> rbw, rbw_storage;
  std::vector<Resolved> resolved;
  std::vector<size_t> work, order;
  std::vector<uint32_t> exit_use, exit_targets;
  std::vector<LiveRun> local;
  // StraightLine's
  std::vector<uint32_t> first_ev, first_def, run_last, stamp;
  std::vector<uint8_t> in_run, flags, clip;
  std::vector<std::pair<uint32_t, uint32_t>> points;  // (storage, instruction)
  // With detail: (tensor index, instruction) of each read / write of a
  // planned tensor, in instruction order, and the last instruction noted
  // per tensor (an instruction once).
  std::vector<std::pair<uint32_t, uint32_t>> read_uses, write_uses;
  std::vector<uint32_t> last_read, last_write;
};

struct Block {
  uint32_t first = 0, last = 0;  // instructions
  std::vector<uint32_t> succ;
  bool to_exit = false;
};

// The indices of one value list, bounds-checked.
template <typename V>
bool ValidIndex(const V* v, int64_t i) {
  return v && i >= 0 && static_cast<uint64_t>(i) < v->size();
}

// Cross-method state, for the values of a method that only another method
// may write (share_mutable_buffers): (buffer, offset) -> nbytes, method.
struct StateAt {
  uint32_t memory_id = 0;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  size_t method = 0;
  bool operator<(const StateAt& o) const {
    return std::tie(memory_id, offset, nbytes, method) < std::tie(o.memory_id, o.offset, o.nbytes, o.method);
  }
};

// Derives one method at a time; its containers keep their capacity from one
// method to the next, and so do the output's tensors and storages (pooled),
// so that a program of many small methods costs little more than reading it.
class MethodDeriver {
 public:
  MethodDeriver(const efb::Program& p, bool detail) : p_(p), detail_(detail) {}

  // Starts method `plan_index`, writing into `out` (whatever it held is reused).
  void Reset(size_t plan_index, MethodLifetimes* out);
  // Phase 1: values, instructions, what each names; structure; the origins
  // that need no other method.
  void Collect();
  // Whether Finish needs other methods' state (a planned tensor here that
  // nothing writes and no view explains).
  bool NeedsOtherState() const;
  // Phase 2: views, state other methods share, storages, dataflow.
  // `other_state`: every method's state, sorted (entries of this method are skipped).
  void Finish(const std::vector<StateAt>& other_state);

 private:
  using Plan = efb::ExecutionPlan;
  void NotChecked(const std::string& why) {
    if (out_->not_checked.empty()) out_->not_checked = why;
  }
  efb::KernelTypes Type(uint32_t v) const { return types_[v]; }
  bool IsTensor(uint32_t v) const { return types_[v] == efb::KernelTypes::Tensor; }
  PlanStorage& NewStorage();
  PlannedTensor& NewTensor();
  // With detail: out_->writers and readers, from NoteUse's calls between
  // StartUses and FinishUses, in instruction order.
  void StartUses();
  void NoteUse(size_t tensor, uint32_t instr, bool reads, bool writes);
  void FinishUses();
  // A storage's direct runs (PlanThrough::direct) are built in its `live`:
  // for nearly every storage they are all of it. AssembleLive moves them
  // out for the few that targets may point to.
  SmallVec<LiveRun>& DirectRuns(size_t st) { return out_->storages[st].live; }

 public:
  // Drops the tensors and storages of `out` this method did not use.
  void Trim();

 private:
  bool StraightLine();
  void ApplyRules();
  void AssembleLive();
  void ReportReadBeforeWrite();
  bool Covered(uint32_t s, const uint64_t* bits);
  void CollectValues();
  void CollectInstructions();
  void AddKernelCall(uint32_t i, const efb::KernelCall& k);
  void Expand(uint32_t i, int32_t v, Role role);
  void ScalarWrite(uint32_t i, uint32_t v) { scalar_writes_.emplace_back(v, i); }
  void CheckMoveCycles();
  void CheckLoops();
  bool WrittenIn(uint32_t v, uint32_t lo, uint32_t hi);
  void ClassifyLocal();
  void ResolveViews(const std::vector<StateAt>& other_state);
  void BuildStorages();
  void BuildBlocks();
  bool Dataflow();
  void FinishTensors();

  const efb::Program& p_;
  const bool detail_;
  const Plan* plan_ = nullptr;
  MethodLifetimes* out_ = nullptr;
  size_t ntensors_ = 0, nstorages_ = 0;  // used in out_->tensors / storages
  uint32_t n_ = 0;                       // instructions
  std::vector<efb::KernelTypes> types_;
  std::vector<const efb::Instruction*> instrs_;
  std::vector<uint32_t> jump_dest_;                           // global, or kNone
  std::vector<Event> events_;                                 // instruction order
  std::vector<std::pair<uint32_t, uint32_t>> scalar_writes_;  // (value, instruction)
  std::vector<uint8_t> is_input_, is_output_;
  std::vector<int32_t> target_of_value_;    // value -> target index, or -1
  std::vector<uint32_t> targets_;           // target index -> value
  std::vector<uint32_t> storage_of_value_;  // planned tensor value -> storage; kNone otherwise
  std::vector<uint8_t> copy_target_;        // planned tensors aten::copy_ writes
  std::vector<Block> blocks_;
  std::vector<uint32_t> block_of_;  // instruction -> block
  uint32_t unplanned_ = 0;          // the storage id standing for every unplanned tensor
  uint32_t fresh_ = 0;              // a target's own tensor, before any MoveCall re-points it
  uint64_t work_ = 0;
  std::vector<std::vector<uint32_t>> writes_of_;  // value -> instructions that write it (built on first use)
  std::vector<uint32_t> moved_view_;              // values reported as views moved off their base
  // Working memory of the phases (kept between methods).
  std::vector<uint32_t> first_event_;
  std::vector<uint8_t> first_reads_, written_, read_, viewed_, used_;
  std::vector<uint32_t> first_use_;
  std::vector<uint32_t> wstart_, wlist_;  // instructions that write each value (kWrite/kReadWrite/kWriteKeep/kDelegate)
  std::vector<std::pair<uint64_t, uint32_t>> places_;  // (key of memory_id and offset, tensor index), sorted
  std::vector<std::tuple<uint32_t, uint64_t, uint32_t>> by_offset_;    // (memory_id, offset, tensor index), sorted
  std::vector<uint64_t> longest_;                                      // per memory_id
  std::vector<std::tuple<int, uint64_t, uint32_t, uint32_t>> unread_;  // (dtype, nbytes, first write, value), sorted
  std::vector<uint8_t> leader_;
  std::vector<int32_t> ret_items_, items_;
  DataflowScratch sc_;
};

void MethodDeriver::Reset(size_t plan_index, MethodLifetimes* out) {
  plan_ = p_.execution_plan()->Get(static_cast<flatbuffers::uoffset_t>(plan_index));
  out_ = out;
  // Elements of the last method's tensors and storages are reused in place
  // (their vectors keep their capacity); Trim drops what this one did not use.
  ntensors_ = 0;
  nstorages_ = 0;
  out->plan_index = plan_index;
  if (plan_->name()) {
    out->name.assign(plan_->name()->c_str(), plan_->name()->size());
  } else {
    out->name.clear();
  }
  out->instruction_count = 0;
  out->chain_starts.clear();
  out->tensor_of_value.clear();
  out->aliases.clear();
  out->problems.clear();
  out->not_checked.clear();
  out->delegate_outputs.clear();
  out->through.clear();
  out->writers.start.clear();
  out->writers.list.clear();
  out->readers.start.clear();
  out->readers.list.clear();
  out->blocked = false;
  n_ = 0;
  instrs_.clear();
  jump_dest_.clear();
  events_.clear();
  scalar_writes_.clear();
  targets_.clear();
  blocks_.clear();
  work_ = 0;
  writes_of_.clear();
  moved_view_.clear();
}

PlanStorage& MethodDeriver::NewStorage() {
  if (nstorages_ == out_->storages.size()) out_->storages.emplace_back();
  PlanStorage& s = out_->storages[nstorages_++];
  s.memory_id = 0;
  s.offset = 0;
  s.nbytes = 0;
  s.through = PlanStorage::kNoThrough;
  s.persistent = false;
  s.shared_across_methods = false;
  s.values.clear();
  s.live.clear();  // holds the direct runs until AssembleLive
  return s;
}

PlannedTensor& MethodDeriver::NewTensor() {
  if (ntensors_ == out_->tensors.size()) out_->tensors.emplace_back();
  return out_->tensors[ntensors_++];
}

void MethodDeriver::StartUses() {
  sc_.read_uses.clear();
  sc_.write_uses.clear();
  sc_.last_read.assign(out_->tensors.size(), kNone);
  sc_.last_write.assign(out_->tensors.size(), kNone);
}

void MethodDeriver::NoteUse(size_t tensor, uint32_t instr, bool reads, bool writes) {
  if (reads && sc_.last_read[tensor] != instr) {
    sc_.last_read[tensor] = instr;
    sc_.read_uses.emplace_back(static_cast<uint32_t>(tensor), instr);
  }
  if (writes && sc_.last_write[tensor] != instr) {
    sc_.last_write[tensor] = instr;
    sc_.write_uses.emplace_back(static_cast<uint32_t>(tensor), instr);
  }
}

void MethodDeriver::FinishUses() {
  const size_t nt = out_->tensors.size();
  auto fill = [&](const std::vector<std::pair<uint32_t, uint32_t>>& uses, TensorInstructions& out) {
    out.start.assign(nt + 1, 0);
    for (const auto& u : uses) ++out.start[u.first + 1];
    for (size_t k = 0; k < nt; ++k) out.start[k + 1] += out.start[k];
    out.list.resize(uses.size());
    // A counting sort: each tensor's instructions keep their (ascending) order.
    std::vector<size_t> next(out.start.begin(), out.start.end() - 1);
    for (const auto& [t, i] : uses) out.list[next[t]++] = i;
  };
  fill(sc_.write_uses, out_->writers);
  fill(sc_.read_uses, out_->readers);
}

void MethodDeriver::Trim() {
  out_->tensors.resize(ntensors_);
  out_->storages.resize(nstorages_);
}

void MethodDeriver::CollectValues() {
  const auto* vals = plan_->values();
  const uint32_t nv = vals ? vals->size() : 0;
  types_.assign(nv, efb::KernelTypes::NONE);
  out_->tensor_of_value.assign(nv, -1);
  is_input_.assign(nv, 0);
  is_output_.assign(nv, 0);
  copy_target_.assign(nv, 0);
  const auto* ncbs = plan_->non_const_buffer_sizes();
  // `tensors` and `storages` (BuildStorages) are sized once: grown one by
  // one, their doubling left up to half of each unused, and the old and new
  // blocks were both held while it copied (verify of 330,000 values: 247,500
  // planned tensors in capacity for 262,144, after a copy from 131,072).
  size_t planned = 0;
  for (uint32_t v = 0; v < nv; ++v) {
    const auto* ev = vals->Get(v);
    planned += ev->val() && ev->val_type() == efb::KernelTypes::Tensor && ev->val_as_Tensor()->allocation_info();
  }
  out_->tensors.reserve(planned);
  for (uint32_t v = 0; v < nv; ++v) {
    const auto* ev = vals->Get(v);
    types_[v] = ev->val() ? ev->val_type() : efb::KernelTypes::NONE;
    if (types_[v] != efb::KernelTypes::Tensor) continue;
    const auto* t = ev->val_as_Tensor();
    const auto* ai = t->allocation_info();
    if (!ai) continue;
    PlannedTensor& pt = NewTensor();
    pt.value = v;
    pt.tensor = t;
    pt.origin = PlanOrigin::kWritten;
    pt.input = pt.output = false;
    pt.storage = 0;
    pt.memory_id = ai->memory_id();
    pt.offset = (static_cast<uint64_t>(ai->memory_offset_high()) << 32) | ai->memory_offset_low();
    auto nb = TensorNbytes(*t);
    if (!nb) {
      NotChecked(Idx(v) + " has a shape whose size cannot be computed");
      nb = 0;
    }
    pt.nbytes = *nb;
    // The runtime uses buffer memory_id - 1 of the planned memory it is
    // given; id 0 is reserved (runtime/executor/tensor_parser_exec_aten.cpp).
    if (pt.memory_id == 0 || !ncbs || pt.memory_id >= ncbs->size()) {
      NotChecked(Idx(v) + " is planned in buffer " + std::to_string(pt.memory_id) + ", which does not exist");
    }
    out_->tensor_of_value[v] = static_cast<int32_t>(ntensors_ - 1);
  }
  out_->tensors.resize(ntensors_);
  auto mark = [&](const flatbuffers::Vector<int32_t>* l, std::vector<uint8_t>& flag, bool input) {
    if (!l) return;
    for (int32_t v : *l) {
      if (v < 0 || static_cast<uint32_t>(v) >= nv) {
        NotChecked(std::string("an ") + (input ? "input" : "output") + " is not a value index");
        continue;
      }
      flag[static_cast<uint32_t>(v)] = 1;
    }
  };
  mark(plan_->inputs(), is_input_, true);
  mark(plan_->outputs(), is_output_, false);
  for (auto& t : out_->tensors) {
    t.input = is_input_[t.value];
    t.output = is_output_[t.value];
  }
}

// One argument: a tensor, or the tensors of a list. Other values matter only
// as conditions of jumps (which instructions write them).
void MethodDeriver::Expand(uint32_t i, int32_t v, Role role) {
  const bool writes = role != Role::kRead && role != Role::kTouch;
  if (v < 0 || static_cast<size_t>(v) >= types_.size()) {
    NotChecked("instruction " + std::to_string(i) + " names a value that does not exist");
    return;
  }
  const auto uv = static_cast<uint32_t>(v);
  const auto* ev = plan_->values()->Get(uv);
  switch (types_[uv]) {
    case efb::KernelTypes::Tensor:
      events_.push_back({i, uv, role, 0});
      return;
    case efb::KernelTypes::TensorList:
    case efb::KernelTypes::OptionalTensorList: {
      const auto* items = types_[uv] == efb::KernelTypes::TensorList ? ev->val_as_TensorList()->items()
                                                                     : ev->val_as_OptionalTensorList()->items();
      if (!items) return;
      for (int32_t it : *items) {
        if (it == -1 && types_[uv] == efb::KernelTypes::OptionalTensorList) continue;
        if (it < 0 || static_cast<size_t>(it) >= types_.size()) {
          NotChecked(Idx(uv) + " lists a value that does not exist");
          continue;
        }
        if (IsTensor(static_cast<uint32_t>(it))) events_.push_back({i, static_cast<uint32_t>(it), role, 0});
      }
      if (writes) ScalarWrite(i, uv);
      return;
    }
    default:
      if (writes) ScalarWrite(i, uv);
      return;
  }
}

// The tensor values a list names (items that are tensors), or {v} for a tensor.
static void TensorItems(const efb::ExecutionPlan& plan, const std::vector<efb::KernelTypes>& types, int32_t v,
                        std::vector<int32_t>& out) {
  out.clear();
  if (v < 0 || static_cast<size_t>(v) >= types.size()) return;
  const auto* ev = plan.values()->Get(static_cast<flatbuffers::uoffset_t>(v));
  const flatbuffers::Vector<int32_t>* items = nullptr;
  if (types[static_cast<size_t>(v)] == efb::KernelTypes::Tensor) {
    out.push_back(v);
    return;
  }
  if (types[static_cast<size_t>(v)] == efb::KernelTypes::TensorList) items = ev->val_as_TensorList()->items();
  if (types[static_cast<size_t>(v)] == efb::KernelTypes::OptionalTensorList) {
    items = ev->val_as_OptionalTensorList()->items();
  }
  if (items) out.assign(items->begin(), items->end());
}

void MethodDeriver::AddKernelCall(uint32_t i, const efb::KernelCall& k) {
  const auto* args = k.args();
  if (!args) return;
  std::string op;
  const auto* ops = plan_->operators();
  if (ValidIndex(ops, k.op_index())) {
    op = OperatorName(*ops->Get(static_cast<flatbuffers::uoffset_t>(k.op_index())));
  }
  const uint32_t n = args->size();
  for (int32_t a : *args) {
    if (a < 0 || static_cast<size_t>(a) >= types_.size()) {
      NotChecked("instruction " + std::to_string(i) + " names a value that does not exist");
      return;
    }
  }
  auto arg = [&](uint32_t j) { return args->Get(j); };
  auto tensor_at = [&](uint32_t j) { return IsTensor(static_cast<uint32_t>(arg(j))); };
  if (op == "executorch_prim::et_view.default" && n == 3 && tensor_at(0) && tensor_at(2)) {
    events_.push_back({i, static_cast<uint32_t>(arg(0)), Role::kTouch, 0});
    if (arg(0) != arg(2)) {
      events_.push_back({i, static_cast<uint32_t>(arg(2)), Role::kAlias, static_cast<uint32_t>(arg(0))});
      out_->aliases.push_back({i, static_cast<uint32_t>(arg(0)), static_cast<uint32_t>(arg(2)), true});
    }
    return;
  }
  if (op == "executorch_prim::et_copy_index.tensor" && n == 3 && tensor_at(0) && tensor_at(1)) {
    events_.push_back({i, static_cast<uint32_t>(arg(1)), Role::kRead, 0});
    events_.push_back({i, static_cast<uint32_t>(arg(0)), Role::kWriteKeep, 0});
    return;
  }
  if ((op == "aten::copy_" || op == "aten::copy_.default") && n >= 2 && tensor_at(0) && arg(n - 1) == arg(0)) {
    for (uint32_t j = 1; j + 1 < n; ++j) Expand(i, arg(j), Role::kRead);
    events_.push_back({i, static_cast<uint32_t>(arg(0)), Role::kWriteKeep, 0});
    if (const PlannedTensor* t = out_->Tensor(static_cast<uint32_t>(arg(0)))) copy_target_[t->value] = 1;
    return;
  }
  if (n == 0) return;
  const int32_t ret = arg(n - 1);
  std::vector<int32_t>& ret_items = ret_items_;
  TensorItems(*plan_, types_, ret, ret_items);
  const bool ret_is_tensors = IsTensor(static_cast<uint32_t>(ret)) ||
                              types_[static_cast<uint32_t>(ret)] == efb::KernelTypes::TensorList ||
                              types_[static_cast<uint32_t>(ret)] == efb::KernelTypes::OptionalTensorList;
  // The out argument(s) just before the return: the return again.
  uint32_t outs_from = n - 1;
  if (ret_is_tensors && n >= 2) {
    if (IsTensor(static_cast<uint32_t>(ret))) {
      if (arg(n - 2) == ret) outs_from = n - 2;
    } else {
      const uint32_t k_items = static_cast<uint32_t>(ret_items.size());
      bool individual = k_items > 0 && n - 1 >= k_items;
      for (uint32_t j = 0; individual && j < k_items; ++j) individual = arg(n - 1 - k_items + j) == ret_items[j];
      if (individual) {
        outs_from = n - 1 - k_items;
      } else if (!IsTensor(static_cast<uint32_t>(arg(n - 2))) &&
                 (TensorItems(*plan_, types_, arg(n - 2), items_), items_ == ret_items)) {
        outs_from = n - 2;
      }
    }
  }
  const size_t first_event = events_.size();
  for (uint32_t j = 0; j < outs_from; ++j) Expand(i, arg(j), Role::kRead);
  if (!ret_is_tensors) {
    ScalarWrite(i, static_cast<uint32_t>(ret));
    return;
  }
  for (int32_t w : ret_items) {
    if (w < 0 || static_cast<size_t>(w) >= types_.size() || !IsTensor(static_cast<uint32_t>(w))) continue;
    bool read = false;
    for (size_t e = first_event; e < events_.size() && !read; ++e) {
      read = events_[e].value == static_cast<uint32_t>(w) && events_[e].role == Role::kRead;
    }
    events_.push_back({i, static_cast<uint32_t>(w), read ? Role::kReadWrite : Role::kWrite, 0});
  }
  if (!IsTensor(static_cast<uint32_t>(ret))) ScalarWrite(i, static_cast<uint32_t>(ret));
}

void MethodDeriver::CollectInstructions() {
  const auto* chains = plan_->chains();
  if (!chains) return;
  for (const auto* ch : *chains) {
    out_->chain_starts.push_back(n_);
    if (!ch->instructions()) continue;
    const uint64_t next = uint64_t{n_} + ch->instructions()->size();
    if (next >= kNone) {
      NotChecked("the method has more instructions than the model counts");
      return;
    }
    n_ = static_cast<uint32_t>(next);
  }
  out_->instruction_count = n_;
  instrs_.reserve(n_);
  jump_dest_.assign(n_, kNone);
  for (size_t c = 0; c < chains->size(); ++c) {
    const auto* ch = chains->Get(static_cast<flatbuffers::uoffset_t>(c));
    if (!ch->instructions()) continue;
    const uint32_t base = out_->chain_starts[c];
    const uint32_t len = ch->instructions()->size();
    for (uint32_t li = 0; li < len; ++li) {
      const auto* ins = ch->instructions()->Get(li);
      const uint32_t i = base + li;
      instrs_.push_back(ins);
      if (!ins->instr_args()) {
        NotChecked("instruction " + std::to_string(i) + " has no arguments");
        continue;
      }
      switch (ins->instr_args_type()) {
        case efb::InstructionArguments::KernelCall:
          AddKernelCall(i, *ins->instr_args_as_KernelCall());
          break;
        case efb::InstructionArguments::DelegateCall: {
          const auto* args = ins->instr_args_as_DelegateCall()->args();
          if (args) {
            for (int32_t a : *args) Expand(i, a, Role::kDelegate);
          }
          break;
        }
        case efb::InstructionArguments::MoveCall: {
          const auto* mv = ins->instr_args_as_MoveCall();
          const int32_t from = mv->move_from(), to = mv->move_to();
          if (from < 0 || to < 0 || static_cast<size_t>(from) >= types_.size() ||
              static_cast<size_t>(to) >= types_.size()) {
            NotChecked("instruction " + std::to_string(i) + " moves a value that does not exist");
            break;
          }
          if (from == to) break;  // the runtime assigns the EValue to itself: nothing changes
          out_->aliases.push_back({i, static_cast<uint32_t>(from), static_cast<uint32_t>(to), false});
          if (IsTensor(static_cast<uint32_t>(from))) {
            events_.push_back({i, static_cast<uint32_t>(to), Role::kAlias, static_cast<uint32_t>(from)});
          } else {
            if (IsTensor(static_cast<uint32_t>(to))) {
              NotChecked("instruction " + std::to_string(i) + " (MoveCall) replaces tensor " + Idx(to) +
                         " with a value that is not a tensor");
            }
            ScalarWrite(i, static_cast<uint32_t>(to));
          }
          break;
        }
        case efb::InstructionArguments::JumpFalseCall: {
          const auto* jf = ins->instr_args_as_JumpFalseCall();
          const int64_t dest = jf->destination_instruction();
          if (dest < 0 || dest >= len || jf->cond_value_index() < 0 ||
              static_cast<size_t>(jf->cond_value_index()) >= types_.size()) {
            NotChecked("instruction " + std::to_string(i) + " jumps outside its chain or tests a missing value");
            break;
          }
          jump_dest_[i] = base + static_cast<uint32_t>(dest);
          Expand(i, jf->cond_value_index(), Role::kRead);
          break;
        }
        case efb::InstructionArguments::FreeCall:
          Expand(i, static_cast<int32_t>(ins->instr_args_as_FreeCall()->value_index()), Role::kTouch);
          break;
        default:
          NotChecked("instruction " + std::to_string(i) + " is of a kind the model does not know");
          break;
      }
    }
  }
  // MoveCall/et_view targets.
  target_of_value_.assign(types_.size(), -1);
  for (const Event& e : events_) {
    if (e.role != Role::kAlias || target_of_value_[e.value] >= 0) continue;
    target_of_value_[e.value] = static_cast<int32_t>(targets_.size());
    targets_.push_back(e.value);
  }
  std::sort(scalar_writes_.begin(), scalar_writes_.end());
}

// A directed cycle of MoveCalls/et_views (a -> b, b -> a): which bytes each
// value uses would depend on the order the moves last ran in. Upstream emits
// a MoveCall only from a branch's output into the value both branches of a
// cond share (exir/emit/_emitter.py, output()), never a cycle.
void MethodDeriver::CheckMoveCycles() {
  if (out_->aliases.size() < 2) return;
  std::unordered_map<uint32_t, std::vector<size_t>> edges;  // from -> alias indices
  for (size_t a = 0; a < out_->aliases.size(); ++a) edges[out_->aliases[a].from].push_back(a);
  std::unordered_map<uint32_t, uint8_t> color;          // 0 new, 1 on the stack, 2 done
  for (const PlanAlias& start_alias : out_->aliases) {  // in instruction order: the same answer every time
    const uint32_t start = start_alias.from;
    if (color[start] != 0) continue;
    std::vector<std::pair<uint32_t, size_t>> stack{{start, 0}};
    color[start] = 1;
    while (!stack.empty()) {
      auto& [v, k] = stack.back();
      auto it = edges.find(v);
      if (it == edges.end() || k >= it->second.size()) {
        color[v] = 2;
        stack.pop_back();
        continue;
      }
      const PlanAlias& a = out_->aliases[it->second[k++]];
      const uint8_t c = color[a.to];
      if (c == 1) {
        const auto* ins = instrs_[a.instruction];
        out_->problems.push_back(
            {"plan-move-cycle",
             "instruction " + std::to_string(a.instruction) + " (" + (a.et_view ? "et_view" : "MoveCall") + ") moves " +
                 Idx(a.from) + " into " + Idx(a.to) +
                 ", closing a cycle of moves between values: which bytes each of them uses depends on the order the "
                 "moves last ran in, so their lifetimes cannot be derived",
             ins->instr_args() ? ins->instr_args() : static_cast<const void*>(ins), "moves without a cycle",
             "a cycle through " + Idx(a.to)});
        out_->blocked = true;
        return;
      }
      if (c == 0) {
        color[a.to] = 1;
        stack.emplace_back(a.to, 0);
      }
    }
  }
}

// Does any instruction in lo..hi write `v` (or, for a planned tensor, bytes
// it shares)?
bool MethodDeriver::WrittenIn(uint32_t v, uint32_t lo, uint32_t hi) {
  if (writes_of_.empty()) {
    writes_of_.resize(types_.size());
    for (const Event& e : events_) {
      if (e.role == Role::kRead || e.role == Role::kTouch) continue;
      auto& w = writes_of_[e.value];
      if (w.empty() || w.back() != e.instr) w.push_back(e.instr);
    }
    for (const auto& [value, instr] : scalar_writes_) writes_of_[value].push_back(instr);
    for (auto& w : writes_of_) {
      std::sort(w.begin(), w.end());
      w.erase(std::unique(w.begin(), w.end()), w.end());
    }
  }
  auto in_range = [&](uint32_t x) {
    const auto& w = writes_of_[x];
    auto it = std::lower_bound(w.begin(), w.end(), lo);
    return it != w.end() && *it <= hi;
  };
  if (in_range(v)) return true;
  const PlannedTensor* t = out_->Tensor(v);
  if (!t) return false;
  for (const PlannedTensor& o : out_->tensors) {
    if (++work_ > kMaxWork) return true;  // the caller's answer then errs towards "written"
    if (o.value != v && o.memory_id == t->memory_id && o.offset < t->offset + t->nbytes &&
        t->offset < o.offset + o.nbytes && in_range(o.value)) {
      return true;
    }
  }
  return false;
}

// A JumpFalseCall back to an earlier instruction (or to itself) makes a loop
// (exir/emit/_emitter.py `_emit_map`, `_emit_scan`). It never ends once the
// jump is taken when nothing in the loop writes the condition and no jump in
// it leads out: the runtime then runs until its instruction limit
// (runtime/executor/method.cpp, kMaxInstructions) and fails.
void MethodDeriver::CheckLoops() {
  const auto* vals = plan_->values();
  for (uint32_t j = 0; j < n_; ++j) {
    const uint32_t d = jump_dest_[j];
    if (d == kNone || d > j) continue;
    const auto* jf = instrs_[j]->instr_args_as_JumpFalseCall();
    const auto c = static_cast<uint32_t>(jf->cond_value_index());
    const bool constant = !WrittenIn(c, 0, n_ ? n_ - 1 : 0) && !is_input_[c];
    if (constant && types_[c] == efb::KernelTypes::Bool && vals->Get(c)->val_as_Bool()->bool_val()) {
      continue;  // a constant true condition: the jump is never taken
    }
    if (WrittenIn(c, d, j)) continue;
    bool exits = false;
    for (uint32_t k = d; k < j && !exits; ++k) {
      const uint32_t kd = jump_dest_[k];
      if (kd == kNone || (kd >= d && kd <= j)) continue;
      const auto kc = static_cast<uint32_t>(instrs_[k]->instr_args_as_JumpFalseCall()->cond_value_index());
      const bool kconst = !WrittenIn(kc, 0, n_ - 1) && !is_input_[kc];
      exits = !(kconst && types_[kc] == efb::KernelTypes::Bool && vals->Get(kc)->val_as_Bool()->bool_val());
    }
    if (exits) continue;
    out_->problems.push_back({"plan-loop-no-exit",
                              "instruction " + std::to_string(j) + " jumps back to instruction " + std::to_string(d) +
                                  " while " + Idx(c) + " is false, and nothing in instructions " + std::to_string(d) +
                                  ".." + std::to_string(j) + " writes " + Idx(c) +
                                  " or jumps out: once taken, the loop never ends",
                              jf, "a loop whose condition changes inside it, or a jump out of it",
                              constant ? "a constant condition" : "a condition written outside the loop"});
    out_->blocked = true;
    return;
  }
}

void MethodDeriver::Collect() {
  CollectValues();
  if (!out_->not_checked.empty()) return;
  CollectInstructions();
  if (!out_->not_checked.empty()) return;
  CheckMoveCycles();
  if (!out_->blocked) CheckLoops();
  if (out_->blocked) return;
  ClassifyLocal();
}

// The origins that need no other method. Rules:
// - an input lives from the start (exir/memory_planning.py
//   update_tensor_lifetime: a placeholder starts at 0);
// - state lives from the first to the last instruction and keeps its bytes
//   between calls (update_tensor_lifetime: mutable buffers end at the last
//   node; exir/passes/memory_planning_pass.py run_multimethod). In the file,
//   state is a planned tensor with initial data (data_buffer_idx into the
//   mutable segment, or an external key), a planned tensor with a name
//   (emit_mutable_buffer_names: exir/emit/_emitter.py names only mutable
//   buffers and external constants), the self of aten::copy_ (the write-back
//   insert_write_back_for_buffers_pass adds), or a planned tensor some
//   instruction reads before anything in the method writes it and that the
//   method also writes (a buffer read, then updated in place or written back);
// - a MoveCall/et_view target: its own bytes are never used.
void MethodDeriver::ClassifyLocal() {
  auto& first_event = first_event_;
  auto& first_reads = first_reads_;
  auto& written = written_;
  first_event.assign(types_.size(), kNone);
  first_reads.assign(types_.size(), 0);
  written.assign(types_.size(), 0);
  for (const Event& e : events_) {
    const uint32_t v = e.value;
    if (first_event[v] == kNone) {
      first_event[v] = e.instr;
      first_reads[v] = e.role == Role::kRead || e.role == Role::kReadWrite;
    } else if (first_event[v] == e.instr && (e.role == Role::kRead || e.role == Role::kReadWrite)) {
      first_reads[v] = 1;
    }
    if (e.role == Role::kWrite || e.role == Role::kReadWrite || e.role == Role::kWriteKeep ||
        e.role == Role::kDelegate) {
      written[v] = 1;
    }
  }
  for (PlannedTensor& t : out_->tensors) {
    const auto* eti = t.tensor->extra_tensor_info();
    const bool named = eti && eti->fully_qualified_name() && eti->fully_qualified_name()->size() > 0;
    const bool external = eti && eti->location() == efb::TensorDataLocation::EXTERNAL;
    const bool initial = t.tensor->data_buffer_idx() > 0 || (external && named);
    if (t.nbytes == 0 && target_of_value_[t.value] < 0) {
      t.origin = PlanOrigin::kEmpty;
    } else if (target_of_value_[t.value] >= 0) {
      t.origin = PlanOrigin::kMoveTarget;
      if (t.input || initial || named) {
        NotChecked((t.input ? "input " : "state ") + Idx(t.value) + " is re-pointed by a MoveCall or et_view");
      }
    } else if (t.input) {
      t.origin = PlanOrigin::kInput;
    } else if (initial || named || copy_target_[t.value] || (first_reads[t.value] && written[t.value])) {
      t.origin = PlanOrigin::kState;
    } else if (first_event[t.value] == kNone && !t.output) {
      t.origin = PlanOrigin::kUnused;
    } else if (!written[t.value]) {
      t.origin = PlanOrigin::kUnwritten;  // a view, shared state or unwritten: ResolveViews decides
    } else {
      t.origin = PlanOrigin::kWritten;
    }
  }
}

// Planned tensors that instructions name but none writes. Upstream emits
// three kinds:
// - static views: exir/emit/_emitter.py `_emit_view` emits no instruction for
//   a static view of planned memory, only a separate value whose spec shares
//   its base's mem_id and mem_offset (exir/passes/replace_view_copy_with_view_pass.py
//   _ViewSpec: a view keeps its base's dtype and number of elements, so its
//   nbytes). Such a tensor is a view of a value at the same buffer, offset,
//   size and dtype written before it is first used, and shares that value's
//   storage: of several, one nothing else reads (its data must flow into the
//   view), else the one written last (whose bytes the view reads);
// - a kernel's workspace: an argument the kernel writes before it reads it
//   (cortex_m's scratch buffers), planned over bytes tensors written earlier
//   used (exir/memory_planning.py plans it like any other alloc). Its bytes
//   are live only where it is named;
// - state an operator mutates through an argument that is not its return
//   (a `Tensor(a!)` argument of a custom op), or that only other methods
//   write: live from the first to the last instruction, like every mutable
//   buffer. Bytes no tensor written earlier covers can only be this.
// A view moved off its base looks like a workspace; it is told apart by the
// value it viewed, which is then written and never read (nothing else in an
// upstream program writes a tensor no one reads but an unused output of a
// multi-output kernel): same dtype and size, written before the view is
// used. That is plan-read-before-write.
bool MethodDeriver::NeedsOtherState() const {
  if (!out_->not_checked.empty() || out_->blocked) return false;
  for (const PlannedTensor& t : out_->tensors) {
    if (t.origin == PlanOrigin::kUnwritten) return true;
  }
  return false;
}

void MethodDeriver::ResolveViews(const std::vector<StateAt>& other_state) {
  if (!NeedsOtherState()) return;  // nothing unwritten: nothing to resolve
  const size_t nv = types_.size();
  // Per value: instructions that write it (CSR), whether anything reads it, first use.
  read_.assign(nv, 0);
  first_use_.assign(nv, kNone);
  wstart_.assign(nv + 1, 0);
  auto writes_role = [](Role r) {
    return r == Role::kWrite || r == Role::kReadWrite || r == Role::kWriteKeep || r == Role::kDelegate;
  };
  for (const Event& e : events_) {
    first_use_[e.value] = std::min(first_use_[e.value], e.instr);
    if (writes_role(e.role)) ++wstart_[e.value + 1];
    if (e.role != Role::kWrite && e.role != Role::kWriteKeep) read_[e.value] = 1;
    if (e.role == Role::kAlias) {
      read_[e.aux] = 1;
      first_use_[e.aux] = std::min(first_use_[e.aux], e.instr);
    }
  }
  for (size_t v = 0; v < nv; ++v) wstart_[v + 1] += wstart_[v];
  wlist_.assign(wstart_[nv], 0);
  {
    std::vector<uint32_t>& fill = first_event_;  // reused as a cursor
    fill.assign(wstart_.begin(), wstart_.end() - 1);
    for (const Event& e : events_) {
      if (writes_role(e.role)) wlist_[fill[e.value]++] = e.instr;  // ascending: events are in instruction order
    }
  }
  auto writes_begin = [&](uint32_t v) { return wlist_.begin() + wstart_[v]; };
  auto writes_end = [&](uint32_t v) { return wlist_.begin() + wstart_[v + 1]; };
  auto first_write = [&](uint32_t v) { return wstart_[v] == wstart_[v + 1] ? kNone : wlist_[wstart_[v]]; };
  auto first_of = [&](const PlannedTensor& v) { return first_use_[v.value] == kNone ? n_ : first_use_[v.value]; };
  auto same_type = [](const PlannedTensor& a, const PlannedTensor& b) {
    return a.tensor->scalar_type() == b.tensor->scalar_type();
  };
  // Tensors by (buffer, offset).
  by_offset_.clear();
  for (uint32_t ti = 0; ti < out_->tensors.size(); ++ti) {
    const auto& t = out_->tensors[ti];
    by_offset_.emplace_back(t.memory_id, t.offset, ti);
  }
  std::sort(by_offset_.begin(), by_offset_.end());
  // 1. Views at their base's bytes.
  viewed_.assign(nv, 0);
  for (PlannedTensor& v : out_->tensors) {
    if (v.origin != PlanOrigin::kUnwritten) continue;
    const uint32_t f = first_of(v);
    int64_t best_time = -2;
    bool best_unread = false;
    uint32_t best = kNone;
    for (auto it = std::lower_bound(by_offset_.begin(), by_offset_.end(), std::make_tuple(v.memory_id, v.offset, 0u));
         it != by_offset_.end() && std::get<0>(*it) == v.memory_id && std::get<1>(*it) == v.offset; ++it) {
      if (++work_ > kMaxWork) {
        NotChecked("too many values share one offset for the view search");
        return;
      }
      const PlannedTensor& b = out_->tensors[std::get<2>(*it)];
      if (b.value == v.value || b.nbytes != v.nbytes || !same_type(b, v)) continue;
      int64_t time = -2;
      if (b.origin == PlanOrigin::kInput || b.origin == PlanOrigin::kState) {
        time = -1;
      } else if (b.origin == PlanOrigin::kWritten) {
        auto wi = std::lower_bound(writes_begin(b.value), writes_end(b.value), f);
        if (wi != writes_begin(b.value)) time = *(wi - 1);
      }
      if (time == -2) continue;
      // A candidate nothing else reads is the base (its data has to go
      // somewhere); then the latest written, the bytes the view sees.
      const bool unread = !read_[b.value] && !b.output;
      if (unread > best_unread || (unread == best_unread && time > best_time)) {
        best_unread = unread;
        best_time = time;
        best = b.value;
      }
    }
    if (best != kNone) {
      v.origin = PlanOrigin::kView;
      v.storage = best;  // a value index until BuildStorages
      viewed_[best] = 1;
    }
  }
  // Byte ranges of what is written before instruction f (inputs and state
  // before instruction 0), per buffer by offset, for the coverage test.
  longest_.clear();
  for (const PlannedTensor& t : out_->tensors) {
    if (t.memory_id >= longest_.size()) longest_.resize(size_t{t.memory_id} + 1, 0);
    longest_[t.memory_id] = std::max(longest_[t.memory_id], t.nbytes);
  }
  auto written_before = [&](const PlannedTensor& b, uint32_t f) {
    if (b.origin == PlanOrigin::kInput || b.origin == PlanOrigin::kState) return true;
    if (b.origin != PlanOrigin::kWritten) return false;
    const uint32_t w = first_write(b.value);
    return w != kNone && w < f;
  };
  auto covered = [&](const PlannedTensor& v, uint32_t f) {
    uint64_t reach = v.offset;
    const uint64_t hi = v.offset + v.nbytes;
    const uint64_t from = v.offset > longest_[v.memory_id] ? v.offset - longest_[v.memory_id] : 0;
    for (auto it = std::lower_bound(by_offset_.begin(), by_offset_.end(), std::make_tuple(v.memory_id, from, 0u));
         it != by_offset_.end() && std::get<0>(*it) == v.memory_id && std::get<1>(*it) < hi; ++it) {
      if (++work_ > kMaxWork) return true;
      const PlannedTensor& b = out_->tensors[std::get<2>(*it)];
      const uint64_t off = std::get<1>(*it);
      if (b.value == v.value || b.nbytes == 0 || off + b.nbytes <= reach || !written_before(b, f)) continue;
      if (off > reach) return false;
      reach = off + b.nbytes;
      if (reach >= hi) return true;
    }
    return reach >= hi;
  };
  // Values written and then read by nothing, by (dtype, size), by when first written.
  unread_.clear();
  for (const PlannedTensor& b : out_->tensors) {
    if (b.origin != PlanOrigin::kWritten || read_[b.value] || b.output || viewed_[b.value] ||
        first_write(b.value) == kNone) {
      continue;
    }
    unread_.emplace_back(static_cast<int>(b.tensor->scalar_type()), b.nbytes, first_write(b.value), b.value);
  }
  std::sort(unread_.begin(), unread_.end());
  for (PlannedTensor& v : out_->tensors) {
    if (v.origin != PlanOrigin::kUnwritten) continue;
    const uint32_t f = first_of(v);
    // 2. State another method keeps at these bytes.
    bool shared = false;
    for (auto r = std::lower_bound(other_state.begin(), other_state.end(), StateAt{v.memory_id, v.offset, 0, 0});
         r != other_state.end() && r->memory_id == v.memory_id && r->offset == v.offset && !shared; ++r) {
      shared = r->method != out_->plan_index && r->nbytes >= v.nbytes;
    }
    if (shared) {
      v.origin = PlanOrigin::kSharedState;
      continue;
    }
    // 3. A view moved off its base: the latest such value written before it is used.
    uint32_t base = kNone;
    const int dtype = static_cast<int>(v.tensor->scalar_type());
    auto it = std::lower_bound(unread_.begin(), unread_.end(), std::make_tuple(dtype, v.nbytes, f, 0u));
    if (it != unread_.begin() && std::get<0>(*(it - 1)) == dtype && std::get<1>(*(it - 1)) == v.nbytes) {
      base = std::get<3>(*(it - 1));
    }
    if (base != kNone) {
      const PlannedTensor* b = out_->Tensor(base);
      const auto* ai = v.tensor->allocation_info();
      out_->problems.push_back(
          {"plan-read-before-write",
           DescribePlannedValue(*out_, v.value) + " is read by instruction " + std::to_string(f) + " (" +
               InstructionLabel(p_, *out_, f) + ") but no instruction writes it, and it is not at the bytes of " +
               DescribePlannedValue(*out_, base) + ", which has its type and size, is written by instruction " +
               std::to_string(first_write(base)) + " and is never read: a view moved off its base (buffer " +
               std::to_string(v.memory_id) + ", bytes [" + std::to_string(v.offset) + ", " +
               std::to_string(v.offset + v.nbytes) + ") instead of [" + std::to_string(b->offset) + ", " +
               std::to_string(b->offset + b->nbytes) + "))",
           ai ? static_cast<const void*>(ai) : static_cast<const void*>(v.tensor),
           "a view at its base's bytes [" + std::to_string(b->offset) + ", " + std::to_string(b->offset + b->nbytes) +
               ")",
           "bytes [" + std::to_string(v.offset) + ", " + std::to_string(v.offset + v.nbytes) + ")"});
      moved_view_.push_back(v.value);
      continue;
    }
    // 4. A workspace over bytes written earlier; 5. otherwise state.
    if (!covered(v, f)) v.origin = PlanOrigin::kState;
  }
}

void MethodDeriver::BuildStorages() {
  storage_of_value_.assign(types_.size(), kNone);
  out_->storages.reserve(out_->tensors.size());  // at most one a planned tensor (see CollectValues)
  // State that names the same buffer: one storage.
  std::map<std::tuple<uint32_t, uint64_t, std::string, uint32_t>, uint32_t> state_place;
  for (PlannedTensor& t : out_->tensors) {
    if (t.origin == PlanOrigin::kView) continue;
    if (t.origin == PlanOrigin::kEmpty) {
      // Its own storage (so that it has an offset to keep), outside the dataflow.
      t.storage = static_cast<uint32_t>(nstorages_);
      PlanStorage& s = NewStorage();
      s.memory_id = t.memory_id;
      s.offset = t.offset;
      s.values.push_back(t.value);
      continue;
    }
    if (t.origin == PlanOrigin::kState) {
      std::string name = NameOf(t.tensor);
      const uint32_t dbi = t.tensor->data_buffer_idx();
      if (!name.empty() || dbi > 0) {
        auto k = std::make_tuple(t.memory_id, t.offset, name, name.empty() ? dbi : 0u);
        auto found = state_place.find(k);
        if (found != state_place.end()) {
          PlanStorage& s = out_->storages[found->second];
          s.values.push_back(t.value);
          s.nbytes = std::max(s.nbytes, t.nbytes);
          t.storage = found->second;
          storage_of_value_[t.value] = t.storage;
          continue;
        }
        state_place.emplace(k, static_cast<uint32_t>(nstorages_));
      }
    }
    t.storage = static_cast<uint32_t>(nstorages_);
    storage_of_value_[t.value] = t.storage;
    PlanStorage& s = NewStorage();
    s.memory_id = t.memory_id;
    s.offset = t.offset;
    s.nbytes = t.nbytes;
    s.values.push_back(t.value);
    s.persistent = t.origin == PlanOrigin::kState || t.origin == PlanOrigin::kSharedState;
  }
  for (PlannedTensor& t : out_->tensors) {
    if (t.origin != PlanOrigin::kView) continue;
    const uint32_t base = t.storage;  // the base's value index
    t.storage = storage_of_value_[base];
    storage_of_value_[t.value] = t.storage;
    PlanStorage& s = out_->storages[t.storage];
    s.values.push_back(t.value);
    s.nbytes = std::max(s.nbytes, t.nbytes);
  }
  out_->storages.resize(nstorages_);
  unplanned_ = static_cast<uint32_t>(out_->storages.size());
  fresh_ = unplanned_ + 1;
}

void MethodDeriver::BuildBlocks() {
  block_of_.assign(n_, 0);
  if (n_ == 0) return;
  auto& leader = leader_;
  leader.assign(n_ + 1, 0);
  leader[0] = 1;
  for (uint32_t i = 0; i < n_; ++i) {
    if (jump_dest_[i] == kNone) continue;
    leader[jump_dest_[i]] = 1;
    leader[i + 1] = 1;
  }
  for (uint32_t i = 0; i < n_; ++i) {
    if (leader[i]) blocks_.push_back({i, i, {}, false});
    blocks_.back().last = i;
    block_of_[i] = static_cast<uint32_t>(blocks_.size() - 1);
  }
  const auto* vals = plan_->values();
  for (Block& b : blocks_) {
    const uint32_t j = b.last;
    bool fall = true, jump = false;
    if (jump_dest_[j] != kNone) {
      jump = true;
      const auto c = static_cast<uint32_t>(instrs_[j]->instr_args_as_JumpFalseCall()->cond_value_index());
      // A Bool nothing writes (not an input) is a constant: `_emit_cond`
      // ends the true branch with a jump on a constant false.
      if (types_[c] == efb::KernelTypes::Bool && !is_input_[c] && !WrittenIn(c, 0, n_ - 1)) {
        const bool value = vals->Get(c)->val_as_Bool()->bool_val();
        fall = value;
        jump = !value;
      }
    }
    if (fall) {
      if (j + 1 < n_) {
        b.succ.push_back(block_of_[j + 1]);
      } else {
        b.to_exit = true;
      }
    }
    if (jump) b.succ.push_back(block_of_[jump_dest_[j]]);
  }
}

// Whether tensors written on every path here (`bits`: must-written
// storages) cover storage s's bytes: a workspace argument over dead bytes,
// not a read of bytes nothing wrote.
bool MethodDeriver::Covered(uint32_t s, const uint64_t* bits) {
  const size_t ns = out_->storages.size() + 1;
  auto& sorted = sc_.sorted_storages;
  auto& longest = sc_.longest;
  if (sorted.empty()) {  // built on first need: most methods never read unwritten bytes
    longest.clear();
    for (uint32_t k = 0; k + 1 < ns; ++k) {
      const PlanStorage& st = out_->storages[k];
      if (st.nbytes == 0) continue;
      sorted.push_back(k);
      if (st.memory_id >= longest.size()) longest.resize(size_t{st.memory_id} + 1, 0);
      longest[st.memory_id] = std::max(longest[st.memory_id], st.nbytes);
    }
    std::sort(sorted.begin(), sorted.end(), [&](uint32_t a, uint32_t c) {
      return std::make_tuple(out_->storages[a].memory_id, out_->storages[a].offset, a) <
             std::make_tuple(out_->storages[c].memory_id, out_->storages[c].offset, c);
    });
  }
  const PlanStorage& st = out_->storages[s];
  const uint64_t lo = st.offset, hi = st.offset + st.nbytes;
  const uint64_t from = lo > longest[st.memory_id] ? lo - longest[st.memory_id] : 0;
  auto it = std::lower_bound(sorted.begin(), sorted.end(), std::make_pair(st.memory_id, from),
                             [&](uint32_t a, const std::pair<uint32_t, uint64_t>& k) {
                               return std::make_pair(out_->storages[a].memory_id, out_->storages[a].offset) < k;
                             });
  uint64_t reach = lo;  // [lo, reach) is covered
  for (; it != sorted.end() && out_->storages[*it].memory_id == st.memory_id && out_->storages[*it].offset < hi; ++it) {
    ++work_;
    if (*it == s || !GetBit(bits, *it)) continue;
    const PlanStorage& o = out_->storages[*it];
    if (o.offset > reach) return false;
    reach = std::max(reach, o.offset + o.nbytes);
    if (reach >= hi) return true;
  }
  return reach >= hi;
}

// One block that nothing jumps back into, and no MoveCall or et_view (what
// most programs are): the forward analysis is one pass (written on every
// path = on some path), liveness one backward pass. The same rules as
// Dataflow, without its per-block sets.
bool MethodDeriver::StraightLine() {
  const size_t nsp = out_->storages.size();
  const size_t nv = types_.size();
  const size_t W = (nsp + 1 + 63) / 64;
  auto& must = sc_.must;
  must.assign(W, 0);
  for (const PlannedTensor& t : out_->tensors) {
    if (t.origin == PlanOrigin::kInput || t.origin == PlanOrigin::kState || t.origin == PlanOrigin::kSharedState) {
      SetBit(must.data(), t.storage);
    }
  }
  SetBit(must.data(), unplanned_);
  sc_.entry_must = must;
  sc_.sorted_storages.clear();
  auto& rbw = sc_.rbw;
  auto& rbw_storage = sc_.rbw_storage;
  auto& resolved = sc_.resolved;
  rbw.assign(nv, kNone);
  rbw_storage.assign(nv, kNone);
  resolved.assign(events_.size(), Resolved::kNo);
  auto& sev = sc_.emit.sev;
  sev.clear();
  auto& first_ev = sc_.first_ev;
  auto& first_def = sc_.first_def;
  first_ev.assign(nsp, kNone);
  first_def.assign(nsp, kNone);
  auto storage_of = [&](uint32_t v) { return storage_of_value_[v] == kNone ? unplanned_ : storage_of_value_[v]; };
  auto use = [&](uint32_t v, uint32_t i, bool check) {
    const uint32_t st = storage_of(v);
    if (st == unplanned_) return;
    sev.emplace_back(i, st, 0);
    if (first_ev[st] == kNone) first_ev[st] = i;
    if (check && !GetBit(must.data(), st) && rbw[v] == kNone && !Covered(st, must.data())) {
      rbw[v] = i;
      rbw_storage[v] = st;
    }
  };
  auto write = [&](uint32_t v, uint32_t i, bool kill) {
    const uint32_t st = storage_of(v);
    if (st == unplanned_) return;
    SetBit(must.data(), st);
    sev.emplace_back(i, st, kill ? 1 : 2);
    if (first_ev[st] == kNone) first_ev[st] = i;
    if (first_def[st] == kNone) first_def[st] = i;
  };
  for (size_t e = 0; e < events_.size();) {
    const uint32_t i = events_[e].instr;
    size_t end = e;
    while (end < events_.size() && events_[end].instr == i) ++end;
    for (size_t k = e; k < end; ++k) {  // reads first: what the instruction sees
      const Event& ev = events_[k];
      switch (ev.role) {
        case Role::kRead:
        case Role::kReadWrite:
          use(ev.value, i, true);
          break;
        case Role::kTouch:
        case Role::kWriteKeep:
          use(ev.value, i, false);
          break;
        case Role::kDelegate: {
          const uint32_t st = storage_of(ev.value);
          resolved[k] = st == unplanned_ || GetBit(must.data(), st) ? Resolved::kRead : Resolved::kOutput;
          if (resolved[k] == Resolved::kRead) use(ev.value, i, false);
          break;
        }
        default:
          break;
      }
    }
    for (size_t k = e; k < end; ++k) {  // then writes
      const Event& ev = events_[k];
      switch (ev.role) {
        case Role::kWrite:
          write(ev.value, i, true);
          break;
        case Role::kReadWrite:
        case Role::kWriteKeep:
          write(ev.value, i, false);
          break;
        case Role::kDelegate:
          if (resolved[k] == Resolved::kOutput) {
            write(ev.value, i, true);
            out_->delegate_outputs.emplace_back(i, ev.value);
          }
          break;
        default:
          break;
      }
    }
    e = end;
  }
  // The caller reads the outputs when the method returns; state lives on.
  auto& in_run = sc_.in_run;  // live after the instruction being looked at
  auto& run_last = sc_.run_last;
  in_run.assign(nsp, 0);
  run_last.assign(nsp, 0);
  for (uint32_t v = 0; v < nv; ++v) {
    if (!is_output_[v] || !IsTensor(v)) continue;
    const uint32_t st = storage_of(v);
    if (st == unplanned_) continue;
    in_run[st] = 1;
    if (!GetBit(must.data(), st) && rbw[v] == kNone && !Covered(st, must.data())) {
      rbw[v] = n_;
      rbw_storage[v] = st;
    }
  }
  for (size_t st = 0; st < nsp; ++st) {
    if (out_->storages[st].persistent) in_run[st] = 1;
    if (in_run[st]) run_last[st] = n_ - 1;
  }
  used_.assign(nv, 0);
  for (const Event& ev : events_) {
    if (out_->tensor_of_value[ev.value] >= 0) used_[ev.value] = 1;
  }
  if (detail_) {
    StartUses();
    for (size_t k = 0; k < events_.size(); ++k) {
      const Event& ev = events_[k];
      const int32_t ti = out_->tensor_of_value[ev.value];
      if (ti < 0) continue;
      const bool reads = ev.role == Role::kRead || ev.role == Role::kReadWrite ||
                         (ev.role == Role::kDelegate && resolved[k] == Resolved::kRead);
      const bool writes = ev.role == Role::kWrite || ev.role == Role::kReadWrite || ev.role == Role::kWriteKeep ||
                          (ev.role == Role::kDelegate && resolved[k] == Resolved::kOutput);
      NoteUse(static_cast<size_t>(ti), ev.instr, reads, writes);
    }
    FinishUses();
  }
  // Liveness, backward: a storage is live at an instruction that names it
  // and from a write to the last read after it; a full write ends it.
  auto& stamp = sc_.stamp;
  auto& flags = sc_.flags;
  stamp.assign(nsp, kNone);
  flags.assign(nsp, 0);
  for (size_t k = sev.size(); k > 0;) {
    const uint32_t i = std::get<0>(sev[k - 1]);
    size_t lo = k;
    while (lo > 0 && std::get<0>(sev[lo - 1]) == i) --lo;
    for (size_t q = lo; q < k; ++q) {
      const uint32_t st = std::get<1>(sev[q]);
      if (stamp[st] != i) {
        stamp[st] = i;
        flags[st] = 0;
      }
      const uint8_t kind = std::get<2>(sev[q]);
      flags[st] |= kind == 0 ? 1 : kind == 1 ? 2 : 4;
    }
    for (size_t q = lo; q < k; ++q) {
      const uint32_t st = std::get<1>(sev[q]);
      if (flags[st] & 8) continue;  // done at this instruction
      flags[st] |= 8;
      const bool after = in_run[st];
      if (!after) run_last[st] = i;
      const bool before = (flags[st] & 1) || (!(flags[st] & 2) && after);
      if (!before) DirectRuns(st).push_back({i, run_last[st]});
      in_run[st] = before;
    }
    k = lo;
  }
  for (size_t st = 0; st < nsp; ++st) {
    if (in_run[st] && n_ > 0) DirectRuns(st).push_back({0, run_last[st]});
  }
  // Nothing can be in a storage before its first write unless it was there
  // at the start: before that, keep only the instructions that name it.
  auto& clip = sc_.clip;
  clip.assign(nsp, 0);
  bool any_clip = false;
  for (size_t st = 0; st < nsp; ++st) {
    if (!GetBit(sc_.entry_must.data(), st) && first_ev[st] != kNone && first_ev[st] < first_def[st]) {
      clip[st] = 1;
      any_clip = true;
    }
  }
  if (any_clip) {
    auto& points = sc_.points;
    points.clear();
    for (const auto& [i, st, kind] : sev) {
      if (clip[st] && i < first_def[st]) points.emplace_back(st, i);
    }
    std::sort(points.begin(), points.end());
    auto& local = sc_.local;
    for (size_t st = 0; st < nsp; ++st) {
      if (!clip[st]) continue;
      auto& runs = DirectRuns(st);
      local.assign(runs.begin(), runs.end());
      runs.clear();
      const uint32_t fd = first_def[st];
      for (const LiveRun& r : local) {
        if (r.first >= fd) {
          runs.push_back(r);
          continue;
        }
        for (auto p = std::lower_bound(points.begin(), points.end(), std::make_pair(uint32_t(st), r.first));
             p != points.end() && p->first == st && p->second <= r.last && p->second < fd; ++p) {
          runs.push_back({p->second, p->second});
        }
        if (fd != kNone && r.last >= fd) runs.push_back({fd, r.last});
      }
    }
  }
  ApplyRules();
  AssembleLive();
  ReportReadBeforeWrite();
  return true;
}

// Forward: which storages are written on every / some path (must / may), where
// each MoveCall/et_view target points; then, once that is stable, one more
// pass records each storage's uses, kills and writes, the read-before-write
// problems and the delegate arguments taken as outputs. Backward: liveness.
// A storage is live at an instruction that names it, and between a write
// and the last read that can see it (kills end it), but never before
// anything can have written it.
bool MethodDeriver::Dataflow() {
  if (blocks_.size() == 1 && blocks_[0].succ.empty() && targets_.empty() && !g_plan_lifetimes_general_only) {
    return StraightLine();
  }
  const size_t nb = blocks_.size();
  const size_t ns = out_->storages.size() + 1;  // + unplanned
  const size_t nt = targets_.size();
  if (uint64_t{nb} * ns > kMaxBlockCells || uint64_t{nb} * nt > kMaxTargetCells) {
    NotChecked("its control flow is too large for the plan check (" + std::to_string(nb) + " blocks x " +
               std::to_string(ns) + " storages)");
    return false;
  }
  // Events per block (they are in instruction order).
  auto& block_ev = sc_.block_ev;
  block_ev.assign(nb + 1, events_.size());
  {
    size_t e = 0;
    for (size_t b = 0; b < nb; ++b) {
      while (e < events_.size() && events_[e].instr < blocks_[b].first) ++e;
      block_ev[b] = e;
    }
  }
  // The storage a non-target value uses.
  auto storage_of = [&](uint32_t v) { return storage_of_value_[v] == kNone ? unplanned_ : storage_of_value_[v]; };
  auto& entry_defined = sc_.entry_defined;
  entry_defined.clear();
  for (const PlannedTensor& t : out_->tensors) {
    if (t.origin == PlanOrigin::kInput || t.origin == PlanOrigin::kState || t.origin == PlanOrigin::kSharedState) {
      entry_defined.push_back(t.storage);
    }
  }
  auto& must_in = sc_.must_in;
  auto& may_in = sc_.may_in;
  must_in.Reset(nb, ns);
  may_in.Reset(nb, ns);
  auto& refs_in = sc_.refs_in;
  refs_in.clear();
  refs_in.resize(nb);
  auto& visited = sc_.visited;
  visited.assign(nb, 0);
  const size_t W = must_in.words();
  auto& must = sc_.must;
  auto& may = sc_.may;
  must.assign(W, 0);
  may.assign(W, 0);
  auto& refs = sc_.refs;
  refs.clear();
  refs.resize(nt);

  auto& emit = sc_.emit;
  emit.on = false;
  emit.sev.clear();
  emit.tev.clear();
  emit.alias_keys.clear();
  // Storages of each buffer by offset: a read of bytes its own tensor has
  // not written is fine when tensors written earlier on every path cover
  // them (a workspace argument over dead bytes); plan-read-before-write
  // otherwise.
  sc_.sorted_storages.clear();
  auto covered = [&](uint32_t st, const uint64_t* bits) { return Covered(st, bits); };
  auto& rbw = sc_.rbw;  // first read before write, per value
  auto& rbw_storage = sc_.rbw_storage;
  auto& resolved = sc_.resolved;
  rbw.assign(types_.size(), kNone);
  rbw_storage.assign(types_.size(), kNone);
  resolved.assign(events_.size(), Resolved::kNo);
  bool fresh_used = false;
  uint32_t fresh_value = 0;

  auto use = [&](uint32_t v, uint32_t i, bool check) {
    const int32_t t = target_of_value_[v];
    if (t >= 0) {
      if (emit.on) emit.tev.push_back({i, static_cast<uint32_t>(t), 0, 0});
      for (const auto& [s, d] : refs[static_cast<size_t>(t)]) {
        if (s == fresh_) {
          if (!fresh_used) fresh_value = v;
          fresh_used = true;
          continue;
        }
        if (s == unplanned_) continue;
        if (check && !d && emit.on && rbw[v] == kNone && !covered(s, must.data())) {
          rbw[v] = i;
          rbw_storage[v] = s;
        }
      }
      return;
    }
    const uint32_t s = storage_of(v);
    if (s == unplanned_) return;
    if (emit.on) emit.sev.emplace_back(i, s, 0);
    if (check && !GetBit(must.data(), s) && emit.on && rbw[v] == kNone && !covered(s, must.data())) {
      rbw[v] = i;
      rbw_storage[v] = s;
    }
  };
  auto write = [&](uint32_t v, uint32_t i, bool kill) {
    const int32_t t = target_of_value_[v];
    if (t >= 0) {
      RefSet& r = refs[static_cast<size_t>(t)];
      if (emit.on)
        emit.tev.push_back({i, static_cast<uint32_t>(t), static_cast<uint8_t>(kill && r.size() == 1 ? 1 : 2), 0});
      for (auto& [s, d] : r) {
        if (s == fresh_) {
          if (!fresh_used) fresh_value = v;
          fresh_used = true;
          continue;
        }
        d = true;
        if (s == unplanned_) continue;
        SetBit(may.data(), s);
        if (r.size() == 1) SetBit(must.data(), s);
      }
      return;
    }
    const uint32_t s = storage_of(v);
    if (s == unplanned_) return;
    SetBit(must.data(), s);
    SetBit(may.data(), s);
    if (emit.on) emit.sev.emplace_back(i, s, kill ? 1 : 2);
    for (RefSet& r : refs) {
      for (auto& [rs, d] : r) {
        if (rs == s) d = true;
      }
    }
  };
  auto transfer = [&](size_t b) {
    const size_t e1 = block_ev[b + 1];
    size_t e = block_ev[b];
    while (e < e1) {
      const uint32_t i = events_[e].instr;
      size_t end = e;
      while (end < e1 && events_[end].instr == i) ++end;
      work_ += end - e;
      // Reads first: what the instruction sees.
      for (size_t k = e; k < end; ++k) {
        const Event& ev = events_[k];
        switch (ev.role) {
          case Role::kRead:
          case Role::kReadWrite:
            use(ev.value, i, true);
            break;
          case Role::kTouch:
          case Role::kWriteKeep:
            use(ev.value, i, false);
            break;
          case Role::kAlias:
            use(ev.aux, i, false);
            break;
          case Role::kDelegate: {
            bool all = true, any = false;
            const int32_t t = target_of_value_[ev.value];
            if (t >= 0) {
              for (const auto& [s, d] : refs[static_cast<size_t>(t)]) {
                all = all && d;
                any = any || d || (s != fresh_ && s != unplanned_ && GetBit(may.data(), s));
              }
            } else {
              const uint32_t s = storage_of(ev.value);
              all = s == unplanned_ || GetBit(must.data(), s);
              any = all || GetBit(may.data(), s);
            }
            resolved[k] = all ? Resolved::kRead : any ? Resolved::kMaybe : Resolved::kOutput;
            if (resolved[k] != Resolved::kOutput) use(ev.value, i, false);
            break;
          }
          case Role::kWrite:
            break;
        }
      }
      // Then writes, and re-pointing.
      for (size_t k = e; k < end; ++k) {
        const Event& ev = events_[k];
        switch (ev.role) {
          case Role::kWrite:
            write(ev.value, i, true);
            break;
          case Role::kReadWrite:
          case Role::kWriteKeep:
            write(ev.value, i, false);
            break;
          case Role::kDelegate:
            if (resolved[k] != Resolved::kRead) write(ev.value, i, resolved[k] == Resolved::kOutput);
            if (resolved[k] == Resolved::kOutput && emit.on) out_->delegate_outputs.emplace_back(i, ev.value);
            break;
          case Role::kAlias: {
            const auto to = static_cast<uint32_t>(target_of_value_[ev.value]);
            RefSet& r = refs[to];
            const int32_t ft = target_of_value_[ev.aux];
            if (ft >= 0) {
              r = refs[static_cast<size_t>(ft)];
            } else {
              const uint32_t s = storage_of(ev.aux);
              r.assign(1, {s, s == unplanned_ || GetBit(must.data(), s)});
            }
            if (emit.on) {
              std::vector<uint32_t> keys;
              for (const auto& sd : r) keys.push_back(sd.first);
              emit.tev.push_back({i, to, 3, static_cast<uint32_t>(emit.alias_keys.size())});
              emit.alias_keys.push_back(std::move(keys));
            }
            break;
          }
          default:
            break;
        }
      }
      e = end;
    }
  };
  // Merges the current state into block b's entry; true when it changed.
  auto merge_into = [&](size_t b) {
    uint64_t* m = must_in.row(b);
    uint64_t* y = may_in.row(b);
    if (!visited[b]) {
      visited[b] = 1;
      std::copy(must.begin(), must.end(), m);
      std::copy(may.begin(), may.end(), y);
      refs_in[b] = refs;
      return true;
    }
    bool changed = false;
    for (size_t w = 0; w < W; ++w) {
      const uint64_t nm = m[w] & must[w], ny = y[w] | may[w];
      changed = changed || nm != m[w] || ny != y[w];
      m[w] = nm;
      y[w] = ny;
    }
    for (size_t t = 0; t < nt; ++t) {
      RefSet merged;
      const RefSet &a = refs_in[b][t], &c = refs[t];
      size_t x = 0, z = 0;
      while (x < a.size() || z < c.size()) {
        if (z == c.size() || (x < a.size() && a[x].first < c[z].first)) {
          merged.push_back(a[x++]);
        } else if (x == a.size() || c[z].first < a[x].first) {
          merged.push_back(c[z++]);
        } else {
          merged.emplace_back(a[x].first, a[x].second && c[z].second);
          ++x;
          ++z;
        }
      }
      if (merged != a) {
        refs_in[b][t] = std::move(merged);
        changed = true;
      }
    }
    return changed;
  };
  auto load = [&](size_t b) {
    std::copy(must_in.row(b), must_in.row(b) + W, must.begin());
    std::copy(may_in.row(b), may_in.row(b) + W, may.begin());
    refs = refs_in[b];
  };
  // Entry state.
  std::fill(must.begin(), must.end(), 0);
  std::fill(may.begin(), may.end(), 0);
  for (uint32_t s : entry_defined) {
    SetBit(must.data(), s);
    SetBit(may.data(), s);
  }
  SetBit(must.data(), unplanned_);
  SetBit(may.data(), unplanned_);
  for (RefSet& r : refs) r.assign(1, {fresh_, false});
  auto& entry_must = sc_.entry_must;
  auto& entry_may = sc_.entry_may;
  auto& entry_refs = sc_.entry_refs;
  entry_must = must;
  entry_may = may;
  entry_refs = refs;
  // Exit state (what the caller sees): merged from every block that ends the method.
  auto& exit_must = sc_.exit_must;
  auto& exit_may = sc_.exit_may;
  auto& exit_refs = sc_.exit_refs;
  exit_must.assign(W, ~uint64_t{0});
  exit_may.assign(W, 0);
  exit_refs.clear();
  exit_refs.resize(nt);
  bool exit_seen = false;
  auto merge_exit = [&] {
    for (size_t w = 0; w < W; ++w) {
      exit_must[w] &= must[w];
      exit_may[w] |= may[w];
    }
    for (size_t t = 0; t < nt; ++t) {
      if (!exit_seen) {
        exit_refs[t] = refs[t];
        continue;
      }
      for (const auto& sd : refs[t]) {
        auto it = std::lower_bound(exit_refs[t].begin(), exit_refs[t].end(), sd,
                                   [](const auto& x, const auto& y) { return x.first < y.first; });
        if (it != exit_refs[t].end() && it->first == sd.first) {
          it->second = it->second && sd.second;
        } else {
          exit_refs[t].insert(it, sd);
        }
      }
    }
    exit_seen = true;
  };
  if (nb > 0) {
    merge_into(0);
    auto& work = sc_.work;
    work.assign(1, 0);
    auto& queued = sc_.queued;
    queued.assign(nb, 0);
    queued[0] = 1;
    uint64_t visits = 0;
    while (!work.empty()) {
      const size_t b = work.back();
      work.pop_back();
      queued[b] = 0;
      if (++visits > 64 * nb + 64 || work_ > kMaxWork) {
        NotChecked("its control flow did not settle within the plan check's limits");
        return false;
      }
      load(b);
      transfer(b);
      for (uint32_t s : blocks_[b].succ) {
        if (merge_into(s) && !queued[s]) {
          queued[s] = 1;
          work.push_back(s);
        }
      }
    }
    // The recording pass, from each block's settled entry state.
    emit.on = true;
    for (size_t b = 0; b < nb; ++b) {
      if (!visited[b]) continue;  // unreachable
      load(b);
      transfer(b);
      if (blocks_[b].to_exit) merge_exit();
    }
  } else {
    must = entry_must;
    may = entry_may;
    refs = entry_refs;
    merge_exit();
  }
  if (fresh_used) {
    NotChecked(Idx(fresh_value) +
               " is used before the MoveCall or et_view that re-points it, so its bytes differ between the first "
               "call and later ones");
    return false;
  }
  // The caller reads the outputs when the method returns.
  auto& exit_use = sc_.exit_use;
  auto& exit_targets = sc_.exit_targets;
  exit_use.clear();
  exit_targets.clear();
  auto exit_read = [&](uint32_t v) {
    const int32_t t = target_of_value_[v];
    if (t >= 0) {
      exit_targets.push_back(static_cast<uint32_t>(t));
      for (const auto& [s, d] : exit_refs[static_cast<size_t>(t)]) {
        if (s == fresh_) {
          NotChecked("output " + Idx(v) + " is returned on a path where no MoveCall or et_view re-points it");
          continue;
        }
        if (s == unplanned_) continue;
        exit_use.push_back(s);
        if (!d && rbw[v] == kNone && !covered(s, exit_must.data())) {
          rbw[v] = n_;
          rbw_storage[v] = s;
        }
      }
      return;
    }
    const uint32_t s = storage_of(v);
    if (s == unplanned_) return;
    exit_use.push_back(s);
    if (!GetBit(exit_must.data(), s) && rbw[v] == kNone && !covered(s, exit_must.data())) {
      rbw[v] = n_;
      rbw_storage[v] = s;
    }
  };
  if (exit_seen) {
    for (uint32_t v = 0; v < types_.size(); ++v) {
      if (is_output_[v] && IsTensor(v)) exit_read(v);
    }
  }
  for (size_t s = 0; s + 1 < ns; ++s) {
    if (out_->storages[s].persistent) exit_use.push_back(static_cast<uint32_t>(s));
  }
  if (!out_->not_checked.empty()) return false;

  // Which planned values reachable code names; with detail, the
  // instructions that write and read each by name (delegate arguments as
  // resolved).
  used_.assign(types_.size(), 0);
  if (detail_) StartUses();
  for (size_t k = 0; k < events_.size(); ++k) {
    const Event& ev = events_[k];
    const int32_t ti = out_->tensor_of_value[ev.value];
    if (ti < 0 || !visited[block_of_[ev.instr]]) continue;
    used_[ev.value] = 1;
    if (!detail_) continue;
    const bool reads = ev.role == Role::kRead || ev.role == Role::kReadWrite ||
                       (ev.role == Role::kDelegate && resolved[k] != Resolved::kOutput);
    const bool writes = ev.role == Role::kWrite || ev.role == Role::kReadWrite || ev.role == Role::kWriteKeep ||
                        (ev.role == Role::kDelegate && resolved[k] != Resolved::kRead);
    NoteUse(static_cast<size_t>(ti), ev.instr, reads, writes);
  }
  if (detail_) FinishUses();
  // Backward liveness over blocks.
  const size_t nsp = ns - 1;  // planned storages
  auto& ue = sc_.ue;
  auto& kill = sc_.kill;
  auto& evin = sc_.evin;
  auto& live_in = sc_.live_in;
  auto& live_out = sc_.live_out;
  ue.Reset(nb, nsp);
  kill.Reset(nb, nsp);
  evin.Reset(nb, nsp);
  live_in.Reset(nb, nsp);
  live_out.Reset(nb, nsp);
  const size_t LW = ue.words();
  for (const auto& [i, s, k] : emit.sev) {
    const size_t b = block_of_[i];
    if (k == 0 && !GetBit(kill.row(b), s)) SetBit(ue.row(b), s);
    if (k == 1) SetBit(kill.row(b), s);
    SetBit(evin.row(b), s);
  }
  auto& exit_bits = sc_.exit_bits;
  exit_bits.assign(LW, 0);
  for (uint32_t s : exit_use) SetBit(exit_bits.data(), s);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t bi = nb; bi-- > 0;) {
      if (!visited[bi]) continue;
      uint64_t* lo = live_out.row(bi);
      uint64_t* li = live_in.row(bi);
      for (size_t w = 0; w < LW; ++w) {
        uint64_t o = blocks_[bi].to_exit ? exit_bits[w] : 0;
        for (uint32_t s : blocks_[bi].succ) o |= live_in.row(s)[w];
        const uint64_t in = ue.row(bi)[w] | (o & ~kill.row(bi)[w]);
        changed = changed || o != lo[w] || in != li[w];
        lo[w] = o;
        li[w] = in;
      }
      if (++work_ > kMaxWork) {
        NotChecked("its control flow did not settle within the plan check's limits");
        return false;
      }
    }
  }
  // Runs: within blocks where the storage has events, a backward scan; whole
  // blocks where it is live through without events.
  // (Each storage's `direct` collects its runs, then is sorted and merged.)
  auto& order = sc_.order;
  order.resize(emit.sev.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t c) { return std::get<1>(emit.sev[a]) < std::get<1>(emit.sev[c]); });
  for (size_t x = 0; x < order.size();) {
    const uint32_t s = std::get<1>(emit.sev[order[x]]);
    const size_t b = block_of_[std::get<0>(emit.sev[order[x]])];
    size_t y = x;
    while (y < order.size() && std::get<1>(emit.sev[order[y]]) == s &&
           block_of_[std::get<0>(emit.sev[order[y]])] == b) {
      ++y;
    }
    // Events x..y of storage s in block b, ascending instruction.
    const Block& bl = blocks_[b];
    const bool may_at_entry = GetBit(may_in.row(b), s);
    uint32_t first_def = bl.last + 1;
    for (size_t z = x; z < y; ++z) {
      if (std::get<2>(emit.sev[order[z]]) != 0) {
        first_def = std::get<0>(emit.sev[order[z]]);
        break;
      }
    }
    auto& local = sc_.local;
    local.clear();
    auto& runs_s = DirectRuns(s);
    bool live = GetBit(live_out.row(b), s);
    uint32_t run_last = bl.last;
    bool in_run = live;
    size_t z = y;
    while (z > x) {
      const uint32_t i = std::get<0>(emit.sev[order[z - 1]]);
      bool has_use = false, has_kill = false;
      while (z > x && std::get<0>(emit.sev[order[z - 1]]) == i) {
        const uint8_t k = std::get<2>(emit.sev[order[z - 1]]);
        has_use = has_use || k == 0;
        has_kill = has_kill || k == 1;
        --z;
      }
      if (!in_run) {
        in_run = true;
        run_last = i;
      }
      live = has_use || (!has_kill && live);
      if (!live) {
        local.push_back({i, run_last});
        in_run = false;
      }
    }
    if (in_run) local.push_back({bl.first, run_last});
    // Nothing can be there before the first write unless something wrote
    // it before the block: keep only the instructions that name it.
    for (const LiveRun& r : local) {
      if (may_at_entry || r.first >= first_def) {
        runs_s.push_back(r);
        continue;
      }
      for (size_t q = x; q < y; ++q) {
        const uint32_t i = std::get<0>(emit.sev[order[q]]);
        if (i >= r.first && i <= r.last && i < first_def) runs_s.push_back({i, i});
      }
      if (r.last >= first_def) runs_s.push_back({first_def, r.last});
    }
    x = y;
  }
  for (size_t b = 0; b < nb; ++b) {
    if (!visited[b]) continue;
    const uint64_t* li = live_in.row(b);
    const uint64_t* lo = live_out.row(b);
    const uint64_t* my = may_in.row(b);
    const uint64_t* ev = evin.row(b);
    for (size_t w = 0; w < LW; ++w) {
      uint64_t bits = li[w] & lo[w] & my[w] & ~ev[w];
      while (bits) {
        const size_t s = w * 64 + static_cast<size_t>(__builtin_ctzll(bits));
        bits &= bits - 1;
        DirectRuns(s).push_back({blocks_[b].first, blocks_[b].last});
      }
    }
  }
  ApplyRules();

  // Targets: a target is live (as a value) from where it is re-pointed or
  // written to its last use; wherever it is live, each storage it may point
  // to is live through it.
  if (nt > 0) {
    BitMatrix tue(nb, nt), tkill(nb, nt), tin(nb, nt), tout(nb, nt), tev_in(nb, nt);
    for (const TargetEvent& e : emit.tev) {
      const size_t b = block_of_[e.instr];
      if (e.kind == 0 || e.kind == 2) {
        if (!GetBit(tkill.row(b), e.target)) SetBit(tue.row(b), e.target);
      } else {
        SetBit(tkill.row(b), e.target);
      }
      SetBit(tev_in.row(b), e.target);
    }
    std::vector<uint64_t> texit(tue.words(), 0);
    for (uint32_t t : exit_targets) SetBit(texit.data(), t);
    const size_t TW = tue.words();
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t bi = nb; bi-- > 0;) {
        if (!visited[bi]) continue;
        for (size_t w = 0; w < TW; ++w) {
          uint64_t o = blocks_[bi].to_exit ? texit[w] : 0;
          for (uint32_t sc : blocks_[bi].succ) o |= tin.row(sc)[w];
          const uint64_t in = tue.row(bi)[w] | (o & ~tkill.row(bi)[w]);
          changed = changed || o != tout.row(bi)[w] || in != tin.row(bi)[w];
          tout.row(bi)[w] = o;
          tin.row(bi)[w] = in;
        }
        if (++work_ > kMaxWork) {
          NotChecked("its control flow did not settle within the plan check's limits");
          return false;
        }
      }
    }
    // Per target, its events in instruction order (they are recorded block by block).
    std::vector<std::vector<size_t>> of_target(nt);
    for (size_t k = 0; k < emit.tev.size(); ++k) of_target[emit.tev[k].target].push_back(k);
    std::vector<std::vector<std::pair<uint32_t, std::vector<LiveRun>>>> through(nsp);
    auto add_through = [&](uint32_t t, const std::vector<uint32_t>& keys, LiveRun r) {
      for (uint32_t st : keys) {
        if (st >= nsp) continue;  // unplanned, or the target's own tensor
        auto& lst = through[st];
        if (lst.empty() || lst.back().first != targets_[t]) lst.emplace_back(targets_[t], std::vector<LiveRun>{});
        lst.back().second.push_back(r);
      }
    };
    auto keys_of = [](const RefSet& r) {
      std::vector<uint32_t> k;
      for (const auto& sd : r) k.push_back(sd.first);
      return k;
    };
    for (uint32_t t = 0; t < nt; ++t) {
      const auto& evs = of_target[t];
      size_t x = 0;
      for (size_t b = 0; b < nb; ++b) {
        if (!visited[b]) continue;
        const Block& bl = blocks_[b];
        size_t y = x;
        while (y < evs.size() && block_of_[emit.tev[evs[y]].instr] == b) ++y;
        if (x == y) {
          if (GetBit(tin.row(b), t) && GetBit(tout.row(b), t))
            add_through(t, keys_of(refs_in[b][t]), {bl.first, bl.last});
          continue;
        }
        // Where the target points: from the block's entry, then after each re-pointing.
        std::vector<std::pair<uint32_t, std::vector<uint32_t>>> segs{{bl.first, keys_of(refs_in[b][t])}};
        for (size_t z = x; z < y; ++z) {
          const TargetEvent& e = emit.tev[evs[z]];
          if (e.kind == 3) segs.emplace_back(e.instr, emit.alias_keys[e.keys]);
        }
        // Where it is live: a backward scan, as for storages.
        std::vector<LiveRun> in_use;
        bool live = GetBit(tout.row(b), t);
        bool in_run = live;
        uint32_t run_last = bl.last;
        size_t z = y;
        while (z > x) {
          const uint32_t i = emit.tev[evs[z - 1]].instr;
          bool has_use = false, has_kill = false, repointed = false;
          while (z > x && emit.tev[evs[z - 1]].instr == i) {
            const uint8_t k = emit.tev[evs[z - 1]].kind;
            has_use = has_use || k == 0 || k == 2;
            has_kill = has_kill || k == 1;
            repointed = repointed || k == 3;
            --z;
          }
          const bool here = has_use || has_kill || live;  // re-pointed here: live only if live after
          if (here && !in_run) {
            in_run = true;
            run_last = i;
          }
          live = has_use || (!has_kill && !repointed && live);
          if (in_run && !live) {
            in_use.push_back({i, run_last});
            in_run = false;
          }
        }
        if (in_run) in_use.push_back({bl.first, run_last});
        // Split each run where the target is re-pointed.
        for (const LiveRun& r : in_use) {
          for (size_t q = 0; q < segs.size(); ++q) {
            // Segment q covers segs[q].first up to the next re-pointing (exclusive).
            const uint32_t from = segs[q].first;
            if (q + 1 < segs.size() && segs[q + 1].first <= from) continue;  // re-pointed at once
            const uint32_t to = q + 1 < segs.size() ? segs[q + 1].first - 1 : bl.last;
            const uint32_t lo = std::max(from, r.first), hi = std::min(to, r.last);
            if (lo <= hi) add_through(t, segs[q].second, {lo, hi});
          }
        }
        x = y;
      }
    }
    for (size_t st = 0; st < nsp; ++st) {
      auto& lst = through[st];
      if (lst.empty()) continue;
      std::sort(lst.begin(), lst.end(), [](const auto& p1, const auto& p2) { return p1.first < p2.first; });
      out_->storages[st].through = static_cast<uint32_t>(out_->through.size());
      auto& runs = out_->through.emplace_back().runs;
      for (size_t k = 0; k < lst.size(); ++k) {
        if (!runs.empty() && runs.back().first == lst[k].first) {
          auto& dst = runs.back().second;
          dst.insert(dst.end(), lst[k].second.begin(), lst[k].second.end());
          dst = Coalesce(std::move(dst));
        } else {
          runs.emplace_back(lst[k].first, Coalesce(std::move(lst[k].second)));
        }
      }
    }
  }
  AssembleLive();
  ReportReadBeforeWrite();
  return true;
}

// The rules that hold whatever the dataflow says (on each storage's
// `direct` runs): state lives from the first to the last instruction; an
// input from the first instruction up to its first use.
void MethodDeriver::ApplyRules() {
  const size_t nsp = out_->storages.size();
  auto& input_storage = sc_.input_storage;
  input_storage.assign(nsp, 0);
  for (const PlannedTensor& t : out_->tensors) {
    if (t.origin == PlanOrigin::kInput) input_storage[t.storage] = 1;
  }
  for (size_t s = 0; s < nsp; ++s) {
    PlanStorage& st = out_->storages[s];
    auto& r = DirectRuns(s);
    if (n_ > 0 && st.persistent) {
      r.assign(1, {0, n_ - 1});
    } else if (n_ > 0 && input_storage[s]) {
      r.push_back({0, 0});
    }
    CoalesceInPlace(r);
    if (input_storage[s] && r.size() > 1 && r[0].first == 0) {
      r[0].last = std::max(r[0].last, r[1].first);
      CoalesceInPlace(r);
    }
  }
}

void MethodDeriver::AssembleLive() {
  const size_t nsp = out_->storages.size();
  for (size_t st = 0; st < nsp; ++st) {
    PlanStorage& sto = out_->storages[st];
    if (sto.through == PlanStorage::kNoThrough) continue;  // live: the direct runs
    PlanThrough& th = out_->through[sto.through];
    th.direct = sto.live;
    for (const auto& [target, rs] : th.runs) {
      sto.live.append(rs.begin(), rs.end());
      th.pointed_by.push_back(target);
    }
    CoalesceInPlace(sto.live);
  }
}

void MethodDeriver::ReportReadBeforeWrite() {
  auto& rbw = sc_.rbw;
  auto& rbw_storage = sc_.rbw_storage;
  // Read before write.
  for (uint32_t v : moved_view_) rbw[v] = kNone;  // reported already
  for (uint32_t v = 0; v < types_.size(); ++v) {
    if (rbw[v] == kNone) continue;
    const PlanStorage& s = out_->storages[rbw_storage[v]];
    std::string at = rbw[v] == n_ ? "is returned by the method"
                                  : "is read by instruction " + std::to_string(rbw[v]) + " (" +
                                        InstructionLabel(p_, *out_, rbw[v]) + ")";
    const PlannedTensor* own = out_->Tensor(v);
    const void* where = own && own->tensor->allocation_info() ? static_cast<const void*>(own->tensor->allocation_info())
                                                              : static_cast<const void*>(plan_->values()->Get(v));
    out_->problems.push_back({"plan-read-before-write",
                              DescribePlannedValue(*out_, v) + " " + at + " before anything writes its bytes: bytes [" +
                                  std::to_string(s.offset) + ", " + std::to_string(s.offset + s.nbytes) +
                                  ") of planned buffer " + std::to_string(s.memory_id) +
                                  " hold no input, no initial data, and no tensor written earlier covers them on every "
                                  "path there",
                              where, "bytes written before they are read", "bytes nothing wrote"});
  }
}

void MethodDeriver::FinishTensors() {
  for (PlannedTensor& t : out_->tensors) {
    if (t.origin == PlanOrigin::kWritten && !used_[t.value] && !t.output) t.origin = PlanOrigin::kUnused;
  }
}

void MethodDeriver::Finish(const std::vector<StateAt>& other_state) {
  if (!out_->not_checked.empty() || out_->blocked) return;
  ResolveViews(other_state);
  if (!out_->not_checked.empty()) return;
  BuildStorages();
  BuildBlocks();
  if (Dataflow()) FinishTensors();
  if (!out_->not_checked.empty()) {
    for (PlanStorage& s : out_->storages) s.live.clear();
    out_->problems.clear();
  }
}

// PlanLowerBound, unless the sizes come near 2^63 (a file may plan a buffer
// of up to 2^63 - 1 bytes, where its 64-bit running sum would overflow):
// then the same sweep in 128 bits.
uint64_t LowerBound(const std::vector<PlanBlock>& blocks, uint64_t alignment) {
  auto aligned = [&](uint64_t n) -> unsigned __int128 {
    return (static_cast<unsigned __int128>(n) + alignment - 1) / alignment * alignment;
  };
  unsigned __int128 total = 0;
  for (const PlanBlock& b : blocks) total += aligned(b.size);
  if (total < (static_cast<unsigned __int128>(1) << 62)) return PlanLowerBound(blocks, alignment);
  std::vector<std::tuple<uint64_t, bool, uint64_t>> ev;
  for (const PlanBlock& b : blocks) {
    ev.emplace_back(uint64_t{b.first} * 2 + 1, true, b.size);
    ev.emplace_back((uint64_t{b.last} + 1) * 2, false, b.size);
  }
  std::sort(ev.begin(), ev.end());
  unsigned __int128 live = 0, peak = 0;
  for (const auto& [when, starts, size] : ev) {
    live = starts ? live + aligned(size) : live - aligned(size);
    peak = std::max(peak, live);
  }
  return peak > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(peak);
}

}  // namespace

std::string InstructionLabel(const efb::Program& program, const MethodLifetimes& m, uint32_t instruction) {
  const auto* plans = program.execution_plan();
  if (!plans || m.plan_index >= plans->size()) return "?";
  const auto* plan = plans->Get(static_cast<flatbuffers::uoffset_t>(m.plan_index));
  if (!plan->chains()) return "?";
  size_t c = static_cast<size_t>(std::upper_bound(m.chain_starts.begin(), m.chain_starts.end(), instruction) -
                                 m.chain_starts.begin());
  if (c == 0) return "?";
  --c;
  // Empty chains share their start with the next one: find the chain that holds it.
  while (c < plan->chains()->size()) {
    const auto* ch = plan->chains()->Get(static_cast<flatbuffers::uoffset_t>(c));
    const uint32_t li = instruction - m.chain_starts[c];
    if (ch->instructions() && li < ch->instructions()->size()) {
      const auto* ins = ch->instructions()->Get(li);
      switch (ins->instr_args_type()) {
        case efb::InstructionArguments::KernelCall: {
          const auto* k = ins->instr_args_as_KernelCall();
          const auto* ops = plan->operators();
          if (!k || !ValidIndex(ops, k->op_index())) return "KernelCall";
          return OperatorName(*ops->Get(static_cast<flatbuffers::uoffset_t>(k->op_index())), "?");
        }
        case efb::InstructionArguments::DelegateCall: {
          const auto* d = ins->instr_args_as_DelegateCall();
          const auto* dels = plan->delegates();
          if (!d || !ValidIndex(dels, d->delegate_index())) return "DelegateCall";
          const auto* dl = dels->Get(static_cast<flatbuffers::uoffset_t>(d->delegate_index()));
          return std::string("delegate ") + (dl->id() ? dl->id()->str() : "?");
        }
        case efb::InstructionArguments::MoveCall:
          return "MoveCall";
        case efb::InstructionArguments::JumpFalseCall:
          return "JumpFalseCall";
        case efb::InstructionArguments::FreeCall:
          return "FreeCall";
        default:
          return "?";
      }
    }
    if (c + 1 >= m.chain_starts.size() || m.chain_starts[c + 1] != m.chain_starts[c]) break;
    ++c;
  }
  return "?";
}

std::string DescribePlannedValue(const MethodLifetimes& m, uint32_t value) {
  std::string s = Idx(value);
  const PlannedTensor* t = m.Tensor(value);
  if (!t) return s;
  const std::string name = NameOf(t->tensor);
  if (!name.empty()) s += " \"" + name + "\"";
  s += " (" + std::string(ScalarTypeName(static_cast<int>(t->tensor->scalar_type()))) + DimsOf(t->tensor) + ")";
  return s;
}

std::string DescribeStorage(const MethodLifetimes& m, const PlanStorage& s) {
  std::string t = DescribePlannedValue(m, s.values.front());
  for (size_t i = 1; i < s.values.size(); ++i) {
    const PlannedTensor* v = m.Tensor(s.values[i]);
    t += (i == 1 ? " with " : ", ");
    t += v && v->origin == PlanOrigin::kView ? "its view " : "";
    t += Idx(s.values[i]);
  }
  const std::vector<uint32_t>& pointed_by = m.PointedBy(s);
  if (!pointed_by.empty()) {
    t += ", also used through";
    for (size_t i = 0; i < pointed_by.size(); ++i) t += (i ? ", " : " ") + Idx(pointed_by[i]);
    t += " (MoveCall/et_view)";
  }
  return t;
}

struct MethodLifetimesDeriver::Impl {
  Impl(const efb::Program& program, bool detail) : p(program), d(program, detail), probe(program, false) {}
  const efb::Program& p;
  MethodDeriver d;
  MethodLifetimes out;
  // Every method's state, built the first time a method needs it.
  std::vector<StateAt> state;
  bool state_built = false;
  MethodDeriver probe;
  MethodLifetimes probe_out;

  void BuildState() {
    state_built = true;
    const auto* plans = p.execution_plan();
    for (size_t m = 0; m < plans->size(); ++m) {
      probe.Reset(m, &probe_out);
      probe.Collect();
      for (const PlannedTensor& t : probe_out.tensors) {
        if (t.origin == PlanOrigin::kState) state.push_back({t.memory_id, t.offset, t.nbytes, m});
      }
    }
    std::sort(state.begin(), state.end());
  }
};

MethodLifetimesDeriver::MethodLifetimesDeriver(const efb::Program& program, bool detail)
    : impl_(std::make_unique<Impl>(program, detail)) {}
MethodLifetimesDeriver::~MethodLifetimesDeriver() = default;

const MethodLifetimes& MethodLifetimesDeriver::Derive(size_t plan_index) {
  Impl& i = *impl_;
  i.d.Reset(plan_index, &i.out);
  i.d.Collect();
  // Other methods' state matters only to a value nothing here writes, and
  // only when there are other methods.
  if (!i.state_built && i.p.execution_plan()->size() > 1 && i.d.NeedsOtherState()) i.BuildState();
  i.d.Finish(i.state);
  i.d.Trim();
  return i.out;
}

void AddStateBufferEntries(const MethodLifetimes& m, size_t method, std::vector<StateBufferEntry>& out,
                           bool persistent_only) {
  if (!m.derived()) return;
  // Buffers where the method keeps state, and whether it keeps only state there.
  std::vector<std::pair<uint32_t, bool>> buffers;  // (memory_id, state only)
  for (const PlanStorage& st : m.storages) {
    if (!st.persistent) continue;
    if (std::find_if(buffers.begin(), buffers.end(), [&](const auto& b) { return b.first == st.memory_id; }) ==
        buffers.end()) {
      buffers.emplace_back(st.memory_id, true);
    }
  }
  if (buffers.empty()) return;
  bool other_tensors = false;  // anything but state, with bytes, anywhere
  for (const PlanStorage& st : m.storages) {
    if (st.persistent || st.nbytes == 0) continue;
    other_tensors = true;
    for (auto& b : buffers) {
      if (b.first == st.memory_id) b.second = false;
    }
  }
  for (uint32_t s = 0; s < m.storages.size(); ++s) {
    const PlanStorage& st = m.storages[s];
    auto b = std::find_if(buffers.begin(), buffers.end(), [&](const auto& x) { return x.first == st.memory_id; });
    if (b == buffers.end() || st.nbytes == 0 || (persistent_only && !st.persistent)) continue;
    StateBufferEntry e;
    e.method = method;
    e.storage = s;
    e.memory_id = st.memory_id;
    e.offset = st.offset;
    e.nbytes = st.nbytes;
    e.persistent = st.persistent;
    e.live = st.persistent || !st.live.empty();
    e.state_only = b->second;
    e.apart = b->second && other_tensors;
    const PlannedTensor* t = m.Tensor(st.values.front());
    if (st.persistent) {
      e.name = NameOf(t->tensor);
      e.initial = t->tensor->data_buffer_idx();
    }
    e.where = t->tensor->allocation_info() ? static_cast<const void*>(t->tensor->allocation_info())
                                           : static_cast<const void*>(t->tensor);
    out.push_back(std::move(e));
  }
}

bool SameState(const StateBufferEntry& a, const StateBufferEntry& b) {
  if (!a.name.empty() && !b.name.empty()) return a.name == b.name;
  return a.memory_id == b.memory_id && a.offset == b.offset && a.nbytes == b.nbytes &&
         !(a.initial > 0 && b.initial > 0 && a.initial != b.initial);
}

namespace {

bool EntryBytesMeet(const StateBufferEntry& a, const StateBufferEntry& b) {
  const uint64_t ae = a.offset + a.nbytes < a.offset ? UINT64_MAX : a.offset + a.nbytes;
  const uint64_t be = b.offset + b.nbytes < b.offset ? UINT64_MAX : b.offset + b.nbytes;
  return a.nbytes > 0 && b.nbytes > 0 && a.offset < be && b.offset < ae;
}

// `e` (unnamed, with initial data) may be a copy of `f`, state kept in a
// shared buffer: the same initial data and size (equal initial data is stored
// once, so the same index).
bool CopyOf(const StateBufferEntry& e, const StateBufferEntry& f) {
  return (e.name.empty() || f.name.empty()) && e.initial > 0 && e.initial == f.initial && e.nbytes == f.nbytes;
}

}  // namespace

SharedStateAnalysis AnalyzeSharedState(const std::vector<StateBufferEntry>& entries, size_t max_overlaps) {
  SharedStateAnalysis r;
  uint64_t work = 0;
  auto spend = [&](uint64_t n) {
    work += n;
    if (work > kMaxWork) r.not_checked = true;
    return !r.not_checked;
  };
  // State of one method alone is shared with nothing (a shared buffer, a
  // group, a mismatch and an overlap each take two methods): all the analysis
  // could say is that it stopped at its limit. Before it knows that no buffer
  // is shared it takes at most n(n-1)/2 steps clustering n entries of state,
  // then for each cluster at most one step per named entry and per entry with
  // initial data; below the limit, there is nothing to look for.
  if (!entries.empty() && std::all_of(entries.begin(), entries.end(),
                                      [&](const StateBufferEntry& e) { return e.method == entries.front().method; })) {
    uint64_t n = 0, keyed = 0;
    for (const StateBufferEntry& e : entries) {
      if (!e.persistent) continue;
      ++n;
      keyed += (e.name.empty() ? 0 : 1) + (e.initial > 0 ? 1 : 0);
    }
    if (n * (n > 0 ? n - 1 : 0) / 2 + n * keyed <= kMaxWork) return r;
  }
  // Entries by buffer; each buffer's state as clusters of the same state (by
  // place, then SameState with the cluster's first entry).
  std::map<uint32_t, std::vector<size_t>> by_buffer;
  std::map<uint32_t, std::vector<std::vector<size_t>>> clusters;
  {
    std::map<std::tuple<uint32_t, uint64_t, uint64_t>, std::vector<size_t>> at;  // place -> clusters' indices
    for (size_t k = 0; k < entries.size(); ++k) {
      const StateBufferEntry& e = entries[k];
      by_buffer[e.memory_id].push_back(k);
      if (!e.persistent) continue;
      auto& cs = clusters[e.memory_id];
      auto& here = at[{e.memory_id, e.offset, e.nbytes}];
      bool placed = false;
      for (size_t c : here) {
        if (!spend(1)) return r;
        if (SameState(entries[cs[c].front()], e)) {
          cs[c].push_back(k);
          placed = true;
          break;
        }
      }
      if (!placed) {
        here.push_back(cs.size());
        cs.push_back({k});
      }
    }
  }
  // Persistent entries by name, and (unnamed) by initial data and size.
  std::map<std::string, std::vector<size_t>> by_name;
  std::map<std::pair<uint32_t, uint64_t>, std::vector<size_t>> by_initial;
  for (size_t k = 0; k < entries.size(); ++k) {
    const StateBufferEntry& e = entries[k];
    if (!e.persistent) continue;
    if (!e.name.empty()) by_name[e.name].push_back(k);
    if (e.initial > 0) by_initial[{e.initial, e.nbytes}].push_back(k);
  }

  // Which buffers are shared.
  for (const auto& [mid, cs] : clusters) {
    std::set<size_t> with_state, apart, state_only;
    for (const auto& c : cs) {
      for (size_t k : c) {
        with_state.insert(entries[k].method);
        if (entries[k].apart) apart.insert(entries[k].method);
        if (entries[k].state_only) state_only.insert(entries[k].method);
      }
    }
    bool shared = false;
    if (!apart.empty()) {
      shared = with_state.size() >= 2;
      // One method keeps state here; another keeps a copy of some of it elsewhere.
      for (size_t c = 0; c < cs.size() && !shared; ++c) {
        const StateBufferEntry& s = entries[cs[c].front()];
        const std::vector<size_t>* same[2] = {nullptr, nullptr};
        if (!s.name.empty() && by_name.count(s.name)) same[0] = &by_name[s.name];
        if (s.initial > 0 && by_initial.count({s.initial, s.nbytes})) same[1] = &by_initial[{s.initial, s.nbytes}];
        for (const auto* list : same) {
          for (size_t j = 0; list && j < list->size() && !shared; ++j) {
            if (!spend(1)) return r;
            const StateBufferEntry& e = entries[(*list)[j]];
            shared = e.memory_id != mid && !with_state.count(e.method) &&
                     ((!e.name.empty() && e.name == s.name) || CopyOf(e, s));
          }
        }
      }
    }
    // Two methods that keep nothing but state here, with some of it in common.
    for (size_t c = 0; c < cs.size() && !shared && state_only.size() >= 2; ++c) {
      std::set<size_t> methods;
      for (size_t k : cs[c]) {
        if (state_only.count(entries[k].method)) methods.insert(entries[k].method);
      }
      shared = methods.size() >= 2;
    }
    if (shared) r.buffers.push_back(mid);
  }
  if (r.buffers.empty()) return r;
  auto is_shared = [&](uint32_t mid) { return std::binary_search(r.buffers.begin(), r.buffers.end(), mid); };

  for (uint32_t mid : r.buffers) {
    for (const auto& c : clusters[mid]) {
      r.fixed.insert(r.fixed.end(), c.begin(), c.end());
      std::set<size_t> methods;
      for (size_t k : c) methods.insert(entries[k].method);
      if (methods.size() >= 2) r.groups.push_back({mid, entries[c.front()].name, c});
    }
  }
  std::sort(r.fixed.begin(), r.fixed.end());
  std::vector<uint8_t> fixed(entries.size(), 0);
  for (size_t k : r.fixed) fixed[k] = 1;
  std::vector<const std::vector<size_t>*> cluster_of(entries.size(), nullptr);
  for (const auto& [mid, cs] : clusters) {
    for (const auto& c : cs) {
      for (size_t k : c) cluster_of[k] = &c;
    }
  }

  // Named state in a shared buffer: at the same bytes wherever it is named.
  std::vector<uint8_t> mismatched(entries.size(), 0);
  for (const auto& [name, list] : by_name) {
    auto ref = std::find_if(list.begin(), list.end(), [&](size_t k) { return fixed[k] != 0; });
    if (ref == list.end()) continue;
    const StateBufferEntry& f = entries[*ref];
    for (size_t k : list) {
      const StateBufferEntry& e = entries[k];
      if (k == *ref || (e.memory_id == f.memory_id && e.offset == f.offset && e.nbytes == f.nbytes)) continue;
      r.mismatches.push_back({k, *ref});
      mismatched[k] = 1;
    }
  }
  // Unnamed state outside the shared buffers that is a copy of state another
  // method keeps in one (the same initial data and size), in a method that
  // keeps no such state there: its own copy, which the others never see.
  for (const auto& [key, list] : by_initial) {
    for (size_t k : list) {
      const StateBufferEntry& e = entries[k];
      if (mismatched[k] || is_shared(e.memory_id)) continue;
      for (size_t f : list) {
        if (!spend(1)) return r;
        const StateBufferEntry& s = entries[f];
        if (!fixed[f] || s.method == e.method || !CopyOf(e, s)) continue;
        bool kept = false;  // e's method keeps s's state in the shared buffer too
        if (!spend(cluster_of[f]->size())) return r;
        for (size_t g : *cluster_of[f]) kept = kept || entries[g].method == e.method;
        if (kept) continue;
        r.mismatches.push_back({k, f});
        break;
      }
    }
  }
  std::sort(r.mismatches.begin(), r.mismatches.end(), [](const auto& a, const auto& b) { return a.entry < b.entry; });

  // Anything of one method on another's state in a shared buffer.
  if (max_overlaps == 0) return r;
  std::set<std::pair<size_t, size_t>> reported;  // two states meeting: said once
  for (uint32_t mid : r.buffers) {
    std::vector<size_t> state;
    for (const auto& c : clusters[mid]) state.insert(state.end(), c.begin(), c.end());
    std::sort(state.begin(), state.end(), [&](size_t a, size_t b) {
      return std::make_pair(entries[a].offset, a) < std::make_pair(entries[b].offset, b);
    });
    uint64_t longest = 0;
    for (size_t k : state) longest = std::max(longest, entries[k].nbytes);
    for (size_t k : by_buffer[mid]) {
      const StateBufferEntry& a = entries[k];
      if (!a.live) continue;
      const uint64_t from = a.offset > longest ? a.offset - longest : 0;
      auto it = std::lower_bound(state.begin(), state.end(), from,
                                 [&](size_t x, uint64_t off) { return entries[x].offset < off; });
      const uint64_t end = a.offset + a.nbytes < a.offset ? UINT64_MAX : a.offset + a.nbytes;
      for (; it != state.end() && entries[*it].offset < end; ++it) {
        if (!spend(1)) return r;
        const StateBufferEntry& b = entries[*it];
        if (b.method == a.method || !EntryBytesMeet(a, b) || (a.persistent && SameState(a, b))) continue;
        if (a.persistent && reported.count({*it, k})) continue;
        if (r.overlaps.size() >= max_overlaps) {
          r.more_overlaps = true;
        } else {
          r.overlaps.push_back({k, *it});
          if (a.persistent) reported.emplace(k, *it);
        }
        break;
      }
    }
  }
  return r;
}

ProgramLifetimes DeriveLifetimes(const efb::Program& program) {
  ProgramLifetimes lt;
  const auto* plans = program.execution_plan();
  if (!plans) return lt;
  MethodLifetimesDeriver d(program, /*detail=*/true);
  lt.methods.reserve(plans->size());
  for (size_t m = 0; m < plans->size(); ++m) lt.methods.push_back(d.Derive(m));
  // Buffers several methods share (share_mutable_buffers).
  std::vector<StateBufferEntry> entries;
  for (size_t m = 0; m < lt.methods.size(); ++m) AddStateBufferEntries(lt.methods[m], m, entries);
  const SharedStateAnalysis shared = AnalyzeSharedState(entries, 0);
  for (size_t k : shared.fixed) lt.methods[entries[k].method].storages[entries[k].storage].shared_across_methods = true;
  for (const SharedStateGroup& g : shared.groups) {
    SharedState sh;
    sh.memory_id = g.memory_id;
    sh.name = g.name;
    for (size_t k : g.entries) sh.uses.push_back({entries[k].method, entries[k].storage});
    lt.shared.push_back(std::move(sh));
  }
  return lt;
}

std::vector<MethodPlanView> PlanViews(const efb::Program& program, const ProgramLifetimes& lt) {
  std::vector<MethodPlanView> views;
  const auto* plans = program.execution_plan();
  for (size_t m = 0; m < lt.methods.size(); ++m) {
    const MethodLifetimes& ml = lt.methods[m];
    MethodPlanView v;
    v.method = m;
    v.name = ml.name;
    v.not_checked = ml.not_checked;
    if (ml.blocked && v.not_checked.empty()) v.not_checked = "its control flow has a loop with no exit or a move cycle";
    const auto* plan = plans && m < plans->size() ? plans->Get(static_cast<flatbuffers::uoffset_t>(m)) : nullptr;
    const auto* ncbs = plan ? plan->non_const_buffer_sizes() : nullptr;
    std::map<uint32_t, PlanBufferView> by_id;
    for (const PlannedTensor& t : ml.tensors) {
      PlanBufferView& b = by_id[t.memory_id];
      b.memory_id = t.memory_id;
      b.used_end = std::max(b.used_end, t.offset + t.nbytes < t.offset ? UINT64_MAX : t.offset + t.nbytes);
    }
    for (auto& [mid, b] : by_id) {
      b.size = ncbs && mid < ncbs->size() ? ncbs->Get(mid) : 0;
      if (plan && plan->non_const_buffer_device()) {
        for (const auto* dev : *plan->non_const_buffer_device()) {
          if (dev->buffer_idx() >= 0 && static_cast<uint32_t>(dev->buffer_idx()) == mid) {
            b.device_type = static_cast<uint32_t>(dev->device_type());
          }
        }
      }
    }
    if (ml.derived()) {
      std::vector<uint8_t> live_storage(ml.storages.size(), 0);
      for (uint32_t s = 0; s < ml.storages.size(); ++s) {
        const PlanStorage& st = ml.storages[s];
        auto iv = st.Interval();
        if (!iv) continue;
        live_storage[s] = 1;
        PlanBufferView& b = by_id[st.memory_id];
        PlanBlock blk;
        blk.size = st.nbytes;
        blk.first = iv->first;
        blk.last = iv->last;
        if (st.shared_across_methods) blk.fixed_offset = st.offset;
        b.blocks.push_back(blk);
        b.block_storage.push_back(s);
        b.offsets.push_back(st.offset);
      }
      for (const PlannedTensor& t : ml.tensors) {
        if (!live_storage[t.storage]) by_id[t.memory_id].idle_values.push_back(t.value);
      }
    } else {
      for (const PlannedTensor& t : ml.tensors) by_id[t.memory_id].idle_values.push_back(t.value);
    }
    for (auto& [mid, b] : by_id) {
      std::vector<uint64_t> all;
      for (const PlannedTensor& t : ml.tensors) {
        if (t.memory_id == mid) all.push_back(t.offset);
      }
      b.alignment = InferPlanAlignment(all);
      b.lower_bound = LowerBound(b.blocks, b.alignment);
      v.buffers.push_back(std::move(b));
    }
    views.push_back(std::move(v));
  }
  return views;
}

}  // namespace ptepack
