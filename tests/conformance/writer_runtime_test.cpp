// Every file the writer produces goes through ExecuTorch's runtime (issue 17, part 2).
//
// Subjects: every real fixture (with its .ptd), programs built with ProgramBuilder and the
// `ptepack pack` example. Each is read, restored to package form and written again under a grid
// of BackendConfig variants (segment, constant and delegate alignment, delegate segments on/off,
// stack traces, mutable-buffer names, external constants in one or several .ptd, external
// mutable weights, inline constants, every flatbuffer order, .ptd segment alignment, legacy
// extended header). Each output must load in the runtime exactly when the original does, and the
// runtime must see the same thing in both: method meta, delegate payloads and compile specs as
// the backend gets them, constant bytes per tensor, initial mutable state, named-data keys.
//
// Both runtime builds judge every output. The one known difference: Program.constant_buffer
// (inline constants) is refused by the OSS build (ET_ENABLE_DEPRECATED_CONSTANT_BUFFER=0).
//
// The default grid covers every value of every axis at least once; PTEPACK_CONFORMANCE_FULL=1
// covers every pair of values of every two axes, plus every single-axis change.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "conformance/oracle_runner.h"
#include "conformance/programs.h"
#include "ptepack/error.h"
#include "serialize/api/package_access.h"
#include "serialize/model/program_parts.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "serialize/read/restore.h"
#include "serialize/write/infer_config.h"
#include "serialize/write/pte_writer.h"
#include "test_util.h"

namespace ptepack::testing {
namespace {

using json = nlohmann::ordered_json;

// ---- The config grid.
enum class External { kNone, kAll, kSplitByTag, kLargeOnly };
const char* ExternalName(External e) {
  switch (e) {
    case External::kNone:
      return "none";
    case External::kAll:
      return "all";
    case External::kSplitByTag:
      return "split";
    case External::kLargeOnly:
      return "large";
  }
  return "?";
}

struct Axis {
  const char* name;
  size_t size;
};
// Values of each axis, by index.
const uint64_t kSegmentAlignment[] = {16, 32, 64, 128, 256, 1024, 4096};
const std::optional<uint64_t> kTensorAlignment[] = {std::nullopt, 32, 64, 128};
const std::optional<uint64_t> kDelegateAlignment[] = {std::nullopt, 32, 512};
const External kExternal[] = {External::kNone, External::kAll, External::kSplitByTag, External::kLargeOnly};
const FlatbufferOrder kOrders[] = {FlatbufferOrder::kFlatc, FlatbufferOrder::kPythonObjectApi,
                                   FlatbufferOrder::kFlatcLegacy};
const uint64_t kPtdSegmentAlignment[] = {128, 16, 4096};
const Axis kAxes[] = {
    {"segment_alignment", std::size(kSegmentAlignment)},
    {"constant_tensor_alignment", std::size(kTensorAlignment)},
    {"delegate_alignment", std::size(kDelegateAlignment)},
    {"extract_delegate_segments", 2},
    {"emit_stacktrace", 2},
    {"emit_mutable_buffer_names", 2},
    {"external_constants", std::size(kExternal)},
    {"external_mutable_weights", 2},
    {"flatbuffer_order", std::size(kOrders)},
    {"inline_constants", 2},
    {"ptd_segment_alignment", std::size(kPtdSegmentAlignment)},
    {"legacy_extended_header", 2},
};
constexpr size_t kNumAxes = std::size(kAxes);
using Point = std::array<size_t, kNumAxes>;  // one value index per axis; npos: keep the original's

constexpr size_t kKeep = static_cast<size_t>(-1);

// Applies a grid point to the config that reproduces the original.
BackendConfig Apply(const Point& p, BackendConfig c) {
  if (p[0] != kKeep) c.segment_alignment = kSegmentAlignment[p[0]];
  if (p[1] != kKeep) c.constant_tensor_alignment = kTensorAlignment[p[1]];
  if (p[2] != kKeep) c.delegate_alignment = kDelegateAlignment[p[2]];
  if (p[3] != kKeep) c.extract_delegate_segments = p[3] == 0;
  if (p[4] != kKeep) c.emit_stacktrace = p[4] == 1;
  if (p[5] != kKeep) c.emit_mutable_buffer_names = p[5] == 1;
  if (p[6] != kKeep) {
    c.external_constants = false;
    c.external_constants_fn = nullptr;
    switch (kExternal[p[6]]) {
      case External::kNone:
        break;
      case External::kAll:
        c.external_constants = true;
        c.external_tag = "weights";
        break;
      case External::kSplitByTag:  // several .ptd: alternate tensors between two files
        c.external_constants_fn = [](const ConstantTensorInfo& t) -> std::optional<std::string> {
          return t.value_index % 2 == 0 ? "even" : "odd";
        };
        break;
      case External::kLargeOnly:  // some constants stay in the .pte
        c.external_constants_fn = [](const ConstantTensorInfo& t) -> std::optional<std::string> {
          if (t.nbytes >= 16) return "large";
          return std::nullopt;
        };
        break;
    }
  }
  if (p[7] != kKeep) c.external_mutable_weights = p[7] == 1;
  if (p[8] != kKeep) c.flatbuffer_order = kOrders[p[8]];
  if (p[9] != kKeep) c.inline_constants = p[9] == 1;
  if (p[10] != kKeep) c.ptd_segment_alignment = kPtdSegmentAlignment[p[10]];
  if (p[11] != kKeep) c.legacy_extended_header = p[11] == 1;
  // The one combination ExecuTorch cannot express: inline constants kept inside the
  // flatbuffer and constants moved to a .ptd.
  if (c.inline_constants && (c.external_constants || c.external_constants_fn)) c.inline_constants = false;
  return c;
}

std::string Describe(const Point& p, const BackendConfig& config) {
  std::string s;
  for (size_t k = 0; k < kNumAxes; k++) {
    if (p[k] == kKeep) continue;
    if (!s.empty()) s += " ";
    s += std::string(kAxes[k].name) + "=";
    switch (k) {
      case 0:
        s += std::to_string(kSegmentAlignment[p[k]]);
        break;
      case 1:
        s += kTensorAlignment[p[k]] ? std::to_string(*kTensorAlignment[p[k]]) : "default";
        break;
      case 2:
        s += kDelegateAlignment[p[k]] ? std::to_string(*kDelegateAlignment[p[k]]) : "default";
        break;
      case 6:
        s += ExternalName(kExternal[p[k]]);
        break;
      case 8:
        s += FlatbufferOrderName(kOrders[p[k]]);
        break;
      case 10:
        s += std::to_string(kPtdSegmentAlignment[p[k]]);
        break;
      case 3:
        s += p[k] == 0 ? "true" : "false";
        break;
      case 9:  // Apply turns it off next to external constants
        s += config.inline_constants ? "true" : "false";
        break;
      default:
        s += p[k] == 1 ? "true" : "false";
    }
  }
  return s.empty() ? "as the original" : s;
}

uint64_t SplitMix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Inline constants cannot go with external constants (the config refuses the pair).
constexpr size_t kExternalAxis = 6, kInlineAxis = 9;
bool Valid(const Point& p) { return !(p[kInlineAxis] == 1 && p[kExternalAxis] != 0); }

// Greedy covering array: points until every value (strength 1) or every pair of values of two
// axes (strength 2) appears in some point. Deterministic.
std::vector<Point> Covering(int strength) {
  std::set<std::vector<size_t>> uncovered;
  for (size_t a = 0; a < kNumAxes; a++) {
    for (size_t va = 0; va < kAxes[a].size; va++) {
      if (strength == 1) uncovered.insert({a, va});
      for (size_t b = a + 1; strength == 2 && b < kNumAxes; b++) {
        for (size_t vb = 0; vb < kAxes[b].size; vb++) {
          if (a == kExternalAxis && b == kInlineAxis && va != 0 && vb == 1) continue;  // invalid pair
          uncovered.insert({a, va, b, vb});
        }
      }
    }
  }
  auto covers = [&](const Point& p) {
    size_t n = 0;
    for (const auto& u : uncovered) n += p[u[0]] == u[1] && (u.size() == 2 || p[u[2]] == u[3]);
    return n;
  };
  std::vector<Point> points;
  uint64_t rng = 17;
  while (!uncovered.empty()) {
    Point best{};
    size_t best_n = 0;
    for (int c = 0; c < 64; c++) {
      Point p;
      for (size_t k = 0; k < kNumAxes; k++) p[k] = SplitMix(rng) % kAxes[k].size;
      // Steer towards the first uncovered tuple so the search always progresses.
      const auto& u = *uncovered.begin();
      p[u[0]] = u[1];
      if (u.size() == 4) p[u[2]] = u[3];
      if (!Valid(p)) {
        const bool inline_wanted =
            (u[0] == kInlineAxis && u[1] == 1) || (u.size() == 4 && u[2] == kInlineAxis && u[3] == 1);
        if (inline_wanted) {
          p[kExternalAxis] = 0;
        } else {
          p[kInlineAxis] = 0;
        }
      }
      const size_t n = covers(p);
      if (n > best_n) {
        best = p;
        best_n = n;
      }
    }
    for (auto it = uncovered.begin(); it != uncovered.end();) {
      const auto& u = *it;
      if (best[u[0]] == u[1] && (u.size() == 2 || best[u[2]] == u[3])) {
        it = uncovered.erase(it);
      } else {
        ++it;
      }
    }
    points.push_back(best);
  }
  return points;
}

bool FullGrid() {
  const char* e = std::getenv("PTEPACK_CONFORMANCE_FULL");
  return e != nullptr && std::string(e) == "1";
}

std::vector<Point> Grid() {
  Point keep;
  keep.fill(kKeep);
  std::vector<Point> grid = {keep};  // the original's own config: must round-trip
  for (const Point& p : Covering(FullGrid() ? 2 : 1)) grid.push_back(p);
  if (FullGrid()) {
    for (size_t k = 0; k < kNumAxes; k++) {
      for (size_t v = 0; v < kAxes[k].size; v++) {
        Point p = keep;
        p[k] = v;
        grid.push_back(p);
      }
    }
  }
  return grid;
}

// ---- Subjects.
struct Subject {
  std::string name;
  std::string pte;
  std::vector<std::string> ptds;
  bool legacy_ptd = false;  // linear.ptd: the pre-June-2025 FlatTensor layout
};

std::vector<Subject> Subjects() {
  std::vector<Subject> out;
  for (const std::string& f : PteFixtures()) {
    Subject s{f.substr(0, f.find('.')), FixturePath(f), {}, false};
    const std::string ptd = FixturePath(s.name + ".ptd");
    if (std::filesystem::exists(ptd)) s.ptds.push_back(ptd);
    s.legacy_ptd = s.name == "linear";
    out.push_back(s);
  }
  const std::string dir = ScratchDir("conformance_subjects");
  const std::pair<const char*, BuiltProgram (*)()> built[] = {{"builder_affine", AffineProgram},
                                                              {"builder_delegates", DelegateProgram}};
  for (const auto& [name, make] : built) {
    const std::string path = dir + "/" + name + ".pte";
    WritePackage(make().package, BackendConfig{}, path);
    out.push_back({name, path, {}, false});
  }
  const std::string packed = dir + "/pack_add.pte";
  RunResult r = RunCli({"pack", std::string(PTEPACK_SOURCE_DIR) + "/testdata/pack/config.json",
                        std::string(PTEPACK_SOURCE_DIR) + "/testdata/pack/add_spec.json", "-o", packed});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  out.push_back({"pack_add", packed, {}, false});
  return out;
}

struct Written {
  std::string pte;
  std::vector<std::string> ptds;
  bool inline_constants = false;
};

Written Write(const Subject& s, const PackageParts& pkg, const BackendConfig& config, const std::string& dir) {
  WriteResult wr = WritePackage(PackageOf(pkg), config, dir + "/" + s.name + ".pte");
  Written w{wr.pte.path, {}, config.inline_constants};
  for (const auto& p : wr.ptds) w.ptds.push_back(p.path);
  return w;
}

json WithoutPtdKeys(json view) {
  view.erase("ptd_keys");
  return view;
}

// Counts what the grid did, for the summary line.
struct Tally {
  size_t outputs = 0, runs = 0, loaded = 0, refused_as_expected = 0;
  size_t refused_inline_oss = 0, refused_like_original = 0;
};

// One output judged by one build against the reference (what the runtime saw in the original).
void Judge(const Subject& s, const std::string& variant, const Written& w, OracleBuild build,
           const OracleResult& reference, const json& reference_ptd_keys, Tally* tally) {
  const bool oss = build == OracleBuild::kOss;
  SCOPED_TRACE(s.name + " [" + variant + "] " + (oss ? "OSS build" : "deprecated-constant-buffer build"));
  OracleResult r = RunRuntimeOracle(build, w.pte, w.ptds);
  tally->runs++;
  ASSERT_TRUE(r.out.is_object()) << r.Describe();
  if (oss && w.inline_constants) {
    // Program.constant_buffer: the OSS runtime refuses the file, whatever it holds.
    EXPECT_EQ(r.out["program"]["status"]["name"], "Error::InvalidProgram") << r.Describe();
    EXPECT_FALSE(r.loaded());
    tally->refused_as_expected++;
    tally->refused_inline_oss++;
    return;
  }
  EXPECT_EQ(r.loaded(), reference.loaded()) << "original: " << reference.Describe() << "\noutput: " << r.Describe();
  if (r.loaded()) {
    tally->loaded++;
  } else if (!reference.loaded()) {
    tally->refused_as_expected++;
    tally->refused_like_original++;
  }
  EXPECT_EQ(WithoutPtdKeys(RuntimeView(r.out)), WithoutPtdKeys(RuntimeView(reference.out)))
      << "the runtime sees the output differently from the original";
  // The .ptd files hold exactly the original's .ptd keys plus what the output moved out.
  json expected = reference_ptd_keys;
  for (const auto& k : ExternalKeys(r.out)) expected.push_back(k);
  std::sort(expected.begin(), expected.end());
  expected.erase(std::unique(expected.begin(), expected.end()), expected.end());
  EXPECT_EQ(RuntimeView(r.out)["ptd_keys"], expected);
}

// What went into ProgramBuilder is what the runtime gets: constant bytes per tensor, initial
// mutable state, delegate payloads and compile specs in init order, named-data keys.
TEST(WriterConformance, BuilderProgramsAsTheRuntimeSeesThem) {
  PTEPACK_REQUIRE_RUNTIME_ORACLE();
  for (BuiltProgram (*make)() : {AffineProgram, DelegateProgram}) {
    const BuiltProgram built = make();
    const std::string dir = ScratchDir("builder_facts");
    for (bool split : {false, true}) {
      BackendConfig config;
      config.external_constants = split;
      config.external_mutable_weights = split;
      config.emit_mutable_buffer_names = true;
      WriteResult wr = WritePackage(built.package, config, dir + "/p.pte");
      std::vector<std::string> ptds;
      for (const auto& p : wr.ptds) ptds.push_back(p.path);
      SCOPED_TRACE(split ? "constants and mutable state in .ptd" : "all in the .pte");
      OracleResult r = RunRuntimeOracle(OracleBuild::kOss, wr.pte.path, ptds);
      ASSERT_TRUE(r.loaded()) << r.Describe();
      size_t constants = 0, states = 0;
      json inits = json::array();
      for (const auto& m : r.out["methods"]) {
        const std::string method = m["name"];
        for (const auto& c : m["constants"]) {
          auto it = built.constants.find({method, c["value_index"].get<uint32_t>()});
          ASSERT_NE(it, built.constants.end()) << c.dump();
          EXPECT_EQ(c["xxh64"], Xxh64Hex(it->second)) << method << " " << c.dump();
          EXPECT_EQ(c["nbytes"], it->second.size());
          constants++;
        }
        for (const auto& st : m["planned_initial_state"]) {
          auto it = built.initial_state.find({method, st["value_index"].get<uint32_t>()});
          ASSERT_NE(it, built.initial_state.end()) << st.dump();
          EXPECT_EQ(st["xxh64"], Xxh64Hex(it->second));
          states++;
        }
        for (const auto& d : m["delegate_inits"]) inits.push_back(d);
      }
      EXPECT_EQ(constants, built.constants.size());
      EXPECT_EQ(states, built.initial_state.size());
      ASSERT_EQ(inits.size(), built.delegates.size());
      for (size_t i = 0; i < inits.size(); i++) {
        const auto& want = built.delegates[i];
        EXPECT_EQ(inits[i]["backend"], want.backend);
        EXPECT_EQ(inits[i]["processed_size"], want.payload.size());
        EXPECT_EQ(inits[i]["processed_xxh64"], Xxh64Hex(want.payload));
        ASSERT_EQ(inits[i]["compile_specs"].size(), want.specs.size());
        for (size_t k = 0; k < want.specs.size(); k++) {
          EXPECT_EQ(inits[i]["compile_specs"][k]["key"], want.specs[k].first);
          EXPECT_EQ(inits[i]["compile_specs"][k]["xxh64"], Xxh64Hex(want.specs[k].second));
        }
      }
      json keys = r.out["program"]["named_data"].value("keys", json::array());
      EXPECT_EQ(keys.size(), built.named_data_keys.size()) << keys.dump();
      for (const auto& k : built.named_data_keys) {
        EXPECT_NE(std::find(keys.begin(), keys.end(), k), keys.end()) << k;
      }
    }
  }
}

TEST(WriterConformance, GridCoversEveryAxisValue) {
  std::vector<Point> grid = Grid();
  for (const Point& p : grid) EXPECT_TRUE(p[kExternalAxis] == kKeep || Valid(p)) << Describe(p, BackendConfig{});
  for (size_t k = 0; k < kNumAxes; k++) {
    for (size_t v = 0; v < kAxes[k].size; v++) {
      EXPECT_TRUE(std::any_of(grid.begin(), grid.end(), [&](const Point& p) { return p[k] == v; }))
          << kAxes[k].name << " value " << v << " never tried";
    }
  }
}

TEST(WriterConformance, EveryOutputLoadsExactlyWhenTheOriginalDoes) {
  PTEPACK_REQUIRE_RUNTIME_ORACLE();
  const std::vector<Point> grid = Grid();
  Tally tally;
  size_t subject_index = 0;
  for (const Subject& s : Subjects()) {
    SCOPED_TRACE(s.name);
    auto pte = PteFile::Open(s.pte);
    std::vector<std::unique_ptr<PtdFile>> ptd_files;
    std::vector<const PtdFile*> ptds;
    for (const auto& p : s.ptds) {
      ptd_files.push_back(PtdFile::Open(p));
      ptds.push_back(ptd_files.back().get());
    }
    PackageParts pkg = PackageFromPte(*pte, ptds);
    const InferredConfig inf = InferConfig(*pte, pkg, ptds);
    inf.ApplyBlobAlignments(pkg);
    const BackendConfig base = inf.config;

    // References: the original as the deprecated-constant-buffer build sees it (it loads every
    // layout ExecuTorch ever wrote); for linear also the .ptd upgraded to the current layout.
    struct Reference {
      PackageParts pkg;
      OracleResult result;
      json ptd_keys;
      std::string label;
    };
    std::vector<Reference> refs;
    {
      OracleResult r = RunRuntimeOracle(OracleBuild::kDeprecatedConstantBuffer, s.pte, s.ptds);
      refs.push_back({pkg, r, RuntimeView(r.out)["ptd_keys"], "original"});
    }
    if (s.legacy_ptd) {
      ASSERT_FALSE(refs[0].result.loaded()) << "the legacy .ptd layout is expected to be refused";
      PackageParts upgraded = pkg;
      for (auto& ef : upgraded.external) {
        if (ef.legacy) UpgradeLegacy(ef);
      }
      const std::string dir = ScratchDir("conformance_" + s.name + "_upgraded");
      Written w = Write(s, upgraded, base, dir);
      OracleResult r = RunRuntimeOracle(OracleBuild::kDeprecatedConstantBuffer, w.pte, w.ptds);
      ASSERT_TRUE(r.loaded()) << "upgrading the .ptd makes it loadable: " << r.Describe();
      refs.push_back({upgraded, r, RuntimeView(r.out)["ptd_keys"], "upgraded .ptd"});
    }

    for (const Reference& ref : refs) {
      for (size_t i = 0; i < grid.size(); i++) {
        const BackendConfig config = Apply(grid[i], base);
        const std::string variant = ref.label + ": " + Describe(grid[i], config);
        const std::string dir = ScratchDir("conformance_" + std::to_string(subject_index) + "_" +
                                           std::to_string(&ref - refs.data()) + "_" + std::to_string(i));
        Written w;
        try {
          w = Write(s, ref.pkg, config, dir);
        } catch (const std::exception& e) {
          ADD_FAILURE() << s.name << " [" << variant << "]: the writer refused: " << e.what();
          continue;
        }
        tally.outputs++;
        for (OracleBuild b : {OracleBuild::kDeprecatedConstantBuffer, OracleBuild::kOss}) {
          Judge(s, variant, w, b, ref.result, ref.ptd_keys, &tally);
        }
        std::filesystem::remove_all(dir);
      }
    }
    subject_index++;
  }
  std::printf(
      "[ conformance ] %zu grid points, %zu outputs written, %zu runtime runs: %zu loaded, %zu refused as expected "
      "(%zu: inline constants in the OSS build, %zu: like the original, legacy .ptd)\n",
      grid.size(), tally.outputs, tally.runs, tally.loaded, tally.refused_as_expected, tally.refused_inline_oss,
      tally.refused_like_original);
  EXPECT_EQ(tally.loaded + tally.refused_as_expected, tally.runs);
}

// A program with no methods (found by the fuzzer): the runtime loads it, but its re-encoding is
// 44 bytes, shorter than the 64 bytes Program::load reads first. What repack writes must load
// as the input does.
TEST(WriterConformance, TinyProgramStaysLoadable) {
  PTEPACK_REQUIRE_RUNTIME_ORACLE();
  const std::string in = std::string(PTEPACK_SOURCE_DIR) + "/testdata/regressions/pte-no-methods-tiny-program.pte";
  const std::string out = ScratchDir("tiny") + "/tiny.pte";
  ASSERT_TRUE(RunRuntimeOracle(OracleBuild::kDeprecatedConstantBuffer, in).loaded());
  RunResult r = RunCli({"repack", in, "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::filesystem::file_size(out), 64u);
  OracleResult o = RunRuntimeOracle(OracleBuild::kDeprecatedConstantBuffer, out);
  EXPECT_TRUE(o.loaded()) << o.Describe();
}

// A fuzzer-found program whose one constant tensor needs no bytes, in a
// constant segment of 7 zero bytes. Restoring cut the buffer to nothing, so
// the rewritten program had an empty constant segment that its tensor still
// referred to, and repack refused its own output. The runtime loads the
// input, and must load what repack writes.
TEST(WriterConformance, ZeroSizeConstantStaysLoadable) {
  PTEPACK_REQUIRE_RUNTIME_ORACLE();
  const std::string in =
      std::string(PTEPACK_SOURCE_DIR) + "/testdata/regressions/pte-zero-size-constant-in-padding.pte";
  const std::string out = ScratchDir("zero_size_constant") + "/out.pte";
  ASSERT_EQ(RunCli({"verify", in}).exit_code, 0);
  ASSERT_TRUE(RunRuntimeOracle(OracleBuild::kDeprecatedConstantBuffer, in).loaded());
  RunResult r = RunCli({"repack", in, "-o", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(RunCli({"verify", out}).exit_code, 0);
  OracleResult o = RunRuntimeOracle(OracleBuild::kDeprecatedConstantBuffer, out);
  EXPECT_TRUE(o.loaded()) << o.Describe();
}

}  // namespace
}  // namespace ptepack::testing
