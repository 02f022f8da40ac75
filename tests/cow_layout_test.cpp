// LayoutPte works on a shallow copy of the caller's program and changes
// deeper tables copy-on-write (fb::Own) instead of deep-copying the whole
// tree (issue 16: the copy doubled the peak memory of repack). A table it
// changes without owning it first would change the caller's package: these
// tests lay out real ExecuTorch programs with every placement option and
// check that the input encodes to the same bytes afterwards and that a second
// layout gives the same file. Also: AtomicFile's direct mode and the source
// descriptor it hands from one output to the next (extract's 10,000 files).
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "program_views_generated.h"
#include "serialize/format/fbtree.h"
#include "serialize/format/program_json.h"
#include "serialize/io/file_io.h"
#include "serialize/model/program_parts.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "serialize/read/restore.h"
#include "serialize/write/infer_config.h"
#include "serialize/write/pte_writer.h"
#include "tests/test_util.h"

namespace ptepack {
namespace {

namespace fs = std::filesystem;
using testing::FixturePath;
using testing::ReadFile;

std::vector<uint8_t> EncodeTree(const fb::Table& t) { return fb::Encode(prog::S(), t, fb::EncodeOptions{}).data; }

struct Variant {
  const char* name;
  void (*apply)(BackendConfig&);
};

const Variant kVariants[] = {
    {"inferred", [](BackendConfig&) {}},
    {"delegates inline", [](BackendConfig& c) { c.extract_delegate_segments = false; }},
    {"delegates extracted", [](BackendConfig& c) { c.extract_delegate_segments = true; }},
    {"no stacktraces, no buffer names",
     [](BackendConfig& c) {
       c.emit_stacktrace = false;
       c.emit_mutable_buffer_names = false;
     }},
    {"external constants and mutable weights",
     [](BackendConfig& c) {
       c.external_constants = true;
       c.external_mutable_weights = true;
     }},
    {"constants by callback", [](BackendConfig& c) {
       c.external_constants_fn = [](const ConstantTensorInfo& i) -> std::optional<std::string> {
         return i.value_index % 2 ? std::optional<std::string>("odd") : std::nullopt;
       };
     }}};

// Lays `pkg` out with every variant of `base`: the input must encode to the
// same bytes afterwards and a second layout must give the same file.
void CheckVariants(const PackageParts& pkg, const BackendConfig& base, const std::string& what) {
  const std::vector<uint8_t> before = EncodeTree(*pkg.program);
  const size_t mutable_before = pkg.mutable_data ? pkg.mutable_data->size() : 0;
  int laid_out = 0;
  for (const Variant& v : kVariants) {
    SCOPED_TRACE(what + ", " + v.name);
    BackendConfig cfg = base;
    v.apply(cfg);
    std::vector<uint8_t> first, second;
    try {
      first = RenderPte(LayoutPte(pkg, cfg));
      second = RenderPte(LayoutPte(pkg, cfg));
      ++laid_out;
    } catch (const Error&) {
      // Some options do not apply to some programs; the input must still be intact.
    }
    EXPECT_TRUE(first == second) << "a second layout of the same package differs";
    ASSERT_TRUE(EncodeTree(*pkg.program) == before) << "layout changed the caller's program";
    EXPECT_EQ(pkg.mutable_data ? pkg.mutable_data->size() : 0, mutable_before);
  }
  EXPECT_GE(laid_out, 3);
}

// Names on every tensor that has none, as ProgramBuilder's placement hints
// and named mutable buffers carry them: placement then drops or moves them,
// changing ExtraTensorInfo tables (files read back have few such names).
void AddNames(fb::Table& program) {
  prog::ForEachTensor(program, [](fb::Table&, uint32_t vi, fb::Table& t) {
    prog::Tensor tensor{t};
    if (tensor.get_data_buffer_idx() == 0 || tensor.extra_tensor_info().table()) return;
    auto eti = prog::ExtraTensorInfo<>::New();
    prog::ExtraTensorInfo{*eti}.set_fully_qualified_name("named_" + std::to_string(vi));
    tensor.extra_tensor_info() = fb::TableValue(eti);
  });
}

class CopyOnWriteLayout : public ::testing::TestWithParam<const char*> {};

TEST_P(CopyOnWriteLayout, LeavesTheInputProgramUnchanged) {
  const std::string name = GetParam();
  if (!fs::exists(FixturePath(name))) GTEST_SKIP() << "fixture " << name << " not found";
  auto pte = PteFile::Open(FixturePath(name));
  ASSERT_TRUE(pte->ok());
  std::vector<std::unique_ptr<PtdFile>> ptd_files;
  std::vector<const PtdFile*> ptds;
  const std::string ptd = name.substr(0, name.rfind('.')) + ".ptd";
  if (fs::exists(FixturePath(ptd))) {
    ptd_files.push_back(PtdFile::Open(FixturePath(ptd)));
    ptds.push_back(ptd_files.back().get());
  }
  PackageParts pkg = PackageFromPte(*pte, ptds);
  const InferredConfig inf = InferConfig(*pte, pkg, ptds);
  inf.ApplyBlobAlignments(pkg);
  CheckVariants(pkg, inf.config, name);
  // The inferred config still reproduces the file after all of that.
  EXPECT_TRUE(RenderPte(LayoutPte(pkg, inf.config)) == ReadFile(FixturePath(name)));

  PackageParts named = pkg;
  named.program = fb::Clone(*pkg.program);
  AddNames(*named.program);
  CheckVariants(named, inf.config, name + " with names");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CopyOnWriteLayout,
                         ::testing::Values("add.pte", "conv2d_quantized.pte", "keyword_spotting.pte", "linear.pte",
                                           "stories260k_qnn.pte", "xor.pte", "module_linear_no_constant_segment.pte"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string n = info.param;
                           return n.substr(0, n.find('.'));
                         });

TEST(FbTreeOwn, CopiesASharedTableOnceAndLeavesTheOtherTreeAlone) {
  auto root = prog::Program<>::New();
  auto plan = prog::ExecutionPlan<>::New();
  prog::ExecutionPlan{*plan}.set_name("forward");
  prog::Program{*root}.execution_plan() = fb::OffsetVector({fb::TableValue(plan)}, reflection::Obj);

  std::shared_ptr<fb::Table> copy = fb::ShallowClone(*root);
  auto& slot = prog::Program{*copy}.execution_plan().mutable_elems()[0].mutable_table();
  EXPECT_EQ(slot.get(), plan.get());  // shared until changed
  fb::Table& owned = fb::Own(slot);
  EXPECT_NE(&owned, plan.get());
  prog::ExecutionPlan{owned}.set_name("changed");
  EXPECT_EQ(prog::ExecutionPlan{std::as_const(*plan)}.get_name(), "forward");
  EXPECT_EQ(&fb::Own(slot), &owned);  // now the only owner: no second copy

  std::shared_ptr<fb::Table> alone = prog::ExecutionPlan<>::New();
  fb::Table* p = alone.get();
  EXPECT_EQ(&fb::Own(alone), p);
}

// fb::Value holds one payload in 32 bytes (issue 16: the decoded tree of a
// 10,000-method program was 120 MB at 144 bytes a value).
TEST(FbValue, CopiesShareTablesAndBytesButNotElementLists) {
  auto plan = prog::ExecutionPlan<>::New();
  fb::Value v = fb::OffsetVector({fb::TableValue(plan), fb::StringValue("x")}, reflection::Obj);
  fb::Value copy = v;
  copy.mutable_elems().push_back(fb::StringValue("y"));
  EXPECT_EQ(v.elems().size(), 2u);
  EXPECT_EQ(copy.elems().size(), 3u);
  EXPECT_EQ(copy.elems()[0].table().get(), plan.get());
  EXPECT_EQ(copy.elems()[1].str_view().data(), v.elems()[1].str_view().data());
  // Assigning a value its own element (which lives in the payload it replaces).
  v = v.elems()[1];
  EXPECT_EQ(v.kind, fb::Value::Kind::kString);
  EXPECT_EQ(v.str(), "x");
  v = std::move(copy.mutable_elems()[2]);
  EXPECT_EQ(v.str(), "y");
}

TEST(FbValue, ReadsChangeNothingAndWritesRefuseToDropAnotherPayload) {
  fb::Value scalar = fb::ScalarValue(reflection::Int, 7);
  EXPECT_TRUE(scalar.elems().empty());
  EXPECT_EQ(scalar.table(), nullptr);
  EXPECT_EQ(scalar.str(), "");
  EXPECT_EQ(scalar.bits(), 7u);  // still there after the reads
  try {
    scalar.mutable_elems();
    ADD_FAILURE() << "a scalar's bits were dropped for a vector";
  } catch (const Error& e) {
    EXPECT_EQ(e.finding().code, "internal");
  }
  EXPECT_EQ(scalar.bits(), 7u);
  fb::Value absent;  // holds nothing: becomes a vector
  absent.mutable_elems().push_back(fb::StringValue("a"));
  EXPECT_EQ(absent.elems().size(), 1u);
}

TEST(FbValue, KeepsWhatBytesSayAboutTheirSource) {
  const std::string dir = testing::TempDir("fbvalue_bytes");
  const std::string path = dir + "/data.bin";
  {
    std::ofstream f(path, std::ios::binary);
    f << std::string(4096, 'z');
  }
  auto mapping = MappedFile::Open(path);
  fb::Value mapped = fb::ScalarVector(reflection::UByte, mapping->All());
  EXPECT_EQ(MappingOf(mapped.scalars()), mapping.get());  // the writer copies from the file
  EXPECT_EQ(mapped.scalars_size(), 4096u);
  fb::Value zeros = fb::ScalarVector(reflection::UByte, Bytes::Zeros(1 << 20));
  EXPECT_TRUE(IsZeros(zeros.scalars()));  // the writer leaves a hole
  // A view nobody owns is copied, so the value cannot outlive its bytes.
  std::vector<uint8_t> raw = {1, 2, 3};
  fb::Value unowned = fb::ScalarVector(reflection::UByte, Bytes::View(raw.data(), raw.size()));
  raw.assign({9, 9, 9});
  ASSERT_EQ(unowned.scalars_size(), 3u);
  EXPECT_EQ(unowned.scalars_data()[0], 1);
  EXPECT_EQ(unowned.scalars_data()[2], 3);
}

TEST(FbValue, DecodedStringsAndVectorsAreViewsOfTheInput) {
  if (!fs::exists(FixturePath("add.pte"))) GTEST_SKIP() << "fixture add.pte not found";
  auto pte = PteFile::Open(FixturePath("add.pte"));
  ASSERT_TRUE(pte->ok());
  PackageParts pkg = PackageFromPte(*pte, {});
  const auto& plan = *prog::Program{std::as_const(*pkg.program)}.execution_plan().elems().at(0).table();
  const std::string_view name = prog::ExecutionPlan{plan}.name().str_view();
  EXPECT_EQ(name, "forward");
  const Bytes& file = pte->file();
  const auto* p = reinterpret_cast<const uint8_t*>(name.data());
  EXPECT_TRUE(p >= file.data && p + name.size() <= file.data + file.size);
}

// ProgramToJson swaps doubles for placeholders on its own copies of the tables
// that hold them (not on the caller's tree, and without a deep copy).
TEST(FbValue, ProgramToJsonLeavesTheInputAlone) {
  auto root = prog::Program<>::New();
  auto plan = prog::ExecutionPlan<>::New();
  auto dbl = prog::Double<>::New();
  prog::Double{*dbl}.set_double_val(0.1);
  auto ev = prog::EValue<>::New();
  prog::EValue{*ev}.set_val_type(executorch_flatbuffer::KernelTypes::Double);
  prog::EValue{*ev}.val() = fb::TableValue(dbl);
  prog::ExecutionPlan{*plan}.set_name("forward");
  prog::ExecutionPlan{*plan}.values() = fb::OffsetVector({fb::TableValue(ev)}, reflection::Obj);
  prog::Program{*root}.execution_plan() = fb::OffsetVector({fb::TableValue(plan)}, reflection::Obj);
  const std::vector<uint8_t> before = EncodeTree(*root);
  const std::string json = ProgramToJson(*root);
  EXPECT_NE(json.find("double_val\": 0.1\n"), std::string::npos) << json;
  EXPECT_EQ(prog::Double{std::as_const(*dbl)}.get_double_val(), 0.1);
  EXPECT_TRUE(EncodeTree(*root) == before);
  EXPECT_EQ(ProgramToJson(*root), json);
}

int OpenFdsTo(const std::string& path) {
  struct stat want {};
  if (::stat(path.c_str(), &want) != 0) return -1;
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
    struct stat st {};
    if (::stat(e.path().c_str(), &st) == 0 && st.st_dev == want.st_dev && st.st_ino == want.st_ino) ++n;
  }
  return n;
}

TEST(AtomicFileDirect, CreatesTheTargetItselfAndRemovesItWithoutCommit) {
  const std::string dir = testing::TempDir("atomic_direct");
  AtomicFile::Options o;
  o.direct = true;
  o.sync = false;
  {
    AtomicFile f(dir + "/a.bin", o);
    f.Write("abc", 3);
    EXPECT_TRUE(fs::exists(dir + "/a.bin"));  // no temporary name
    f.Commit();
  }
  EXPECT_TRUE(ReadFile(dir + "/a.bin") == (std::vector<uint8_t>{'a', 'b', 'c'}));
  {
    AtomicFile f(dir + "/b.bin", o);
    f.Write("x", 1);
  }
  EXPECT_FALSE(fs::exists(dir + "/b.bin"));
  try {
    AtomicFile f(dir + "/a.bin", o);
    ADD_FAILURE() << "an existing file was replaced";
  } catch (const Error& e) {
    EXPECT_EQ(e.finding().code, "create-failed");
  }
  EXPECT_TRUE(ReadFile(dir + "/a.bin") == (std::vector<uint8_t>{'a', 'b', 'c'}));
}

TEST(AtomicFileDirect, OutputsFromOneSourceShareOneDescriptorWhileWritingGoesOn) {
  const std::string dir = testing::TempDir("atomic_parked");
  const std::string src = dir + "/src.bin";
  std::vector<uint8_t> data(3 * 4096);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 1);
  testing::WriteFile(src, data);
  auto m = MappedFile::Open(src);
  ASSERT_EQ(OpenFdsTo(src), 0);  // the mapping keeps no descriptor
  AtomicFile::Options o;
  o.direct = true;
  o.sync = false;
  {
    WritingScope scope;
    for (int i = 0; i < 3; ++i) {
      AtomicFile f(dir + "/out" + std::to_string(i), o);
      f.Write(m->View(static_cast<size_t>(i) * 4096 + 5, 4000));
      f.Commit();
      EXPECT_EQ(OpenFdsTo(src), 1) << "file " << i;  // kept for the next output, never more than one
    }
  }
  EXPECT_EQ(OpenFdsTo(src), 0);  // closed when writing ends
  for (int i = 0; i < 3; ++i) {
    std::vector<uint8_t> want(data.begin() + i * 4096 + 5, data.begin() + i * 4096 + 4005);
    EXPECT_TRUE(ReadFile(dir + "/out" + std::to_string(i)) == want) << "file " << i;
  }
}

}  // namespace
}  // namespace ptepack
