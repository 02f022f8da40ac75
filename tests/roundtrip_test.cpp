// Read every real ExecuTorch fixture, restore it to package form, infer the
// config that produced it, write it again and compare bytes.
#include <gtest/gtest.h>

#include "serialize/model/program_parts.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "serialize/read/restore.h"
#include "serialize/write/infer_config.h"
#include "serialize/write/pte_writer.h"
#include "tests/test_util.h"

namespace ptepack {
namespace {

using testing::FixturePath;
using testing::ReadFile;

struct Case {
  const char* pte;
  const char* ptd;    // may be null
  const char* order;  // producer whose layout we expect to match
};

class FixtureRoundTrip : public ::testing::TestWithParam<Case> {};

TEST_P(FixtureRoundTrip, ReadThenWriteGivesSameBytes) {
  const Case& c = GetParam();
  auto pte = PteFile::Open(FixturePath(c.pte));
  ASSERT_TRUE(pte->ok()) << pte->report().findings().front().ToString();
  std::vector<std::unique_ptr<PtdFile>> ptd_files;
  std::vector<const PtdFile*> ptds;
  if (c.ptd) {
    ptd_files.push_back(PtdFile::Open(FixturePath(c.ptd)));
    ASSERT_TRUE(ptd_files.back()->ok()) << ptd_files.back()->report().findings().front().ToString();
    ptds.push_back(ptd_files.back().get());
  }
  PackageParts pkg = PackageFromPte(*pte, ptds);
  InferredConfig inf = InferConfig(*pte, pkg, ptds);
  inf.ApplyBlobAlignments(pkg);
  ASSERT_TRUE(inf.exact) << c.pte << ": " << inf.note;
  EXPECT_STREQ(FlatbufferOrderName(inf.config.flatbuffer_order), c.order);

  PteLayout layout = LayoutPte(pkg, inf.config);
  std::vector<uint8_t> written = RenderPte(layout);
  std::vector<uint8_t> original = ReadFile(FixturePath(c.pte));
  ASSERT_EQ(written.size(), original.size());
  EXPECT_TRUE(written == original) << "bytes differ for " << c.pte;

  if (c.ptd) {
    ASSERT_EQ(layout.external.size(), 1u);
    PtdLayout pl = LayoutPtd(layout.external[0], inf.config.ptd_segment_alignment);
    std::vector<uint8_t> ptd_written = RenderPtd(pl);
    std::vector<uint8_t> ptd_original = ReadFile(FixturePath(c.ptd));
    ASSERT_EQ(ptd_written.size(), ptd_original.size());
    EXPECT_TRUE(ptd_written == ptd_original) << "bytes differ for " << c.ptd;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, FixtureRoundTrip,
    ::testing::Values(Case{"add.pte", nullptr, "flatc"}, Case{"arduino_add.pte", nullptr, "python"},
                      Case{"conv2d_quantized.pte", nullptr, "flatc"}, Case{"keyword_spotting.pte", nullptr, "python"},
                      Case{"linear.pte", "linear.ptd", "flatc"}, Case{"maxpool2d.pte", nullptr, "flatc"},
                      Case{"module_linear_no_constant_segment.pte", nullptr, "flatc-legacy"},
                      Case{"softmax.pte", nullptr, "flatc"}, Case{"stories260k_qnn.pte", nullptr, "python"},
                      Case{"xor.pte", "xor.ptd", "flatc"}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string n = info.param.pte;
      return n.substr(0, n.find('.'));
    });

}  // namespace
}  // namespace ptepack
