// ptepack_replan_bench: `ptepack plan --algorithm best` on generated *programs* (issue 23):
// the kinds of method bench/plan_bench.cpp plans as bare blocks, here written with
// ProgramBuilder the way ExecuTorch's emitter writes them, so that every number goes through
// the whole path: the file is read and verified, lifetimes derived from its instructions
// (serialize/read/plan_lifetimes.h), the plan report made (serialize/insight/plan.h) and the
// re-planned program written and verified (serialize/api/replan.h).
//
// Each program: a chain of out-variant operators (each reads the newest tensor, now and then
// an older one: residual connections), some with several outputs (a TensorList return, as
// `_emit_operator` appends it), loops as `_emit_map` writes them (select_copy at the head, the
// body, et_copy_index into a DYNAMIC_BOUND stack, add/eq on the counter, a backward
// JumpFalseCall), mutable buffers written back with aten::copy_ (state: alive throughout), and
// in the "shared" shapes a second method sharing state in buffer 2 (share_mutable_buffers).
// Tensor sizes run from a byte to hundreds of MiB (each program picks a scale between 16 B and
// 64 MiB, each tensor spreads around it; the file stays small: planned tensors have no data).
//
// Input plan: ExecuTorch's own greedy (the plan upstream writes: `--algorithm
// executorch-greedy` gives every fixture's offsets byte for byte), made from an unshared plan.
// Then `plan --algorithm best` on that file. Prints the distribution of planned size / lower
// bound for the input, our executorch-greedy and best, and checks best is never larger than
// the input or our greedy (exit 1 otherwise). Not a test: a bench, run by hand or by
// scripts/bench.sh --only replan.
//
//   ptepack_replan_bench [--programs 240] [--seed 1] [--max-ops 3000] [--keep DIR] [--verbose] [--json]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/backend_config.h"
#include "ptepack/program_builder.h"
#include "serialize/api/replan.h"
#include "serialize/insight/plan.h"
#include "serialize/read/pte_reader.h"
#include "serialize/write/pte_writer.h"

namespace ptepack::bench {
namespace {

constexpr uint64_t kAlign = 16;

double Cpu() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

struct Shape {
  const char* name;
  double multi_output;  // chance an operator writes several outputs
  double skip;          // chance an operator also reads an older tensor
  int loops;            // loop bodies
  int state;            // mutable buffers of the method (buffer 1, written back with copy_)
  int shared_state;     // mutable buffers shared with a second method (buffer 2)
};

constexpr Shape kShapes[] = {
    {"chain", 0.0, 0.0, 0, 0, 0}, {"residual", 0.05, 0.3, 0, 0, 0}, {"multi-output", 0.4, 0.1, 0, 0, 0},
    {"loops", 0.1, 0.1, 3, 0, 0}, {"kv-cache", 0.1, 0.1, 0, 4, 0},  {"shared", 0.1, 0.2, 0, 1, 3},
    {"mixed", 0.2, 0.2, 2, 2, 2}, {"wide", 0.6, 0.5, 1, 1, 1},
};

int I(uint32_t v) { return static_cast<int>(v); }

// One program: a method "forward" (and "reset" for shared state), every planned tensor its
// own 16-aligned bytes (the unshared plan; `plan` re-plans it).
class Generator {
 public:
  Generator(std::mt19937_64& rng, const Shape& shape, uint32_t ops) : rng_(rng), shape_(shape), ops_(ops) {
    scale_ = std::ldexp(1.0, 4 + static_cast<int>(rng_() % 23));  // 16 B .. 64 MiB
  }

  Package Build() {
    auto& m = b_.AddMethod("forward");
    m_ = &m;
    std::vector<int> state, shared;
    for (int i = 0; i < shape_.state; i++) {
      state.push_back(I(m.MutableBuffer(Spec(1), "state." + std::to_string(i))));
    }
    for (int i = 0; i < shape_.shared_state; i++) {
      shared_specs_.push_back(Spec(2));
      shared.push_back(I(m.MutableBuffer(shared_specs_.back(), "shared." + std::to_string(i))));
    }
    const int inputs = 1 + static_cast<int>(rng_() % 3);
    std::vector<int> in;
    for (int i = 0; i < inputs; i++) in.push_back(New());
    recent_ = in;
    nb_ = I(m.Bool(false));
    one_ = I(m.Int(1));
    // Where loops and state reads go.
    std::vector<uint32_t> loop_at, read_at;
    for (int l = 0; l < shape_.loops; l++) loop_at.push_back(static_cast<uint32_t>(rng_() % ops_));
    for (size_t s = 0; s < state.size() + shared.size(); s++) read_at.push_back(static_cast<uint32_t>(rng_() % ops_));
    for (uint32_t t = 0; t < ops_; t++) {
      for (uint32_t a : loop_at) {
        if (a == t) Loop();
      }
      for (size_t s = 0; s < read_at.size(); s++) {
        if (read_at[s] != t) continue;
        const int st = s < state.size() ? state[s] : shared[s - state.size()];
        const int out = New();
        Kernel(m, Operator(m, "aten::add", "out"), {recent_.back(), st, one_, out, out});
        recent_.push_back(out);
      }
      Op();
    }
    // State written back at the end (insert_write_back_for_buffers_pass): state.copy_(newest).
    for (size_t s = 0; s < state.size(); s++) {
      Kernel(m, Operator(m, "aten::copy_", ""), {state[s], Newest(state[s]), nb_, state[s]});
    }
    for (size_t s = 0; s < shared.size(); s++) {
      Kernel(m, Operator(m, "aten::copy_", ""), {shared[s], Newest(shared[s]), nb_, shared[s]});
    }
    std::vector<int> outs;
    for (size_t k = 0; k < std::min<size_t>(recent_.size(), 1 + rng_() % 3); k++) {
      outs.push_back(recent_[recent_.size() - 1 - k]);
    }
    m.Inputs(in);
    m.Outputs(outs);
    m.PlannedBufferSizes(shared.empty()
                             ? std::vector<int64_t>{0, static_cast<int64_t>(end_[1])}
                             : std::vector<int64_t>{0, static_cast<int64_t>(end_[1]), static_cast<int64_t>(end_[2])});
    if (!shared.empty()) Reset();
    return b_.Build();
  }

 private:
  // A planned tensor near the program's scale, in buffer `mid` after everything there.
  TensorSpec Spec(uint32_t mid) {
    std::uniform_real_distribution<double> u(0, 1);
    std::normal_distribution<double> spread(0, 1.5);
    uint64_t bytes;
    if (u(rng_) < 0.08) {
      bytes = 1 + rng_() % 8;  // scalars, shapes, indices
    } else {
      bytes = static_cast<uint64_t>(std::min(scale_ * std::exp2(spread(rng_)), 512.0 * (1 << 20)));
    }
    const int k = static_cast<int>(rng_() % 3);  // 1, 2 or 4 bytes an element
    const ScalarType type = k == 0 ? ScalarType::kChar : k == 1 ? ScalarType::kHalf : ScalarType::kFloat;
    const uint64_t elem = uint64_t{1} << k;
    const int32_t n = static_cast<int32_t>(std::max<uint64_t>(1, bytes / elem));
    TensorSpec s{type, {n}, PlannedLocation{mid, end_[mid]}};
    end_[mid] += (static_cast<uint64_t>(n) * elem + kAlign - 1) / kAlign * kAlign;
    return s;
  }
  int New() { return I(m_->Tensor(Spec(1))); }
  int Newest(int avoid) {
    for (auto it = recent_.rbegin(); it != recent_.rend(); ++it) {
      if (*it != avoid) return *it;
    }
    return recent_.back();
  }

  // out = op(newest[, older]) or (o1, o2, ...) = op(...) with a TensorList return.
  void Op() {
    std::uniform_real_distribution<double> u(0, 1);
    auto& m = *m_;
    std::vector<int> args = {recent_.back()};
    if (recent_.size() > 1 && u(rng_) < shape_.skip) {
      const size_t back = std::min<size_t>(recent_.size() - 1, 1 + static_cast<size_t>(std::exp2(u(rng_) * 6)));
      args.push_back(recent_[recent_.size() - 1 - back]);
    }
    if (u(rng_) < shape_.multi_output) {
      const int n = 2 + static_cast<int>(rng_() % 3);
      std::vector<int> outs;
      for (int o = 0; o < n; o++) outs.push_back(New());
      args.insert(args.end(), outs.begin(), outs.end());
      args.push_back(I(m.TensorList(outs)));
      Kernel(m, Operator(m, "bench::split", "out"), args);
      recent_.insert(recent_.end(), outs.begin(), outs.end());
      return;
    }
    const int out = New();
    args.push_back(out);
    args.push_back(out);
    Kernel(m, Operator(m, args.size() == 3 ? "aten::neg" : "aten::add", "out"), args);
    recent_.push_back(out);
  }

  // `_emit_map`: the counter's bound, the head's select_copy, a body of a few operators, the
  // result stacked with et_copy_index, the counter advanced and compared, a backward jump.
  void Loop() {
    auto& m = *m_;
    const int x = recent_.back();
    const int zero = I(m.Int(0)), iter = I(m.Int(0)), sym = I(m.Int(0)), done = I(m.Bool(false));
    Kernel(m, Operator(m, "aten::sym_size", "int"), {x, zero, sym});
    const int head = static_cast<int>(instructions_);
    const int slice = New();
    Kernel(m, Operator(m, "aten::select_copy", "int_out"), {x, zero, iter, slice, slice});
    recent_.push_back(slice);
    const int body = 1 + static_cast<int>(rng_() % 8);
    for (int k = 0; k < body; k++) Op();
    TensorSpec acc_spec = Spec(1);
    acc_spec.shape_dynamism = ShapeDynamism::kDynamicBound;
    const int acc = I(m.Tensor(acc_spec));
    Kernel(m, Operator(m, "executorch_prim::et_copy_index", "tensor"), {acc, recent_.back(), iter});
    Kernel(m, Operator(m, "executorch_prim::add", "Scalar"), {iter, one_, iter});
    Kernel(m, Operator(m, "executorch_prim::eq", "Scalar"), {iter, sym, done});
    m.JumpFalse(done, head);
    ++instructions_;
    Kernel(m, Operator(m, "executorch_prim::sub", "Scalar"), {iter, sym, iter});
    recent_.push_back(acc);
  }

  // A second method that resets the shared state (share_mutable_buffers: the same names at the
  // same bytes of buffer 2).
  void Reset() {
    auto& r = b_.AddMethod("reset");
    const int x = I(r.Tensor(TensorSpec{ScalarType::kFloat, {4}, PlannedLocation{1, 0}}));
    const int nb = I(r.Bool(false));
    for (size_t s = 0; s < shared_specs_.size(); s++) {
      const int st = I(r.MutableBuffer(shared_specs_[s], "shared." + std::to_string(s)));
      Kernel(r, Operator(r, "aten::copy_", ""), {st, x, nb, st});
    }
    r.Inputs({x});
    r.Outputs({x});
    r.PlannedBufferSizes({0, 16, static_cast<int64_t>(end_[2])});
  }

  // One operator entry per name (as the emitter's operator table).
  uint32_t Operator(ProgramBuilder::Method& m, const std::string& name, const std::string& overload) {
    auto& table = &m == m_ ? ops_forward_ : ops_reset_;
    auto [it, fresh] = table.emplace(name + "." + overload, 0);
    if (fresh) it->second = m.Operator(name, overload);
    return it->second;
  }
  void Kernel(ProgramBuilder::Method& m, uint32_t op, const std::vector<int32_t>& args) {
    m.KernelCall(op, args);
    if (&m == m_) ++instructions_;
  }

  std::mt19937_64& rng_;
  const Shape& shape_;
  uint32_t ops_;
  double scale_ = 16;
  ProgramBuilder b_;
  ProgramBuilder::Method* m_ = nullptr;
  std::vector<int> recent_;
  std::vector<TensorSpec> shared_specs_;
  uint64_t end_[3] = {0, 0, 0};
  int nb_ = 0, one_ = 0;
  uint32_t instructions_ = 0;  // of "forward" so far
  std::map<std::string, uint32_t> ops_forward_, ops_reset_;
};

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

uint64_t SizeOf(const BufferPlan& b, PlanAlgorithm a) {
  for (const auto& x : b.algorithms) {
    if (x.algorithm == a) return x.size;
  }
  throw std::logic_error("algorithm not run");
}

int Main(int argc, char** argv) {
  int programs = 240;
  uint64_t seed = 1;
  uint32_t max_ops = 3000;
  std::string keep;
  bool verbose = false, json = false;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--programs") {
      programs = std::stoi(next());
    } else if (a == "--seed") {
      seed = std::stoull(next());
    } else if (a == "--max-ops") {
      max_ops = static_cast<uint32_t>(std::stoul(next()));
    } else if (a == "--keep") {
      keep = next();
    } else if (a == "--verbose") {
      verbose = true;
    } else if (a == "--json") {
      json = true;
    } else {
      std::fprintf(
          stderr,
          "usage: ptepack_replan_bench [--programs N] [--seed N] [--max-ops N] [--keep DIR] [--verbose] [--json]\n");
      return 2;
    }
  }
  const std::string dir = keep.empty() ? std::filesystem::temp_directory_path().string() + "/ptepack_replan_bench." +
                                             std::to_string(::getpid())
                                       : keep;
  std::filesystem::create_directories(dir);
  std::mt19937_64 rng(seed);
  std::vector<double> input_ratio, greedy_ratio, best_ratio;
  size_t best_above = 0, tensors = 0, instructions = 0, buffers = 0, not_checked = 0, reproduced = 0, improved = 0;
  double cpu_plan = 0, cpu_write = 0, largest_cpu = 0;
  size_t largest = 0;
  uint64_t bytes_input = 0, bytes_best = 0;
  for (int n = 0; n < programs; n++) {
    const Shape& shape = kShapes[n % (sizeof kShapes / sizeof kShapes[0])];
    const double span = std::log2(static_cast<double>(std::max<uint32_t>(max_ops, 11))) - 3.3;
    const uint32_t ops =
        static_cast<uint32_t>(std::exp2(3.3 + span * std::uniform_real_distribution<double>(0, 1)(rng)));
    const std::string base = dir + "/" + std::to_string(n) + "_" + shape.name;
    std::filesystem::create_directories(base);
    // The unshared plan, then ExecuTorch's greedy as the input (upstream's plan).
    WritePackage(Generator(rng, shape, ops).Build(), BackendConfig{}, base + "/unshared.pte");
    ReplanOptions to_greedy;
    to_greedy.plan.chosen = PlanAlgorithm::kExecutorchGreedy;
    to_greedy.plan.keep_input_unless_smaller = false;
    to_greedy.plan.algorithms = {PlanAlgorithm::kExecutorchGreedy};
    Replan(base + "/unshared.pte", base + "/input.pte", to_greedy);
    // `ptepack plan --algorithm best -o`.
    const double c0 = Cpu();
    ReplanOptions best;
    best.plan.algorithms = {PlanAlgorithm::kExecutorchGreedy, PlanAlgorithm::kBest};
    auto input = PteFile::Open(base + "/input.pte");
    if (!input->ok()) throw std::runtime_error(base + "/input.pte does not verify");
    const PlanReport report = AnalyzePlan(*input, best.plan);
    const double c1 = Cpu();
    Replan(base + "/input.pte", base + "/best.pte", best);
    const double c2 = Cpu();
    cpu_plan += c1 - c0;
    cpu_write += c2 - c1;
    size_t program_tensors = 0;
    for (const MethodPlan& m : report.methods) {
      not_checked += !m.not_checked.empty();
      program_tensors += m.planned_tensors;
      for (const BufferPlan& b : m.buffers) {
        const uint64_t now = static_cast<uint64_t>(b.size_now);
        const uint64_t greedy = SizeOf(b, PlanAlgorithm::kExecutorchGreedy);
        if (b.planned_size > now || b.planned_size > greedy) {
          best_above++;
          std::fprintf(stderr, "%s: %s buffer %u: best %llu > input %llu or greedy %llu\n", base.c_str(),
                       m.name.c_str(), b.memory_id, static_cast<unsigned long long>(b.planned_size),
                       static_cast<unsigned long long>(now), static_cast<unsigned long long>(greedy));
        }
        reproduced += b.greedy_reproduces.value_or(false);
        if (b.blocks == static_cast<size_t>(b.fixed_blocks) || b.lower_bound == 0) continue;  // nothing to place
        buffers++;
        improved += b.planned_size < now;
        bytes_input += now;
        bytes_best += b.planned_size;
        const double lb = static_cast<double>(b.lower_bound);
        input_ratio.push_back(static_cast<double>(now) / lb);
        greedy_ratio.push_back(static_cast<double>(greedy) / lb);
        best_ratio.push_back(static_cast<double>(b.planned_size) / lb);
        if (verbose && static_cast<double>(b.planned_size) > lb * 1.01) {
          std::fprintf(stderr, "%s: %s buffer %u (%zu blocks): best %.4f x the lower bound\n", base.c_str(),
                       m.name.c_str(), b.memory_id, b.blocks, static_cast<double>(b.planned_size) / lb);
        }
      }
    }
    tensors += program_tensors;
    instructions += ops;
    if (program_tensors > largest) largest = program_tensors, largest_cpu = c2 - c0;
    if (keep.empty()) std::filesystem::remove_all(base);
  }
  if (keep.empty()) std::filesystem::remove_all(dir);

  if (json) {
    auto dist = [](const std::vector<double>& v) {
      char b[128];
      std::snprintf(b, sizeof b, "{\"median\": %.4f, \"p90\": %.4f, \"worst\": %.4f}", Quantile(v, 0.5),
                    Quantile(v, 0.9), Quantile(v, 1.0));
      return std::string(b);
    };
    std::printf(
        "{\"programs\": %d, \"tensors\": %zu, \"buffers\": %zu, \"input\": %s, \"greedy\": %s, \"best\": %s, "
        "\"best_above\": %zu, \"not_checked\": %zu, \"improved\": %zu, \"bytes_input\": %llu, \"bytes_best\": %llu, "
        "\"cpu_plan_s\": %.3f, \"cpu_write_s\": %.3f}\n",
        programs, tensors, buffers, dist(input_ratio).c_str(), dist(greedy_ratio).c_str(), dist(best_ratio).c_str(),
        best_above, not_checked, improved, static_cast<unsigned long long>(bytes_input),
        static_cast<unsigned long long>(bytes_best), cpu_plan, cpu_write);
    return best_above == 0 && not_checked == 0 ? 0 : 1;
  }
  std::printf(
      "%d generated programs (%zu planned tensors, about %zu operators), %zu planned buffers placed; "
      "size / lower bound:\n\n",
      programs, tensors, instructions, buffers);
  std::printf("| plan | median | p90 | worst |\n|---|---|---|---|\n");
  std::printf("| input: ExecuTorch's greedy (upstream's plan) | %.4f | %.4f | %.4f |\n", Quantile(input_ratio, 0.5),
              Quantile(input_ratio, 0.9), Quantile(input_ratio, 1.0));
  std::printf("| our executorch-greedy on the file | %.4f | %.4f | %.4f |\n", Quantile(greedy_ratio, 0.5),
              Quantile(greedy_ratio, 0.9), Quantile(greedy_ratio, 1.0));
  std::printf("| plan --algorithm best -o | %.4f | %.4f | %.4f |\n", Quantile(best_ratio, 0.5),
              Quantile(best_ratio, 0.9), Quantile(best_ratio, 1.0));
  std::printf(
      "\nbest larger than the input or our greedy: %zu times (must be 0); smaller than the input in %zu of "
      "%zu buffers; %llu -> %llu bytes in all (%.1f %% less)\n",
      best_above, improved, buffers, static_cast<unsigned long long>(bytes_input),
      static_cast<unsigned long long>(bytes_best),
      bytes_input ? 100.0 * (1.0 - static_cast<double>(bytes_best) / static_cast<double>(bytes_input)) : 0.0);
  std::printf("executorch-greedy gives the input's offsets in %zu buffers; methods not derived: %zu (must be 0)\n",
              reproduced, not_checked);
  std::printf("goal for best: median <= 1.02 (%s), worst <= 1.10 (%s)\n",
              Quantile(best_ratio, 0.5) <= 1.02 ? "met" : "NOT met",
              Quantile(best_ratio, 1.0) <= 1.10 ? "met" : "NOT met");
  std::printf("CPU: plan report %.2f s, re-plan and write (verified) %.2f s; largest program (%zu tensors) %.2f s\n",
              cpu_plan, cpu_write, largest, largest_cpu);
  return best_above == 0 && not_checked == 0 ? 0 : 1;
}

}  // namespace
}  // namespace ptepack::bench

int main(int argc, char** argv) {
  try {
    return ptepack::bench::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ptepack_replan_bench: %s\n", e.what());
    return 2;
  }
}
