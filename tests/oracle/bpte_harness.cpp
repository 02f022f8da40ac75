// ExecuTorch's BundledProgram support as a test oracle: loads a .bpte with the unmodified
// devtools/bundled_program/bundled_program.cpp and the runtime subset, and for every test case
// of every method: load_bundled_input, execute, verify_method_outputs. Prints one JSON object.
//
//   et_bpte_oracle FILE.bpte
//
// Exit 0: every case loaded, ran and matched its expected outputs; 1: something failed (the JSON
// says what); 2: usage or unreadable file. Kernels: aten::add.out and aten::mul.out on int32 and
// float tensors of equal size (what the real sample uses); every other operator gets a stub.
#include <executorch/devtools/bundled_program/bundled_program.h>
#include <executorch/devtools/bundled_program/schema/bundled_program_schema_generated.h>
#include <executorch/extension/data_loader/buffer_data_loader.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/core/memory_allocator.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/kernel/kernel_runtime_context.h>
#include <executorch/runtime/kernel/operator_registry.h>
#include <executorch/runtime/platform/runtime.h>
#include <executorch/schema/program_generated.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

using executorch::aten::ScalarType;
using executorch::aten::Tensor;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::HierarchicalAllocator;
using executorch::runtime::Kernel;
using executorch::runtime::KernelRuntimeContext;
using executorch::runtime::MemoryAllocator;
using executorch::runtime::MemoryManager;
using executorch::runtime::Program;
using executorch::runtime::Span;
using json = nlohmann::ordered_json;
namespace bp = executorch::bundled_program;

json Status(Error e) { return json{{"code", static_cast<uint32_t>(e)}, {"name", executorch::runtime::to_string(e)}}; }

template <typename T, typename Op>
void Apply(const Tensor& a, const Tensor& b, Tensor& o, Op op) {
  const T* pa = a.const_data_ptr<T>();
  const T* pb = b.const_data_ptr<T>();
  T* po = o.mutable_data_ptr<T>();
  for (ssize_t i = 0; i < o.numel(); i++) po[i] = op(pa[i], pb[i]);
}

template <typename Op>
void Binary(KernelRuntimeContext& ctx, EValue* a, EValue* b, EValue* out, Op op) {
  if (!a->isTensor() || !b->isTensor() || !out->isTensor()) return ctx.fail(Error::NotImplemented);
  const Tensor ta = a->toTensor(), tb = b->toTensor();
  Tensor to = out->toTensor();
  if (ta.numel() != to.numel() || tb.numel() != to.numel() || ta.scalar_type() != to.scalar_type() ||
      tb.scalar_type() != to.scalar_type()) {
    return ctx.fail(Error::InvalidArgument);
  }
  if (to.scalar_type() == ScalarType::Int) return Apply<int32_t>(ta, tb, to, op);
  if (to.scalar_type() == ScalarType::Float) return Apply<float>(ta, tb, to, op);
  ctx.fail(Error::NotImplemented);
}

void AddOut(KernelRuntimeContext& ctx, Span<EValue*> args) {  // self, other, alpha, out
  if (args.size() < 4) return ctx.fail(Error::InvalidArgument);
  const int64_t alpha = args[2]->isInt() ? args[2]->toInt() : 1;
  Binary(ctx, args[0], args[1], args[3], [alpha](auto x, auto y) { return static_cast<decltype(x)>(x + alpha * y); });
}

void MulOut(KernelRuntimeContext& ctx, Span<EValue*> args) {  // self, other, out
  if (args.size() < 3) return ctx.fail(Error::InvalidArgument);
  Binary(ctx, args[0], args[1], args[2], [](auto x, auto y) { return static_cast<decltype(x)>(x * y); });
}

void Stub(KernelRuntimeContext& ctx, Span<EValue*> /*args*/) { ctx.fail(Error::NotImplemented); }

std::deque<std::string> g_names;

void RegisterKernels(const executorch_flatbuffer::Program* fb) {
  if (!fb || !fb->execution_plan()) return;
  for (const auto* plan : *fb->execution_plan()) {
    if (!plan->operators()) continue;
    for (const auto* op : *plan->operators()) {
      std::string name = op->name() ? op->name()->str() : "";
      if (op->overload() && op->overload()->size()) name += "." + op->overload()->str();
      if (executorch::runtime::registry_has_op_function(name.c_str())) continue;
      auto fn = name == "aten::add.out" ? AddOut : name == "aten::mul.out" ? MulOut : Stub;
      g_names.push_back(name);
      (void)executorch::runtime::register_kernel(Kernel(g_names.back().c_str(), fn));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: et_bpte_oracle FILE.bpte\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) return 2;
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The runtime expects the buffer aligned like a loaded file.
  void* buf = std::aligned_alloc(64, (raw.size() + 63) / 64 * 64);
  std::copy(raw.begin(), raw.end(), static_cast<char*>(buf));
  executorch::runtime::runtime_init();
  json out;
  out["is_bundled_program"] = bp::is_bundled_program(buf, raw.size());
  const void* prog_data = nullptr;
  size_t prog_size = 0;
  Error e = bp::get_program_data(buf, raw.size(), &prog_data, &prog_size);
  out["get_program_data"] = Status(e);
  bool ok = e == Error::Ok;
  if (ok) {
    executorch::extension::BufferDataLoader loader(prog_data, prog_size);
    auto program = Program::load(&loader, Program::Verification::InternalConsistency);
    out["program_load"] = Status(program.error());
    ok = program.ok();
    if (ok) {
      RegisterKernels(executorch_flatbuffer::GetProgram(prog_data));
      const auto* suites = bundled_program_flatbuffer::GetBundledProgram(buf)->method_test_suites();
      json methods = json::array();
      for (const auto* suite : *suites) {
        json mj{{"name", suite->method_name()->str()}};
        auto meta = program->method_meta(suite->method_name()->c_str());
        if (!meta.ok()) {
          mj["meta_status"] = Status(meta.error());
          ok = false;
          methods.push_back(mj);
          continue;
        }
        std::vector<std::vector<uint8_t>> buffers;
        std::vector<Span<uint8_t>> spans;
        for (size_t i = 0; i < meta->num_memory_planned_buffers(); i++) {
          buffers.emplace_back(static_cast<size_t>(meta->memory_planned_buffer_size(i).get()));
        }
        for (auto& b : buffers) spans.emplace_back(b.data(), b.size());
        HierarchicalAllocator planned(Span<Span<uint8_t>>(spans.data(), spans.size()));
        static std::vector<uint8_t> method_pool(1 << 20), temp_pool(1 << 20);
        MemoryAllocator method_allocator(static_cast<uint32_t>(method_pool.size()), method_pool.data());
        MemoryAllocator temp_allocator(static_cast<uint32_t>(temp_pool.size()), temp_pool.data());
        MemoryManager mm(&method_allocator, &planned, &temp_allocator);
        auto method = program->load_method(suite->method_name()->c_str(), &mm);
        mj["load_status"] = Status(method.error());
        if (!method.ok()) {
          ok = false;
          methods.push_back(mj);
          continue;
        }
        json cases = json::array();
        for (size_t i = 0; i < suite->test_cases()->size(); i++) {
          json cj;
          Error le = bp::load_bundled_input(*method, buf, i);
          cj["load_bundled_input"] = Status(le);
          Error xe = le == Error::Ok ? method->execute() : Error::Internal;
          cj["execute"] = Status(xe);
          Error ve = xe == Error::Ok ? bp::verify_method_outputs(*method, buf, i, 1e-5, 1e-8) : Error::Internal;
          cj["verify_method_outputs"] = Status(ve);
          ok = ok && le == Error::Ok && xe == Error::Ok && ve == Error::Ok;
          cases.push_back(cj);
        }
        mj["cases"] = cases;
        methods.push_back(mj);
      }
      out["methods"] = methods;
    }
  }
  out["ok"] = ok;
  std::printf("%s\n", out.dump().c_str());
  std::free(buf);
  return ok ? 0 : 1;
}
