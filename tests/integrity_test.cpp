// Checksums, manifests and transfer bundles: regions and hashes checked
// against XXH3 computed here over the raw bytes, every kind of damage
// detected and named, and bundles that give back identical files.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <xxhash.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "ptepack/error.h"
#include "serialize/api/package_access.h"
#include "serialize/bundle/bundle.h"
#include "serialize/format/pte_format.h"
#include "serialize/model/spec.h"
#include "serialize/read/checksum.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "serialize/write/pte_writer.h"
#include "tests/test_util.h"

namespace ptepack {
namespace {

using nlohmann::json;
using testing::FixturePath;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

uint64_t H(const std::vector<uint8_t>& v, size_t off, size_t n) { return XXH3_64bits(v.data() + off, n); }

std::string CopyFixture(const std::string& name, const std::string& dir) {
  std::string p = dir + "/" + name;
  std::filesystem::copy_file(FixturePath(name), p, std::filesystem::copy_options::overwrite_existing);
  return p;
}

void FlipByte(const std::string& path, uint64_t off) {
  std::vector<uint8_t> v = ReadFile(path);
  ASSERT_LT(off, v.size());
  v[off] ^= 0x5a;
  WriteFile(path, v);
}

using testing::RunCli;
using testing::RunResult;

// conv2d_quantized.pte (hand-checked in reader_test.cpp): eh00 program size
// 2416, segment base 2432, one 9664-byte constant segment, 12096 bytes.
TEST(Checksum, RegionsAndHashesOfConv2d) {
  auto pte = PteFile::Open(FixturePath("conv2d_quantized.pte"));
  ASSERT_TRUE(pte->ok());
  FileSums s = ChecksumPte(*pte);
  std::vector<uint8_t> raw = ReadFile(FixturePath("conv2d_quantized.pte"));
  ASSERT_EQ(s.size, 12096u);
  ASSERT_EQ(s.regions.size(), 3u);
  EXPECT_EQ(s.regions[0].name, "program");
  EXPECT_EQ(s.regions[0].offset, 0u);
  EXPECT_EQ(s.regions[0].size, 2416u);
  EXPECT_EQ(s.regions[0].xxh3, H(raw, 0, 2416));
  EXPECT_EQ(s.regions[1].name, "segments[0]");
  EXPECT_EQ(s.regions[1].offset, 2432u);
  EXPECT_EQ(s.regions[1].size, 9664u);
  EXPECT_EQ(s.regions[1].xxh3, H(raw, 2432, 9664));
  EXPECT_EQ(s.regions[2].name, "padding");
  EXPECT_EQ(s.regions[2].size, 16u);
  EXPECT_EQ(s.regions[2].xxh3, H(raw, 2416, 16));
}

TEST(Checksum, RegionsCoverEveryFixtureExactlyOnce) {
  for (const auto& name : testing::PteFixtures()) {
    auto pte = PteFile::Open(FixturePath(name));
    if (!pte->ok()) continue;
    FileSums s = ChecksumPte(*pte);
    uint64_t total = 0;
    for (const auto& r : s.regions) total += r.size;
    EXPECT_EQ(total, s.size) << name;
    // The same file held in memory (no file to pread from) hashes the same.
    auto mem = PteFile::FromBytes(Bytes::Own(ReadFile(FixturePath(name))), name);
    FileSums m = ChecksumPte(*mem);
    ASSERT_EQ(m.regions.size(), s.regions.size()) << name;
    for (size_t i = 0; i < s.regions.size(); ++i) EXPECT_EQ(m.regions[i].xxh3, s.regions[i].xxh3) << name;
  }
  for (const char* name : {"linear.ptd", "xor.ptd"}) {
    auto ptd = PtdFile::Open(FixturePath(name));
    ASSERT_TRUE(ptd->ok()) << name;
    FileSums s = ChecksumPtd(*ptd);
    std::vector<uint8_t> raw = ReadFile(FixturePath(name));
    uint64_t total = 0;
    for (const auto& r : s.regions) total += r.size;
    EXPECT_EQ(total, raw.size()) << name;
    EXPECT_EQ(s.regions[0].size, ptd->header().flatbuffer_offset + ptd->header().flatbuffer_size);
    EXPECT_EQ(s.regions[1].xxh3, H(raw, s.regions[1].offset, s.regions[1].size)) << name;
  }
}

TEST(Checksum, HashFileRangeMatchesOneShotXxh3) {
  const std::string dir = TempDir("integrity_range");
  std::vector<uint8_t> v(3 * 1024 * 1024 + 17);
  std::mt19937 rng(7);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  WriteFile(dir + "/data", v);
  auto m = MappedFile::Open(dir + "/data");
  EXPECT_EQ(HashBytes(m->All()), H(v, 0, v.size()));
  EXPECT_EQ(HashBytes(m->View(1000, 2 * 1024 * 1024)), H(v, 1000, 2 * 1024 * 1024));
  EXPECT_EQ(HashBytes(Bytes::Copy(v.data() + 5, 100)), H(v, 5, 100));
}

TEST(Manifest, RoundTripAndEveryKindOfDamageIsNamed) {
  const std::string dir = TempDir("integrity_manifest");
  const std::string pte_path = CopyFixture("conv2d_quantized.pte", dir);
  auto sums = [&] {
    auto pte = PteFile::Open(pte_path);
    EXPECT_TRUE(pte->ok());
    return std::vector<FileSums>{ChecksumPte(*pte)};
  };
  const std::string manifest_path = dir + "/m.json";
  WriteManifest(manifest_path, sums());
  json m = LoadManifest(manifest_path);
  EXPECT_EQ(m["format"], "ptepack-checksum-manifest");
  EXPECT_EQ(m["files"][0]["name"], "conv2d_quantized.pte");
  auto reports = CheckManifest(m, sums());
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_TRUE(reports[0].ok());

  // A byte of constant data.
  FlipByte(pte_path, 2432 + 5000);
  reports = CheckManifest(m, sums());
  ASSERT_FALSE(reports[0].ok());
  ASSERT_EQ(reports[0].findings().size(), 1u);
  const Finding& f = reports[0].findings()[0];
  EXPECT_EQ(f.code, "checksum-mismatch");
  EXPECT_NE(f.message.find("segments[0]"), std::string::npos) << f.message;
  EXPECT_EQ(f.offset, 2432u);
  FlipByte(pte_path, 2432 + 5000);  // undo

  // A padding byte (the reader does not look at it).
  FlipByte(pte_path, 2420);
  reports = CheckManifest(m, sums());
  ASSERT_EQ(reports[0].findings().size(), 1u);
  EXPECT_NE(reports[0].findings()[0].message.find("padding"), std::string::npos);
  FlipByte(pte_path, 2420);

  // A file the manifest does not know.
  auto other = PteFile::Open(FixturePath("add.pte"));
  reports = CheckManifest(m, {ChecksumPte(*other)});
  EXPECT_TRUE(reports[0].Has("not-in-manifest"));
}

TEST(Manifest, RegionMovedOrMissing) {
  auto pte = PteFile::Open(FixturePath("conv2d_quantized.pte"));
  FileSums s = ChecksumPte(*pte);
  json m = ManifestJson({s});
  m["files"][0]["regions"][1]["offset"] = 2560;
  m["files"][0]["regions"].push_back(
      {{"name", "segments[1]"}, {"offset", 20000}, {"size", 4}, {"xxh3", "0000000000000000"}});
  m["files"][0]["size"] = 1;
  auto reports = CheckManifest(m, {s});
  EXPECT_TRUE(reports[0].Has("region-mismatch"));
  EXPECT_TRUE(reports[0].Has("size-mismatch"));
  EXPECT_FALSE(reports[0].Has("checksum-mismatch"));
  bool named = false;
  for (const auto& f : reports[0].findings()) named = named || f.message.find("segments[1]") != std::string::npos;
  EXPECT_TRUE(named);
}

TEST(Manifest, MalformedManifestsAreRejected) {
  const std::string dir = TempDir("integrity_bad_manifest");
  auto expect_bad = [&](const std::string& text) {
    WriteFile(dir + "/m.json", std::vector<uint8_t>(text.begin(), text.end()));
    try {
      LoadManifest(dir + "/m.json");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.finding().code, "bad-manifest") << text;
    }
  };
  expect_bad("not json");
  expect_bad("{}");
  expect_bad(R"({"format":"ptepack-checksum-manifest","version":2,"algorithm":"xxh3-64","files":[]})");
  expect_bad(R"({"format":"ptepack-checksum-manifest","version":1,"algorithm":"sha256","files":[]})");
  expect_bad(
      R"({"format":"ptepack-checksum-manifest","version":1,"algorithm":"xxh3-64","files":[{"name":"a.pte","size":1,"regions":[{"name":"program","size":1,"xxh3":"xyz"}]}]})");
}

TEST(CliChecksum, VerifyWritesAndChecksManifests) {
  const std::string dir = TempDir("integrity_cli");
  const std::string pte = CopyFixture("conv2d_quantized.pte", dir);
  RunResult r = RunCli({"verify", "--checksum", pte});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("segments[0]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("7259ae23ce7ebeb8"), std::string::npos) << r.out;  // XXH3 of bytes [2432, 12096)

  const std::string m = dir + "/conv.manifest.json";
  r = RunCli({"verify", pte, "--write-manifest", m});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(std::filesystem::exists(m));
  r = RunCli({"verify", pte, "--manifest", m});
  EXPECT_EQ(r.exit_code, 0) << r.err;

  FlipByte(pte, 2432 + 100);
  r = RunCli({"verify", pte, "--manifest", m, "--json"});
  EXPECT_EQ(r.exit_code, 1);
  json j = json::parse(r.out);
  EXPECT_FALSE(j["valid"].get<bool>());
  bool named = false;
  for (const auto& f : j["findings"]) {
    named = named || (f["code"] == "checksum-mismatch" &&
                      f["message"].get<std::string>().find("segments[0]") != std::string::npos);
  }
  EXPECT_TRUE(named) << r.out;
  r = RunCli({"verify", pte, "--manifest", m});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("segments[0]"), std::string::npos) << r.err;

  // The `checksum` command, several files at once, .ptd included.
  const std::string xpte = CopyFixture("xor.pte", dir), xptd = CopyFixture("xor.ptd", dir);
  r = RunCli({"checksum", xpte, xptd, "--write-manifest", dir + "/xor.json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = RunCli({"verify", xpte, "--ptd", xptd, "--manifest", dir + "/xor.json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;

  // A manifest that is not one is a usage error, not an invalid file.
  WriteFile(dir + "/junk.json", {'{', '}'});
  r = RunCli({"verify", xpte, "--manifest", dir + "/junk.json"});
  EXPECT_EQ(r.exit_code, 2);
}

// Issue 24 item 22: manifests name files by base name; a renamed copy is
// found by its content (the entry whose program region has the same size
// and checksum) and verifies. A renamed copy whose segment changed is
// matched all the same and the change named; another program is not in the
// manifest.
TEST(CliChecksum, RenamedCopyVerifiesAgainstTheManifest) {
  const std::string dir = TempDir("integrity_renamed");
  const std::string pte = CopyFixture("conv2d_quantized.pte", dir);
  const std::string m = dir + "/m.json";
  RunResult r = RunCli({"verify", pte, "--write-manifest", m});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string copy = dir + "/model-v2.pte";
  std::filesystem::copy_file(pte, copy);
  r = RunCli({"verify", copy, "--manifest", m});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("all checksums match"), std::string::npos) << r.out;
  r = RunCli({"checksum", copy, "--manifest", m, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(json::parse(r.out)["valid"].get<bool>());

  FlipByte(copy, 2432 + 100);  // constant data: segments[0]
  r = RunCli({"verify", copy, "--manifest", m, "--json"});
  EXPECT_EQ(r.exit_code, 1);
  json j = json::parse(r.out);
  size_t mismatches = 0;
  for (const auto& f : j["findings"]) {
    if (f["code"] != "checksum-mismatch") continue;
    ++mismatches;
    EXPECT_NE(f["message"].get<std::string>().find("segments[0]"), std::string::npos) << r.out;
  }
  EXPECT_EQ(mismatches, 1u) << r.out;

  const std::string other = dir + "/other.pte";
  std::filesystem::copy_file(FixturePath("add.pte"), other);
  r = RunCli({"verify", other, "--manifest", m, "--json"});
  EXPECT_EQ(r.exit_code, 1);
  j = json::parse(r.out);
  bool not_in = false;
  for (const auto& f : j["findings"]) not_in = not_in || f["code"] == "not-in-manifest";
  EXPECT_TRUE(not_in) << r.out;
  // The original beside its renamed copy: the entry is the original's; the
  // copy has none left.
  r = RunCli({"checksum", pte, dir + "/model-v2.pte", "--manifest", m, "--json"});
  EXPECT_EQ(r.exit_code, 1);
}

// A program with a few MiB of constants, so bundles stream several blocks.
std::string MakeProgram(const std::string& dir) {
  std::vector<uint8_t> data(5 * 1024 * 1024);
  std::mt19937 rng(3);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i % 4096 < 2048 ? rng() : i);
  WriteFile(dir + "/w.bin", data);
  json values = json::array();
  values.push_back(
      {{"val_type", "Tensor"},
       {"val", {{"scalar_type", "BYTE"}, {"sizes", {data.size()}}, {"dim_order", {0}}, {"data_buffer_idx", 1}}}});
  json plan{{"name", "forward"},
            {"values", values},
            {"inputs", json::array()},
            {"outputs", {0}},
            {"chains", {{{"instructions", json::array()}}}},
            {"operators", json::array()},
            {"delegates", json::array()},
            {"non_const_buffer_sizes", {0}}};
  json spec{{"program", {{"version", 0}, {"execution_plan", {plan}}}}, {"constants", {{{"file", "w.bin"}}}}};
  const std::string out = dir + "/model.pte";
  WritePackage(PackageOf(PackageFromSpecJson(spec.dump(), dir)), BackendConfig{}, out);
  return out;
}

TEST(Bundle, CreateListExtractGivesIdenticalFiles) {
  const std::string dir = TempDir("integrity_bundle");
  const std::string pte = MakeProgram(dir);
  const std::string ptd = CopyFixture("xor.ptd", dir);
  for (bool long_mode : {false, true}) {
    BundleOptions o;
    o.long_distance = long_mode;
    o.threads = long_mode ? 2 : 0;
    BundleInfo info = CreateBundle(dir + "/b.ptebundle", {pte, ptd}, o);
    ASSERT_EQ(info.members.size(), 2u);
    EXPECT_EQ(info.members[0].name, "model.pte");
    EXPECT_EQ(info.members[0].kind, "pte");
    EXPECT_EQ(info.members[1].kind, "ptd");
    EXPECT_LT(info.size, std::filesystem::file_size(pte));  // half of the data compresses
    BundleInfo listed = ReadBundle(dir + "/b.ptebundle");
    ASSERT_EQ(listed.members.size(), 2u);
    EXPECT_EQ(listed.members[0].xxh3, XXH3_64bits(ReadFile(pte).data(), ReadFile(pte).size()));
    std::vector<uint8_t> raw = ReadFile(dir + "/b.ptebundle");
    EXPECT_EQ(std::string(raw.begin(), raw.begin() + 8), "PTEBNDL1");
    EXPECT_EQ(std::string(raw.end() - 8, raw.end()), "PTEBEND1");

    const std::string out = dir + "/out";
    std::filesystem::remove_all(out);
    auto written = ExtractBundle(dir + "/b.ptebundle", out);
    ASSERT_EQ(written.size(), 2u);
    EXPECT_TRUE(ReadFile(out + "/model.pte") == ReadFile(pte));
    EXPECT_TRUE(ReadFile(out + "/xor.ptd") == ReadFile(ptd));
    EXPECT_THROW(ExtractBundle(dir + "/b.ptebundle", out), Error);  // exists
    EXPECT_NO_THROW(ExtractBundle(dir + "/b.ptebundle", out, /*overwrite=*/true));
  }
}

TEST(Bundle, DamageIsDetectedAndLeavesNoOutput) {
  const std::string dir = TempDir("integrity_bundle_damage");
  const std::string pte = MakeProgram(dir);
  BundleInfo info = CreateBundle(dir + "/b.ptebundle", {pte});
  const std::vector<uint8_t> good = ReadFile(dir + "/b.ptebundle");
  auto expect_fails = [&](const std::vector<uint8_t>& bytes, const std::string& what) {
    WriteFile(dir + "/bad.ptebundle", bytes);
    std::filesystem::remove_all(dir + "/out");
    EXPECT_THROW(ExtractBundle(dir + "/bad.ptebundle", dir + "/out"), Error) << what;
    EXPECT_FALSE(std::filesystem::exists(dir + "/out/model.pte")) << what;
  };
  std::vector<uint8_t> b = good;
  b[info.members[0].offset + info.members[0].compressed_size / 2] ^= 0x40;
  expect_fails(b, "flipped compressed byte");
  expect_fails(std::vector<uint8_t>(good.begin(), good.end() - 1), "truncated");
  b = good;
  b[0] = 'X';
  expect_fails(b, "bad magic");

  // An index naming a path outside the output directory.
  std::string index(good.begin() + static_cast<long>(LoadU64(good.data() + good.size() - 24)), good.end() - 24);
  json j = json::parse(index);
  j["files"][0]["name"] = "../escape.pte";
  std::string evil = j.dump();
  b.assign(good.begin(), good.begin() + static_cast<long>(LoadU64(good.data() + good.size() - 24)));
  uint64_t off = b.size();
  b.insert(b.end(), evil.begin(), evil.end());
  uint8_t trailer[24];
  StoreU64(trailer, off);
  StoreU64(trailer + 8, evil.size());
  std::memcpy(trailer + 16, "PTEBEND1", 8);
  b.insert(b.end(), trailer, trailer + 24);
  expect_fails(b, "path in member name");
  EXPECT_FALSE(std::filesystem::exists(dir + "/escape.pte"));
}

TEST(Bundle, OnlyValidProgramsGoIn) {
  // Skips here, not inside EXPECT_THROW (which would count the skip as the wrong exception).
  if (!testing::HaveFixtures()) testing::SkipWithoutFixtures();
  const std::string dir = TempDir("integrity_bundle_inputs");
  EXPECT_THROW(CreateBundle(dir + "/b.ptebundle", {FixturePath("xor.ptd")}), Error);  // .ptd first
  EXPECT_THROW(CreateBundle(dir + "/b.ptebundle", {FixturePath("xor.pte"), FixturePath("xor.pte")}), Error);
  EXPECT_THROW(CreateBundle(dir + "/b.ptebundle", {FixturePath("bundled_program.bpte")}), Error);
  EXPECT_FALSE(std::filesystem::exists(dir + "/b.ptebundle"));
}

TEST(CliBundle, CreateExtractList) {
  const std::string dir = TempDir("integrity_cli_bundle");
  RunResult r = RunCli(
      {"bundle", "create", dir + "/x.ptebundle", FixturePath("xor.pte"), FixturePath("xor.ptd"), "--level", "9", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunCli({"bundle", "list", dir + "/x.ptebundle", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["files"].size(), 2u);
  r = RunCli({"bundle", "extract", dir + "/x.ptebundle", "-o", dir + "/x", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(ReadFile(dir + "/x/xor.pte") == ReadFile(FixturePath("xor.pte")));
  EXPECT_TRUE(ReadFile(dir + "/x/xor.ptd") == ReadFile(FixturePath("xor.ptd")));
  r = RunCli({"bundle", "extract", dir + "/x.ptebundle", "-o", dir + "/x", "-q"});
  EXPECT_EQ(r.exit_code, 2);  // exists, no --force
  r = RunCli({"bundle", "--help"});
  EXPECT_NE(r.out.find("does NOT read"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace ptepack
