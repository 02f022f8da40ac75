// `verify`'s checks of the memory plan, run by the reader after the table
// checks (program_checks.h) passed: every planned tensor's bytes against
// every other's while both are live (serialize/read/plan_lifetimes.h), the
// way exir/memory_planning.py's Verifier.verify_storage_reuse checks a plan
// upstream, but on the emitted program, and for every planner.
//
// Findings (docs/memory-plan.md has the rules and docs/hostile-inputs.md the
// bad inputs):
//   plan-overlap               two tensors share bytes while both are live
//   plan-read-before-write     an instruction (or the caller, for an output)
//                              reads planned bytes nothing has written
//   plan-shared-state-mismatch state several methods share is at different
//                              bytes in two of them
//   plan-loop-no-exit          a backward jump whose loop can never end
//   plan-move-cycle            MoveCalls that form a cycle
//   plan-not-checked (warning) what the model could not derive, once per
//                              method; `verify` lists it under "not checked"
#pragma once

#include <vector>

#include "program_generated.h"
#include "serialize/read/plan_lifetimes.h"
#include "serialize/read/program_checks.h"

namespace ptepack {

void CheckMemoryPlan(const Where& w, const executorch_flatbuffer::Program& program);

// Two storages of one method (indices in MethodLifetimes::storages, a < b)
// that share bytes while both are live, and the first instructions where
// they are (storages that one MoveCall/et_view target may point to are
// alternatives there, not a conflict). What `plan-overlap` reports and
// `map --memory` draws in red.
struct PlanConflict {
  uint32_t a = 0;
  uint32_t b = 0;
  LiveRun both;
};
// At most `limit` of them (in buffer, then storage order); *more is set when
// there were more.
std::vector<PlanConflict> FindPlanConflicts(const MethodLifetimes& m, size_t limit, bool* more = nullptr);
void CheckMemoryPlan(const Where& w, const executorch_flatbuffer::Program& program, const ProgramLifetimes& lt);

// False when the environment sets PTEPACK_SKIP_PLAN_CHECK (for measuring what
// the check costs, side by side; not a user option).
bool PlanCheckEnabled();

}  // namespace ptepack
