// Judging a file from its leading bytes and its size (serialize/read/leading_bytes.h), as the
// browser viewer does for large files: every real file and every mutant of their headers gets
// exactly the findings, segments, description and size breakdown that reading the whole file
// gives, from a copy of only the bytes LeadingBytesNeeded asks for (in its own allocation, so
// that AddressSanitizer catches a read past them).
#include "serialize/read/leading_bytes.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "ptepack/error.h"
#include "serialize/format/pte_format.h"
#include "serialize/insight/size.h"
#include "serialize/read/describe.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "test_util.h"

namespace ptepack {
namespace {

using testing::FixturePath;
using testing::ReadFile;

std::string Findings(const Report& r) {
  std::string s;
  for (const auto& f : r.findings()) s += f.ToString() + "\n";
  return s;
}

// The leading bytes the reader asks for, copied on their own.
Bytes Head(const std::vector<uint8_t>& file) {
  const uint64_t first = std::min<uint64_t>(64, file.size());
  const uint64_t need = LeadingBytesNeeded(file.data(), static_cast<size_t>(first), file.size());
  EXPECT_LE(need, file.size());
  return Bytes::Copy(file.data(), static_cast<size_t>(need));
}

// Whole file and leading bytes read alike; returns how many bytes were needed.
uint64_t ExpectSamePte(const std::vector<uint8_t>& file, const std::string& what) {
  auto whole = PteFile::FromBytes(Bytes::Copy(file.data(), file.size()), "f.pte");
  Bytes head = Head(file);
  auto part = PteFile::FromLeadingBytes(head, file.size(), "f.pte");
  EXPECT_EQ(Findings(part->report()), Findings(whole->report())) << what;
  EXPECT_EQ(part->file_size(), file.size());
  EXPECT_EQ(part->segments().size(), whole->segments().size()) << what;
  for (size_t i = 0; i < whole->segments().size() && i < part->segments().size(); ++i) {
    EXPECT_EQ(part->segments()[i].file_offset, whole->segments()[i].file_offset) << what;
    EXPECT_EQ(part->segments()[i].in_file, whole->segments()[i].in_file) << what;
  }
  EXPECT_EQ((part->program() != nullptr), (whole->program() != nullptr)) << what;
  if (whole->program()) {
    EXPECT_EQ(DescribePte(*part, {}).dump(), DescribePte(*whole, {}).dump()) << what;
    std::string a, b;
    try {
      a = SizeJson(AnalyzeSize(*whole, {}), SIZE_MAX, SizeSort::kBytes).dump();
    } catch (const Error& e) {
      a = e.what();
    }
    try {
      b = SizeJson(AnalyzeSize(*part, {}), SIZE_MAX, SizeSort::kBytes).dump();
    } catch (const Error& e) {
      b = e.what();
    }
    EXPECT_EQ(b, a) << what;
  }
  return head.size;
}

uint64_t ExpectSamePtd(const std::vector<uint8_t>& file, const std::string& what) {
  auto whole = PtdFile::FromBytes(Bytes::Copy(file.data(), file.size()), "f.ptd");
  Bytes head = Head(file);
  auto part = PtdFile::FromLeadingBytes(head, file.size(), "f.ptd");
  EXPECT_EQ(Findings(part->report()), Findings(whole->report())) << what;
  EXPECT_EQ(part->entries().size(), whole->entries().size()) << what;
  if (whole->ok()) {
    EXPECT_EQ(DescribePtd(*part).dump(), DescribePtd(*whole).dump()) << what;
  }
  return head.size;
}

std::vector<std::string> FixtureFiles(const std::string& ext) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(testing::FixturesDir())) {
    if (e.path().extension() == ext) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(LeadingBytes, RealFilesReadAsWhole) {
  if (!testing::HaveFixtures()) testing::SkipWithoutFixtures();
  for (const auto& path : FixtureFiles(".pte")) {
    auto file = ReadFile(path);
    uint64_t need = ExpectSamePte(file, path);
    std::printf("  %-45s %9zu bytes, %9llu needed\n", std::filesystem::path(path).filename().c_str(), file.size(),
                static_cast<unsigned long long>(need));
  }
  for (const auto& path : FixtureFiles(".ptd")) {
    auto file = ReadFile(path);
    uint64_t need = ExpectSamePtd(file, path);
    std::printf("  %-45s %9zu bytes, %9llu needed\n", std::filesystem::path(path).filename().c_str(), file.size(),
                static_cast<unsigned long long>(need));
  }
}

// A program with its .ptd, both from leading bytes: the external keys are checked against the
// .ptd's entries, and the description and size breakdown (which place each external tensor in
// its .ptd) are those of the whole files.
TEST(LeadingBytes, ProgramWithPtdReadAsWhole) {
  for (const std::string name : {"linear", "xor"}) {
    const auto pte = ReadFile(FixturePath(name + ".pte"));
    const auto ptd = ReadFile(FixturePath(name + ".ptd"));
    auto whole = PteFile::FromBytes(Bytes::Copy(pte.data(), pte.size()), name + ".pte");
    auto whole_ptd = PtdFile::FromBytes(Bytes::Copy(ptd.data(), ptd.size()), name + ".ptd");
    auto part = PteFile::FromLeadingBytes(Head(pte), pte.size(), name + ".pte");
    auto part_ptd = PtdFile::FromLeadingBytes(Head(ptd), ptd.size(), name + ".ptd");
    EXPECT_LT(part_ptd->file().size, ptd.size()) << name << ".ptd: its tensor data is not needed";
    whole->CheckExternalKeys({whole_ptd.get()});
    part->CheckExternalKeys({part_ptd.get()});
    EXPECT_EQ(Findings(part->report()), Findings(whole->report())) << name;
    EXPECT_EQ(DescribePte(*part, {part_ptd.get()}).dump(), DescribePte(*whole, {whole_ptd.get()}).dump()) << name;
    EXPECT_EQ(SizeJson(AnalyzeSize(*part, {part_ptd.get()}), SIZE_MAX, SizeSort::kBytes).dump(),
              SizeJson(AnalyzeSize(*whole, {whole_ptd.get()}), SIZE_MAX, SizeSort::kBytes).dump())
        << name;
  }
}

// The program of stories260k_qnn.pte ends long before its delegate payload: that is all that
// is read (its extended header's program_size, hand-checked: bytes 16..23).
TEST(LeadingBytes, SegmentDataIsNotNeeded) {
  auto file = ReadFile(FixturePath("stories260k_qnn.pte"));
  ASSERT_EQ(std::memcmp(file.data() + 8, "eh00", 4), 0);
  const uint64_t program_size = LoadU64(file.data() + 16);
  EXPECT_EQ(LeadingBytesNeeded(file.data(), 64, file.size()), program_size);
  EXPECT_LT(program_size * 10, file.size());
  auto part = PteFile::FromLeadingBytes(Head(file), file.size(), "stories260k_qnn.pte");
  ASSERT_TRUE(part->ok()) << Findings(part->report());
  // Segment 0 (constants) is empty: nothing to read. Segment 1 is the QNN payload.
  ASSERT_EQ(part->segments().size(), 2u);
  EXPECT_EQ(part->SegmentData(0).size, 0u);
  try {
    part->SegmentData(1);
    FAIL() << "segment data of a partly read file";
  } catch (const Error& e) {
    EXPECT_EQ(e.finding().code, "not-loaded");
    EXPECT_NE(std::string(e.what()).find("segment 1"), std::string::npos) << e.what();
  }
}

// Every byte of the first 64 (the headers) set to 0, 0xff and its value + 1, and the file cut
// short at several places: the reader stops where the whole-file reader stops, and reads
// nothing past what it asked for.
TEST(LeadingBytes, HeaderMutantsReadAsWhole) {
  size_t mutants = 0;
  for (const std::string name : {"keyword_spotting.pte", "xor.pte", "linear.pte", "add.pte"}) {
    const auto file = ReadFile(FixturePath(name));
    // One mutation per byte of the largest keeps this test quick under ASan.
    const int kinds = file.size() > 50000 ? 1 : 3;
    for (size_t at = 0; at < 64 && at < file.size(); ++at) {
      for (int how = 3 - kinds; how < 3; ++how) {
        auto m = file;
        m[at] = how == 0 ? 0 : how == 1 ? 0xff : static_cast<uint8_t>(m[at] + 1);
        ExpectSamePte(m, name + " byte " + std::to_string(at) + " mutated (" + std::to_string(how) + ")");
        ++mutants;
      }
    }
    for (size_t cut :
         {size_t{0}, size_t{7}, size_t{12}, size_t{40}, size_t{63}, size_t{64}, file.size() / 2, file.size() - 1}) {
      std::vector<uint8_t> m(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(cut));
      ExpectSamePte(m, name + " cut at " + std::to_string(cut));
      ++mutants;
    }
  }
  for (const std::string name : {"xor.ptd", "linear.ptd"}) {
    const auto file = ReadFile(FixturePath(name));
    for (size_t at = 0; at < 64 && at < file.size(); ++at) {
      for (int how = 0; how < 3; ++how) {
        auto m = file;
        m[at] = how == 0 ? 0 : how == 1 ? 0xff : static_cast<uint8_t>(m[at] + 1);
        ExpectSamePtd(m, name + " byte " + std::to_string(at) + " mutated (" + std::to_string(how) + ")");
        ++mutants;
      }
    }
  }
  std::printf("  %zu mutants read alike\n", mutants);
}

// A file whose segments lie far past the bytes in memory: the checks use the total size (a
// segment past the end is found, one inside is not), and the .bpte and header-less cases ask
// for the whole file.
TEST(LeadingBytes, TotalSizeDecidesSegmentRanges) {
  const auto file = ReadFile(FixturePath("stories260k_qnn.pte"));
  Bytes head = Head(file);
  // The same leading bytes, as if the file were 1 byte short or 4 GiB long.
  auto shorter = PteFile::FromLeadingBytes(head, file.size() - 1, "f.pte");
  EXPECT_TRUE(shorter->report().Has("segment-out-of-range") || shorter->report().Has("truncated"))
      << Findings(shorter->report());
  auto longer = PteFile::FromLeadingBytes(head, uint64_t{4} << 30, "f.pte");
  EXPECT_TRUE(longer->ok()) << Findings(longer->report());
  EXPECT_EQ(longer->file_size(), uint64_t{4} << 30);

  uint8_t bp[64] = {0};
  std::memcpy(bp + 4, "BP08", 4);
  EXPECT_EQ(LeadingBytesNeeded(bp, 64, 1000), 1000u);
  uint8_t et[64] = {0};
  std::memcpy(et + 4, "ET12", 4);
  EXPECT_EQ(LeadingBytesNeeded(et, 64, 1000), 1000u);             // no eh00: the program is the whole file
  EXPECT_EQ(LeadingBytesNeeded(et, 64, uint64_t{3} << 30), 64u);  // over 2 GiB: rejected at the header
  uint8_t other[64] = {0};
  std::memcpy(other + 4, "PK\3\4", 4);
  EXPECT_EQ(LeadingBytesNeeded(other, 64, 1000), 64u);  // not ExecuTorch: the identifier says so
  EXPECT_EQ(LeadingBytesNeeded(other, 10, 10), 10u);
  EXPECT_EQ(LeadingBytesNeeded(other, 10, 1000), 64u);  // ask for the first 64 first

  // Fewer bytes than asked for is refused, not misjudged.
  try {
    PteFile::FromLeadingBytes(head.Sub(0, head.size - 1), file.size(), "f.pte");
    FAIL() << "a short head was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.finding().code, "not-loaded");
  }
}

}  // namespace
}  // namespace ptepack
