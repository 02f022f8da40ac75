// ptepack_micro_bench: the in-process parts of issue 16, with Google Benchmark.
//
//   BM_ProgramBuilderMeta   ProgramBuilder builds bench/gen_programs.py's `meta`
//                           program (20,002 values, 5,000 instructions) and
//                           lays it out to bytes in memory (LayoutPte + RenderPte):
//                           the C++ counterpart of serialize_pte_binary. With
//                           PTEPACK_BENCH_HEAP=prepared, in a process whose heap
//                           is prepared as the CLI's (serialize/io/heap.h).
//   BM_PackFromSpec         PackageFromSpecJson + LayoutPte + RenderPte of a spec
//                           (`ptepack pack` without the file write).
//   BM_Repack               PteFile::Open + PackageFromPte + InferConfig +
//                           LayoutPte + RenderPte (`ptepack repack` in memory).
//   BM_PlanCheck/N          DeriveLifetimes + CheckMemoryPlan (what `verify`
//                           adds for the memory plan) of one method of N
//                           planned tensors, a chain of N out-variant kernels
//                           whose outputs rotate over 3 slots (issue 23's goal:
//                           100,000 tensors in under a second).
//   BM_ReadWithoutPlanCheck/N, BM_ReadWithPlanCheck/N
//                           PteFile::FromBytes of that program without and
//                           with the plan check, side by side.
//
// The last two read bench/gen_programs.py's output: set PTEPACK_BENCH_DIR to its
// directory (scripts/bench.sh does); without it they are skipped with a message.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "config/backend_config.h"
#include "ptepack/program_builder.h"
#include "serialize/api/package_access.h"
#include "serialize/io/heap.h"
#include "serialize/model/program_parts.h"
#include "serialize/model/spec.h"
#include "serialize/read/plan_checks.h"
#include "serialize/read/program_checks.h"
#include "serialize/read/pte_reader.h"
#include "serialize/read/restore.h"
#include "serialize/write/infer_config.h"
#include "serialize/write/pte_writer.h"

namespace ptepack {
namespace {

// The `meta` program of bench/gen_programs.py (meta_plan), value for value.
Package BuildMeta(int num_values = 20002, int num_instructions = 5000, int num_ops = 64) {
  ProgramBuilder b;
  auto& m = b.AddMethod("forward");
  std::vector<int32_t> tensors;
  for (int i = 0; i < num_values; ++i) {
    if (i % 4 == 3) {
      m.Int(i);
    } else {
      tensors.push_back(static_cast<int32_t>(m.Tensor({ScalarType::kFloat, {1, 64}, PlannedLocation{1, 256ull * i}})));
    }
  }
  std::vector<uint32_t> ops;
  for (int i = 0; i < num_ops; ++i) ops.push_back(m.Operator("aten::op" + std::to_string(i), "out"));
  for (int k = 0; k < num_instructions; ++k) {
    std::vector<int32_t> args;
    for (int d = 0; d < 3; ++d) args.push_back(tensors[(k + d) % tensors.size()]);
    args.push_back((4 * k % num_values) | 3);
    m.KernelCall(ops[k % num_ops], args);
  }
  m.Inputs({0});
  m.Outputs({tensors.back()});
  m.PlannedBufferSizes({0, 256ll * num_values});
  m.ContainerMeta("T1#1($)", "$");
  return b.Build();
}

void BM_ProgramBuilderMeta(benchmark::State& state) {
  BackendConfig cfg;
  size_t bytes = 0;
  for (auto _ : state) {
    Package pkg = BuildMeta();
    std::vector<uint8_t> out = RenderPte(LayoutPte(PartsOf(pkg), cfg));
    bytes = out.size();
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["file_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_ProgramBuilderMeta)->Unit(benchmark::kMillisecond);

// One method: x -> t0 -> t1 -> ... -> t(n-1), each an out-variant kernel
// reading the previous tensor; t_i at slot i % 3 (64 bytes each), so a tensor
// shares bytes with the one three kernels later, after its last read.
std::vector<uint8_t> ChainProgram(int n) {
  ProgramBuilder b;
  auto& m = b.AddMethod("forward");
  int32_t prev = static_cast<int32_t>(m.Tensor({ScalarType::kFloat, {16}, PlannedLocation{1, 192}}));
  const int32_t input = prev;
  const uint32_t op = m.Operator("aten::add", "out");
  for (int i = 0; i < n; ++i) {
    auto t = static_cast<int32_t>(m.Tensor({ScalarType::kFloat, {16}, PlannedLocation{1, 64ull * (i % 3)}}));
    m.KernelCall(op, {prev, prev, t, t});
    prev = t;
  }
  m.Inputs({input});
  m.Outputs({prev});
  m.PlannedBufferSizes({0, 256});
  return RenderPte(LayoutPte(PartsOf(b.Build()), BackendConfig{}));
}

void BM_PlanCheck(benchmark::State& state) {
  const std::vector<uint8_t> bytes = ChainProgram(static_cast<int>(state.range(0)));
  const auto* program = executorch_flatbuffer::GetProgram(bytes.data());
  size_t findings = 0;
  for (auto _ : state) {
    Report r("bench.pte");
    Bytes view = Bytes::View(bytes.data(), bytes.size());
    CheckMemoryPlan(Where{r, view, view.size}, *program);
    findings = r.findings().size();
  }
  if (findings != 0) state.SkipWithError("the plan check found problems in a valid plan");
  state.counters["tensors"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_PlanCheck)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

void ReadChain(benchmark::State& state, bool plan_check) {
  const std::vector<uint8_t> bytes = ChainProgram(static_cast<int>(state.range(0)));
  ReadOptions opts;
  opts.check_memory_plan = plan_check;
  for (auto _ : state) {
    auto f = PteFile::FromBytes(Bytes::View(bytes.data(), bytes.size()), "bench.pte", opts);
    benchmark::DoNotOptimize(f->ok());
  }
}
void BM_ReadWithoutPlanCheck(benchmark::State& state) { ReadChain(state, false); }
void BM_ReadWithPlanCheck(benchmark::State& state) { ReadChain(state, true); }
BENCHMARK(BM_ReadWithoutPlanCheck)->Arg(100000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReadWithPlanCheck)->Arg(100000)->Unit(benchmark::kMillisecond);

std::string BenchFile(benchmark::State& state, const std::string& rel) {
  const char* dir = std::getenv("PTEPACK_BENCH_DIR");
  if (!dir) {
    state.SkipWithError("set PTEPACK_BENCH_DIR to the output of bench/gen_programs.py");
    return "";
  }
  return std::string(dir) + "/" + rel;
}

void BM_PackFromSpec(benchmark::State& state) {
  std::string path = BenchFile(state, "meta/spec.json");
  if (path.empty()) return;
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  const std::string base = path.substr(0, path.find_last_of('/'));
  BackendConfig cfg;
  for (auto _ : state) {
    PackageParts pkg = PackageFromSpecJson(text, base);
    std::vector<uint8_t> out = RenderPte(LayoutPte(pkg, cfg));
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_PackFromSpec)->Unit(benchmark::kMillisecond);

void BM_Repack(benchmark::State& state) {
  std::string path = BenchFile(state, "methods/out.pte");
  if (path.empty()) return;
  for (auto _ : state) {
    auto pte = PteFile::Open(path);
    PackageParts pkg = PackageFromPte(*pte);
    InferredConfig inf = InferConfig(*pte, pkg);
    inf.ApplyBlobAlignments(pkg);
    std::vector<uint8_t> out = RenderPte(LayoutPte(pkg, inf.config));
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_Repack)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ptepack

// With PTEPACK_BENCH_HEAP=prepared the process prepares its heap as the CLI
// does (serialize/io/heap.h) before any benchmark runs.
int main(int argc, char** argv) {
  const char* heap = std::getenv("PTEPACK_BENCH_HEAP");
  if (heap != nullptr && std::string(heap) == "prepared" && !ptepack::PrepareHeap()) {
    std::fprintf(stderr, "PTEPACK_BENCH_HEAP=prepared: this build or platform has no heap policy\n");
    return 2;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
