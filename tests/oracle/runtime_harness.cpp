// ExecuTorch's runtime as a test oracle: loads a .pte (and .ptd files) with the unmodified
// ExecuTorch runtime and prints, as one JSON object on stdout, everything the runtime saw.
//
//   et_runtime_oracle (FILE.pte | --batch LIST) [--ptd F.ptd]... [--run | --clobber [--share-buffer ID]...
//                     [--max-steps N]]
//
// Exit 0: everything loaded (and, with --run or --clobber, executed); 1: the runtime refused
// something (the JSON says what); 2: usage. Anything else is a crash.
//
// Stub kernels are registered for every operator the program names (so load_method resolves
// them) and one stub BackendInterface for every delegate id, which records what init() was
// given. With --run, the few real kernels below replace the stubs and every method is executed
// on deterministic inputs. With --clobber (clobber.h), every operator without a prim-op kernel
// and every delegate gets a clobbering stub, all methods are loaded, then each is executed in
// program order and traced; --share-buffer ID gives every method one and the same planned
// buffer ID (memory_id), as a caller does for mutable state shared between methods;
// --max-steps stops a run after N instructions (default 1,000,000). --batch LIST does the same
// for every .pte named in LIST (one a line) in one process, one JSON line each.
#include <executorch/extension/data_loader/file_data_loader.h>
#include <executorch/extension/flat_tensor/flat_tensor_data_map.h>
#include <executorch/extension/named_data_map/merged_data_map.h>
#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/core/memory_allocator.h>
#include <executorch/runtime/core/named_data_map.h>
#include <executorch/runtime/core/tag.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/merged_data_map.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/method_meta.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/executor/tensor_parser.h>
#include <executorch/runtime/kernel/kernel_runtime_context.h>
#include <executorch/runtime/kernel/operator_registry.h>
#include <executorch/runtime/platform/runtime.h>
#include <executorch/schema/program_generated.h>
#include <sys/mman.h>
#include <xxhash.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "clobber.h"

namespace {

using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::extension::FileDataLoader;
using executorch::extension::FlatTensorDataMap;
using executorch::runtime::BackendInitContext;
using executorch::runtime::BackendInterface;
using executorch::runtime::CompileSpec;
using executorch::runtime::DelegateHandle;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::HierarchicalAllocator;
using executorch::runtime::Kernel;
using executorch::runtime::KernelRuntimeContext;
using executorch::runtime::MemoryAllocator;
using executorch::runtime::MemoryManager;
using executorch::runtime::Method;
using executorch::runtime::MethodMeta;
using executorch::runtime::NamedDataMap;
using executorch::runtime::Program;
using executorch::runtime::Result;
using executorch::runtime::Span;
using executorch::runtime::Tag;
using json = nlohmann::ordered_json;

std::string Hash(const void* data, size_t size) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, static_cast<uint64_t>(XXH64(size == 0 ? "" : data, size, 0)));
  return buf;
}

json Status(Error e) { return json{{"code", static_cast<uint32_t>(e)}, {"name", executorch::runtime::to_string(e)}}; }

// ---- Stub backend: records every init(); in --clobber mode it also computes (clobber.h).
json g_delegate_inits = json::array();
bool g_clobber = false;
std::deque<clobber::DelegateInfo> g_delegate_infos;  // the handles init() returns in --clobber mode

class StubBackend final : public BackendInterface {
 public:
  explicit StubBackend(std::string id) : id_(std::move(id)) {}
  const char* name() const { return id_.c_str(); }
  bool is_available() const override { return true; }
  Result<DelegateHandle*> init(BackendInitContext& /*context*/, FreeableBuffer* processed,
                               executorch::runtime::ArrayRef<CompileSpec> specs) const override {
    json specs_json = json::array();
    for (const CompileSpec& s : specs) {
      specs_json.push_back(
          {{"key", s.key ? s.key : ""}, {"size", s.value.nbytes}, {"xxh64", Hash(s.value.buffer, s.value.nbytes)}});
    }
    g_delegate_inits.push_back({{"backend", id_},
                                {"processed_size", processed->size()},
                                {"processed_xxh64", Hash(processed->data(), processed->size())},
                                {"compile_specs", specs_json}});
    if (g_clobber) {
      g_delegate_infos.push_back({id_, clobber::DelegateOutputsFromPayload(processed->data(), processed->size())});
      return &g_delegate_infos.back();
    }
    return const_cast<char*>(id_.c_str());  // any non-null handle
  }
  Error execute(executorch::runtime::BackendExecutionContext& /*context*/, DelegateHandle* handle,
                Span<EValue*> args) const override {
    if (g_clobber) return clobber::StubDelegate(*static_cast<const clobber::DelegateInfo*>(handle), args);
    return Error::NotSupported;  // a stub: it cannot compute
  }

 private:
  std::string id_;
};

// ---- Kernels. Stubs fail when called; the real ones cover what the --run programs use.
void StubKernel(KernelRuntimeContext& ctx, Span<EValue*> /*args*/) { ctx.fail(Error::NotImplemented); }

bool IsFloatTensor(const EValue* v) { return v->isTensor() && v->toTensor().scalar_type() == ScalarType::Float; }

double ScalarOf(const EValue* v) {
  if (v->isInt()) return static_cast<double>(v->toInt());
  if (v->isDouble()) return v->toDouble();
  return 1.0;
}

// out = a op b (same shapes, or b broadcast from one element or along the last dimension).
template <typename Op>
void Elementwise(KernelRuntimeContext& ctx, const EValue* a, const EValue* b, EValue* out, Op op) {
  if (!IsFloatTensor(a) || !IsFloatTensor(out) || (!IsFloatTensor(b) && !b->isScalar())) {
    return ctx.fail(Error::NotImplemented);
  }
  const Tensor ta = a->toTensor();
  Tensor to = out->toTensor();
  if (ta.numel() != to.numel()) return ctx.fail(Error::InvalidArgument);
  const float* pa = ta.const_data_ptr<float>();
  float* po = to.mutable_data_ptr<float>();
  if (b->isScalar()) {
    const float s = static_cast<float>(ScalarOf(b));
    for (ssize_t i = 0; i < ta.numel(); i++) po[i] = op(pa[i], s);
    return;
  }
  const Tensor tb = b->toTensor();
  const float* pb = tb.const_data_ptr<float>();
  if (tb.numel() == 0 || ta.numel() % tb.numel() != 0) return ctx.fail(Error::InvalidArgument);
  for (ssize_t i = 0; i < ta.numel(); i++) po[i] = op(pa[i], pb[i % tb.numel()]);
}

// aten::add.out(self, other, *, alpha, out)
void AddOut(KernelRuntimeContext& ctx, Span<EValue*> args) {
  if (args.size() < 4) return ctx.fail(Error::InvalidArgument);
  const float alpha = static_cast<float>(ScalarOf(args[2]));
  Elementwise(ctx, args[0], args[1], args[3], [alpha](float x, float y) { return x + alpha * y; });
}

// aten::mul.out(self, other, *, out)
void MulOut(KernelRuntimeContext& ctx, Span<EValue*> args) {
  if (args.size() < 3) return ctx.fail(Error::InvalidArgument);
  Elementwise(ctx, args[0], args[1], args[2], [](float x, float y) { return x * y; });
}

// aten::permute_copy.out(self, dims, *, out) for 2-D float tensors.
void PermuteCopyOut(KernelRuntimeContext& ctx, Span<EValue*> args) {
  if (args.size() < 3 || !IsFloatTensor(args[0]) || !IsFloatTensor(args[2])) {
    return ctx.fail(Error::NotImplemented);
  }
  const Tensor in = args[0]->toTensor();
  Tensor out = args[2]->toTensor();
  auto dims = args[1]->toIntList();
  if (in.dim() != 2 || dims.size() != 2 || out.numel() != in.numel()) {
    return ctx.fail(Error::NotImplemented);
  }
  const float* pi = in.const_data_ptr<float>();
  float* po = out.mutable_data_ptr<float>();
  const ssize_t r = in.size(0), c = in.size(1);
  const bool transpose = dims[0] == 1;
  for (ssize_t i = 0; i < r; i++) {
    for (ssize_t j = 0; j < c; j++) {
      po[transpose ? j * r + i : i * c + j] = pi[i * c + j];
    }
  }
}

// aten::addmm.out(self, mat1, mat2, *, beta, alpha, out): out = beta*self + alpha*(mat1 @ mat2),
// self broadcast along rows.
void AddmmOut(KernelRuntimeContext& ctx, Span<EValue*> args) {
  if (args.size() < 6 || !IsFloatTensor(args[0]) || !IsFloatTensor(args[1]) || !IsFloatTensor(args[2]) ||
      !IsFloatTensor(args[5])) {
    return ctx.fail(Error::NotImplemented);
  }
  const Tensor bias = args[0]->toTensor(), m1 = args[1]->toTensor(), m2 = args[2]->toTensor();
  Tensor out = args[5]->toTensor();
  const float beta = static_cast<float>(ScalarOf(args[3]));
  const float alpha = static_cast<float>(ScalarOf(args[4]));
  if (m1.dim() != 2 || m2.dim() != 2 || m1.size(1) != m2.size(0) || out.numel() != m1.size(0) * m2.size(1) ||
      bias.numel() == 0 || out.numel() % bias.numel() != 0) {
    return ctx.fail(Error::InvalidArgument);
  }
  const ssize_t n = m1.size(0), k = m1.size(1), m = m2.size(1);
  const float* a = m1.const_data_ptr<float>();
  const float* b = m2.const_data_ptr<float>();
  const float* pb = bias.const_data_ptr<float>();
  float* po = out.mutable_data_ptr<float>();
  for (ssize_t i = 0; i < n; i++) {
    for (ssize_t j = 0; j < m; j++) {
      float acc = 0;
      for (ssize_t x = 0; x < k; x++) acc += a[i * k + x] * b[x * m + j];
      po[i * m + j] = beta * pb[(i * m + j) % bias.numel()] + alpha * acc;
    }
  }
}

struct RealKernel {
  const char* name;
  executorch::runtime::OpFunction fn;
};
constexpr RealKernel kRealKernels[] = {
    {"aten::add.out", AddOut},
    {"aten::mul.out", MulOut},
    {"aten::permute_copy.out", PermuteCopyOut},
    {"aten::addmm.out", AddmmOut},
};

std::deque<std::string> g_names;  // registered kernel / backend names must outlive the registry
std::deque<StubBackend> g_backends;

// Whether a kernel of this name is registered (the registry's own lookup logs every miss).
bool Registered(const std::string& name) {
  for (const Kernel& k : executorch::runtime::get_registered_kernels()) {
    if (name == k.name_) return true;
  }
  return false;
}

// Registers a kernel for every operator and a stub backend for every delegate id in the program.
json RegisterOperatorsAndBackends(const executorch_flatbuffer::Program* fb, bool run) {
  std::set<std::string> ops, backends;
  if (fb->execution_plan() != nullptr) {
    for (const auto* plan : *fb->execution_plan()) {
      if (plan == nullptr) continue;
      if (plan->operators() != nullptr) {
        for (const auto* op : *plan->operators()) {
          if (op == nullptr || op->name() == nullptr) continue;
          std::string name = op->name()->str();
          if (op->overload() != nullptr && op->overload()->size() > 0) {
            name += "." + op->overload()->str();
          }
          ops.insert(name);
        }
      }
      if (plan->delegates() != nullptr) {
        for (const auto* d : *plan->delegates()) {
          if (d != nullptr && d->id() != nullptr) backends.insert(d->id()->str());
        }
      }
    }
  }
  json registered = {{"operators", json::array()}, {"backends", json::array()}};
  static std::map<std::string, std::string> ours;  // kernels this process registered (--batch), and their kind
  static std::set<std::string> our_backends;
  for (const std::string& name : ops) {
    if (auto it = ours.find(name); it != ours.end()) {
      registered["operators"].push_back({{"name", name}, {"kernel", it->second}});
      continue;
    }
    if (Registered(name)) {
      registered["operators"].push_back({{"name", name}, {"kernel", "oracle"}});  // prim ops
      continue;
    }
    executorch::runtime::OpFunction fn = g_clobber ? clobber::StubKernel : StubKernel;
    const char* kind = g_clobber ? "clobber" : "stub";
    if (run && !g_clobber) {
      for (const RealKernel& k : kRealKernels) {
        if (name == k.name) {
          fn = k.fn;
          kind = "harness";
        }
      }
    }
    g_names.push_back(name);
    if (executorch::runtime::register_kernel(Kernel(g_names.back().c_str(), fn)) != Error::Ok) {
      std::fprintf(stderr, "cannot register kernel %s\n", name.c_str());
      std::exit(3);
    }
    registered["operators"].push_back({{"name", name}, {"kernel", kind}});
    ours[name] = kind;
  }
  for (const std::string& id : backends) {
    registered["backends"].push_back(id);
    if (!our_backends.insert(id).second) continue;
    g_backends.emplace_back(id);
    if (executorch::runtime::register_backend({g_backends.back().name(), &g_backends.back()}) != Error::Ok) {
      std::fprintf(stderr, "cannot register backend %s\n", id.c_str());
      std::exit(3);
    }
  }
  return registered;
}

json Keys(const NamedDataMap& map) {
  json keys = json::array();
  auto n = map.get_num_keys();
  if (!n.ok()) return {{"status", Status(n.error())}};
  for (uint32_t i = 0; i < n.get(); i++) {
    auto k = map.get_key(i);
    keys.push_back(k.ok() ? json(k.get()) : json(Status(k.error())));
  }
  return keys;
}

json TensorInfoJson(const executorch::runtime::TensorInfo& t) {
  json sizes = json::array();
  for (int32_t s : t.sizes()) sizes.push_back(s);
  json dim_order = json::array();
  for (uint8_t d : t.dim_order()) dim_order.push_back(d);
  return {{"dtype", static_cast<int>(t.scalar_type())},
          {"sizes", sizes},
          {"dim_order", dim_order},
          {"nbytes", t.nbytes()},
          {"memory_planned", t.is_memory_planned()}};
}

json MetaJson(const MethodMeta& meta) {
  json j;
  auto io = [&](size_t n, auto tag_of, auto tensor_of) {
    json list = json::array();
    for (size_t i = 0; i < n; i++) {
      json e;
      Result<Tag> tag = tag_of(i);
      if (!tag.ok()) {
        e["status"] = Status(tag.error());
      } else {
        e["tag"] = executorch::runtime::tag_to_string(tag.get());
        if (tag.get() == Tag::Tensor) {
          auto t = tensor_of(i);
          if (t.ok()) {
            e.update(TensorInfoJson(t.get()));
          } else {
            e["status"] = Status(t.error());
          }
        }
      }
      list.push_back(e);
    }
    return list;
  };
  j["inputs"] = io(
      meta.num_inputs(), [&](size_t i) { return meta.input_tag(i); },
      [&](size_t i) { return meta.input_tensor_meta(i); });
  j["outputs"] = io(
      meta.num_outputs(), [&](size_t i) { return meta.output_tag(i); },
      [&](size_t i) { return meta.output_tensor_meta(i); });
  json sizes = json::array();
  for (size_t i = 0; i < meta.num_memory_planned_buffers(); i++) {
    auto s = meta.memory_planned_buffer_size(i);
    sizes.push_back(s.ok() ? json(s.get()) : json(Status(s.error())));
  }
  j["memory_planned_buffer_sizes"] = sizes;
  json backends = json::array();
  for (size_t i = 0; i < meta.num_backends(); i++) {
    auto b = meta.get_backend_name(i);
    backends.push_back(b.ok() ? json(b.get()) : json(Status(b.error())));
  }
  j["backends"] = backends;
  j["num_instructions"] = meta.num_instructions();
  return j;
}

// A memory pool for the runtime's allocators (not touched until used). Mapped,
// not calloc'ed: under ASan a calloc of this size poisons and later quarantines
// 10 MiB of shadow per run, which made each oracle run 0.18 s instead of 0.01 s
// (the mutation test runs it thousands of times). A read or write past the end
// still faults: the pool ends on a page boundary.
struct Pool {
  explicit Pool(size_t n) : size(n) {
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    data = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
  }
  ~Pool() {
    if (data != nullptr) ::munmap(data, size);
  }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  uint8_t* data;
  size_t size;
};
constexpr size_t kMethodPool = 64u << 20;
constexpr size_t kTempPool = 16u << 20;

// Every constant tensor of a plan, resolved through the runtime's own tensor parser: inline and
// segment constants through Program::get_constant_buffer_data, external ones through the named
// data map (layout validated, then get_data), as Method::parse_external_constants does.
json Constants(const Program& program, const executorch_flatbuffer::ExecutionPlan* plan, const NamedDataMap* data_map,
               bool* all_ok) {
  json list = json::array();
  if (plan->values() == nullptr) return list;
  Pool pool(kMethodPool);
  MemoryAllocator allocator(static_cast<uint32_t>(pool.size), pool.data);
  MemoryManager mm(&allocator);
  for (uint32_t i = 0; i < plan->values()->size(); i++) {
    const auto* v = plan->values()->Get(i);
    if (v == nullptr || v->val_type() != executorch_flatbuffer::KernelTypes::Tensor) continue;
    const auto* t = static_cast<const executorch_flatbuffer::Tensor*>(v->val());
    if (t == nullptr || t->allocation_info() != nullptr) continue;
    const bool external = t->extra_tensor_info() != nullptr &&
                          t->extra_tensor_info()->location() == executorch_flatbuffer::TensorDataLocation::EXTERNAL;
    if (!external && t->data_buffer_idx() == 0) continue;
    json e = {{"value_index", i}};
    executorch::runtime::deserialization::NamedData named[1] = {};  // destroyed at scope end
    size_t n_named = 0;
    Error err = Error::Ok;
    if (external) {
      const char* key = t->extra_tensor_info()->fully_qualified_name() != nullptr
                            ? t->extra_tensor_info()->fully_qualified_name()->c_str()
                            : nullptr;
      e["source"] = "external";
      e["key"] = key ? key : "";
      if (key == nullptr) {
        err = Error::InvalidExternalData;
      } else if (data_map == nullptr) {
        err = Error::InvalidState;
      } else {
        auto layout = data_map->get_tensor_layout(key);
        if (!layout.ok()) {
          err = layout.error();
        } else if ((err = executorch::runtime::deserialization::validateTensorLayout(t, layout.get())) == Error::Ok) {
          auto buffer = data_map->get_data(key);
          if (!buffer.ok()) {
            err = buffer.error();
          } else {
            named[0].key = key;
            new (&named[0].buffer) FreeableBuffer(std::move(buffer.get()));
            n_named = 1;
          }
        }
      }
    } else {
      e["source"] = "program";
      e["buffer_index"] = t->data_buffer_idx();
    }
    if (err == Error::Ok) {
      auto tensor = executorch::runtime::deserialization::parseTensor(
          &program, &mm, t, data_map, Span<executorch::runtime::deserialization::NamedData>(named, n_named));
      if (!tensor.ok()) {
        err = tensor.error();
      } else {
        e["dtype"] = static_cast<int>(tensor.get().scalar_type());
        e["nbytes"] = tensor.get().nbytes();
        e["xxh64"] = Hash(tensor.get().const_data_ptr(), tensor.get().nbytes());
        if (tensor.get().scalar_type() == ScalarType::Float && tensor.get().numel() <= 64) {
          json vals = json::array();
          for (ssize_t k = 0; k < tensor.get().numel(); k++) vals.push_back(tensor.get().const_data_ptr<float>()[k]);
          e["values"] = vals;  // small float constants, for tests that compute expected outputs
        }
      }
    }
    e["status"] = Status(err);
    if (err != Error::Ok) *all_ok = false;
    list.push_back(e);
    allocator.reset();
  }
  return list;
}

// Mutable tensors with an initial state (from a segment or a .ptd), hashed where load_method put
// them: in the memory-planned buffers.
json PlannedInitialState(const executorch_flatbuffer::ExecutionPlan* plan, const std::vector<Span<uint8_t>>& buffers) {
  json list = json::array();
  if (plan->values() == nullptr) return list;
  for (uint32_t i = 0; i < plan->values()->size(); i++) {
    const auto* v = plan->values()->Get(i);
    if (v == nullptr || v->val_type() != executorch_flatbuffer::KernelTypes::Tensor) continue;
    const auto* t = static_cast<const executorch_flatbuffer::Tensor*>(v->val());
    if (t == nullptr || t->allocation_info() == nullptr) continue;
    const bool external = t->extra_tensor_info() != nullptr &&
                          t->extra_tensor_info()->location() == executorch_flatbuffer::TensorDataLocation::EXTERNAL;
    if (!external && t->data_buffer_idx() == 0) continue;
    size_t nbytes = executorch::runtime::elementSize(static_cast<ScalarType>(t->scalar_type()));
    if (t->sizes() != nullptr) {
      for (int32_t s : *t->sizes()) nbytes *= static_cast<size_t>(s < 0 ? 0 : s);
    }
    const auto* a = t->allocation_info();
    const size_t offset = a->memory_offset_low() | (size_t{a->memory_offset_high()} << 32);
    const size_t id = a->memory_id();
    json e = {{"value_index", i}, {"nbytes", nbytes}};
    if (external) e["key"] = t->extra_tensor_info()->fully_qualified_name()->str();
    if (id >= 1 && id - 1 < buffers.size() && offset <= buffers[id - 1].size() &&
        nbytes <= buffers[id - 1].size() - offset) {
      e["xxh64"] = Hash(buffers[id - 1].data() + offset, nbytes);
    }
    list.push_back(e);
  }
  return list;
}

// Deterministic float input i of a method: element k is ((k * 7 + i * 3) % 11 - 5) / 4.
void FillInputs(Method& method, json* inputs) {
  std::vector<EValue> values(method.inputs_size());
  if (method.get_inputs(values.data(), values.size()) != Error::Ok) return;
  for (size_t i = 0; i < values.size(); i++) {
    if (!values[i].isTensor()) continue;
    Tensor t = values[i].toTensor();
    if (t.scalar_type() != ScalarType::Float) continue;
    float* p = t.mutable_data_ptr<float>();
    for (ssize_t k = 0; k < t.numel(); k++) {
      p[k] = static_cast<float>(static_cast<int>((k * 7 + i * 3) % 11) - 5) / 4.0f;
    }
    inputs->push_back({{"index", i}, {"xxh64", Hash(p, t.nbytes())}});
  }
}

json OutputsJson(Method& method) {
  json outs = json::array();
  for (size_t i = 0; i < method.outputs_size(); i++) {
    const EValue& v = method.get_output(i);
    json e = {{"tag", executorch::runtime::tag_to_string(v.tag)}};
    if (v.isTensor()) {
      const Tensor t = v.toTensor();
      e["dtype"] = static_cast<int>(t.scalar_type());
      json sizes = json::array();
      for (auto s : t.sizes()) sizes.push_back(s);
      e["sizes"] = sizes;
      e["xxh64"] = Hash(t.const_data_ptr(), t.nbytes());
      if (t.scalar_type() == ScalarType::Float && t.numel() <= 64) {
        json vals = json::array();
        for (ssize_t k = 0; k < t.numel(); k++) vals.push_back(t.const_data_ptr<float>()[k]);
        e["values"] = vals;
      }
    } else if (v.isInt()) {
      e["value"] = v.toInt();
    } else if (v.isDouble()) {
      e["value"] = v.toDouble();
    } else if (v.isBool()) {
      e["value"] = v.toBool();
    }
    outs.push_back(e);
  }
  return outs;
}

int Usage() {
  std::fprintf(stderr,
               "usage: et_runtime_oracle (FILE.pte | --batch LIST) [--ptd F.ptd]... [--run | --clobber "
               "[--share-buffer ID]... [--max-steps N]]\n");
  return 2;
}

// One loaded method and the memory it runs in. Kept alive until every method has run in
// --clobber mode (methods may share planned buffers); destroyed after its own run otherwise.
struct Session {
  std::vector<std::vector<uint8_t>> own;  // planned buffers of this method alone
  std::vector<Span<uint8_t>> spans;       // every planned buffer (own or shared), by memory_id - 1
  std::unique_ptr<HierarchicalAllocator> planned;
  Pool method_pool{kMethodPool}, temp_pool{kTempPool};
  MemoryAllocator method_allocator{static_cast<uint32_t>(kMethodPool), method_pool.data};
  MemoryAllocator temp_allocator{static_cast<uint32_t>(kTempPool), temp_pool.data};
  std::unique_ptr<MemoryManager> mm;
  clobber::Storage io;  // inputs and unplanned outputs in --clobber mode (outlives the method)
  std::optional<Method> method;
  const executorch_flatbuffer::ExecutionPlan* plan = nullptr;
};

// Instructions one --clobber run may execute before it is called a loop that does not end
// (--max-steps; upstream's Method::execute stops at ET_MAX_INSTRUCTIONS, 10,000,000).
constexpr size_t kMaxClobberSteps = 1000000;

}  // namespace

struct Options {
  std::vector<std::string> ptds;
  bool run = false;
  std::set<uint32_t> shared_ids;  // --share-buffer: memory_ids every method shares
  size_t max_steps = kMaxClobberSteps;
};

// Loads (and with --run or --clobber runs) one program and prints its JSON object on one line.
// 0: everything loaded (and ran); 1: the runtime refused something.
static int RunFile(const std::string& pte, const Options& opt) {
  const std::vector<std::string>& ptds = opt.ptds;
  const bool run = opt.run;
  const std::set<uint32_t>& shared_ids = opt.shared_ids;
  const size_t max_steps = opt.max_steps;
  json out;
  out["oracle"] = {{"deprecated_constant_buffer", ET_ENABLE_DEPRECATED_CONSTANT_BUFFER != 0}};
  bool ok = true;

  // .ptd files: each through FlatTensorDataMap::load; several merged with MergedDataMap.
  std::deque<FileDataLoader> ptd_loaders;
  std::deque<FlatTensorDataMap> ptd_maps;
  json ptd_json = json::array();
  for (const std::string& path : ptds) {
    json e = {{"file", path}};
    auto loader = FileDataLoader::from(path.c_str());
    if (!loader.ok()) {
      e["status"] = Status(loader.error());
      ok = false;
    } else {
      ptd_loaders.push_back(std::move(loader.get()));
      auto map = FlatTensorDataMap::load(&ptd_loaders.back());
      e["status"] = Status(map.error());
      if (map.ok()) {
        ptd_maps.push_back(std::move(map.get()));
        e["keys"] = Keys(ptd_maps.back());
      } else {
        ok = false;
      }
    }
    ptd_json.push_back(e);
  }
  out["ptd"] = ptd_json;
  const NamedDataMap* external_map = nullptr;
  std::unique_ptr<executorch::extension::merged_data_map::MergedDataMap> merged;
  if (ok && ptd_maps.size() == 1) {
    external_map = &ptd_maps.front();
  } else if (ok && ptd_maps.size() > 1) {
    std::vector<const NamedDataMap*> maps;
    for (const auto& m : ptd_maps) maps.push_back(&m);
    auto m = executorch::extension::merged_data_map::MergedDataMap::load(
        Span<const NamedDataMap*>(maps.data(), maps.size()));
    out["merged"] = {{"status", Status(m.error())}};
    if (m.ok()) {
      merged = std::make_unique<executorch::extension::merged_data_map::MergedDataMap>(std::move(m.get()));
      out["merged"]["keys"] = Keys(*merged);
      external_map = merged.get();
    } else {
      ok = false;
    }
  }

  auto loader = FileDataLoader::from(pte.c_str());
  if (!loader.ok()) {
    out["program"] = {{"status", Status(loader.error())}};
    std::printf("%s\n", out.dump().c_str());
    std::fflush(stdout);
    std::fflush(stdout);
    return 1;
  }
  auto program = Program::load(&loader.get(), Program::Verification::InternalConsistency);
  out["program"] = {{"status", Status(program.error())}};
  if (!program.ok()) {
    out["ok"] = false;
    std::printf("%s\n", out.dump().c_str());
    std::fflush(stdout);
    std::fflush(stdout);
    return 1;
  }

  // The flatbuffer, verified by Program::load above, read through the oracle's generated code.
  std::ifstream f(pte, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const executorch_flatbuffer::Program* fb = executorch_flatbuffer::GetProgram(bytes.data());
  out["registered"] = RegisterOperatorsAndBackends(fb, run);

  auto pte_map = program->get_named_data_map();
  out["program"]["named_data"] = {{"status", Status(pte_map.error())}};
  if (pte_map.ok()) out["program"]["named_data"]["keys"] = Keys(*pte_map.get());
  // Constants and external tensors resolve against the external map merged with the program's
  // own named data, as Method::load does.
  const NamedDataMap* constants_map = external_map;
  std::unique_ptr<executorch::runtime::internal::MergedDataMap> with_pte;
  if (external_map != nullptr && pte_map.ok()) {
    auto m = executorch::runtime::internal::MergedDataMap::load(external_map, pte_map.get());
    if (m.ok()) {
      with_pte = std::make_unique<executorch::runtime::internal::MergedDataMap>(std::move(m.get()));
      constants_map = with_pte.get();
    }
  } else if (pte_map.ok()) {
    constants_map = pte_map.get();
  }

  // --share-buffer: one buffer per shared memory_id, as large as the largest method asks.
  std::map<uint32_t, std::vector<uint8_t>> shared;
  for (uint32_t id : shared_ids) {
    size_t size = 0;
    for (size_t mi = 0; mi < program->num_methods(); mi++) {
      auto name = program->get_method_name(mi);
      if (!name.ok()) continue;
      auto meta = program->method_meta(name.get());
      if (!meta.ok() || id - 1 >= meta->num_memory_planned_buffers()) continue;
      auto s = meta->memory_planned_buffer_size(id - 1);
      if (s.ok()) size = std::max(size, static_cast<size_t>(s.get()));
    }
    shared[id].resize(size);
  }

  json methods = json::array();
  std::deque<std::unique_ptr<Session>> sessions;  // --clobber: every loaded method, in program order
  std::vector<size_t> session_method;             // its index in `methods`
  for (size_t mi = 0; mi < program->num_methods(); mi++) {
    json mj;
    auto name = program->get_method_name(mi);
    if (!name.ok()) {
      mj["status"] = Status(name.error());
      ok = false;
      methods.push_back(mj);
      continue;
    }
    mj["name"] = name.get();
    const executorch_flatbuffer::ExecutionPlan* plan = fb->execution_plan()->Get(mi);
    auto meta = program->method_meta(name.get());
    mj["meta_status"] = Status(meta.error());
    if (!meta.ok()) {
      ok = false;
      methods.push_back(mj);
      continue;
    }
    mj["meta"] = MetaJson(meta.get());

    auto session = std::make_unique<Session>();
    session->plan = plan;
    for (size_t i = 0; i < meta->num_memory_planned_buffers(); i++) {
      auto s = meta->memory_planned_buffer_size(i);
      session->own.emplace_back(shared.count(static_cast<uint32_t>(i + 1)) ? 0
                                : s.ok()                                   ? static_cast<size_t>(s.get())
                                                                           : 0);
    }
    for (size_t i = 0; i < session->own.size(); i++) {
      auto it = shared.find(static_cast<uint32_t>(i + 1));
      std::vector<uint8_t>& b = it != shared.end() ? it->second : session->own[i];
      session->spans.emplace_back(b.data(), b.size());
    }
    session->planned =
        std::make_unique<HierarchicalAllocator>(Span<Span<uint8_t>>(session->spans.data(), session->spans.size()));
    session->mm =
        std::make_unique<MemoryManager>(&session->method_allocator, session->planned.get(), &session->temp_allocator);

    g_delegate_inits = json::array();
    auto method = program->load_method(name.get(), session->mm.get(), nullptr, external_map);
    mj["load_status"] = Status(method.error());
    mj["delegate_inits"] = g_delegate_inits;
    if (!method.ok()) ok = false;
    mj["constants"] = Constants(program.get(), plan, constants_map, &ok);
    if (method.ok()) {
      session->method.emplace(std::move(method.get()));
      mj["planned_initial_state"] = PlannedInitialState(plan, session->spans);
      if (run) {
        json inputs = json::array();
        FillInputs(*session->method, &inputs);
        Error e = session->method->execute();
        mj["run"] = {{"inputs", inputs}, {"status", Status(e)}};
        if (e == Error::Ok) {
          mj["run"]["outputs"] = OutputsJson(*session->method);
        } else {
          ok = false;
        }
      }
      if (g_clobber) {
        session_method.push_back(methods.size());
        sessions.push_back(std::move(session));
      }
    }
    methods.push_back(mj);
  }
  // --clobber: every method loaded; now each runs once, in program order.
  for (size_t k = 0; k < sessions.size(); k++) {
    Session& s = *sessions[k];
    Error input_error = Error::Ok;
    json clob = {{"inputs", clobber::SetInputsAndOutputs(*s.method, &s.io, &input_error)}};
    if (input_error != Error::Ok) {
      clob["status"] = Status(input_error);
      ok = false;
    } else {
      clob.update(clobber::ExecuteTraced(*s.method, s.plan, max_steps, shared_ids));
      if (clob["status"]["code"] != 0 || clob.contains("error") || clob.contains("limit")) ok = false;
    }
    methods[session_method[k]]["clobber"] = clob;
  }
  out["methods"] = methods;
  out["ok"] = ok;
  std::printf("%s\n", out.dump().c_str());
  std::fflush(stdout);
  return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  std::string pte, batch;
  Options opt;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--ptd" && i + 1 < argc) {
      opt.ptds.push_back(argv[++i]);
    } else if (a == "--run") {
      opt.run = true;
    } else if (a == "--clobber") {
      g_clobber = true;
    } else if (a == "--share-buffer" && i + 1 < argc) {
      char* end = nullptr;
      const unsigned long id = std::strtoul(argv[++i], &end, 10);
      if (end == nullptr || *end != '\0' || id == 0 || id > 0xffff) return Usage();
      opt.shared_ids.insert(static_cast<uint32_t>(id));
    } else if (a == "--max-steps" && i + 1 < argc) {
      char* end = nullptr;
      opt.max_steps = std::strtoull(argv[++i], &end, 10);
      if (end == nullptr || *end != '\0' || opt.max_steps == 0) return Usage();
    } else if (a == "--batch" && i + 1 < argc) {
      batch = argv[++i];
    } else if (!a.empty() && a[0] != '-' && pte.empty()) {
      pte = a;
    } else {
      return Usage();
    }
  }
  if (pte.empty() == batch.empty() || (opt.run && g_clobber) ||
      (!g_clobber && (!opt.shared_ids.empty() || opt.max_steps != kMaxClobberSteps))) {
    return Usage();
  }
  executorch::runtime::runtime_init();
  if (batch.empty()) return RunFile(pte, opt);
  // --batch LIST: every .pte named in LIST (one path a line), with the same .ptd files and
  // flags, one JSON line each, in one process (the mutation tests' start-up cost).
  std::ifstream list(batch);
  if (!list) return Usage();
  int rc = 0;
  for (std::string line; std::getline(list, line);) {
    if (!line.empty()) rc = std::max(rc, RunFile(line, opt));
  }
  return rc;
}
