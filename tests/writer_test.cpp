// The writer against every config combination: what the reader sees in the
// output must match what the config asked for, and reading the output back
// and writing it with the inferred config must reproduce it byte for byte.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "ptepack/program_builder.h"
#include "serialize/api/package_access.h"
#include "serialize/format/pte_format.h"
#include "serialize/model/program_parts.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "serialize/read/restore.h"
#include "serialize/write/infer_config.h"
#include "serialize/write/pte_writer.h"
#include "tests/test_util.h"

namespace ptepack {
namespace {

namespace efb = executorch_flatbuffer;

Bytes Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return Bytes::Own(std::move(v));
}

// What the test program holds, to compare against what comes back.
struct Model {
  Package pkg;
  Bytes w1, w2, b1, delegate, state, blob;
};

Model MakeModel() {
  Model m;
  m.w1 = Pattern(4 * 3 * 5, 1);  // FLOAT[3,5]: 60 bytes
  m.w2 = Pattern(2 * 7, 2);      // HALF[7]: 14 bytes
  m.b1 = Pattern(8 * 3, 3);      // LONG[3]
  m.delegate = Pattern(1000, 4);
  m.state = Pattern(4 * 4, 5);  // FLOAT[4] initial state
  m.blob = Pattern(300, 6);
  ProgramBuilder b;
  auto& f = b.AddMethod("forward");
  uint32_t x = f.Tensor({ScalarType::kFloat, {3, 5}, PlannedLocation{1, 0}});
  uint32_t w1 = f.ConstantTensor({ScalarType::kFloat, {3, 5}}, m.w1, "layer.weight");
  uint32_t w2 = f.ConstantTensor({ScalarType::kHalf, {7}}, m.w2, "layer.scale");
  uint32_t b1 = f.ConstantTensor({ScalarType::kLong, {3}}, m.b1);
  uint32_t w1_again = f.ConstantTensor({ScalarType::kFloat, {3, 5}}, m.w1, "tied.weight");  // deduplicated
  uint32_t st = f.MutableBuffer({ScalarType::kFloat, {4}, PlannedLocation{1, 64}}, "counter", m.state);
  uint32_t y = f.Tensor({ScalarType::kFloat, {3, 5}, PlannedLocation{1, 128}});
  uint32_t alpha = f.Double(0.5);
  uint32_t op = f.Operator("aten::add", "out");
  uint32_t del = f.Delegate("TestBackend", m.delegate, {{"mode", Bytes::Copy("fast", 4)}});
  f.KernelCall(
      op, {static_cast<int32_t>(x), static_cast<int32_t>(w1), static_cast<int32_t>(alpha), static_cast<int32_t>(y)},
      {{"model.py", 10, "forward", "x + w"}});
  f.DelegateCall(del,
                 {static_cast<int32_t>(y), static_cast<int32_t>(w2), static_cast<int32_t>(b1),
                  static_cast<int32_t>(w1_again), static_cast<int32_t>(st)},
                 {{"model.py", 11, "forward", "backend(y)"}});
  f.Inputs({static_cast<int32_t>(x)});
  f.Outputs({static_cast<int32_t>(y)});
  f.PlannedBufferSizes({0, 256});
  auto& g = b.AddMethod("get_size");
  g.Outputs({static_cast<int32_t>(g.Int(42))});
  b.AddNamedData("blob", m.blob, 64);
  EXPECT_EQ(b.dedup_bytes_saved(), m.w1.size);
  m.pkg = b.Build();
  return m;
}

struct Written {
  std::vector<uint8_t> pte;
  std::map<std::string, std::vector<uint8_t>> ptds;
};

Written Write(const Model& m, const BackendConfig& c) {
  PteLayout l = LayoutPte(PartsOf(m.pkg), c);
  Written w;
  w.pte = RenderPte(l);
  for (const auto& ef : l.external) w.ptds[ef.tag] = RenderPtd(LayoutPtd(ef, c.ptd_segment_alignment));
  return w;
}

const efb::Tensor* ValueTensor(const efb::ExecutionPlan* plan, uint32_t i) {
  return plan->values()->Get(i)->val_as_Tensor();
}

Bytes View(const std::vector<uint8_t>& v) { return Bytes::View(v.data(), v.size()); }

// Checks the output against the config and the model; returns the readers.
void CheckOutput(const Model& m, const BackendConfig& c, const Written& w) {
  ReadOptions ro;
  ro.segment_alignment = c.segment_alignment;
  ro.tensor_alignment = c.tensor_alignment();
  auto pte = PteFile::FromBytes(View(w.pte), "out.pte", ro);
  ASSERT_TRUE(pte->ok()) << pte->report().findings().front().ToString();
  std::vector<std::unique_ptr<PtdFile>> ptd_files;
  std::vector<const PtdFile*> ptds;
  for (const auto& [tag, bytes] : w.ptds) {
    ReadOptions pro;
    pro.segment_alignment = c.ptd_segment_alignment;
    ptd_files.push_back(PtdFile::FromBytes(View(bytes), tag + ".ptd", pro));
    ASSERT_TRUE(ptd_files.back()->ok()) << ptd_files.back()->report().findings().front().ToString();
    ptds.push_back(ptd_files.back().get());
  }
  pte->CheckExternalKeys(ptds);
  ASSERT_TRUE(pte->ok()) << pte->report().findings().front().ToString();

  const efb::Program* p = pte->program();
  const auto* plan = p->execution_plan()->Get(0);
  ASSERT_EQ(plan->name()->str(), "forward");
  ASSERT_EQ(p->execution_plan()->Get(1)->name()->str(), "get_size");

  // Constants: in the constant segment at the tensor alignment, or in a .ptd.
  bool external = c.external_constants;
  struct Want {
    uint32_t value;
    Bytes data;
    const char* key;
  };
  std::vector<Want> wants{
      {1, m.w1, "layer.weight"}, {2, m.w2, "layer.scale"}, {3, m.b1, "constant_3"}, {4, m.w1, "tied.weight"}};
  for (const auto& want : wants) {
    const auto* t = ValueTensor(plan, want.value);
    if (external) {
      ASSERT_TRUE(t->extra_tensor_info());
      EXPECT_EQ(t->extra_tensor_info()->location(), efb::TensorDataLocation::EXTERNAL);
      std::string key = t->extra_tensor_info()->fully_qualified_name()->str();
      EXPECT_EQ(key, want.key);
      ASSERT_EQ(ptds.size(), 1u);
      auto data = ptds[0]->Find(key);
      ASSERT_TRUE(data.has_value()) << key;
      EXPECT_TRUE(data->Equals(want.data)) << key;
    } else {
      EXPECT_EQ(t->extra_tensor_info(), nullptr) << "internal constants carry no name";
      uint32_t idx = t->data_buffer_idx();
      ASSERT_GT(idx, 0u);
      if (c.inline_constants) {
        const auto* st = p->constant_buffer()->Get(idx)->storage();
        EXPECT_EQ(std::memcmp(st->data(), want.data.data, want.data.size), 0);
        EXPECT_EQ(static_cast<uint64_t>(st->data() - w.pte.data()) % c.tensor_alignment(), 0u);
        continue;
      }
      const auto* cs = p->constant_segment();
      uint64_t off = cs->offsets()->Get(idx);
      EXPECT_EQ(off % c.tensor_alignment(), 0u);
      // Alignment below the element size is allowed but reported.
      if ((pte->segments()[cs->segment_index()].file_offset + off) %
              ScalarTypeSize(static_cast<int>(t->scalar_type())) !=
          0) {
        EXPECT_LT(c.tensor_alignment(), ScalarTypeSize(static_cast<int>(t->scalar_type())));
        EXPECT_TRUE(pte->report().Has("tensor-misaligned"));
      }
      Bytes seg = pte->SegmentData(cs->segment_index());
      ASSERT_LE(off + want.data.size, seg.size);
      EXPECT_EQ(std::memcmp(seg.data + off, want.data.data, want.data.size), 0);
    }
  }
  // The tied weight shares storage with the first one.
  if (!external) {
    EXPECT_EQ(ValueTensor(plan, 1)->data_buffer_idx(), ValueTensor(plan, 4)->data_buffer_idx());
  }

  // Mutable buffer: name only when asked, initial state in the mutable segment.
  const auto* st = ValueTensor(plan, 5);
  bool named = st->extra_tensor_info() && st->extra_tensor_info()->fully_qualified_name();
  if (c.external_mutable_weights) {
    EXPECT_EQ(st->extra_tensor_info()->location(), efb::TensorDataLocation::EXTERNAL);
    auto data = ptds.at(0)->Find(st->extra_tensor_info()->fully_qualified_name()->str());
    ASSERT_TRUE(data.has_value());
    EXPECT_TRUE(data->Equals(m.state));
  } else {
    EXPECT_EQ(named, c.emit_mutable_buffer_names);
    ASSERT_TRUE(p->mutable_data_segments());
    const auto* ms = p->mutable_data_segments()->Get(0);
    Bytes seg = pte->SegmentData(ms->segment_index());
    uint64_t off = ms->offsets()->Get(st->data_buffer_idx());
    EXPECT_EQ(std::memcmp(seg.data + off, m.state.data, m.state.size), 0);
  }

  // Delegate payload: in a segment, or inline at the delegate alignment.
  const auto* d = plan->delegates()->Get(0);
  EXPECT_EQ(d->id()->str(), "TestBackend");
  if (c.extract_delegate_segments) {
    ASSERT_EQ(d->processed()->location(), efb::DataLocation::SEGMENT);
    EXPECT_TRUE(pte->SegmentData(d->processed()->index()).Equals(m.delegate));
  } else {
    ASSERT_EQ(d->processed()->location(), efb::DataLocation::INLINE);
    const auto* data = p->backend_delegate_data()->Get(d->processed()->index())->data();
    EXPECT_EQ(std::memcmp(data->data(), m.delegate.data, m.delegate.size), 0);
    EXPECT_EQ(static_cast<uint64_t>(data->data() - w.pte.data()) % c.delegate_data_alignment(), 0u);
  }

  // Stack traces only when asked.
  const auto* chain = plan->chains()->Get(0);
  if (c.emit_stacktrace) {
    ASSERT_TRUE(chain->stacktrace());
    EXPECT_EQ(chain->stacktrace()->Get(1)->items()->Get(0)->context()->str(), "backend(y)");
  } else {
    EXPECT_EQ(chain->stacktrace(), nullptr);
  }

  // Named data at lcm(segment alignment, 64).
  ASSERT_TRUE(p->named_data());
  const auto* nd = p->named_data()->Get(0);
  EXPECT_EQ(nd->key()->str(), "blob");
  EXPECT_TRUE(pte->SegmentData(nd->segment_index()).Equals(m.blob));
  // Like ExecuTorch, segment offsets are aligned relative to the segment base,
  // which itself is only aligned to segment_alignment.
  EXPECT_EQ(pte->segments()[nd->segment_index()].offset % std::max<uint64_t>(64, c.segment_alignment), 0u);
  for (const auto& s : pte->segments()) EXPECT_EQ(s.file_offset % c.segment_alignment, 0u);

  // Read back, infer the config, write again: same bytes.
  PackageParts again = PackageFromPte(*pte, ptds);
  InferredConfig inf = InferConfig(*pte, again, ptds);
  inf.ApplyBlobAlignments(again);
  EXPECT_TRUE(inf.exact) << inf.note;
  inf.config.ptd_segment_alignment = c.ptd_segment_alignment;
  PteLayout l2 = LayoutPte(again, inf.config);
  EXPECT_TRUE(RenderPte(l2) == w.pte) << "rewrite differs";
}

// LayoutPteHead (config inference's verification) is the head of the real
// file -- flatbuffer and eh00 header, byte for byte -- without the segments'
// pieces, and the same head LayoutPte writes in front of them.
TEST(Writer, HeadLayoutIsTheRealFilesHeadWithoutPieces) {
  for (const std::string name :
       {"add.pte", "keyword_spotting.pte", "module_linear_no_constant_segment.pte", "arduino_add.pte"}) {
    auto pte = PteFile::Open(testing::FixturePath(name));
    ASSERT_TRUE(pte->ok()) << name;
    PackageParts pkg = PackageFromPte(*pte, {});
    InferredConfig inf = InferConfig(*pte, pkg);
    inf.ApplyBlobAlignments(pkg);
    const PteLayout head = LayoutPteHead(pkg, inf.config);
    ASSERT_EQ(head.head.size(), pte->program_size()) << name;
    EXPECT_EQ(std::memcmp(head.head.data(), pte->file().data, head.head.size()), 0) << name;
    EXPECT_TRUE(head.segments.empty()) << name;
    const PteLayout full = LayoutPte(pkg, inf.config);
    EXPECT_EQ(head.head, full.head) << name;
    EXPECT_EQ(head.segment_base_offset, full.segment_base_offset) << name;
    EXPECT_EQ(head.header_size, full.header_size) << name;
    EXPECT_EQ(RenderPte(full), testing::ReadFile(testing::FixturePath(name))) << name;
  }
}

TEST(Writer, DefaultConfigMatchesExecuTorchDefaults) {
  BackendConfig c;
  EXPECT_TRUE(c.extract_delegate_segments);
  EXPECT_EQ(c.segment_alignment, 128u);
  EXPECT_FALSE(c.constant_tensor_alignment.has_value());
  EXPECT_EQ(c.tensor_alignment(), 16u);
  EXPECT_FALSE(c.external_constants);
  EXPECT_FALSE(c.external_mutable_weights);
  EXPECT_FALSE(c.emit_mutable_buffer_names);
  EXPECT_FALSE(c.emit_stacktrace);
  Model m = MakeModel();
  CheckOutput(m, c, Write(m, c));
}

class AlignmentSweep : public ::testing::TestWithParam<uint64_t> {};

TEST_P(AlignmentSweep, SegmentAlignment) {
  Model m = MakeModel();
  BackendConfig c;
  c.segment_alignment = GetParam();
  CheckOutput(m, c, Write(m, c));
}

TEST_P(AlignmentSweep, ConstantTensorAlignment) {
  Model m = MakeModel();
  BackendConfig c;
  c.constant_tensor_alignment = GetParam();
  CheckOutput(m, c, Write(m, c));
}

TEST_P(AlignmentSweep, DelegateAlignmentInline) {
  Model m = MakeModel();
  BackendConfig c;
  c.extract_delegate_segments = false;
  c.delegate_alignment = GetParam();
  CheckOutput(m, c, Write(m, c));
}

TEST_P(AlignmentSweep, PtdSegmentAlignmentWithExternalConstants) {
  Model m = MakeModel();
  BackendConfig c;
  c.external_constants = true;
  c.ptd_segment_alignment = GetParam();
  CheckOutput(m, c, Write(m, c));
}

INSTANTIATE_TEST_SUITE_P(PowersOfTwo, AlignmentSweep,
                         ::testing::Values(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096));

// Every combination of the boolean options, under each flatbuffer layout.
class OptionMatrix : public ::testing::TestWithParam<std::tuple<int, FlatbufferOrder>> {};

TEST_P(OptionMatrix, Combination) {
  int bits = std::get<0>(GetParam());
  BackendConfig c;
  c.flatbuffer_order = std::get<1>(GetParam());
  c.extract_delegate_segments = bits & 1;
  c.external_constants = bits & 2;
  c.external_mutable_weights = bits & 4;
  c.emit_mutable_buffer_names = bits & 8;
  c.emit_stacktrace = bits & 16;
  c.segment_alignment = (bits & 32) ? 4096 : 128;
  c.constant_tensor_alignment = (bits & 32) ? 64 : 16;
  Model m = MakeModel();
  CheckOutput(m, c, Write(m, c));
}

INSTANTIATE_TEST_SUITE_P(All, OptionMatrix,
                         ::testing::Combine(::testing::Range(0, 64),
                                            ::testing::Values(FlatbufferOrder::kFlatc,
                                                              FlatbufferOrder::kPythonObjectApi,
                                                              FlatbufferOrder::kFlatcLegacy)));

TEST(Writer, TagCallbackSplitsConstantsIntoSeveralFiles) {
  Model m = MakeModel();
  BackendConfig c;
  c.external_constants_fn = [](const ConstantTensorInfo& t) -> std::optional<std::string> {
    if (t.name.rfind("layer.", 0) == 0) return std::string("layers");
    if (t.name.empty()) return std::string("misc");
    return std::nullopt;  // tied.weight stays in the program
  };
  PteLayout l = LayoutPte(PartsOf(m.pkg), c);
  std::map<std::string, std::set<std::string>> keys;
  for (const auto& ef : l.external) {
    for (const auto& e : ef.entries) keys[ef.tag].insert(e.key);
  }
  EXPECT_EQ(keys["layers"], (std::set<std::string>{"layer.weight", "layer.scale"}));
  EXPECT_EQ(keys["misc"], (std::set<std::string>{"constant_3"}));
  EXPECT_EQ(keys.size(), 2u);
  auto pte = PteFile::FromBytes(Bytes::Own(RenderPte(l)), "x.pte");
  ASSERT_TRUE(pte->ok());
  const auto* plan = pte->program()->execution_plan()->Get(0);
  // tied.weight is internal and its data is in the constant segment.
  const auto* tied = plan->values()->Get(4)->val_as_Tensor();
  EXPECT_EQ(tied->extra_tensor_info(), nullptr);
  uint32_t idx = tied->data_buffer_idx();
  Bytes seg = pte->SegmentData(pte->program()->constant_segment()->segment_index());
  EXPECT_EQ(std::memcmp(seg.data + pte->program()->constant_segment()->offsets()->Get(idx), m.w1.data, m.w1.size), 0);
  // Only the placeholder and the tied weight remain.
  EXPECT_EQ(pte->program()->constant_segment()->offsets()->size(), 2u);
}

// WritePackage(Package&&) lays out the tables in place and frees them early:
// its files must be the const& overload's, whether the moved package was the
// only holder of its tables or a copy shares them (and that copy, written
// after, is unchanged).
TEST(Writer, MovedPackageWritesTheSameFiles) {
  BackendConfig split;
  split.external_constants = true;
  BackendConfig inline_constants;
  inline_constants.inline_constants = true;
  int round = 0;
  for (const BackendConfig& c : {BackendConfig{}, split, inline_constants}) {
    const std::string dir = testing::TempDir("moved_package_" + std::to_string(round++));
    // Each write in a directory of its own (a .ptd is named after its tag): its files by name.
    auto write = [&](const std::string& sub, auto&& pkg) {
      std::filesystem::create_directories(dir + "/" + sub);
      WritePackage(std::forward<decltype(pkg)>(pkg), c, dir + "/" + sub + "/model.pte");
      std::map<std::string, std::vector<uint8_t>> f;
      for (const auto& e : std::filesystem::directory_iterator(dir + "/" + sub)) {
        f[e.path().filename().string()] = testing::ReadFile(e.path().string());
      }
      return f;
    };
    Model kept = MakeModel();
    const auto ref = write("ref", kept.pkg);
    ASSERT_EQ(ref.count("model.pte"), 1u);
    EXPECT_EQ(ref.size(), c.external_constants ? 2u : 1u);
    Model alone = MakeModel();
    EXPECT_EQ(write("alone", std::move(alone.pkg)), ref);
    Package copy = kept.pkg;
    EXPECT_EQ(write("shared", std::move(copy)), ref);
    EXPECT_EQ(write("after", kept.pkg), ref);
    // What was moved from is empty, as the header says.
    EXPECT_THROW(WritePackage(alone.pkg, c, dir + "/empty.pte"), Error);
  }
}

TEST(Writer, LegacyInlineConstants) {
  Model m = MakeModel();
  BackendConfig c;
  c.inline_constants = true;
  c.constant_tensor_alignment = 32;
  CheckOutput(m, c, Write(m, c));
}

TEST(Writer, LegacyHeaderHasNoSegmentDataSize) {
  Model m = MakeModel();
  BackendConfig c;
  c.legacy_extended_header = true;
  Written w = Write(m, c);
  auto pte = PteFile::FromBytes(View(w.pte), "x.pte");
  ASSERT_TRUE(pte->ok());
  ASSERT_TRUE(pte->header());
  EXPECT_EQ(pte->header()->length, 24u);
  EXPECT_FALSE(pte->header()->has_segment_data_size);
}

TEST(Writer, BadConfigsAreRejectedWithTheFieldName) {
  Model m = MakeModel();
  for (uint64_t bad : {0ull, 3ull, 24ull, 100ull}) {
    BackendConfig c;
    c.segment_alignment = bad;
    try {
      LayoutPte(PartsOf(m.pkg), c);
      FAIL() << "accepted segment_alignment " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.finding().code, "bad-config");
      EXPECT_NE(std::string(e.what()).find("segment_alignment"), std::string::npos);
    }
  }
  BackendConfig both;
  both.external_constants = true;
  both.external_constants_fn = [](const ConstantTensorInfo&) { return std::optional<std::string>("x"); };
  EXPECT_THROW(both.Validate(), Error);
}

// Our flatc layout against the real flatc: print our flatbuffer as JSON with
// flatc and let flatc rebuild it; the bytes must be the same.
TEST(Writer, FlatcLayoutMatchesRealFlatc) {
  if (std::system("flatc --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "flatc not installed";
  Model m = MakeModel();
  BackendConfig c;
  c.extract_delegate_segments = false;  // keep some inline data in the flatbuffer too
  PteLayout l = LayoutPte(PartsOf(m.pkg), c);
  ASSERT_NE(l.segment_base_offset, 0u);
  // Remove the 32-byte padded eh00 header to get flatc's own output back.
  ASSERT_GT(l.head.size(), 40u);
  std::vector<uint8_t> fb(l.head.size() - 32);
  std::memcpy(fb.data(), l.head.data(), 8);
  std::memcpy(fb.data() + 8, l.head.data() + 40, l.head.size() - 40);
  StoreU32(fb.data(), LoadU32(l.head.data()) - 32);
  std::string dir = testing::TempDir("flatc_diff");
  testing::WriteFile(dir + "/ours.pte", fb);
  std::string schema = std::string(PTEPACK_SCHEMA_DIR) + "/program.fbs";
  std::string cmd = "cd " + dir + " && flatc --json --strict-json --raw-binary " + schema +
                    " -- ours.pte && mkdir -p bin && flatc --binary -o bin " + schema + " ours.json";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::vector<uint8_t> theirs = testing::ReadFile(dir + "/bin/ours.pte");
  EXPECT_TRUE(theirs == fb) << "flatc rebuilt " << theirs.size() << " bytes, ours " << fb.size();
}

}  // namespace
}  // namespace ptepack

namespace ptepack {
namespace {

// Build() shares the builder's value tables with the package it returns. A
// layout that rewrites tensors (external constants drop or keep names, move
// data) must not reach the builder: a second Build() writes the same bytes as
// the first, with either config.
TEST(Writer, BuildTwiceAfterALayoutRewroteTensors) {
  Bytes w = Pattern(4 * 8, 7), b = Pattern(4 * 8, 8);
  ProgramBuilder builder;
  auto& f = builder.AddMethod("forward");
  uint32_t x = f.Tensor({ScalarType::kFloat, {8}, PlannedLocation{1, 0}});
  uint32_t wi = f.ConstantTensor({ScalarType::kFloat, {8}}, w, "w");
  uint32_t bi = f.ConstantTensor({ScalarType::kFloat, {8}}, b);
  f.KernelCall(f.Operator("aten::add", "out"),
               {static_cast<int32_t>(x), static_cast<int32_t>(wi), static_cast<int32_t>(bi), static_cast<int32_t>(x)});
  f.Inputs({static_cast<int32_t>(x)});
  f.Outputs({static_cast<int32_t>(x)});
  f.PlannedBufferSizes({0, 32});
  BackendConfig inline_cfg;
  BackendConfig external_cfg;
  external_cfg.external_constants = true;

  Package first = builder.Build();
  const std::vector<uint8_t> external1 = RenderPte(LayoutPte(PartsOf(first), external_cfg));
  const std::vector<uint8_t> inline1 = RenderPte(LayoutPte(PartsOf(first), inline_cfg));
  Package second = builder.Build();
  EXPECT_TRUE(RenderPte(LayoutPte(PartsOf(second), inline_cfg)) == inline1);
  EXPECT_TRUE(RenderPte(LayoutPte(PartsOf(second), external_cfg)) == external1);

  auto pte = PteFile::FromBytes(Bytes::Own(std::vector<uint8_t>(external1)), "x.pte");
  ASSERT_TRUE(pte->ok());
  const auto* values = pte->program()->execution_plan()->Get(0)->values();
  ASSERT_NE(values->Get(wi)->val_as_Tensor()->extra_tensor_info(), nullptr);
  EXPECT_EQ(values->Get(wi)->val_as_Tensor()->extra_tensor_info()->fully_qualified_name()->str(), "w");
  EXPECT_EQ(values->Get(wi)->val_as_Tensor()->extra_tensor_info()->location(), efb::TensorDataLocation::EXTERNAL);
  ASSERT_NE(values->Get(bi)->val_as_Tensor()->extra_tensor_info(), nullptr);  // external too, under a made-up name
  EXPECT_NE(values->Get(bi)->val_as_Tensor()->extra_tensor_info()->fully_qualified_name()->str(), "w");
  EXPECT_EQ(values->Get(x)->val_as_Tensor()->extra_tensor_info(), nullptr);
  auto inl = PteFile::FromBytes(Bytes::Own(std::vector<uint8_t>(inline1)), "y.pte");
  ASSERT_TRUE(inl->ok());
  for (uint32_t i : {x, wi, bi}) {
    EXPECT_EQ(inl->program()->execution_plan()->Get(0)->values()->Get(i)->val_as_Tensor()->extra_tensor_info(),
              nullptr);
  }
}

// A key twice in one .ptd is refused before anything is laid out; with
// several repeated, the one repeated first in entry order is named ("a" at
// entry 3, before "b" at entry 4). Taking the entries (&&) or not, the same.
TEST(Writer, PtdLayoutNamesTheFirstRepeatedKey) {
  static const uint8_t bytes[4] = {1, 2, 3, 4};
  ExternalFile ef;
  ef.tag = "w";
  for (const char* k : {"b", "a", "c", "a", "b"}) ef.entries.push_back(NamedBlob{k, Bytes::View(bytes, 4), 1, nullptr});
  auto message = [](auto&& call) {
    try {
      call();
    } catch (const Error& e) {
      return e.finding().code + ": " + e.finding().message;
    }
    return std::string("no error");
  };
  EXPECT_EQ(message([&] { LayoutPtd(ef, 128); }), "duplicate-key: key \"a\" twice in w.ptd");
  EXPECT_EQ(message([&] { LayoutPtd(ExternalFile(ef), 128); }), "duplicate-key: key \"a\" twice in w.ptd");
  ef.entries.pop_back();
  ef.entries.erase(ef.entries.begin() + 3);
  EXPECT_EQ(message([&] { LayoutPtd(ef, 128); }), "no error");
}

}  // namespace
}  // namespace ptepack
