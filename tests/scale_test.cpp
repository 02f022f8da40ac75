// Issue 16's fixes, checked for what they must not change: the streamed
// `inspect` of a .ptd prints exactly what the built description printed, the
// dedup hasher gives libxxhash's XXH3-64 of the bytes, and split of many named
// constants keys each one by its name.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "config/backend_config.h"
#include "ptepack/program_builder.h"
#include "serialize/io/hash.h"
#include "serialize/model/dedup.h"
#include "serialize/model/program_parts.h"
#include "serialize/model/spec.h"
#include "serialize/read/checksum.h"
#include "serialize/read/describe.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/write/pte_writer.h"
#include "test_util.h"

namespace ptepack {
namespace {

using testing::FixturePath;
using testing::TempDir;

// A program of `n` named float[4] constants written with every constant external:
// model.pte + weights.ptd in `dir`. Returns the .ptd path.
std::string WriteManyKeys(const std::string& dir, int n) {
  ProgramBuilder b;
  auto& m = b.AddMethod("forward");
  std::vector<int32_t> args;
  for (int i = 0; i < n; ++i) {
    std::vector<uint8_t> data(16);
    for (int k = 0; k < 16; ++k) data[k] = static_cast<uint8_t>(i * 7 + k);
    args.push_back(static_cast<int32_t>(m.ConstantTensor({ScalarType::kFloat, {4}}, Bytes::Own(std::move(data)),
                                                         "layer" + std::to_string(i) + ".weight")));
  }
  uint32_t out = m.Tensor({ScalarType::kFloat, {4}, PlannedLocation{1, 0}});
  args.push_back(static_cast<int32_t>(out));
  m.KernelCall(m.Operator("aten::cat", "out"), args);
  m.Outputs({static_cast<int32_t>(out)});
  m.PlannedBufferSizes({0, 16});
  BackendConfig cfg;
  cfg.external_constants = true;
  cfg.external_tag = "weights";
  WritePackage(b.Build(), cfg, dir + "/model.pte");
  return dir + "/weights.ptd";
}

void ExpectStreamedEqualsBuilt(const std::string& path) {
  SCOPED_TRACE(path);
  ReadOptions ro;
  ro.allow_legacy_ptd = true;
  auto ptd = PtdFile::Open(path, ro);
  std::ostringstream json;
  WritePtdJson(*ptd, json);
  EXPECT_EQ(json.str(), DescribePtd(*ptd).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  std::string text;
  WritePtdText(*ptd, [&](const std::string& s) { text += s; });
  EXPECT_EQ(text, RenderPtdText(DescribePtd(*ptd)));
}

TEST(ScaleInspect, StreamedPtdDescriptionEqualsBuiltOne) {
  for (const char* f : {"linear.ptd", "xor.ptd"}) {
    const std::string p = FixturePath(f);
    if (!std::ifstream(p)) GTEST_SKIP() << "fixture " << p << " absent";
    ExpectStreamedEqualsBuilt(p);
  }
  for (const char* f : {"ptd-key-with-nul.ptd", "ptd-non-utf8-key.ptd", "ptd-legacy-huge-tensor-alignment.ptd"}) {
    ExpectStreamedEqualsBuilt(std::string(PTEPACK_SOURCE_DIR) + "/testdata/regressions/" + f);
  }
  ExpectStreamedEqualsBuilt(WriteManyKeys(TempDir("scale_inspect"), 1000));
}

TEST(ScaleSplit, ThousandsOfNamedConstantsKeepTheirNames) {
  // The key index replaced a scan of every entry per tensor; each tensor still
  // gets its own name as key, in tensor order, with its own 16 bytes.
  const int n = 3000;
  auto ptd = PtdFile::Open(WriteManyKeys(TempDir("scale_split"), n));
  ASSERT_TRUE(ptd->ok());
  ASSERT_EQ(ptd->entries().size(), static_cast<size_t>(n));
  for (int i = 0; i < n; i += 499) {
    const PtdEntry& e = ptd->entries()[i];
    EXPECT_EQ(e.key, "layer" + std::to_string(i) + ".weight");
    Bytes d = ptd->EntryData(e);
    ASSERT_EQ(d.size, 16u);
    for (int k = 0; k < 16; ++k) EXPECT_EQ(d.data[k], static_cast<uint8_t>(i * 7 + k));
  }
}

TEST(ScaleDedup, BytesHasherGivesXxh3OfTheBytes) {
  const std::string dir = TempDir("scale_hash");
  std::vector<uint8_t> data(3 << 20);
  std::mt19937 rng(7);
  for (auto& c : data) c = static_cast<uint8_t>(rng());
  testing::WriteFile(dir + "/data.bin", data);
  auto m = MappedFile::Open(dir + "/data.bin");
  std::vector<uint8_t> other(100, 0x5a);
  testing::WriteFile(dir + "/other.bin", other);
  auto m2 = MappedFile::Open(dir + "/other.bin");
  BytesHasher h;
  // Small pieces (one read), a piece larger than the read block, the next
  // file and back, owned memory and zeros.
  const std::vector<std::pair<size_t, size_t>> ranges{{0, 16}, {5, 1000}, {100, 2 << 20}, {3 << 19, 1}};
  for (auto [off, n] : ranges) {
    EXPECT_EQ(h.Hash(m->View(off, n)), XXH3_64bits(data.data() + off, n)) << off << "+" << n;
    EXPECT_EQ(h.Hash(m2->View(1, 50)), XXH3_64bits(other.data() + 1, 50));
  }
  EXPECT_EQ(h.Hash(Bytes::Copy(data.data(), 4096)), XXH3_64bits(data.data(), 4096));
  std::vector<uint8_t> zeros(5000, 0);
  EXPECT_EQ(h.Hash(Bytes::Zeros(5000)), XXH3_64bits(zeros.data(), zeros.size()));
  // DedupIndex finds equal bytes through it, across files and memory.
  DedupIndex idx;
  EXPECT_FALSE(idx.FindOrAdd(m->View(64, 4096), 1));
  EXPECT_EQ(idx.FindOrAdd(Bytes::Copy(data.data() + 64, 4096), 2), std::optional<size_t>(1));
  EXPECT_FALSE(idx.FindOrAdd(m->View(65, 4096), 3));
}

// Dedup needs equal sizes, then equal bytes: a piece of a size seen once is
// not read, pieces of one size are told apart by the XXH3 of their first
// 4096 bytes, and only pieces whose prefixes are equal are hashed whole
// before the byte compare. Counted in bytes read to hash, derived by hand.
// The same for an index that keeps the pieces itself and for one that reads
// them back from the caller (placement's and the .ptd's, split28).
class ScaleDedup : public ::testing::TestWithParam<bool> {};

TEST_P(ScaleDedup, HashesWholePiecesOnlyWhenSizeAndPrefixAreEqual) {
  const std::string dir = TempDir(GetParam() ? "scale_dedup_prefix_ref" : "scale_dedup_prefix");
  constexpr size_t kPiece = 1 << 20, kPieces = 16;
  std::vector<uint8_t> data(kPiece * kPieces);
  std::mt19937 rng(11);
  for (auto& c : data) c = static_cast<uint8_t>(rng());
  testing::WriteFile(dir + "/data.bin", data);
  auto m = MappedFile::Open(dir + "/data.bin");
  std::map<size_t, Bytes> kept;  // what the caller keeps, for the index that reads it back
  DedupIndex idx = GetParam() ? DedupIndex([&kept](size_t id) { return kept.at(id); }) : DedupIndex();
  auto find_or_add = [&](const Bytes& b, size_t id) {
    std::optional<size_t> same = idx.FindOrAdd(b, id);
    if (!same) kept[id] = b;
    return same;
  };
  // Sizes 1..16 bytes: each size once, nothing read.
  for (size_t n = 1; n <= 16; ++n) EXPECT_FALSE(find_or_add(m->View(n * 100, n), 100 + n));
  EXPECT_EQ(idx.bytes_hashed(), 0u);
  // 16 distinct pieces of 1 MiB: the first is hashed when the second comes, then each its prefix.
  for (size_t i = 0; i < kPieces; ++i) EXPECT_FALSE(find_or_add(m->View(i * kPiece, kPiece), i));
  EXPECT_EQ(idx.bytes_hashed(), kPieces * kDedupPrefix);
  // A copy of piece 5 in memory: its prefix, then it and piece 5 whole.
  EXPECT_EQ(find_or_add(Bytes::Copy(data.data() + 5 * kPiece, kPiece), 99), std::optional<size_t>(5));
  EXPECT_EQ(idx.bytes_hashed(), (kPieces + 1) * kDedupPrefix + 2 * kPiece);
  EXPECT_EQ(idx.hits(), 1u);
  EXPECT_EQ(idx.bytes_saved(), kPiece);
  // Piece 7 with its last byte changed: same prefix, other bytes: a new entry.
  std::vector<uint8_t> near(data.begin() + 7 * kPiece, data.begin() + 8 * kPiece);
  near.back() ^= 1;
  EXPECT_FALSE(find_or_add(Bytes::Copy(near.data(), near.size()), 50));
  EXPECT_EQ(idx.bytes_hashed(), (kPieces + 2) * kDedupPrefix + 4 * kPiece);
  // ... and later found as itself; piece 7's whole hash is not computed again.
  EXPECT_EQ(find_or_add(Bytes::Copy(near.data(), near.size()), 51), std::optional<size_t>(50));
  EXPECT_EQ(idx.bytes_hashed(), (kPieces + 3) * kDedupPrefix + 5 * kPiece);
  // Equal small pieces (no longer than the prefix) are found by their one hash.
  EXPECT_EQ(find_or_add(Bytes::Copy(data.data() + 300, 3), 7), std::optional<size_t>(103));
  EXPECT_EQ(idx.bytes_hashed(), (kPieces + 3) * kDedupPrefix + 5 * kPiece + 3 + 3);
  EXPECT_EQ(idx.hits(), 3u);
}

INSTANTIATE_TEST_SUITE_P(KeptOrReadBack, ScaleDedup, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "ReadBack" : "Kept"; });

std::string ReadText(const std::string& path) {
  auto v = testing::ReadFile(path);
  return std::string(v.begin(), v.end());
}

std::vector<uint8_t> PackBytes(const std::string& spec_text, const std::string& base) {
  return RenderPte(LayoutPte(PackageFromSpecJson(spec_text, base), BackendConfig{}));
}

TEST(ScaleSpec, ProgramTextParsedDirectlyGivesTheSameProgram) {
  // The program of a spec goes to FlatBuffers' parser as written; a spec the
  // fast path does not take (a second "program" key: the last one counts, as
  // in nlohmann::json) goes through nlohmann first. Same bytes either way,
  // and the same as a spec with the keys in another order and odd spacing.
  const std::string dir = std::string(PTEPACK_SOURCE_DIR) + "/testdata/pack";
  const std::string text = ReadText(dir + "/add_spec.json");
  const size_t brace = text.find('{');
  ASSERT_NE(brace, std::string::npos);
  const std::vector<uint8_t> direct = PackBytes(text, dir);
  const std::string twice = "{\"program\": {\"version\": 7, \"s\": \"}{\\\"program\\\"\"}," + text.substr(brace + 1);
  EXPECT_EQ(PackBytes(twice, dir), direct);
  const nlohmann::json j = nlohmann::json::parse(text);
  std::string reordered = "{ ";
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() != "program") reordered += "\"" + it.key() + "\" :\n" + it.value().dump() + " ,\t";
  }
  reordered += "\"program\"\r\n:\n" + j["program"].dump(1) + "}";
  EXPECT_EQ(PackBytes(reordered, dir), direct);
}

TEST(ScaleSpec, MalformedProgramStillNamesTheOffset) {
  const std::string dir = std::string(PTEPACK_SOURCE_DIR) + "/testdata/pack";
  const std::string bad = "{\"program\": {\"execution_plan\": [],}, \"constants\": []}";
  try {
    PackageFromSpecJson(bad, dir);
    FAIL() << "accepted a trailing comma";
  } catch (const Error& e) {
    EXPECT_EQ(e.finding().code, "bad-spec");
    ASSERT_TRUE(e.finding().offset.has_value());
    EXPECT_EQ(*e.finding().offset, 34u);  // the '}' after the comma (0-based, as every finding's offset)
  }
}

}  // namespace
}  // namespace ptepack
