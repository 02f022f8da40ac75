// Plan mutants (issue 23, "Must show"): a planned tensor's memory_offset (or memory_id) changed
// in the flatbuffer in place, staying inside its buffer so that ExecuTorch's runtime loads it,
// run in the runtime oracle's clobbering mode (tests/oracle/clobber.h) against the original's
// run. For each mutant: did the execution change (trace or outputs), and did `verify` flag the
// plan (a `plan-*` finding)? The assertion: every mutant whose execution changes is flagged
// (0 missed). Printed: the counts, and the mutants verify flags whose execution does not
// change, by kind.
//
// Kinds, from the original run's trace (which calls read and write each tensor) and the
// planned byte ranges: the moved tensor's new bytes meet another planned tensor's that is
// "live together" with it (both hold a value still to be read), "in/out of one call" (one is
// last read by the call that first writes the other, which upstream's planner never allows but
// a kernel that reads its inputs before writing its outputs survives), "a scratch buffer over a
// live tensor" (a buffer a call takes but nothing writes first: the stubs do not touch its
// bytes, a real kernel writes them), "disjoint lifetimes"
// (bytes reused after the other is dead: a valid plan), or none; "left its alias group": it
// shared bytes by design with a tensor alive at the same time (a view) and no longer does; "a
// view moved onto another tensor of its size": the mutant is a valid program in which the view
// views that tensor instead, which no plan check can tell from the original's intent (not
// counted as missed; its count is printed).
//
// Seeds: every fixture with planned tensors that the runtime runs (linear.pte is refused
// with its pre-2025 .ptd; stories260k_qnn plans nothing), and the safe plans of the rule
// programs (plan_programs.h; the only seeds with two buffers, so the only memory_id mutants),
// counted apart.
//
// PTEPACK_PLAN_MUTANTS=N: fixture mutants (default 2,000; scripts/conformance.sh --long runs
// 10,000); the rule programs add a twentieth as many.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "conformance/oracle_runner.h"
#include "conformance/plan_programs.h"
#include "ptepack/reader.h"
#include "serialize/read/pte_reader.h"
#include "serialize/write/pte_writer.h"
#include "test_util.h"

extern char** environ;

namespace ptepack::testing {
namespace {

using json = nlohmann::ordered_json;
constexpr size_t kNone = static_cast<size_t>(-1);

struct Planned {
  size_t plan;    // execution plan index
  int32_t value;  // value index
  uint32_t memory_id;
  uint64_t offset, nbytes;
  size_t low_field = kNone;     // file offset of memory_offset_low (kNone: not stored, the default 0)
  size_t id_field = kNone;      // file offset of memory_id
  int64_t first = 0, last = 0;  // live interval from the original run's trace (instruction indices)
  std::set<int64_t> reads, writes;
  int group = -1;  // its alias group (a view and its base: same bytes, one never written by a call)
  // The group's interval and uses (its own when it has no group).
  int64_t gfirst = 0, glast = 0;
  std::set<int64_t> greads, gwrites;
};

struct Seed {
  std::string label;
  bool ours = false;  // a rule program (not a fixture)
  std::string pte;
  std::vector<std::string> ptds;
  OracleBuild build = OracleBuild::kOss;
  std::vector<uint32_t> share;
  std::vector<uint8_t> bytes;
  std::vector<Planned> tensors;
  std::vector<std::vector<int64_t>> buffer_sizes;  // per plan
  json reference;                                  // ClobberView of the original
};

// The oracle as one subprocess for several files of one seed (--batch: one JSON line each,
// which spares the sanitizer build's start-up per mutant), stdout to a file.
struct Batch {
  pid_t pid = -1;
  std::string out_path;
  size_t files = 0;
};

Batch StartOracle(const Seed& s, const std::vector<std::string>& ptes, const std::string& dir, const std::string& tag) {
  Batch b;
  b.files = ptes.size();
  const std::string list = dir + "/batch_" + tag + ".txt";
  b.out_path = dir + "/batch_" + tag + ".json";
  {
    std::ofstream l(list, std::ios::trunc);
    for (const auto& p : ptes) l << p << "\n";
  }
#ifdef PTEPACK_RUNTIME_ORACLE_OSS
  std::vector<std::string> args = {s.build == OracleBuild::kOss ? PTEPACK_RUNTIME_ORACLE_OSS : PTEPACK_RUNTIME_ORACLE,
                                   "--batch", list};
#else
  std::vector<std::string> args = {"", "--batch", list};
#endif
  for (const auto& p : s.ptds) {
    args.push_back("--ptd");
    args.push_back(p);
  }
  args.push_back("--clobber");
  for (uint32_t id : s.share) {
    args.push_back("--share-buffer");
    args.push_back(std::to_string(id));
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, b.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  if (posix_spawn(&b.pid, argv[0], &fa, nullptr, argv.data(), environ) != 0) b.pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return b;
}

// One result per file; a file the process did not get to (it crashed) is null. *exit_code:
// the process's.
std::vector<json> WaitOracle(const Batch& b, int* exit_code) {
  *exit_code = -1;
  std::vector<json> out(b.files);
  if (b.pid < 0) return out;
  int status = 0;
  waitpid(b.pid, &status, 0);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  std::ifstream f(b.out_path, std::ios::binary);
  size_t k = 0;
  for (std::string line; k < out.size() && std::getline(f, line); k++) {
    out[k] = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (out[k].is_discarded()) out[k] = json();
  }
  return out;
}

std::vector<json> RunOracle(const Seed& s, const std::vector<std::string>& ptes, const std::string& dir,
                            int* exit_code) {
  return WaitOracle(StartOracle(s, ptes, dir, "one"), exit_code);
}

// Planned tensors and where their allocation fields sit in the file.
bool ReadPlan(Seed* s) {
  auto pte = PteFile::FromBytes(Bytes::View(s->bytes.data(), s->bytes.size()), s->label);
  if (!pte->ok() || pte->program() == nullptr || pte->program()->execution_plan() == nullptr) return false;
  const uint8_t* base = s->bytes.data();
  auto field = [&](const void* table, uint16_t vt) -> size_t {
    const uint8_t* p = reinterpret_cast<const flatbuffers::Table*>(table)->GetAddressOf(vt);
    if (p == nullptr || p < base || p + 4 > base + s->bytes.size()) return kNone;
    return static_cast<size_t>(p - base);
  };
  const auto* plans = pte->program()->execution_plan();
  for (size_t pi = 0; pi < plans->size(); pi++) {
    const auto* plan = plans->Get(static_cast<flatbuffers::uoffset_t>(pi));
    std::vector<int64_t> sizes;
    if (plan->non_const_buffer_sizes() != nullptr) {
      for (int64_t v : *plan->non_const_buffer_sizes()) sizes.push_back(v);
    }
    s->buffer_sizes.push_back(sizes);
    if (plan->values() == nullptr) continue;
    for (size_t vi = 0; vi < plan->values()->size(); vi++) {
      const auto* v = plan->values()->Get(static_cast<flatbuffers::uoffset_t>(vi));
      const auto* t = v->val_as_Tensor();
      if (t == nullptr || t->allocation_info() == nullptr) continue;
      const auto* a = t->allocation_info();
      Planned p;
      p.plan = pi;
      p.value = static_cast<int32_t>(vi);
      p.memory_id = a->memory_id();
      p.offset = a->memory_offset_low() | (uint64_t{a->memory_offset_high()} << 32);
      p.nbytes = TensorNbytes(*t).value_or(0);
      p.low_field = field(a, executorch_flatbuffer::AllocationDetails::VT_MEMORY_OFFSET_LOW);
      p.id_field = field(a, executorch_flatbuffer::AllocationDetails::VT_MEMORY_ID);
      if (a->memory_offset_high() != 0) p.low_field = kNone;  // keep to offsets below 4 GiB
      s->tensors.push_back(p);
    }
  }
  // Every field is one tensor's own (no table shared between tensors).
  std::set<size_t> seen;
  for (Planned& p : s->tensors) {
    for (size_t* f : {&p.low_field, &p.id_field}) {
      if (*f != kNone && !seen.insert(*f).second) *f = kNone;
    }
  }
  return true;
}

// Live intervals from the original run: a tensor is written by the calls whose trace entry
// lists it under "out" and read by those listing it (or a list holding it) under "in"; method
// inputs and initial state are written before the first instruction (-1), method outputs and
// mutable state are read after the last (n).
void Lifetimes(Seed* s) {
  auto pte = PteFile::FromBytes(Bytes::View(s->bytes.data(), s->bytes.size()), s->label);
  const auto* plans = pte->program()->execution_plan();
  for (size_t pi = 0; pi < plans->size(); pi++) {
    const auto* plan = plans->Get(static_cast<flatbuffers::uoffset_t>(pi));
    const json& run = s->reference.at(pi);
    int64_t n = 0;
    for (const auto* c : *plan->chains()) n += c->instructions() ? c->instructions()->size() : 0;
    std::map<int32_t, Planned*> by_value;
    for (Planned& p : s->tensors) {
      if (p.plan == pi) by_value[p.value] = &p;
    }
    auto items = [&](int32_t v) {
      std::vector<int32_t> out = {v};
      const auto* val = plan->values()->Get(static_cast<flatbuffers::uoffset_t>(v));
      if (val->val_as_TensorList() != nullptr && val->val_as_TensorList()->items() != nullptr) {
        for (int32_t x : *val->val_as_TensorList()->items()) out.push_back(x);
      }
      return out;
    };
    for (const auto& e : run.value("trace", json::array())) {
      const int64_t at = e["instruction"].get<int64_t>();
      for (const auto& a : e["in"]) {
        for (int32_t v : items(a["value"].get<int32_t>())) {
          if (by_value.count(v)) by_value[v]->reads.insert(at);
        }
      }
      for (const auto& o : e["out"]) {
        const int32_t v = o["value"].get<int32_t>();
        if (by_value.count(v)) by_value[v]->writes.insert(at);
      }
    }
    if (plan->inputs()) {
      for (int32_t v : *plan->inputs()) {
        if (by_value.count(v)) by_value[v]->writes.insert(-1);
      }
    }
    if (plan->outputs()) {
      for (int32_t v : *plan->outputs()) {
        if (by_value.count(v)) by_value[v]->reads.insert(n);
      }
    }
    for (Planned& p : s->tensors) {
      if (p.plan != pi) continue;
      const auto* t = plan->values()->Get(static_cast<flatbuffers::uoffset_t>(p.value))->val_as_Tensor();
      const bool state = t->data_buffer_idx() != 0 || t->extra_tensor_info() != nullptr;
      if (state) {
        p.writes.insert(-1);
        p.reads.insert(n);
      }
      std::set<int64_t> all = p.reads;
      all.insert(p.writes.begin(), p.writes.end());
      p.first = all.empty() ? 0 : *all.begin();
      p.last = all.empty() ? -2 : *all.rbegin();
    }
  }
  // Alias groups: tensors at the same place, of the same size, of which one is never written (a
  // static view: the emitter's _emit_view gives it its base's allocation_info and no
  // instruction). The group holds its bytes from the first use of any member to the last.
  std::map<std::tuple<size_t, uint32_t, uint64_t, uint64_t>, std::vector<Planned*>> places;
  for (Planned& p : s->tensors) {
    if (p.nbytes > 0) places[{p.plan, p.memory_id, p.offset, p.nbytes}].push_back(&p);
  }
  int groups = 0;
  for (Planned& p : s->tensors) {
    p.gfirst = p.first;
    p.glast = p.last;
    p.greads = p.reads;
    p.gwrites = p.writes;
  }
  for (auto& [place, members] : places) {
    bool view = false;
    for (Planned* p : members) view = view || p->writes.empty();
    if (members.size() < 2 || !view) continue;
    int64_t first = members[0]->first, last = members[0]->last;
    std::set<int64_t> reads, writes;
    for (Planned* p : members) {
      first = std::min(first, p->first);
      last = std::max(last, p->last);
      reads.insert(p->reads.begin(), p->reads.end());
      writes.insert(p->writes.begin(), p->writes.end());
    }
    for (Planned* p : members) {
      p->group = groups;
      p->gfirst = first;
      p->glast = last;
      p->greads = reads;
      p->gwrites = writes;
    }
    groups++;
  }
}

// The one kind no plan check can flag (see Kind).
const char kViewOfAnother[] = "a view moved onto another tensor of its size (it views that one now)";

bool Meet(uint64_t a, uint64_t an, uint64_t b, uint64_t bn) { return an > 0 && bn > 0 && a < b + bn && b < a + an; }

// How the moved tensor's new bytes relate to the others (see the file comment).
std::string Kind(const Seed& s, size_t ti, uint32_t mem, uint64_t offset) {
  const Planned& t = s.tensors[ti];
  bool live_together = false, in_out = false, disjoint = false, left_alias = false, scratch = false;
  // A scratch buffer: read by a call, written by none, no input, state or view (keyword_spotting's
  // avg_pool2d workspace). The stubs neither read nor write its bytes; a real kernel writes them.
  auto is_scratch = [](const Planned& p) { return p.group < 0 && p.writes.empty() && !p.reads.empty(); };
  for (size_t ui = 0; ui < s.tensors.size(); ui++) {
    const Planned& u = s.tensors[ui];
    if (ui == ti || u.plan != t.plan) continue;
    const bool is = u.memory_id == mem && Meet(offset, t.nbytes, u.offset, u.nbytes);
    if (t.group >= 0 && u.group == t.group) {
      left_alias = true;  // any move takes it off the place it shares with its group
      continue;
    }
    if (!is) continue;
    // t's own uses (it left its group, if it had one) against u's group's.
    const bool together = t.first <= u.glast && u.gfirst <= t.last;
    if (!together) {
      disjoint = true;
    } else if (is_scratch(t) || is_scratch(u)) {
      scratch = true;
    } else if ((t.first == u.glast && u.greads.count(t.first) && t.writes.count(t.first) &&
                !u.gwrites.count(t.first)) ||
               (u.gfirst == t.last && t.reads.count(u.gfirst) && u.gwrites.count(u.gfirst) &&
                !t.writes.count(u.gfirst))) {
      in_out = true;
    } else {
      live_together = true;
    }
  }
  if (left_alias && t.writes.empty()) {
    // A view (nothing writes it) put exactly where another tensor of its size is: the mutant is
    // a valid program in which it views that tensor instead. No plan check can tell.
    for (const Planned& u : s.tensors) {
      if (u.plan == t.plan && u.group != t.group && u.memory_id == mem && u.offset == offset && u.nbytes == t.nbytes &&
          !u.writes.empty()) {
        return kViewOfAnother;
      }
    }
  }
  if (left_alias) return "left its alias group";
  if (live_together) return "live together";
  if (scratch) return "a scratch buffer over a live tensor";
  if (in_out) return "in/out of one call";
  if (disjoint) return "disjoint lifetimes";
  return "no shared bytes";
}

struct Mutant {
  size_t seed, tensor;
  std::string what;  // "offset" or "memory_id"
  uint32_t value;    // the new field value
};

bool PlanFlagged(const std::string& path, const Seed& s, std::string* codes, std::string* other) {
  VerifyOptions o;
  o.ptd = s.ptds;
  const VerifyResult r = Verify(path, o);
  bool flagged = false;
  for (const Finding& f : r.findings) {
    if (f.code.rfind("plan-", 0) == 0) {
      flagged = true;
      if (codes->find(f.code) == std::string::npos) *codes += (codes->empty() ? "" : ",") + f.code;
    } else if (f.severity == Finding::Severity::kError && other->empty()) {
      *other = f.ToString();
    }
  }
  return flagged;
}

std::vector<Seed> Seeds(const std::string& dir) {
  std::vector<Seed> seeds;
  struct F {
    const char* pte;
    const char* ptd;
    OracleBuild build;
  };
  for (const F& f : {F{"add.pte", "", OracleBuild::kOss}, F{"arduino_add.pte", "", OracleBuild::kOss},
                     F{"conv2d_quantized.pte", "", OracleBuild::kOss}, F{"keyword_spotting.pte", "", OracleBuild::kOss},
                     F{"maxpool2d.pte", "", OracleBuild::kOss},
                     F{"module_linear_no_constant_segment.pte", "", OracleBuild::kDeprecatedConstantBuffer},
                     F{"softmax.pte", "", OracleBuild::kOss}, F{"xor.pte", "xor.ptd", OracleBuild::kOss}}) {
    Seed s;
    s.label = f.pte;
    s.pte = FixturePath(f.pte);
    if (*f.ptd) s.ptds = {FixturePath(f.ptd)};
    s.build = f.build;
    s.bytes = ReadFile(s.pte);
    seeds.push_back(std::move(s));
  }
  for (const RuleProgram& p : PlanRulePrograms()) {
    Seed s;
    s.label = p.name;
    s.ours = true;
    s.pte = dir + "/seed_" + p.name + ".pte";
    WritePackage(p.Build(p.With(p.cases.at(0).moves)), BackendConfig{}, s.pte);
    s.share = p.share_buffers;
    s.bytes = ReadFile(s.pte);
    seeds.push_back(std::move(s));
  }
  return seeds;
}

std::vector<uint8_t> MutantBytes(const Seed& s, const Mutant& m) {
  const Planned& t = s.tensors[m.tensor];
  std::vector<uint8_t> b = s.bytes;
  const size_t field = m.what == "offset" ? t.low_field : t.id_field;
  for (int k = 0; k < 4; k++) b[field + k] = static_cast<uint8_t>(m.value >> (8 * k));
  return b;
}

TEST(PlanMutants, EveryChangedRunIsFlagged) {
  PTEPACK_REQUIRE_RUNTIME_ORACLE();
  size_t n_fixture = 2000;
  if (const char* e = std::getenv("PTEPACK_PLAN_MUTANTS")) n_fixture = std::strtoull(e, nullptr, 10);
  const size_t n_ours = n_fixture / 20;
  const std::string dir = ScratchDir("plan_mutants");
  std::vector<Seed> seeds = Seeds(dir);
  std::vector<size_t> fixture_seeds, our_seeds;
  for (size_t i = 0; i < seeds.size(); i++) {
    Seed& s = seeds[i];
    ASSERT_TRUE(ReadPlan(&s)) << s.label;
    int exit_code = 0;
    const json out = RunOracle(s, {s.pte}, dir, &exit_code).at(0);
    ASSERT_EQ(exit_code, 0) << s.label << ": the original does not run: " << out.dump().substr(0, 500);
    s.reference = ClobberView(out);
    Lifetimes(&s);
    std::string codes, other;
    EXPECT_FALSE(PlanFlagged(s.pte, s, &codes, &other)) << s.label << ": the original is flagged: " << codes;
    bool movable = false;
    for (const Planned& p : s.tensors) movable = movable || p.low_field != kNone;
    if (movable) (s.ours ? our_seeds : fixture_seeds).push_back(i);
  }

  // Mutants, deterministic and distinct.
  std::mt19937_64 rng(20261204);
  std::set<std::tuple<size_t, size_t, uint32_t>> done;  // (seed, field offset, value)
  auto make = [&](const std::vector<size_t>& pool, size_t count) {
    std::vector<Mutant> out;
    size_t attempts = 0;
    while (out.size() < count && attempts++ < count * 200) {
      const size_t si = pool[rng() % pool.size()];
      const Seed& s = seeds[si];
      const size_t ti = rng() % s.tensors.size();
      const Planned& t = s.tensors[ti];
      const auto& sizes = s.buffer_sizes[t.plan];
      Mutant m{si, ti, "offset", 0};
      const uint64_t align = t.nbytes % 4 == 0 ? 4 : 1;
      std::vector<uint32_t> ids;
      for (uint32_t id = 1; id < sizes.size(); id++) {
        if (id != t.memory_id && static_cast<uint64_t>(sizes[id]) >= t.nbytes) ids.push_back(id);
      }
      const int kind = static_cast<int>(rng() % (ids.empty() || t.id_field == kNone ? 3 : 4));
      uint32_t mem = t.memory_id;
      uint64_t offset = t.offset;
      if (kind == 3) {  // another buffer, same offset when it fits there
        mem = ids[rng() % ids.size()];
        m.what = "memory_id";
        m.value = mem;
        if (offset + t.nbytes > static_cast<uint64_t>(sizes[mem])) continue;
      } else {
        if (t.low_field == kNone) continue;
        const uint64_t limit = static_cast<uint64_t>(sizes.at(t.memory_id)) - t.nbytes;  // last offset inside
        if (kind == 0) {  // onto another planned tensor of the same buffer
          const Planned& u = s.tensors[rng() % s.tensors.size()];
          if (u.plan != t.plan || u.memory_id != t.memory_id) continue;
          offset = u.offset;
        } else if (kind == 1) {  // a few 16-byte steps away
          const int64_t step = (static_cast<int64_t>(rng() % 4) + 1) * (rng() % 2 ? 16 : -16);
          offset = static_cast<uint64_t>(static_cast<int64_t>(t.offset) + step);
        } else {  // anywhere, aligned to 4 (or 1)
          offset = (rng() % (limit + 1)) / align * align;
        }
        if (offset > limit || offset == t.offset) continue;
        m.value = static_cast<uint32_t>(offset);
      }
      const size_t field = m.what == "offset" ? t.low_field : t.id_field;
      if (!done.insert({si, field, m.value}).second) continue;
      out.push_back(m);
    }
    return out;
  };
  std::vector<Mutant> mutants = make(fixture_seeds, n_fixture);
  ASSERT_EQ(mutants.size(), n_fixture) << "not enough distinct mutants";
  for (const Mutant& m : make(our_seeds, n_ours)) mutants.push_back(m);

  struct Count {
    size_t total = 0, changed = 0, flagged = 0, missed = 0, flagged_same = 0;
  };
  std::map<std::string, Count> fixtures_by_kind, ours_by_kind;
  Count fixtures, ours;
  size_t refused = 0, crashed = 0, other_findings = 0, unsound = 0;
  double oracle_seconds = 0, verify_seconds = 0;  // wall time spent in each (printed)
  std::vector<std::string> missed_examples, unsound_examples, refused_examples, same_examples;
  std::map<std::string, size_t> same_examples_by_kind;
  // Judges mutant i from its run; removes its file (unless kept as an example).
  auto evaluate = [&](size_t i, const json& out, int exit_code) {
    const Mutant& m = mutants[i];
    const Seed& s = seeds[m.seed];
    const Planned& t = s.tensors[m.tensor];
    const std::string path = dir + "/m" + std::to_string(i) + ".pte";
    const uint32_t mem = m.what == "memory_id" ? m.value : t.memory_id;
    const uint64_t offset = m.what == "offset" ? m.value : t.offset;
    const std::string kind = Kind(s, m.tensor, mem, offset);
    const std::string name = s.label + " plan " + std::to_string(t.plan) + " value " + std::to_string(t.value) + " " +
                             std::to_string(t.memory_id) + ":" + std::to_string(t.offset) + " -> " +
                             std::to_string(mem) + ":" + std::to_string(offset) + " (" + kind + ")";
    // Refused: the runtime did not load it (Program::load or load_method). A crash or a failed
    // run of a loaded program is a changed execution (under the sanitizers, an unsafe plan can
    // make the runtime's own et_copy_index memcpy overlapping ranges).
    bool loaded = out.is_object() && out.contains("program") && out["program"]["status"]["code"] == 0;
    if (loaded) {
      for (const auto& meth : out.value("methods", json::array())) loaded = loaded && meth["load_status"]["code"] == 0;
    }
    if (out.is_object() && !loaded) {
      ++refused;
      if (refused_examples.size() < 5) refused_examples.push_back(name);
      std::remove(path.c_str());
      return;
    }
    std::string diff = out.is_object() ? FirstClobberDifference(s.reference, ClobberView(out))
                                       : "the runtime crashed (exit " + std::to_string(exit_code) + ")";
    if (!out.is_object()) ++crashed;
    const bool changed = !diff.empty();
    std::string codes, other;
    const auto v0 = std::chrono::steady_clock::now();
    const bool flagged = PlanFlagged(path, s, &codes, &other);
    verify_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - v0).count();
    if (!other.empty()) ++other_findings;
    Count& c = s.ours ? ours : fixtures;
    Count& k = (s.ours ? ours_by_kind : fixtures_by_kind)[kind];
    for (Count* x : {&c, &k}) {
      x->total++;
      x->changed += changed;
      x->flagged += flagged;
      x->missed += changed && !flagged && kind != kViewOfAnother;
      x->flagged_same += flagged && !changed;
    }
    if (changed && !flagged && kind != kViewOfAnother && missed_examples.size() < 10) {
      const std::string keep = dir + "/missed_" + std::to_string(i) + ".pte";
      WriteFile(keep, ReadFile(path));
      missed_examples.push_back(name + " kept as " + keep + "; first change: " + diff.substr(0, 200));
    }
    if (flagged && !changed && same_examples_by_kind[kind]++ < 3) same_examples.push_back(name + " [" + codes + "]");
    // The oracle's own soundness on straight-line fixtures: a run changes only when the moved
    // tensor's bytes meet a tensor alive with it, or it leaves its alias group (or views another).
    if (!s.ours && changed && kind != "live together" && kind != "left its alias group" && kind != kViewOfAnother) {
      ++unsound;
      if (unsound_examples.size() < 5) unsound_examples.push_back(name + ": " + diff.substr(0, 200));
    }
    std::remove(path.c_str());
  };

  // Runs: a batch of up to 100 mutants of one seed per oracle process, two processes at a time
  // (the test judges one pair's results while nothing else runs).
  struct Chunk {
    size_t seed;
    std::vector<size_t> mutants;
    std::vector<std::string> files;
    Batch batch;
  };
  std::vector<Chunk> chunks;
  {
    std::map<size_t, std::vector<size_t>> by_seed;
    for (size_t i = 0; i < mutants.size(); i++) by_seed[mutants[i].seed].push_back(i);
    for (const auto& [si, all] : by_seed) {
      for (size_t from = 0; from < all.size(); from += 100) {
        chunks.push_back(
            {si, std::vector<size_t>(all.begin() + from, all.begin() + std::min(all.size(), from + 100)), {}, {}});
      }
    }
  }
  for (size_t c0 = 0; c0 < chunks.size(); c0 += 2) {
    const size_t c1 = std::min(chunks.size(), c0 + 2);
    const auto o0 = std::chrono::steady_clock::now();
    for (size_t c = c0; c < c1; c++) {
      Chunk& ch = chunks[c];
      for (size_t i : ch.mutants) {
        ch.files.push_back(dir + "/m" + std::to_string(i) + ".pte");
        WriteFile(ch.files.back(), MutantBytes(seeds[ch.seed], mutants[i]));
      }
      ch.batch = StartOracle(seeds[ch.seed], ch.files, dir, std::to_string(c - c0));
    }
    std::vector<std::vector<json>> outs;
    for (size_t c = c0; c < c1; c++) {
      int exit_code = 0;
      outs.push_back(WaitOracle(chunks[c].batch, &exit_code));
    }
    oracle_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - o0).count();
    for (size_t c = c0; c < c1; c++) {
      const Chunk& ch = chunks[c];
      for (size_t k = 0; k < ch.mutants.size(); k++) {
        const json& out = outs[c - c0][k];
        if (!out.is_null()) {
          evaluate(ch.mutants[k], out, 0);
        } else {  // the batch did not get to it (a crash): alone, for its own verdict
          int alone = 0;
          const json one = RunOracle(seeds[ch.seed], {ch.files[k]}, dir, &alone).at(0);
          evaluate(ch.mutants[k], one, alone);
        }
      }
    }
  }

  auto line = [](const char* who, const Count& c) {
    std::printf(
        "plan mutants (%s): %zu; execution changed: %zu; flagged by verify: %zu; missed (changed, not "
        "flagged): %zu; flagged, execution unchanged: %zu\n",
        who, c.total, c.changed, c.flagged, c.missed, c.flagged_same);
  };
  line("fixtures", fixtures);
  line("rule programs", ours);
  for (const auto* by : {&fixtures_by_kind, &ours_by_kind}) {
    std::string s;
    for (const auto& [kind, c] : *by) {
      s += "\n  " + kind + ": " + std::to_string(c.total) + " mutants, " + std::to_string(c.changed) + " changed, " +
           std::to_string(c.flagged) + " flagged, " + std::to_string(c.flagged_same) + " flagged but unchanged";
    }
    std::printf("by kind (%s):%s\n",
                by == &fixtures_by_kind ? "fixtures"
                                        : "rule programs; kinds from straight-line intervals, approximate with loops "
                                          "and MoveCalls",
                s.c_str());
  }
  std::printf(
      "runtime refused to load: %zu; runs that crashed (counted as changed): %zu; mutants with other verify "
      "errors: %zu\n",
      refused, crashed, other_findings);
  for (const auto& e : same_examples) std::printf("  flagged, unchanged: %s\n", e.c_str());
  std::printf("wall time: oracle runs %.1f s, verify %.1f s\n", oracle_seconds, verify_seconds);

  std::string ex;
  for (const auto& e : refused_examples) ex += "\n  " + e;
  EXPECT_EQ(refused, 0u) << "mutants inside their buffer that the runtime does not load:" << ex;
  ex.clear();
  for (const auto& e : unsound_examples) ex += "\n  " + e;
  EXPECT_EQ(unsound, 0u) << "runs that changed without a live tensor's bytes shared:" << ex;
  EXPECT_EQ(other_findings, 0u) << "verify reports errors other than the plan's on offset mutants";
  ex.clear();
  for (const auto& e : missed_examples) ex += "\n  " + e;
  EXPECT_EQ(fixtures.missed + ours.missed, 0u) << "mutants whose execution changed and verify did not flag:" << ex;
}

}  // namespace
}  // namespace ptepack::testing
