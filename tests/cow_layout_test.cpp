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

#include "program_views_generated.h"
#include "serialize/format/fbtree.h"
#include "serialize/io/file_io.h"
#include "serialize/model/package.h"
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
void CheckVariants(const Package& pkg, const BackendConfig& base, const std::string& what) {
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
  Package pkg = PackageFromPte(*pte, ptds);
  const InferredConfig inf = InferConfig(*pte, pkg, ptds);
  inf.ApplyBlobAlignments(pkg);
  CheckVariants(pkg, inf.config, name);
  // The inferred config still reproduces the file after all of that.
  EXPECT_TRUE(RenderPte(LayoutPte(pkg, inf.config)) == ReadFile(FixturePath(name)));

  Package named = pkg;
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
