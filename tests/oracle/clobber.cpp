// The runtime oracle's clobbering mode; see clobber.h.
#include "clobber.h"

#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/core/tag.h>
#include <executorch/runtime/executor/method_meta.h>
#include <xxhash.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace clobber {
namespace {

using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::aten::TensorImpl;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::KernelRuntimeContext;
using executorch::runtime::Method;
using executorch::runtime::Span;
using executorch::runtime::Tag;
using json = nlohmann::ordered_json;

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

// splitmix64: the byte stream outputs and inputs are filled with.
uint64_t SplitMix(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void FillBytes(uint8_t* p, size_t n, uint64_t seed, bool as_bool) {
  uint64_t state = seed;
  const uint64_t mask = as_bool ? 0x0101010101010101ull : ~0ull;  // a Bool byte other than 0/1 is not a bool
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {  // a word at a time (little-endian: byte k is bits 8k..8k+7)
    const uint64_t r = SplitMix(&state) & mask;
    std::memcpy(p + i, &r, 8);
  }
  if (i < n) {
    const uint64_t r = SplitMix(&state) & mask;
    for (size_t k = 0; i + k < n; k++) p[i + k] = static_cast<uint8_t>(r >> (8 * k));
  }
}

class Hasher {
 public:
  Hasher() : s_(XXH64_createState()) { XXH64_reset(s_, 0); }
  ~Hasher() { XXH64_freeState(s_); }
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  void Add(const void* p, size_t n) {
    if (n > 0) XXH64_update(s_, p, n);
  }
  template <typename T>
  void Pod(T v) {
    Add(&v, sizeof v);
  }
  void Str(const std::string& s) {
    Pod<uint64_t>(s.size());
    Add(s.data(), s.size());
  }
  uint64_t Digest() const { return XXH64_digest(s_); }

 private:
  XXH64_state_t* s_;
};

void HashTensor(const Tensor& t, Hasher* h) {
  h->Pod<int8_t>(static_cast<int8_t>(t.scalar_type()));
  h->Pod<int64_t>(t.dim());
  for (auto s : t.sizes()) h->Pod<int64_t>(s);
  const void* data = t.const_data_ptr();
  if (data == nullptr) {
    h->Str("<no data>");
  } else {
    h->Add(data, t.nbytes());
  }
}

// Hash of an argument's content: its tag, then a tensor's dtype, shape and bytes, a scalar's
// value, or a list's items. Never a pointer or an offset, so two plans compare.
uint64_t HashValue(const EValue& v) {
  Hasher h;
  h.Pod<uint32_t>(static_cast<uint32_t>(v.tag));
  switch (v.tag) {
    case Tag::Tensor:
      HashTensor(v.toTensor(), &h);
      break;
    case Tag::Int:
      h.Pod<int64_t>(v.toInt());
      break;
    case Tag::Double:
      h.Pod<double>(v.toDouble());
      break;
    case Tag::Bool:
      h.Pod<uint8_t>(v.toBool() ? 1 : 0);
      break;
    case Tag::String: {
      auto s = v.toString();
      h.Str(std::string(s.data(), s.size()));
      break;
    }
    case Tag::ListInt: {
      auto l = v.tryToIntList();
      if (!l.ok()) {
        h.Str("<bad list>");
        break;
      }
      for (int64_t x : l.get()) h.Pod<int64_t>(x);
      break;
    }
    case Tag::ListDouble: {
      auto l = v.tryToDoubleList();
      if (!l.ok()) {
        h.Str("<bad list>");
        break;
      }
      for (double x : l.get()) h.Pod<double>(x);
      break;
    }
    case Tag::ListBool: {
      auto l = v.tryToBoolList();
      if (!l.ok()) {
        h.Str("<bad list>");
        break;
      }
      for (bool x : l.get()) h.Pod<uint8_t>(x ? 1 : 0);
      break;
    }
    case Tag::ListTensor: {
      auto l = v.tryToTensorList();
      if (!l.ok()) {
        h.Str("<bad list>");
        break;
      }
      for (const Tensor& t : l.get()) HashTensor(t, &h);
      break;
    }
    case Tag::ListOptionalTensor: {
      auto l = v.tryToListOptionalTensor();
      if (!l.ok()) {
        h.Str("<bad list>");
        break;
      }
      for (const auto& t : l.get()) {
        h.Pod<uint8_t>(t.has_value() ? 1 : 0);
        if (t.has_value()) HashTensor(*t, &h);
      }
      break;
    }
    default:
      break;  // None (and ListScalar, which the emitter never writes): the tag alone
  }
  return h.Digest();
}

// ---- Where the run is: set by ExecuteTraced before every step, read by the stubs.
struct RunState {
  const executorch_flatbuffer::ExecutionPlan* plan = nullptr;
  const EValue* base = nullptr;  // &values_[0] of the method, when it could be found
  size_t chain = 0;
  size_t instr = 0;
  size_t calls = 0;
  json* trace = nullptr;
  std::string error;  // the first time the harness lost track of the run
  // Planned tensors whose value this run has given bytes: a method input, initial state, state
  // in a shared buffer, an output of an earlier call (a stub's, a prim op's tensor arguments, a
  // MoveCall's target). A planned tensor read before that is a scratch buffer whose bytes are
  // whatever was there: the stubs do not read them (else a plan that moves a dead tensor's
  // leftovers would change the run).
  std::vector<uint8_t> written;
  // Planned tensors at the same place with the same size: a static view and its base (the
  // emitter's _emit_view gives the view its base's allocation_info): one written, both are.
  std::vector<std::vector<int32_t>> aliases;
  bool stub_ran = false;  // a stub ran in this step (else a KernelCall ran a prim op)
};
RunState g_run;

const executorch_flatbuffer::Tensor* PlannedTensor(int32_t v) {
  const auto* values = g_run.plan->values();
  if (values == nullptr || v < 0 || static_cast<uint32_t>(v) >= values->size()) return nullptr;
  const auto* t = values->Get(static_cast<flatbuffers::uoffset_t>(v))->val_as_Tensor();
  return t != nullptr && t->allocation_info() != nullptr ? t : nullptr;
}

// Whether a value's bytes hold something this run wrote (everything but planned tensors does).
bool Defined(int32_t v) {
  if (PlannedTensor(v) == nullptr || static_cast<size_t>(v) >= g_run.written.size()) return true;
  if (g_run.written[static_cast<size_t>(v)]) return true;
  for (int32_t a : g_run.aliases[static_cast<size_t>(v)]) {
    if (g_run.written[static_cast<size_t>(a)]) return true;
  }
  return false;
}

void MarkWritten(int32_t v) {
  if (v >= 0 && static_cast<size_t>(v) < g_run.written.size()) g_run.written[static_cast<size_t>(v)] = 1;
}

// The items of a TensorList value (empty for anything else).
std::vector<int32_t> ListItems(int32_t v) {
  std::vector<int32_t> out;
  const auto* values = g_run.plan->values();
  if (values == nullptr || v < 0 || static_cast<uint32_t>(v) >= values->size()) return out;
  const auto* list = values->Get(static_cast<flatbuffers::uoffset_t>(v))->val_as_TensorList();
  if (list != nullptr && list->items() != nullptr) out.assign(list->items()->begin(), list->items()->end());
  return out;
}

// A read argument's hash: HashValue, except that a planned tensor (or list item) this run has
// not written hashes as "unwritten" with its dtype and shape, not its bytes.
uint64_t HashArg(const EValue& v, int32_t value, bool* unwritten) {
  if (v.isTensor() && !Defined(value)) {
    *unwritten = true;
    Hasher h;
    h.Pod<uint32_t>(static_cast<uint32_t>(v.tag));
    const Tensor t = v.toTensor();
    h.Pod<int8_t>(static_cast<int8_t>(t.scalar_type()));
    for (auto s : t.sizes()) h.Pod<int64_t>(s);
    h.Str("<unwritten>");
    return h.Digest();
  }
  if (v.isTensorList() && g_run.base != nullptr) {
    const std::vector<int32_t> items = ListItems(value);
    bool any = false;
    for (int32_t x : items) any = any || !Defined(x);
    if (any) {
      *unwritten = true;
      Hasher h;
      h.Pod<uint32_t>(static_cast<uint32_t>(v.tag));
      for (int32_t x : items) h.Pod<uint64_t>(HashArg(g_run.base[x], x, unwritten));
      return h.Digest();
    }
  }
  return HashValue(v);
}

// The current instruction's argument value indices, checked against the EValue pointers the
// runtime passed (they point into the method's values_), so a trace entry never names the
// wrong instruction.
const flatbuffers::Vector<int32_t>* CurrentArgs(executorch_flatbuffer::InstructionArguments kind, Span<EValue*> args) {
  auto fail = [&](const std::string& why) -> const flatbuffers::Vector<int32_t>* {
    if (g_run.error.empty()) {
      g_run.error =
          "instruction " + std::to_string(g_run.instr) + " of chain " + std::to_string(g_run.chain) + ": " + why;
    }
    return nullptr;
  };
  if (g_run.plan == nullptr || g_run.plan->chains() == nullptr || g_run.chain >= g_run.plan->chains()->size()) {
    return fail("no current chain");
  }
  const auto* instrs = g_run.plan->chains()->Get(static_cast<flatbuffers::uoffset_t>(g_run.chain))->instructions();
  if (instrs == nullptr || g_run.instr >= instrs->size()) return fail("no current instruction");
  const auto* ins = instrs->Get(static_cast<flatbuffers::uoffset_t>(g_run.instr));
  if (ins->instr_args_type() != kind) return fail("a stub ran but the instruction is of another kind");
  const flatbuffers::Vector<int32_t>* idx = kind == executorch_flatbuffer::InstructionArguments::KernelCall
                                                ? ins->instr_args_as_KernelCall()->args()
                                                : ins->instr_args_as_DelegateCall()->args();
  if (idx == nullptr || idx->size() != args.size()) return fail("argument count differs from the program's");
  if (g_run.base != nullptr) {
    for (size_t i = 0; i < args.size(); i++) {
      if (args[i] != g_run.base + idx->Get(static_cast<flatbuffers::uoffset_t>(i))) {
        return fail("argument " + std::to_string(i) + " is not the program's value");
      }
    }
  }
  return idx;
}

const TensorImpl* Impl(const EValue& v) { return v.isTensor() ? v.toTensor().unsafeGetTensorImpl() : nullptr; }

// One output of a call: its value index and the slot the runtime gave (for a TensorList item,
// the item's own EValue).
struct Output {
  int32_t value;
  EValue* slot;
};

// Fills an output with bytes (or a scalar) derived from the call's seed; returns its hash after.
uint64_t Clobber(const Output& o, uint64_t seed) {
  EValue& v = *o.slot;
  if (v.isTensor()) {
    Tensor t = v.toTensor();
    void* p = t.mutable_data_ptr();
    if (p != nullptr) {
      FillBytes(static_cast<uint8_t*>(p), t.nbytes(), seed, t.scalar_type() == ScalarType::Bool);
    }
  } else if (v.isInt()) {
    v = EValue(static_cast<int64_t>(seed & 0xffff));
  } else if (v.isBool()) {
    v = EValue(static_cast<bool>(seed & 1));
  } else if (v.isDouble()) {
    v = EValue(static_cast<double>(seed & 0xffff) / 16.0);
  }
  return HashValue(v);
}

// Hashes the inputs, fills the outputs, appends the trace entry. `read[i]`: argument i is read.
void Record(json entry, Span<EValue*> args, const flatbuffers::Vector<int32_t>* idx, const std::vector<bool>& read,
            const std::vector<Output>& outs) {
  Hasher seed;
  seed.Str(entry.contains("op") ? entry["op"].get<std::string>() : entry["delegate"].get<std::string>());
  json in = json::array();
  for (size_t i = 0; i < args.size(); i++) {
    if (!read[i]) continue;
    const int32_t value = idx->Get(static_cast<flatbuffers::uoffset_t>(i));
    bool unwritten = false;
    const uint64_t h = HashArg(*args[i], value, &unwritten);
    seed.Pod<uint64_t>(i);
    seed.Pod<uint64_t>(h);
    json a = {{"arg", i}, {"value", value}, {"xxh64", Hex(h)}};
    if (unwritten) a["unwritten"] = true;
    in.push_back(a);
  }
  const uint64_t s = seed.Digest();
  json out = json::array();
  for (size_t k = 0; k < outs.size(); k++) {
    const uint64_t h = Clobber(outs[k], s ^ ((k + 1) * 0x9e3779b97f4a7c15ull));
    MarkWritten(outs[k].value);
    out.push_back({{"value", outs[k].value}, {"xxh64", Hex(h)}});
  }
  g_run.stub_ran = true;
  entry["in"] = in;
  entry["out"] = out;
  if (g_run.trace != nullptr) g_run.trace->push_back(entry);
}

json EntryHead() {
  json e = {{"call", g_run.calls++}};
  if (g_run.chain != 0) e["chain"] = g_run.chain;
  e["instruction"] = g_run.instr;
  return e;
}

// Values the program gives bytes before anything runs: inputs, constants, mutable state.
bool HasBytesAtStart(int32_t value) {
  const auto* plan = g_run.plan;
  if (plan->inputs() != nullptr) {
    for (int32_t in : *plan->inputs()) {
      if (in == value) return true;
    }
  }
  const auto* v = plan->values()->Get(static_cast<flatbuffers::uoffset_t>(value));
  if (v->val_type() != executorch_flatbuffer::KernelTypes::Tensor) return true;  // not a tensor: never an output here
  const auto* t = v->val_as_Tensor();
  if (t->data_buffer_idx() != 0) return true;
  return t->extra_tensor_info() != nullptr &&
         t->extra_tensor_info()->location() == executorch_flatbuffer::TensorDataLocation::EXTERNAL;
}

// Every value an instruction names (arguments and the items of list arguments).
void Named(const executorch_flatbuffer::ExecutionPlan* plan, const executorch_flatbuffer::Instruction* ins,
           std::set<int32_t>* out) {
  auto add_list = [&](const flatbuffers::Vector<int32_t>* args) {
    if (args == nullptr) return;
    for (int32_t a : *args) {
      out->insert(a);
      if (a < 0 || static_cast<uint32_t>(a) >= plan->values()->size()) continue;
      const auto* v = plan->values()->Get(static_cast<flatbuffers::uoffset_t>(a));
      if (v->val_type() == executorch_flatbuffer::KernelTypes::TensorList && v->val_as_TensorList()->items()) {
        for (int32_t x : *v->val_as_TensorList()->items()) out->insert(x);
      }
    }
  };
  switch (ins->instr_args_type()) {
    case executorch_flatbuffer::InstructionArguments::KernelCall:
      add_list(ins->instr_args_as_KernelCall()->args());
      break;
    case executorch_flatbuffer::InstructionArguments::DelegateCall:
      add_list(ins->instr_args_as_DelegateCall()->args());
      break;
    case executorch_flatbuffer::InstructionArguments::MoveCall:
      out->insert(ins->instr_args_as_MoveCall()->move_from());
      out->insert(ins->instr_args_as_MoveCall()->move_to());
      break;
    case executorch_flatbuffer::InstructionArguments::FreeCall:
      out->insert(static_cast<int32_t>(ins->instr_args_as_FreeCall()->value_index()));
      break;
    case executorch_flatbuffer::InstructionArguments::JumpFalseCall:
      out->insert(ins->instr_args_as_JumpFalseCall()->cond_value_index());
      break;
    default:
      break;
  }
}

// How many trailing arguments of a DelegateCall are its outputs, for a payload that does not say
// (kDelegateMagic). The emitter writes the delegate's inputs, then its flattened returns
// (`_emit_delegate`), and a return is a fresh value: nothing earlier in the chain names it and
// the program gives it no bytes (not a method input, constant or mutable state). So the outputs
// are the longest run of such tensors at the end of the arguments. For the real fixtures with
// delegates (stories260k_qnn's kv_forward and prefill_forward: 13 method inputs, then the 11
// method outputs) this gives 11, the method's outputs. A delegate reading a mutable buffer that
// has no initial state and that nothing before it names would be taken for an output too: none
// of the fixtures does.
size_t DelegateOutputs(const flatbuffers::Vector<int32_t>* idx) {
  std::set<int32_t> named;
  const auto* instrs = g_run.plan->chains()->Get(static_cast<flatbuffers::uoffset_t>(g_run.chain))->instructions();
  for (size_t i = 0; i < g_run.instr; i++)
    Named(g_run.plan, instrs->Get(static_cast<flatbuffers::uoffset_t>(i)), &named);
  size_t n = 0;
  for (size_t i = idx->size(); i-- > 0;) {
    const int32_t v = idx->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (v < 0 || static_cast<uint32_t>(v) >= g_run.plan->values()->size()) break;
    if (g_run.plan->values()->Get(static_cast<flatbuffers::uoffset_t>(v))->val_type() !=
        executorch_flatbuffer::KernelTypes::Tensor) {
      break;
    }
    if (named.count(v) != 0 || HasBytesAtStart(v)) break;
    n++;
  }
  return n;
}

std::string OperatorName(const executorch_flatbuffer::KernelCall* call) {
  const auto* ops = g_run.plan->operators();
  if (ops == nullptr || call->op_index() < 0 || static_cast<uint32_t>(call->op_index()) >= ops->size()) return "?";
  const auto* op = ops->Get(static_cast<flatbuffers::uoffset_t>(call->op_index()));
  std::string name = op->name() != nullptr ? op->name()->str() : "?";
  if (op->overload() != nullptr && op->overload()->size() > 0) name += "." + op->overload()->str();
  return name;
}

// Whether a mutable Bool/Bool-tensor cond value is true, as Method's parse_cond_value reads it.
// nullopt: the runtime will refuse it (and say so itself).
std::optional<bool> CondValue(const EValue& v) {
  if (v.isBool()) return v.toBool();
  if (!v.isTensor()) return std::nullopt;
  const Tensor t = v.toTensor();
  if (t.scalar_type() != ScalarType::Bool || t.const_data_ptr() == nullptr) return std::nullopt;
  const uint8_t* p = static_cast<const uint8_t*>(t.const_data_ptr());
  for (ssize_t i = 0; i < t.numel(); i++) {
    if (p[i] == 0) return false;
  }
  return true;
}

}  // namespace

int64_t DelegateOutputsFromPayload(const void* data, size_t size) {
  const size_t m = sizeof kDelegateMagic - 1;
  if (data == nullptr || size <= m || std::memcmp(data, kDelegateMagic, m) != 0) return -1;
  const char* p = static_cast<const char*>(data);
  int64_t n = 0;
  size_t i = m;
  for (; i < size && p[i] >= '0' && p[i] <= '9' && n < (1 << 20); i++) n = n * 10 + (p[i] - '0');
  if (i == m || i >= size || p[i] != '\n') return -1;
  return n;
}

void StubKernel(KernelRuntimeContext& ctx, Span<EValue*> args) {
  const auto* idx = CurrentArgs(executorch_flatbuffer::InstructionArguments::KernelCall, args);
  if (idx == nullptr) return ctx.fail(Error::Internal);
  const auto* ins = g_run.plan->chains()
                        ->Get(static_cast<flatbuffers::uoffset_t>(g_run.chain))
                        ->instructions()
                        ->Get(static_cast<flatbuffers::uoffset_t>(g_run.instr));
  const std::string name = OperatorName(ins->instr_args_as_KernelCall());
  const size_t n = args.size();
  std::vector<bool> read(n, true);
  std::vector<Output> outs;
  if (n > 0) {
    // The return value, appended last by the emitter.
    EValue& ret = *args[n - 1];
    const int32_t ret_idx = idx->Get(static_cast<flatbuffers::uoffset_t>(n - 1));
    if (ret.isTensor() || ret.isInt() || ret.isDouble() || ret.isBool()) {
      outs.push_back({ret_idx, &ret});
      read[n - 1] = false;
    } else if (ret.isTensorList()) {
      const auto* list = g_run.plan->values()->Get(static_cast<flatbuffers::uoffset_t>(ret_idx))->val_as_TensorList();
      if (list != nullptr && list->items() != nullptr) {
        for (int32_t item : *list->items()) {
          if (item >= 0 && static_cast<uint32_t>(item) < g_run.plan->values()->size() && g_run.base != nullptr) {
            outs.push_back({item, const_cast<EValue*>(g_run.base + item)});
          }
        }
      }
      read[n - 1] = false;
    }
    std::set<const TensorImpl*> out_impls;
    for (const Output& o : outs) {
      if (const TensorImpl* impl = Impl(*o.slot)) out_impls.insert(impl);
    }
    // Earlier arguments naming an output are its out kwargs: written, not read, except the
    // `self` of an in-place operator (aten::foo_), which it reads and writes.
    const std::string base_name = name.substr(0, name.find('.'));
    const bool in_place = !base_name.empty() && base_name.back() == '_';
    for (size_t i = 0; i + 1 < n; i++) {
      if (i == 0 && in_place) continue;
      const EValue& a = *args[i];
      if (a.isTensor() && out_impls.count(Impl(a)) != 0) {
        read[i] = false;
      } else if (a.isTensorList() && a.tryToTensorList().ok() && a.toTensorList().size() > 0) {
        bool all = true;
        for (const Tensor& t : a.toTensorList()) all = all && out_impls.count(t.unsafeGetTensorImpl()) != 0;
        if (all) read[i] = false;
      }
    }
  }
  json e = EntryHead();
  e["op"] = name;
  Record(std::move(e), args, idx, read, outs);
}

Error StubDelegate(const DelegateInfo& info, Span<EValue*> args) {
  const auto* idx = CurrentArgs(executorch_flatbuffer::InstructionArguments::DelegateCall, args);
  if (idx == nullptr) return Error::Internal;
  const size_t n = args.size();
  const size_t n_out = info.outputs >= 0 ? static_cast<size_t>(info.outputs) : DelegateOutputs(idx);
  if (n_out > n) {
    if (g_run.error.empty()) {
      g_run.error = "delegate " + info.backend + " declares " + std::to_string(n_out) + " outputs but has " +
                    std::to_string(n) + " arguments";
    }
    return Error::Internal;
  }
  std::vector<bool> read(n, true);
  std::vector<Output> outs;
  for (size_t i = n - n_out; i < n; i++) {
    read[i] = false;
    outs.push_back({idx->Get(static_cast<flatbuffers::uoffset_t>(i)), args[i]});
  }
  json e = EntryHead();
  e["delegate"] = info.backend;
  Record(std::move(e), args, idx, read, outs);
  return Error::Ok;
}

json SetInputsAndOutputs(Method& method, Storage* storage, Error* status_error) {
  json inputs = json::array();
  const auto meta = method.method_meta();
  for (size_t i = 0; i < method.inputs_size(); i++) {
    auto tag = meta.input_tag(i);
    if (!tag.ok() || tag.get() != Tag::Tensor) continue;
    auto info = meta.input_tensor_meta(i);
    if (!info.ok()) {
      *status_error = info.error();
      continue;
    }
    const auto& t = info.get();
    const size_t dim = t.sizes().size();
    storage->sizes.emplace_back(t.sizes().begin(), t.sizes().end());
    storage->dim_orders.emplace_back(t.dim_order().begin(), t.dim_order().end());
    storage->strides.emplace_back(dim);
    auto& sizes = storage->sizes.back();
    auto& order = storage->dim_orders.back();
    auto& strides = storage->strides.back();
    executorch::aten::StridesType stride = 1;
    for (size_t k = dim; k-- > 0;) {  // contiguous in dim order
      const size_t d = order.size() == dim ? order[k] : k;
      if (d < dim) {
        strides[d] = stride;
        stride *= sizes[d];
      }
    }
    storage->bytes.emplace_back(t.nbytes());
    auto& bytes = storage->bytes.back();
    const ScalarType dtype = t.scalar_type();
    if (dtype == ScalarType::Float) {
      float* p = reinterpret_cast<float*>(bytes.data());
      for (size_t k = 0; k < bytes.size() / sizeof(float); k++) {
        p[k] = static_cast<float>(static_cast<int>((k * 7 + i * 3) % 11) - 5) / 4.0f;
      }
    } else if (dtype == ScalarType::Bool) {
      for (size_t k = 0; k < bytes.size(); k++) bytes[k] = static_cast<uint8_t>((k + i) % 2);
    } else {
      FillBytes(bytes.data(), bytes.size(), 0x5eed0000u + i, false);
    }
    storage->impls.emplace_back(dtype, static_cast<ssize_t>(dim), sizes.data(), bytes.data(),
                                order.size() == dim ? order.data() : nullptr, strides.data());
    Error e = method.set_input(EValue(Tensor(&storage->impls.back())), i);
    if (e != Error::Ok) *status_error = e;
    inputs.push_back(
        {{"index", i},
         {"xxh64", Hex(XXH64(bytes.empty() ? static_cast<const void*>("") : bytes.data(), bytes.size(), 0))}});
  }
  // Outputs the plan does not place: memory of ours, as a caller gives it.
  for (size_t i = 0; i < method.outputs_size(); i++) {
    const EValue& v = method.get_output(i);
    if (!v.isTensor() || v.toTensor().const_data_ptr() != nullptr) continue;
    storage->bytes.emplace_back(v.toTensor().nbytes());
    auto& bytes = storage->bytes.back();
    Error e = method.set_output_data_ptr(bytes.data(), bytes.size(), i);
    if (e != Error::Ok) *status_error = e;
  }
  return inputs;
}

// Which planned tensors have bytes before the first instruction, and the alias table.
void InitWritten(const executorch_flatbuffer::ExecutionPlan* plan, const std::set<uint32_t>& shared_buffers) {
  const size_t n = plan->values() != nullptr ? plan->values()->size() : 0;
  g_run.written.assign(n, 0);
  g_run.aliases.assign(n, {});
  if (plan->inputs() != nullptr) {
    for (int32_t v : *plan->inputs()) MarkWritten(v);
  }
  std::map<std::tuple<uint32_t, uint64_t, uint64_t>, std::vector<int32_t>> places;
  for (size_t v = 0; v < n; v++) {
    const auto* t = PlannedTensor(static_cast<int32_t>(v));
    if (t == nullptr) continue;
    const auto* a = t->allocation_info();
    const bool external = t->extra_tensor_info() != nullptr &&
                          t->extra_tensor_info()->location() == executorch_flatbuffer::TensorDataLocation::EXTERNAL;
    if (t->data_buffer_idx() != 0 || external || shared_buffers.count(a->memory_id()) != 0) {
      g_run.written[v] = 1;
    }
    uint64_t nbytes = executorch::runtime::elementSize(static_cast<ScalarType>(t->scalar_type()));
    if (t->sizes() != nullptr) {
      for (int32_t d : *t->sizes()) nbytes *= static_cast<uint64_t>(d < 0 ? 0 : d);
    }
    if (nbytes == 0) continue;
    const uint64_t offset = a->memory_offset_low() | (uint64_t{a->memory_offset_high()} << 32);
    places[{a->memory_id(), offset, nbytes}].push_back(static_cast<int32_t>(v));
  }
  for (const auto& [place, members] : places) {
    for (int32_t v : members) {
      for (int32_t w : members) {
        if (w != v) g_run.aliases[static_cast<size_t>(v)].push_back(w);
      }
    }
  }
}

// After an instruction without a stub: a prim op's tensor arguments hold what it wrote (et_view's
// out, et_copy_index's copy_to); a MoveCall's target is its source's tensor.
void AfterStep(const executorch_flatbuffer::Instruction* ins) {
  if (ins == nullptr) return;
  if (ins->instr_args_type() == executorch_flatbuffer::InstructionArguments::KernelCall && !g_run.stub_ran) {
    const auto* args = ins->instr_args_as_KernelCall()->args();
    if (args == nullptr) return;
    for (int32_t v : *args) {
      MarkWritten(v);
      for (int32_t x : ListItems(v)) MarkWritten(x);
    }
  } else if (ins->instr_args_type() == executorch_flatbuffer::InstructionArguments::MoveCall) {
    const auto* mv = ins->instr_args_as_MoveCall();
    if (Defined(mv->move_from())) MarkWritten(mv->move_to());
  }
}

json ExecuteTraced(Method& method, const executorch_flatbuffer::ExecutionPlan* plan, size_t max_steps,
                   const std::set<uint32_t>& shared_buffers) {
  json trace = json::array();
  g_run = RunState{};
  g_run.plan = plan;
  g_run.trace = &trace;
  InitWritten(plan, shared_buffers);
  // &values_[0]: the output (or input) EValue minus its value index.
  if (method.outputs_size() > 0 && plan->outputs() != nullptr && plan->outputs()->size() > 0) {
    g_run.base = &method.get_output(0) - plan->outputs()->Get(0);
  } else if (method.inputs_size() > 0 && plan->inputs() != nullptr && plan->inputs()->size() > 0) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    g_run.base = &method.mutable_input(0) - plan->inputs()->Get(0);
#pragma GCC diagnostic pop
  }
  const size_t n_chains = plan->chains() != nullptr ? plan->chains()->size() : 0;
  size_t chain = 0, ip = 0, steps = 0;
  Error status = Error::Ok;
  std::string limit;
  for (;;) {
    if (steps >= max_steps) {
      limit = "stopped after " + std::to_string(max_steps) + " instructions (a loop that does not end?)";
      break;
    }
    size_t n = 0, next = ip + 1;
    const executorch_flatbuffer::Instruction* ins = nullptr;
    if (chain < n_chains) {
      const auto* instrs = plan->chains()->Get(static_cast<flatbuffers::uoffset_t>(chain))->instructions();
      n = instrs != nullptr ? instrs->size() : 0;
      if (ip < n) {
        ins = instrs->Get(static_cast<flatbuffers::uoffset_t>(ip));
        if (ins->instr_args_type() == executorch_flatbuffer::InstructionArguments::JumpFalseCall) {
          const auto* jf = ins->instr_args_as_JumpFalseCall();
          if (g_run.base == nullptr) {
            if (g_run.error.empty()) g_run.error = "a JumpFalseCall in a method without inputs or outputs";
          } else {
            std::optional<bool> cond = CondValue(g_run.base[jf->cond_value_index()]);
            if (cond.has_value() && !*cond) next = static_cast<size_t>(jf->destination_instruction());
          }
        }
      }
    }
    g_run.chain = chain;
    g_run.instr = ip;
    g_run.stub_ran = false;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    Error e = method.step();
#pragma GCC diagnostic pop
    if (e == Error::EndOfMethod) break;
    steps++;
    if (e != Error::Ok) {
      status = e;
      break;
    }
    AfterStep(ins);
    if (n == 0) {  // an empty chain: step() moved on to the next
      chain++;
      ip = 0;
      continue;
    }
    ip = next;
    if (ip == n) {
      chain++;
      ip = 0;
    }
  }
  g_run.trace = nullptr;
  json out = {{"status", {{"code", static_cast<uint32_t>(status)}, {"name", executorch::runtime::to_string(status)}}},
              {"steps", steps}};
  if (!limit.empty()) out["limit"] = limit;
  if (!g_run.error.empty()) out["error"] = g_run.error;
  out["trace"] = std::move(trace);
  json outs = json::array();
  for (size_t i = 0; i < method.outputs_size(); i++) {
    const EValue& v = method.get_output(i);
    json o = {{"tag", executorch::runtime::tag_to_string(v.tag)}, {"xxh64", Hex(HashValue(v))}};
    if (v.isTensor()) {
      o["dtype"] = static_cast<int>(v.toTensor().scalar_type());
      json sizes = json::array();
      for (auto s : v.toTensor().sizes()) sizes.push_back(s);
      o["sizes"] = sizes;
    }
    outs.push_back(o);
  }
  out["outputs"] = outs;
  return out;
}

}  // namespace clobber
