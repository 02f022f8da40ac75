// The memory plan of a program, as `ptepack plan` shows it: per method and
// planned buffer the size now, the lower bound no plan can beat, the size each
// planner gives (layout/memory_plan.h) and which tensors set the peak; and the
// new offsets a re-plan would write (serialize/api/plan_rewrite.h writes them).
//
// Lifetimes come from serialize/read/plan_lifetimes.h (PlanViews), untouched:
// one block per storage (a tensor with its static views), idle values (never
// live) apart. What this module adds:
//  - the peak: the first instruction where the bytes alive reach the lower
//    bound, and the storages alive there;
//  - idle values still have to fit in their buffer (the runtime checks every
//    planned tensor's bounds at load, HierarchicalAllocator::get_offset_address),
//    so a buffer is never smaller than its largest idle value; an idle value
//    keeps its offset where it still fits the buffer, else goes to offset 0;
//  - buffers several methods share (share_mutable_buffers): every state there
//    keeps its offset, and each method's other tensors stay off the state of
//    the other methods (the rule plan_checks.cpp's CheckSharedState enforces);
//  - the choice per buffer: the chosen algorithm's placement when it is smaller
//    than the input's buffer, else the input's own offsets (never larger).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "layout/memory_plan.h"
#include "serialize/read/plan_lifetimes.h"

namespace ptepack {

class PteFile;

struct PlanReportOptions {
  // The algorithms whose sizes the report lists, in this order.
  std::vector<PlanAlgorithm> algorithms = {PlanAlgorithm::kExecutorchGreedy, PlanAlgorithm::kBestFit,
                                           PlanAlgorithm::kExact, PlanAlgorithm::kBest};
  // The one whose placement a re-plan writes (added to `algorithms` if absent).
  PlanAlgorithm chosen = PlanAlgorithm::kBest;
  // Alignment of every placed tensor; nullopt: each buffer's own, inferred
  // from its offsets (InferPlanAlignment: at least 16, as upstream's ALIGNMENT).
  std::optional<uint64_t> alignment;
  PlanOptions planner;
  // False: take the chosen placement even where it is not smaller than the
  // input's buffer (tests run every algorithm's plan this way); it can then
  // be larger. True (`ptepack plan`): keep the input's offsets unless smaller.
  bool keep_input_unless_smaller = true;
  // False: lower bounds and peaks only, no planner run (`size`, `inspect`).
  bool run_planners = true;
};

// A storage alive at the peak.
struct PlanPeakValue {
  uint32_t value = 0;       // the storage's first value (its other values share its bytes)
  std::string description;  // DescribePlannedValue, with its views
  uint64_t bytes = 0;       // as the lower bound counts it: aligned
  LiveRun interval;         // where the block is live (first..last)
  bool fixed = false;       // state other methods share: its offset is kept
};

struct PlanAlgorithmResult {
  PlanAlgorithm algorithm = PlanAlgorithm::kBest;
  uint64_t size = 0;              // the buffer size this placement gives (idle values included)
  bool optimal = false;           // equal to the lower bound, or proven by the exact search
  std::vector<uint64_t> offsets;  // per block
  // kExecutorchGreedy: which tie order (PlanOptions::reverse_ties) was used:
  // the one that reproduces the input's offsets where one does.
  bool reverse_ties = false;
};

struct BufferPlan {
  uint32_t memory_id = 0;
  std::optional<uint32_t> device_type;  // non_const_buffer_device's DeviceType, when the file says
  int64_t size_now = 0;                 // non_const_buffer_sizes[memory_id]
  uint64_t used_now = 0;                // end of the last byte a planned tensor uses now
  uint64_t alignment = 16;
  uint64_t lower_bound = 0;  // max(PlanLowerBound of the blocks, largest idle value)
  size_t blocks = 0;         // storages placed (tensors with their static views)
  size_t fixed_blocks = 0;   // of which keep their offset (state several methods share)
  size_t tensors = 0;        // planned tensors (values) in this buffer
  size_t idle_values = 0;
  uint64_t idle_max = 0;  // bytes of the largest idle value

  // The peak: the first instruction where the blocks alive reach the lower
  // bound of the blocks (none when nothing is live).
  std::optional<uint32_t> peak_instruction;
  std::string peak_label;  // InstructionLabel
  uint64_t peak_bytes = 0;
  std::vector<PlanPeakValue> peak_values;  // largest first

  std::vector<PlanAlgorithmResult> algorithms;  // in PlanReportOptions::algorithms order

  // ExecuTorch's greedy against the input: nullopt when it was not run or
  // there is nothing to place.
  std::optional<bool> greedy_reproduces;
  std::string greedy_first_difference;  // the first block (in greedy's placement order) it places elsewhere

  // The re-plan: the chosen algorithm's placement, or the input's offsets.
  PlanAlgorithm chosen = PlanAlgorithm::kBest;
  bool kept_input = true;
  uint64_t planned_size = 0;             // the buffer size a re-plan writes
  std::vector<uint64_t> chosen_offsets;  // per block
};

struct MethodPlan {
  size_t index = 0;  // execution plan index
  std::string name;
  std::string not_checked;     // lifetimes not derived: why (no buffers then but their sizes)
  size_t planned_tensors = 0;  // Tensor values with allocation_info
  std::vector<BufferPlan> buffers;
  uint64_t size_now = 0;     // sum of the planned buffers (non_const_buffer_sizes without entry 0)
  uint64_t lower_bound = 0;  // sum of the buffers' lower bounds (of those with planned tensors)
  uint64_t planned = 0;      // sum of what a re-plan writes (buffers without planned tensors as now)
  // What a re-plan writes: every planned value's new offset, and the new
  // non_const_buffer_sizes (entry 0 unchanged). Empty when not_checked.
  std::vector<std::pair<uint32_t, uint64_t>> new_offsets;  // (value index, offset), ascending value
  std::vector<int64_t> new_buffer_sizes;
  // The table offset of this method's ExecutionPlan in the file (for errors).
  uint64_t file_offset = 0;
};

struct PlanReport {
  std::string file;
  PlanAlgorithm chosen = PlanAlgorithm::kBest;
  std::optional<uint64_t> alignment;  // as asked (nullopt: inferred per buffer)
  bool planners_run = true;
  std::vector<MethodPlan> methods;
  uint64_t size_now = 0, lower_bound = 0, planned = 0;  // over all methods
};

// `pte` must have a verified program (pte.program() != nullptr); errors in
// its plan are the caller's to refuse (`ptepack plan` reads valid files
// only). Throws ptepack::Error "plan-bad-alignment" for an alignment that is
// not a power of two.
PlanReport AnalyzePlan(const PteFile& pte, const PlanReportOptions& options = {});

// {"file", "algorithm", "alignment", "methods": [{"name", "not_checked", "size_now", "lower_bound",
//  "planned", "buffers": [{"memory_id", "device", "size_now", "used_now", "alignment", "lower_bound",
//  "above_lower_bound_percent", "tensors", "blocks", "fixed", "idle", "sizes": {ALGO: N},
//  "optimal": {ALGO: bool}, "planned", "kept_input", "executorch_greedy": {"reproduces_input",
//  "first_difference"}, "peak": {"instruction", "operator", "bytes", "values": [...]}}]}],
//  "size_now", "lower_bound", "planned"}
nlohmann::json PlanJson(const PlanReport& r);
std::string RenderPlanText(const PlanReport& r);

// "x % above" of `now` over `bound` (0 when bound is 0).
double PercentAbove(uint64_t now, uint64_t bound);

}  // namespace ptepack
