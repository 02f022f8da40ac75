// Programs that exercise each lifetime rule of a memory plan (issue 23), written with
// ProgramBuilder the way ExecuTorch's emitter writes them (exir/emit/_emitter.py), each with
// plans to run in the runtime oracle's clobbering mode (tests/oracle/clobber.h):
//  - the unshared plan: every planned tensor its own bytes (static views keep their base's);
//  - a safe plan that reuses bytes the rules say are free, which the runtime must execute with
//    the same trace and outputs as the unshared plan;
//  - unsafe plans that give a tensor bytes still to be read (or never written), whose run must
//    differ, and which `verify` must flag with the finding named.
// The tensors' places are symbolic (by name) so a plan is a few moves away from the unshared one.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ptepack/program_builder.h"
#include "serialize/model/program_parts.h"

namespace ptepack::testing {

// Where planned tensors go: name -> (memory_id, offset).
using PlanLocations = std::map<std::string, PlannedLocation>;

struct PlannedDecl {
  PlannedDecl(std::string n, ScalarType t, std::vector<int32_t> s, uint32_t mem = 1, std::string alias = "",
              ShapeDynamism d = ShapeDynamism::kStatic)
      : name(std::move(n)), type(t), sizes(std::move(s)), memory_id(mem), alias_of(std::move(alias)), dynamism(d) {}
  std::string name;
  ScalarType type = ScalarType::kFloat;
  std::vector<int32_t> sizes;
  uint32_t memory_id = 1;  // its buffer in the unshared plan
  std::string alias_of;    // a static view: its base's place unless a plan moves it
  ShapeDynamism dynamism = ShapeDynamism::kStatic;
  uint64_t nbytes() const;
};

// What a program's build function gets: each planned tensor's spec under one plan and the
// buffer sizes that plan needs (the same for every method, as upstream's shared arena).
class PlanLayout {
 public:
  PlanLayout(const std::vector<PlannedDecl>* decls, PlanLocations loc, std::vector<int64_t> sizes)
      : decls_(decls), loc_(std::move(loc)), sizes_(std::move(sizes)) {}
  TensorSpec Spec(const std::string& name) const;
  const std::vector<int64_t>& buffer_sizes() const { return sizes_; }

 private:
  const std::vector<PlannedDecl>* decls_;
  PlanLocations loc_;
  std::vector<int64_t> sizes_;
};

struct PlanCase {
  std::string label;             // "safe", or what the unsafe plan does
  PlanLocations moves;           // tensors placed elsewhere than in the unshared plan
  std::string expected_finding;  // "" for a safe plan, else "plan-overlap" or "plan-read-before-write"
};

struct RuleProgram {
  std::string name;
  std::string rule;  // the lifetime rule exercised, and where upstream states it
  std::vector<PlannedDecl> tensors;
  std::function<Package(const PlanLayout&)> build;
  std::vector<PlanCase> cases;          // cases[0] is the safe plan, the rest unsafe
  std::vector<uint32_t> share_buffers;  // memory_ids the methods share at run time (--share-buffer)

  // Every tensor its own bytes: offsets 16-aligned in declaration order, per buffer.
  PlanLocations Unshared() const;
  PlanLocations With(const PlanLocations& moves) const;
  Package Build(const PlanLocations& loc) const;
};

std::vector<RuleProgram> PlanRulePrograms();

// Lays a package out with ExecuTorch's default config and writes it as is: without the
// writer's read-back check (WritePackage), which refuses the unsafe plans these tests need.
void WriteUnchecked(const Package& pkg, const std::string& path);

}  // namespace ptepack::testing
