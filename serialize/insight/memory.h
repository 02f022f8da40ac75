// Memory a program needs at runtime, per method and for loading all methods
// (issue 13 part 4): what ExecuTorch's runtime allocates or maps when it
// loads a method, computed from the file alone.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace ptepack {

class PteFile;
class PtdFile;

struct MethodMemory {
  std::string name;
  // Planned (activation) buffers: non_const_buffer_sizes without entry 0,
  // which the runtime skips (MethodMeta::memory_planned_buffer_size(i) is entry i + 1).
  std::vector<uint64_t> planned;
  uint64_t planned_total = 0;
  // Constant data the method's tensors read, each stored copy once: from this
  // .pte (constant segment or inline constant_buffer), and per .ptd file (by
  // file name; "(not given)" for external tensors whose .ptd was not given).
  uint64_t constants_pte = 0;
  std::map<std::string, uint64_t> constants_ptd;
  // Delegate payloads: in segments (handed to the backend at init, freeable
  // after it) and inline in the flatbuffer (resident with the program).
  uint64_t delegates_segment = 0;
  uint64_t delegates_inline = 0;
  // Initial state of mutable buffers, copied into planned memory at load
  // from the mutable data segment or a .ptd (already counted in `planned`).
  uint64_t mutable_state = 0;
  // planned + constants + all delegate data: the peak while loading.
  uint64_t at_init = 0;
  // planned + constants + inline delegate data: after the backends' init
  // freed the segment payloads.
  uint64_t after_init = 0;
  // The memory plan (serialize/insight/plan.h): no plan of the planned
  // buffers can be smaller than this (the most bytes alive at one
  // instruction, per buffer). nullopt when the lifetimes of the method's
  // planned tensors could not be derived: plan_not_checked says why.
  std::optional<uint64_t> planned_lower_bound;
  std::string plan_not_checked;
};

struct MemoryReport {
  uint64_t program_bytes = 0;  // the flatbuffer (and header), resident while the program is loaded
  std::vector<MethodMemory> methods;
  // All methods loaded together: planned buffers add up; each stored
  // constant and delegate payload counts once.
  MethodMemory all;
};

MemoryReport AnalyzeMemory(const PteFile& pte, const std::vector<const PtdFile*>& ptds);
nlohmann::json MemoryJson(const MemoryReport& m);
// The per-method table: methods needing no memory are counted, not listed; at most `top`
// rows, largest at init first (by_name: by name); the name column fits the longest name.
std::string RenderMemoryText(const MemoryReport& m, size_t top = SIZE_MAX, bool by_name = false);

}  // namespace ptepack
