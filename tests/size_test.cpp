// `ptepack size`: every byte of every fixture is attributed exactly once, and
// the numbers match facts derived by hand from two fixtures.
#include "serialize/insight/size.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "serialize/insight/memory.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "test_util.h"

namespace ptepack {
namespace {

using testing::FixturePath;

std::map<std::string, uint64_t> PartBytes(const FileSize& f) {
  std::map<std::string, uint64_t> m;
  for (const auto& p : f.parts) m[p.group + "/" + p.name] += p.bytes;
  return m;
}

uint64_t GroupBytes(const FileSize& f, const std::string& group) {
  uint64_t n = 0;
  for (const auto& p : f.parts) n += p.group == group ? p.bytes : 0;
  return n;
}

// Parts add up to the file exactly, shares to exactly 100.0 %, and the bands
// cover the file in order without gaps or overlaps.
void ExpectExactCover(const FileSize& f) {
  uint64_t sum = 0;
  int64_t tenths = 0;
  for (const auto& p : f.parts) {
    EXPECT_GT(p.bytes, 0u) << f.file << " " << p.name;
    sum += p.bytes;
    tenths += std::llround(p.percent * 10);
  }
  EXPECT_EQ(sum, f.file_size) << f.file;
  EXPECT_EQ(tenths, 1000) << f.file;
  uint64_t cursor = 0;
  for (const auto& b : f.bands) {
    EXPECT_EQ(b.offset, cursor) << f.file << " band " << b.label;
    EXPECT_GT(b.size, 0u) << f.file << " band " << b.label;
    cursor = b.offset + b.size;
  }
  EXPECT_EQ(cursor, f.file_size) << f.file;
}

TEST(Size, EveryFixturePartsAddUpToTheFileSize) {
  size_t n = 0;
  for (const auto& name : testing::PteFixtures()) {
    auto pte = PteFile::Open(FixturePath(name));
    ASSERT_NE(pte->program(), nullptr) << name;
    std::vector<std::unique_ptr<PtdFile>> ptds;
    std::vector<const PtdFile*> ptrs;
    std::string stem = name.substr(0, name.size() - 4);
    if (std::filesystem::exists(FixturePath(stem + ".ptd"))) {
      ptds.push_back(PtdFile::Open(FixturePath(stem + ".ptd")));
      ptrs.push_back(ptds.back().get());
    }
    SizeReport r = AnalyzeSize(*pte, ptrs);
    EXPECT_EQ(r.pte.file_size, pte->file().size);
    ExpectExactCover(r.pte);
    // The flatbuffer's parts (and the header) fill [0, program_size).
    EXPECT_EQ(GroupBytes(r.pte, "header") + GroupBytes(r.pte, "flatbuffer"), pte->program_size()) << name;
    // No byte is claimed by two objects: each table's extent (computed from its fields, not from
    // the vtable's object size, which a shared vtable may take from another table) ends where the
    // next object starts. None of the fixtures stores a string or segment twice over.
    EXPECT_EQ(r.pte.shared_bytes, 0u) << name;
    ASSERT_EQ(r.ptds.size(), ptrs.size());
    for (size_t i = 0; i < ptrs.size(); ++i) {
      EXPECT_EQ(r.ptds[i].file_size, ptrs[i]->file().size);
      ExpectExactCover(r.ptds[i]);
    }
    ++n;
  }
  EXPECT_GE(n, 10u);
}

// conv2d_quantized.pte, by hand (python struct over the first 40 bytes; `flatc --json
// --raw-binary program.fbs -- conv2d_quantized.pte` for the program):
//   eh00 header: length 32, program_size 2416, segment_base_offset 2432, segment_data_size 9664;
//   file size 12096. segments = [{offset 0, size 9664}]; constant_segment.offsets = [0, 0, 9408].
//   values[0]: CHAR [64,3,7,7] data_buffer_idx 1 -> 9408 bytes at 0;
//   values[1]: INT [64] data_buffer_idx 2 -> 256 bytes at 9408; 9408 + 256 = 9664 (no padding inside).
//   header = 8 (root offset, "ET12") + 32 = 40; flatbuffer = 2416 - 40 = 2376;
//   segment alignment padding = 2432 - 2416 = 16; 40 + 2376 + 16 + 9664 = 12096.
//   Strings (9 in the JSON: method name, 2 container-meta strings, operator names/overloads, ...):
//   sum of 4 + length + 1 = 471.
TEST(Size, Conv2dQuantizedMatchesHandDerivedFacts) {
  auto pte = PteFile::Open(FixturePath("conv2d_quantized.pte"));
  SizeReport r = AnalyzeSize(*pte, {});
  auto m = PartBytes(r.pte);
  EXPECT_EQ(m["header/header"], 40u);
  EXPECT_EQ(GroupBytes(r.pte, "flatbuffer"), 2376u);
  EXPECT_EQ(m["padding/segment alignment"], 16u);
  EXPECT_EQ(m["segments/constants"], 9664u);
  EXPECT_EQ(m.count("padding/constant tensor alignment"), 0u);
  EXPECT_EQ(m["flatbuffer/strings"], 471u);
  ASSERT_EQ(r.tensors.size(), 2u);
  EXPECT_EQ(r.tensors[0].bytes, 9408u);
  EXPECT_EQ(r.tensors[0].dtype, "CHAR");
  EXPECT_EQ(r.tensors[0].shape, (std::vector<int64_t>{64, 3, 7, 7}));
  EXPECT_EQ(r.tensors[1].bytes, 256u);
  EXPECT_EQ(r.tensors[1].value_index, 1);
}

// stories260k_qnn.pte, by hand: eh00 length 32, program_size 18688, segment_base_offset 18688,
//   segment_data_size 1331456; file size 1350144. segments = [{} (empty), {size 1331456}];
//   constant_segment.offsets = [0] (segment 0, empty); kv_forward and prefill_forward each have one
//   QnnBackend delegate with processed {SEGMENT, index 1}: both share segment 1.
//   header 40; flatbuffer 18688 - 40 = 18648; no padding (18688 == 18688 and
//   18688 + 1331456 == 1350144); delegate QnnBackend 1331456. 101 strings, 8922 bytes.
TEST(Size, Stories260kQnnMatchesHandDerivedFacts) {
  auto pte = PteFile::Open(FixturePath("stories260k_qnn.pte"));
  SizeReport r = AnalyzeSize(*pte, {});
  auto m = PartBytes(r.pte);
  EXPECT_EQ(m["header/header"], 40u);
  EXPECT_EQ(GroupBytes(r.pte, "flatbuffer"), 18648u);
  EXPECT_EQ(m["segments/delegate QnnBackend"], 1331456u);
  EXPECT_EQ(GroupBytes(r.pte, "padding"), 0u);
  EXPECT_EQ(m["flatbuffer/strings"], 8922u);
  ASSERT_EQ(r.delegates.size(), 2u);
  for (const auto& d : r.delegates) {
    EXPECT_EQ(d.backend_id, "QnnBackend");
    EXPECT_EQ(d.location, "segment 1");
    EXPECT_EQ(d.bytes, 1331456u);
  }
}

// module_linear_no_constant_segment.pte (constants inline, flatc-legacy order), by hand from
// `flatc --json`: constant_buffer = [{storage: []}, {storage: 16 bytes}, {storage: 16 bytes}].
// The vector of 3 offsets: 4 + 3 * 4 = 16; three Buffer tables, each a vtable offset and one
// storage offset: 3 * 8 = 24; the storage vectors: (4 + 0) + (4 + 16) + (4 + 16) = 44; 84 in all.
// No eh00 header: the header is the root offset and "ET12" (8 bytes), the rest flatbuffer.
TEST(Size, LegacyInlineConstantsMatchHandDerivedFacts) {
  auto pte = PteFile::Open(FixturePath("module_linear_no_constant_segment.pte"));
  SizeReport r = AnalyzeSize(*pte, {});
  auto m = PartBytes(r.pte);
  EXPECT_EQ(m["flatbuffer/inline constants (constant_buffer)"], 84u);
  EXPECT_EQ(m["header/header"], 8u);
  EXPECT_EQ(GroupBytes(r.pte, "flatbuffer"), 1040u - 8u);
  EXPECT_EQ(GroupBytes(r.pte, "segments") + GroupBytes(r.pte, "padding"), 0u);
}

// A lone .ptd gets its own breakdown; a program with errors is not broken down (its tables
// cannot be trusted): its first error, located, exit 2 (README, "Exit status"), whether its
// flatbuffer verifies or not.
TEST(Size, CliPtdAndInvalidPrograms) {
  // linear.ptd is in the legacy layout: broken down when accepted, as verify accepts it.
  auto ptd = testing::RunCli({"size", FixturePath("linear.ptd"), "--json", "--allow-legacy-ptd"});
  ASSERT_EQ(ptd.exit_code, 0) << ptd.err;
  auto j = nlohmann::json::parse(ptd.out);
  uint64_t sum = 0;
  for (const auto& p : j["parts"]) sum += p["bytes"].get<uint64_t>();
  EXPECT_EQ(sum, 336u);
  const std::string bad = std::string(PTEPACK_SOURCE_DIR) + "/testdata/regressions/pte-union-tag-without-value.pte";
  auto inv = testing::RunCli({"size", bad, "--json"});
  EXPECT_EQ(inv.exit_code, 2) << inv.err;
  EXPECT_NE(inv.err.find(bad + ": error at offset 756 (0x2f4): forward: values[2] has a type tag but no value"),
            std::string::npos)
      << inv.err;
  EXPECT_EQ(nlohmann::json::parse(inv.out)["error"]["code"], "missing-field");
  std::string garbage = testing::TempDir("size_garbage") + "/g.pte";
  std::vector<uint8_t> bytes = testing::ReadFile(FixturePath("add.pte"));
  for (size_t i = 8; i < bytes.size(); ++i) bytes[i] = 0xff;
  testing::WriteFile(garbage, bytes);
  auto refused = testing::RunCli({"size", garbage});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("[flatbuffer-invalid]"), std::string::npos) << refused.err;
}

TEST(Size, CliJsonTopAndSort) {
  auto run = testing::RunCli({"size", FixturePath("conv2d_quantized.pte"), "--json", "--top", "1"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["file_size"], 12096);
  EXPECT_EQ(j["groups"]["segments"]["bytes"], 9664);
  ASSERT_EQ(j["tensors"].size(), 1u);
  EXPECT_EQ(j["tensors_total"], 2);
  EXPECT_EQ(j["tensors"][0]["bytes"], 9408);
  auto text = testing::RunCli({"size", FixturePath("stories260k_qnn.pte"), "--sort", "name"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("delegate QnnBackend"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("1,350,144 bytes"), std::string::npos) << text.out;
  auto bad = testing::RunCli({"size", FixturePath("add.pte"), "--sort", "size"});
  EXPECT_EQ(bad.exit_code, 2);
}

}  // namespace
}  // namespace ptepack

namespace ptepack {
namespace {

// Runtime memory, by hand from `flatc --json` of the fixtures (see the size facts above):
// conv2d_quantized: non_const_buffer_sizes [0, 4014080] -> one planned buffer of 4014080
//   (entry 0 is skipped, as the runtime does); constants 9408 + 256 = 9664 bytes.
// stories260k_qnn: kv_forward and prefill_forward have non_const_buffer_sizes [0, 0] and one
//   QnnBackend delegate each, both in segment 1 (1331456 bytes, freeable after init); loading all
//   methods maps that payload once.
TEST(Size, RuntimeMemoryMatchesHandDerivedFacts) {
  auto conv = PteFile::Open(testing::FixturePath("conv2d_quantized.pte"));
  MemoryReport m = AnalyzeMemory(*conv, {});
  ASSERT_EQ(m.methods.size(), 1u);
  EXPECT_EQ(m.methods[0].planned, std::vector<uint64_t>{4014080});
  EXPECT_EQ(m.methods[0].constants_pte, 9664u);
  EXPECT_EQ(m.methods[0].at_init, 4014080u + 9664u);
  EXPECT_EQ(m.methods[0].after_init, 4014080u + 9664u);

  auto qnn = PteFile::Open(testing::FixturePath("stories260k_qnn.pte"));
  m = AnalyzeMemory(*qnn, {});
  ASSERT_EQ(m.methods.size(), 29u);
  EXPECT_EQ(m.methods[0].name, "kv_forward");
  EXPECT_EQ(m.methods[0].planned, std::vector<uint64_t>{0});
  EXPECT_EQ(m.methods[0].delegates_segment, 1331456u);
  EXPECT_EQ(m.methods[0].at_init, 1331456u);
  EXPECT_EQ(m.methods[0].after_init, 0u);
  EXPECT_EQ(m.methods[2].name, "get_ar_len");
  EXPECT_TRUE(m.methods[2].planned.empty());
  EXPECT_EQ(m.all.delegates_segment, 1331456u);
}

}  // namespace
}  // namespace ptepack
