// ptepack_plan_bench: the memory planner (layout/memory_plan.h) on generated
// methods shaped like programs, against the lower bound no placement can beat
// (the most bytes alive at one instruction).
//
// Each instance is one method's planned buffer: a chain of out-variant
// operators (each writes a new tensor, reads the last one and now and then an
// older one: residual connections), some writing several outputs, some
// tensors read only much later, loops whose bodies' tensors are kept alive for
// the whole loop (a backward jump), method inputs alive from the start and
// outputs to the end, and shared mutable buffers alive throughout at fixed
// offsets. Sizes run from a few bytes to hundreds of MiB (each instance picks
// a scale between 16 B and 64 MiB, each tensor spreads around it).
//
// Prints, per algorithm, the distribution of size / lower bound over the
// instances (median, 90th percentile, worst) and the planning time, checks
// that `best` is never above ExecuTorch's greedy (with either tie order),
// best-fit or exact, and times one method of --big blocks: planning with each
// algorithm, FindPlanOverlaps and PlanLowerBound.
//
//   ptepack_plan_bench [--instances 240] [--seed 1] [--big 100000] [--json] [--verbose]
//
// --verbose names (on stderr) every instance where best is more than 1 % above
// the lower bound.
//
// Exit status 1 when `best` is ever larger than another algorithm's result or
// a placement overlaps (the goals on the ratios are printed, not enforced).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "layout/memory_plan.h"

namespace ptepack::bench {
namespace {

constexpr uint64_t kAlignment = 16;  // exir/memory_planning.py's default

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// CPU time of this process: on a machine shared with other jobs, wall time
// measures the neighbours too.
double Cpu() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

struct Clock {
  double wall = Now(), cpu = Cpu();
  double Wall() const { return Now() - wall; }
  double CpuSeconds() const { return Cpu() - cpu; }
};

struct Shape {
  const char* name;
  double multi_output;  // chance an operator writes several outputs
  double skip;          // chance an operator also reads an older tensor
  int loops;            // loop bodies
  int mutable_buffers;  // shared, alive throughout, fixed
};

constexpr Shape kShapes[] = {
    {"chain", 0.0, 0.0, 0, 0}, {"residual", 0.05, 0.3, 0, 0}, {"multi-output", 0.4, 0.1, 0, 0},
    {"loops", 0.1, 0.1, 3, 0}, {"kv-cache", 0.1, 0.1, 0, 4},  {"mixed", 0.2, 0.2, 2, 2},
    {"wide", 0.6, 0.5, 1, 1},
};

// One method: `ops` instructions.
std::vector<PlanBlock> Generate(std::mt19937_64& rng, const Shape& shape, uint32_t ops) {
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> spread(0, 1.5);
  const double scale = std::ldexp(1.0, 4 + static_cast<int>(rng() % 23));  // 16 B .. 64 MiB
  auto size = [&]() -> uint64_t {
    if (u(rng) < 0.08) return 1 + rng() % 8;  // scalars, shapes, indices
    const double s = scale * std::exp2(spread(rng));
    const uint64_t elem = uint64_t{1} << (rng() % 3);  // 1, 2 or 4 bytes an element
    return std::max<uint64_t>(elem, std::min<double>(s, 512.0 * (1 << 20)) / elem * elem);
  };
  std::vector<PlanBlock> blocks;
  const uint32_t last = ops - 1;
  // Shared mutable buffers: alive throughout, at fixed offsets one after the other.
  uint64_t fixed_end = 0;
  for (int i = 0; i < shape.mutable_buffers; i++) {
    const uint64_t s = size();
    blocks.push_back(PlanBlock{s, 0, last, fixed_end});
    fixed_end += (s + kAlignment - 1) / kAlignment * kAlignment;
  }
  // Method inputs: alive from the start.
  std::vector<size_t> recent;  // tensors written so far, newest last
  const int inputs = 1 + static_cast<int>(rng() % 3);
  for (int i = 0; i < inputs; i++) {
    blocks.push_back(PlanBlock{size(), 0, 0, std::nullopt});
    recent.push_back(blocks.size() - 1);
  }
  auto use = [&](size_t b, uint32_t t) { blocks[b].last = std::max(blocks[b].last, t); };
  for (uint32_t t = 0; t < ops; t++) {
    // Read the newest tensor, sometimes an older one too.
    use(recent.back(), t);
    if (recent.size() > 1 && u(rng) < shape.skip) {
      const size_t back = std::min<size_t>(recent.size() - 1, 1 + static_cast<size_t>(std::exp2(u(rng) * 6)));
      use(recent[recent.size() - 1 - back], t);
    }
    // Write one tensor, or several.
    const int outs = u(rng) < shape.multi_output ? 2 + static_cast<int>(rng() % 3) : 1;
    for (int o = 0; o < outs; o++) {
      blocks.push_back(PlanBlock{size(), t, t, std::nullopt});
      recent.push_back(blocks.size() - 1);
    }
  }
  // Method outputs: the last tensors, alive to the end.
  for (size_t k = 0; k < std::min<size_t>(recent.size(), 1 + rng() % 3); k++) use(recent[recent.size() - 1 - k], last);
  // Loops: every tensor used inside a body is alive for the whole body.
  for (int l = 0; l < shape.loops && ops > 4; l++) {
    const uint32_t a = static_cast<uint32_t>(rng() % ops);
    const uint32_t body = std::min<uint32_t>(512, std::max<uint32_t>(2, ops / 8));  // instructions
    const uint32_t b = std::min(last, a + 1 + static_cast<uint32_t>(rng() % body));
    for (PlanBlock& blk : blocks) {
      if (!blk.fixed_offset && blk.first <= b && a <= blk.last) {
        blk.first = std::min(blk.first, a);
        blk.last = std::max(blk.last, b);
      }
    }
  }
  return blocks;
}

struct Algo {
  const char* name;
  PlanAlgorithm algorithm;
  bool reverse_ties;
};
constexpr Algo kAlgos[] = {
    {"executorch-greedy", PlanAlgorithm::kExecutorchGreedy, false},
    {"executorch-greedy (ties reversed)", PlanAlgorithm::kExecutorchGreedy, true},
    {"best-fit", PlanAlgorithm::kBestFit, false},
    {"exact", PlanAlgorithm::kExact, false},
    {"best", PlanAlgorithm::kBest, false},
};
constexpr size_t kNumAlgos = sizeof kAlgos / sizeof kAlgos[0];
constexpr size_t kBestIndex = kNumAlgos - 1;

PlanPlacement Plan(const std::vector<PlanBlock>& blocks, const Algo& a) {
  PlanOptions o;
  o.reverse_ties = a.reverse_ties;
  return PlanMemory(blocks, kAlignment, a.algorithm, o);
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

int Main(int argc, char** argv) {
  int instances = 240;
  uint64_t seed = 1;
  uint32_t big = 100000;
  bool json = false, verbose = false;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--instances") {
      instances = std::stoi(next());
    } else if (a == "--seed") {
      seed = std::stoull(next());
    } else if (a == "--big") {
      big = static_cast<uint32_t>(std::stoul(next()));
    } else if (a == "--json") {
      json = true;
    } else if (a == "--verbose") {
      verbose = true;
    } else {
      std::fprintf(stderr,
                   "usage: ptepack_plan_bench [--instances N] [--seed N] [--big BLOCKS] [--json] [--verbose]\n");
      return 2;
    }
  }

  std::mt19937_64 rng(seed);
  std::vector<double> ratio[kNumAlgos];
  double seconds[kNumAlgos] = {};
  size_t optimal[kNumAlgos] = {};
  size_t best_above = 0, overlapping = 0, blocks_total = 0, best_below_greedy = 0;
  for (int n = 0; n < instances; n++) {
    const Shape& shape = kShapes[n % (sizeof kShapes / sizeof kShapes[0])];
    const uint32_t ops =
        static_cast<uint32_t>(std::exp2(3.3 + 8.3 * std::uniform_real_distribution<double>(0, 1)(rng)));
    const std::vector<PlanBlock> blocks = Generate(rng, shape, ops);  // 10 .. 3,000 instructions
    blocks_total += blocks.size();
    const double lower = static_cast<double>(PlanLowerBound(blocks, kAlignment));
    uint64_t size[kNumAlgos];
    for (size_t k = 0; k < kNumAlgos; k++) {
      const Clock c;
      const PlanPlacement p = Plan(blocks, kAlgos[k]);
      seconds[k] += c.CpuSeconds();
      size[k] = p.size;
      optimal[k] += p.optimal;
      ratio[k].push_back(static_cast<double>(p.size) / lower);
      if (!FindPlanOverlaps(blocks, p.offsets, 1).empty()) {
        overlapping++;
        std::fprintf(stderr, "instance %d (%s): %s placement overlaps\n", n, shape.name, kAlgos[k].name);
      }
    }
    for (size_t k = 0; k < kBestIndex; k++) {
      if (size[kBestIndex] > size[k]) {
        best_above++;
        std::fprintf(stderr, "instance %d (%s): best %llu > %s %llu\n", n, shape.name,
                     static_cast<unsigned long long>(size[kBestIndex]), kAlgos[k].name,
                     static_cast<unsigned long long>(size[k]));
      }
    }
    best_below_greedy += size[kBestIndex] < std::min(size[0], size[1]);
    if (verbose && static_cast<double>(size[kBestIndex]) > lower * 1.01) {
      std::fprintf(stderr, "instance %d (%s, %zu blocks, %u instructions): best %.4f x the lower bound\n", n,
                   shape.name, blocks.size(), ops, static_cast<double>(size[kBestIndex]) / lower);
    }
  }

  // One method of `big` planned tensors.
  std::mt19937_64 big_rng(seed + 1);
  const Shape big_shape{"big", 0.1, 0.2, 20, 4};
  std::vector<PlanBlock> blocks = Generate(big_rng, big_shape, big);
  if (blocks.size() > big) blocks.resize(big);  // several outputs add some; keep exactly `big`
  double big_seconds[kNumAlgos];
  uint64_t big_size[kNumAlgos];
  for (size_t k = 0; k < kNumAlgos; k++) {
    const Clock c;
    const PlanPlacement p = Plan(blocks, kAlgos[k]);
    big_seconds[k] = c.CpuSeconds();
    big_size[k] = p.size;
  }
  // The three steps `ptepack plan` runs on a method, wall and CPU time.
  const Clock c_plan;
  const PlanPlacement p = Plan(blocks, kAlgos[kBestIndex]);
  const double t_plan = c_plan.Wall(), cpu_plan = c_plan.CpuSeconds();
  const Clock c_overlaps;
  const size_t big_overlaps = FindPlanOverlaps(blocks, p.offsets).size();
  const double t_overlaps = c_overlaps.Wall(), cpu_overlaps = c_overlaps.CpuSeconds();
  const Clock c_lower;
  const uint64_t big_lower = PlanLowerBound(blocks, kAlignment);
  const double t_lower = c_lower.Wall(), cpu_lower = c_lower.CpuSeconds();
  const double total = t_plan + t_overlaps + t_lower, total_cpu = cpu_plan + cpu_overlaps + cpu_lower;
  overlapping += big_overlaps;

  if (json) {
    std::printf("{\"instances\": %d, \"blocks\": %zu, \"algorithms\": [", instances, blocks_total);
    for (size_t k = 0; k < kNumAlgos; k++) {
      std::printf(
          "%s{\"name\": \"%s\", \"median\": %.4f, \"p90\": %.4f, \"worst\": %.4f, \"optimal\": %zu, "
          "\"seconds\": %.3f, \"big_seconds\": %.3f, \"big_ratio\": %.4f}",
          k ? ", " : "", kAlgos[k].name, Quantile(ratio[k], 0.5), Quantile(ratio[k], 0.9), Quantile(ratio[k], 1.0),
          optimal[k], seconds[k], big_seconds[k], static_cast<double>(big_size[k]) / static_cast<double>(big_lower));
    }
    std::printf(
        "], \"best_above_another\": %zu, \"overlapping\": %zu, \"big_blocks\": %zu, "
        "\"big_plan_s\": %.3f, \"big_overlaps_s\": %.3f, \"big_lower_bound_s\": %.3f, \"big_total_s\": %.3f, "
        "\"big_total_cpu_s\": %.3f}\n",
        best_above, overlapping, blocks.size(), t_plan, t_overlaps, t_lower, total, total_cpu);
  } else {
    std::printf("%d generated methods (%zu planned tensors), alignment %llu; size / lower bound:\n\n", instances,
                blocks_total, static_cast<unsigned long long>(kAlignment));
    std::printf("| algorithm | median | p90 | worst | at the lower bound or proven optimal | planning CPU time |\n");
    std::printf("|---|---|---|---|---|---|\n");
    for (size_t k = 0; k < kNumAlgos; k++) {
      std::printf("| %s | %.4f | %.4f | %.4f | %zu | %.3f s |\n", kAlgos[k].name, Quantile(ratio[k], 0.5),
                  Quantile(ratio[k], 0.9), Quantile(ratio[k], 1.0), optimal[k], seconds[k]);
    }
    std::printf("\nbest above another algorithm: %zu times (must be 0); below both greedy orders: %zu of %d\n",
                best_above, best_below_greedy, instances);
    std::printf("goal for best: median <= 1.02 (%s), worst <= 1.10 (%s)\n",
                Quantile(ratio[kBestIndex], 0.5) <= 1.02 ? "met" : "NOT met",
                Quantile(ratio[kBestIndex], 1.0) <= 1.10 ? "met" : "NOT met");
    std::printf("\none method of %zu planned tensors (size / lower bound, CPU time):\n", blocks.size());
    for (size_t k = 0; k < kNumAlgos; k++) {
      std::printf("  %-34s %.4f  %.3f s\n", kAlgos[k].name,
                  static_cast<double>(big_size[k]) / static_cast<double>(big_lower), big_seconds[k]);
    }
    std::printf(
        "  best + FindPlanOverlaps + PlanLowerBound: %.3f + %.3f + %.3f = %.3f s wall, %.3f s CPU "
        "(goal <= 1 s: %s)\n",
        t_plan, t_overlaps, t_lower, total, total_cpu, total_cpu <= 1.0 ? "met" : "NOT met");
  }
  return best_above == 0 && overlapping == 0 ? 0 : 1;
}

}  // namespace
}  // namespace ptepack::bench

int main(int argc, char** argv) {
  try {
    return ptepack::bench::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ptepack_plan_bench: %s\n", e.what());
    return 2;
  }
}
