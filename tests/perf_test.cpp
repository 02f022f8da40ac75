// Model-scale behaviour of the writer and reader, kept fast: offsets above
// 4 GiB with sparse files, bounded resident memory while writing and
// reading, and streamed output identical to the in-memory rendering.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "program_views_generated.h"
#include "ptepack/error.h"
#include "serialize/api/package_access.h"
#include "serialize/model/program_parts.h"
#include "serialize/model/spec.h"
#include "serialize/read/checksum.h"
#include "serialize/read/describe.h"
#include "serialize/read/pte_reader.h"
#include "serialize/read/restore.h"
#include "serialize/write/pte_writer.h"
#include "tests/test_util.h"

namespace ptepack {
namespace {

using nlohmann::json;
using testing::ReadFile;
using testing::TempDir;

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kMiB = 1ull << 20;

// One constant tensor of a generated program: bytes [offset, offset+size)
// of a data file, or `size` bytes given in hex.
struct Const {
  uint64_t offset = 0;
  uint64_t size = 0;
  std::string hex;  // when set, inline data instead of the file
};

// A one-method program whose values are BYTE tensors over `consts`.
std::string SpecJson(const std::string& data_file, const std::vector<Const>& consts) {
  json values = json::array(), constants = json::array();
  for (size_t i = 0; i < consts.size(); ++i) {
    const Const& c = consts[i];
    // BYTE[a, b] with a * b == size (sizes are int32).
    uint64_t a = 1, b = c.size;
    while (b > (1u << 30) && b % 2 == 0) {
      a *= 2;
      b /= 2;
    }
    values.push_back(
        {{"val_type", "Tensor"},
         {"val", {{"scalar_type", "BYTE"}, {"sizes", {a, b}}, {"dim_order", {0, 1}}, {"data_buffer_idx", i + 1}}}});
    if (!c.hex.empty()) {
      constants.push_back({{"hex", c.hex}});
    } else {
      constants.push_back({{"file", data_file}, {"offset", c.offset}, {"size", c.size}});
    }
  }
  json plan{{"name", "forward"},
            {"values", values},
            {"inputs", json::array()},
            {"outputs", {0}},
            {"chains", {{{"instructions", json::array()}}}},
            {"operators", json::array()},
            {"delegates", json::array()},
            {"non_const_buffer_sizes", {0}}};
  json program{{"version", 0}, {"execution_plan", {plan}}};
  return json{{"program", program}, {"constants", constants}}.dump();
}

void WriteRandomFile(const std::string& path, uint64_t size, uint32_t seed) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> block(1 << 17);  // 1 MiB
  for (uint64_t done = 0; done < size;) {
    for (auto& w : block) w = rng();
    size_t n = static_cast<size_t>(std::min<uint64_t>(size - done, block.size() * 8));
    out.write(reinterpret_cast<const char*>(block.data()), static_cast<std::streamsize>(n));
    done += n;
  }
  ASSERT_TRUE(out.good());
}

// Peak resident set, in bytes, since the last ResetPeakRss().
uint64_t PeakRss() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}
uint64_t CurrentRss() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}
bool ResetPeakRss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.close();
  return out.good();
}

// Sets when unbuffered (O_DIRECT) writing starts, back to the default
// however the test ends.
struct UnbufferedAfter {
  explicit UnbufferedAfter(uint64_t n, bool refuse_direct = false) {
    AtomicFile::SetUnbufferedAfterForTesting(n, refuse_direct);
  }
  ~UnbufferedAfter() { AtomicFile::SetUnbufferedAfterForTesting(AtomicFile::kUnbufferedAfter); }
};

// True if a new file in `dir` can be opened with O_DIRECT.
bool DirectIoWorks(const std::string& dir) {
  const std::string p = dir + "/odirect-probe";
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_DIRECT, 0644);
  if (fd >= 0) ::close(fd);
  ::unlink(p.c_str());
  return fd >= 0;
}

const uint8_t* ConstantData(const PteFile& pte, uint32_t idx, uint64_t* file_offset) {
  const auto* cs = pte.program()->constant_segment();
  *file_offset = pte.segments()[cs->segment_index()].file_offset + cs->offsets()->Get(idx);
  return pte.file().data + *file_offset;
}

// A > 4 GiB sparse source whose second constant lands above 4 GiB in the
// output. Holes in the source are skipped (SEEK_DATA/SEEK_HOLE) and stay
// holes in the output, so this writes and reads a few KiB of real data.
TEST(PerfLargeOffsets, SecondConstantAbove4GiBFromSparseSource) {
  const std::string dir = TempDir("perf_sparse");
  const std::string src = dir + "/weights.bin";
  const uint64_t first = 4 * kGiB + 4096;  // pushes the second constant past 4 GiB
  const uint64_t second = 64 * 1024;
  {
    int fd = ::open(src.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(first + second)), 0);
    // Real bytes at both ends of the first constant and in the second one.
    const char head[] = "first-constant-head";
    const char tail[] = "first-constant-tail";
    ASSERT_EQ(::pwrite(fd, head, sizeof head, 0), static_cast<ssize_t>(sizeof head));
    ASSERT_EQ(::pwrite(fd, tail, sizeof tail, static_cast<off_t>(first - sizeof tail)),
              static_cast<ssize_t>(sizeof tail));
    std::vector<uint8_t> pattern(second);
    for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = static_cast<uint8_t>(i * 31 + 7);
    ASSERT_EQ(::pwrite(fd, pattern.data(), pattern.size(), static_cast<off_t>(first)),
              static_cast<ssize_t>(pattern.size()));
    ::close(fd);
  }
  auto t0 = std::chrono::steady_clock::now();
  PackageParts pkg = PackageFromSpecJson(SpecJson(src, {{0, first, ""}, {first, second, ""}}), dir);
  const std::string out = dir + "/big.pte";
  WriteResult wr = WritePackage(PackageOf(pkg), BackendConfig{}, out);
  double write_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_GT(wr.pte.size, 4 * kGiB);

  t0 = std::chrono::steady_clock::now();
  auto pte = PteFile::Open(out);
  double open_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(pte->ok()) << pte->report().findings().front().ToString();
  const auto* cs = pte->program()->constant_segment();
  ASSERT_NE(cs, nullptr);
  ASSERT_EQ(cs->offsets()->size(), 3u);
  EXPECT_EQ(cs->offsets()->Get(1), 0u);
  // 16-byte constant alignment: first + padding to 16 (first is a multiple).
  EXPECT_EQ(cs->offsets()->Get(2), first);
  uint64_t fo1 = 0, fo2 = 0;
  const uint8_t* c1 = ConstantData(*pte, 1, &fo1);
  const uint8_t* c2 = ConstantData(*pte, 2, &fo2);
  EXPECT_GT(fo2, 4 * kGiB);
  EXPECT_EQ(fo2, fo1 + first);
  EXPECT_EQ(std::memcmp(c1, "first-constant-head", 20), 0);
  EXPECT_EQ(std::memcmp(c1 + first - 20, "first-constant-tail", 20), 0);
  EXPECT_EQ(c1[kGiB], 0);  // inside the hole
  for (size_t i : {size_t{0}, size_t{1}, size_t{4095}, size_t{4096}, size_t{second - 1}}) {
    EXPECT_EQ(c2[i], static_cast<uint8_t>(i * 31 + 7)) << "byte " << i << " of the second constant";
  }
  // The output is sparse like its source: far fewer blocks than bytes.
  struct stat st {};
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  struct stat sst {};
  ASSERT_EQ(::stat(src.c_str(), &sst), 0);
  if (static_cast<uint64_t>(sst.st_blocks) * 512 < 64 * kMiB) {
    EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, 64 * kMiB) << "holes were written out as zeros";
  }
  EXPECT_LT(write_s, 20.0);
  EXPECT_LT(open_s, 1.0);
  std::filesystem::remove_all(dir);
}

// Small constants from a file and from memory, constants copied in the
// kernel and ones written through the buffer, padding and segment gaps: the
// streamed file equals the in-memory rendering byte for byte.
TEST(PerfStreamedWrite, MatchesRenderedBytes) {
  const std::string dir = TempDir("perf_stream");
  const std::string src = dir + "/weights.bin";
  WriteRandomFile(src, 6 * kMiB + 123, 1);
  std::vector<Const> consts = {
      {0, 3 * kMiB + 5, ""},                           // copy_file_range
      {3 * kMiB + 5, 100, ""},                         // through the buffer
      {0, 0, "00112233445566778899"},                  // memory
      {3 * kMiB + 105, 20000, ""},                     // just above the kernel-copy threshold
      {4 * kMiB, 2 * kMiB + 123, ""}, {17, 4096, ""},  // overlaps the first one in the source
  };
  // Page-aligned segments and tensors make source and destination offsets
  // congruent, which is when copy_file_range is used; with the default
  // alignments the data goes through pread + write.
  BackendConfig aligned;
  aligned.segment_alignment = 4096;
  aligned.constant_tensor_alignment = 4096;
  // Unbuffered (O_DIRECT) writing: never, from the first source byte, and
  // from the first byte on a file system that refuses O_DIRECT writes.
  enum Unbuffered { kNever, kFromStart, kRefused };
  const bool direct_io = DirectIoWorks(dir);
  for (const BackendConfig& cfg : {BackendConfig{}, aligned}) {
    for (bool kernel_copy : {true, false}) {
      for (Unbuffered ub : {kNever, kFromStart, kRefused}) {
        AtomicFile::SetKernelCopyForTesting(kernel_copy);
        UnbufferedAfter after(ub == kNever ? UINT64_MAX : 0, ub == kRefused);
        PackageParts pkg = PackageFromSpecJson(SpecJson(src, consts), dir);
        PteLayout layout = LayoutPte(pkg, cfg);
        const std::string out = dir + "/stream.pte";
        WritePteLayout(layout, out, WriteOptions{});
        std::vector<uint8_t> want = RenderPte(layout);
        std::vector<uint8_t> got = ReadFile(out);
        const std::string what = "kernel copy " + std::to_string(kernel_copy) + ", segment alignment " +
                                 std::to_string(cfg.segment_alignment) + ", unbuffered mode " + std::to_string(ub);
        ASSERT_EQ(got.size(), want.size()) << what;
        EXPECT_TRUE(got == want) << what;
        const uint64_t direct = AtomicFile::LastUnbufferedBytesForTesting();
        if (ub == kFromStart && kernel_copy && direct_io) {
          EXPECT_GT(direct, 0u) << what;
        } else {
          EXPECT_EQ(direct, 0u) << what;
        }
        auto pte = PteFile::Open(out);
        EXPECT_TRUE(pte->ok());
      }
    }
  }
  AtomicFile::SetKernelCopyForTesting(true);
  std::filesystem::remove_all(dir);
}

// Tens of MiB written unbuffered (O_DIRECT, several buffers' worth) with the
// default alignments: constants of odd sizes, back to back and padded, one
// that starts exactly where the run of unbuffered writing begins, and with
// ExecuTorch's 128-byte segment alignment every output offset differs from
// the source offset modulo the page size. The file equals the in-memory
// rendering byte for byte, by default (unbuffered writing after 8 MiB) and
// from the first byte.
TEST(PerfStreamedWrite, UnbufferedRunsMatchRenderedBytes) {
  const std::string dir = TempDir("perf_unbuffered");
  const std::string src = dir + "/weights.bin";
  WriteRandomFile(src, 48 * kMiB, 5);
  std::vector<Const> consts = {
      {0, 5 * kMiB + 17, ""}, {5 * kMiB + 17, 3, ""},
      {0, 0, "aabbccddeeff"}, {7 * kMiB, 12 * kMiB + 4095, ""},
      {3, 1 * kMiB, ""},      {20 * kMiB + 1, 19 * kMiB + 1, ""},
      {100, 8 * 1024, ""},    {40 * kMiB, 8 * kMiB, ""},
  };
  const bool direct_io = DirectIoWorks(dir);
  for (uint64_t after : {AtomicFile::kUnbufferedAfter, uint64_t{0}}) {
    UnbufferedAfter hook(after);
    PackageParts pkg = PackageFromSpecJson(SpecJson(src, consts), dir);
    PteLayout layout = LayoutPte(pkg, BackendConfig{});
    const std::string out = dir + "/unbuffered.pte";
    WritePteLayout(layout, out, WriteOptions{});
    std::vector<uint8_t> want = RenderPte(layout);
    std::vector<uint8_t> got = ReadFile(out);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_TRUE(got == want) << "unbuffered after " << after << " bytes";
    if (direct_io) {
      EXPECT_GT(AtomicFile::LastUnbufferedBytesForTesting(), 40 * kMiB) << "unbuffered after " << after << " bytes";
    }
  }
  std::filesystem::remove_all(dir);
}

// Holes in a source end a run of unbuffered writing (they stay holes in the
// output) and the run starts again after them, reading back the partial
// block the hole left; the bytes equal the in-memory rendering.
TEST(PerfStreamedWrite, UnbufferedWriteKeepsHoles) {
  const std::string dir = TempDir("perf_unbuffered_sparse");
  const std::string src = dir + "/weights.bin";
  const uint64_t size = 64 * kMiB;
  {
    int fd = ::open(src.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(size)), 0);
    std::mt19937_64 rng(6);
    std::vector<uint64_t> block(1 << 17);  // 1 MiB
    // Data at [0, 3 MiB), [20 MiB, 30 MiB) and in the last MiB; holes between.
    for (uint64_t mib : {0, 1, 2, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 63}) {
      for (auto& w : block) w = rng();
      ASSERT_EQ(::pwrite(fd, block.data(), kMiB, static_cast<off_t>(mib * kMiB)), static_cast<ssize_t>(kMiB));
    }
    ::close(fd);
  }
  UnbufferedAfter hook(0);
  PackageParts pkg = PackageFromSpecJson(SpecJson(src, {{0, size, ""}, {kMiB + 5, 2 * kMiB, ""}}), dir);
  PteLayout layout = LayoutPte(pkg, BackendConfig{});
  const std::string out = dir + "/sparse.pte";
  WritePteLayout(layout, out, WriteOptions{});
  std::vector<uint8_t> want = RenderPte(layout);
  EXPECT_TRUE(ReadFile(out) == want);
  struct stat st {
  }, sst{};
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  ASSERT_EQ(::stat(src.c_str(), &sst), 0);
  if (static_cast<uint64_t>(sst.st_blocks) * 512 < 32 * kMiB) {
    EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, 40 * kMiB) << "holes were written out as zeros";
  }
  std::filesystem::remove_all(dir);
}

// Writing 256 MiB of file-backed constants keeps the peak resident set
// within flatbuffer + 64 MiB of where it started, through the kernel copy
// and through the mapping (pages dropped after use), with large constants
// and with many small ones.
struct RssCase {
  const char* name;
  bool kernel_copy;
  uint64_t tensor_size;
};
class PerfWriterRss : public ::testing::TestWithParam<RssCase> {};

TEST_P(PerfWriterRss, PeakStaysBounded) {
  const RssCase& c = GetParam();
  const std::string dir = TempDir(std::string("perf_rss_") + c.name);
  const std::string src = dir + "/weights.bin";
  const uint64_t total = 256 * kMiB;
  WriteRandomFile(src, total, 2);
  std::vector<Const> consts;
  for (uint64_t off = 0; off < total; off += c.tensor_size) consts.push_back({off, c.tensor_size, ""});
  PackageParts pkg = PackageFromSpecJson(SpecJson(src, consts), dir);
  PteLayout layout = LayoutPte(pkg, BackendConfig{});
  AtomicFile::SetKernelCopyForTesting(c.kernel_copy);
  if (!ResetPeakRss()) GTEST_SKIP() << "cannot reset the peak RSS counter (/proc/self/clear_refs)";
  const uint64_t before = CurrentRss();
  WritePteLayout(layout, dir + "/out.pte", WriteOptions{});
  const uint64_t peak = PeakRss();
  AtomicFile::SetKernelCopyForTesting(true);
  RecordProperty("peak_growth_kib", std::to_string((peak - before) >> 10));
  EXPECT_LT(peak - before, layout.flatbuffer_size + 64 * kMiB)
      << "peak " << (peak >> 20) << " MiB, before " << (before >> 20) << " MiB";
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Cases, PerfWriterRss,
                         ::testing::Values(RssCase{"kernel_copy_16MiB", true, 16 * kMiB},
                                           RssCase{"mapped_16MiB", false, 16 * kMiB},
                                           RssCase{"small_8KiB", true, 8 * 1024},
                                           RssCase{"mapped_small_32KiB", false, 32 * 1024}),
                         [](const ::testing::TestParamInfo<RssCase>& i) { return std::string(i.param.name); });

// Opening, verifying and describing a program reads its headers and
// flatbuffer only: resident memory does not grow with the data.
TEST(PerfReader, VerifyAndDescribeDoNotTouchData) {
  const std::string dir = TempDir("perf_reader");
  const std::string src = dir + "/weights.bin";
  WriteRandomFile(src, 128 * kMiB, 3);
  std::vector<Const> consts;
  for (uint64_t off = 0; off < 128 * kMiB; off += kMiB) consts.push_back({off, kMiB, ""});
  const std::string out = dir + "/model.pte";
  WritePackage(PackageOf(PackageFromSpecJson(SpecJson(src, consts), dir)), BackendConfig{}, out);
  if (!ResetPeakRss()) GTEST_SKIP() << "cannot reset the peak RSS counter";
  const uint64_t before = CurrentRss();
  auto pte = PteFile::Open(out);
  ASSERT_TRUE(pte->ok());
  json d = DescribePte(*pte, {});
  EXPECT_EQ(d["constants"]["count"].get<size_t>(), 129u);
  EXPECT_LT(PeakRss() - before, 16 * kMiB);
  // Checksums read everything, with pread: still no growth.
  FileSums sums = ChecksumPte(*pte);
  EXPECT_EQ(sums.regions.size(), 3u);  // program, segments[0], padding
  EXPECT_LT(PeakRss() - before, 16 * kMiB);
  std::filesystem::remove_all(dir);
}

// Restoring a program's constants (PackageFromPte, the first step of repack,
// split and extract) reads each constant's padding to drop it, and nothing
// else of the data: 16,384 constants of 4,095 bytes, each padded to 4,096,
// take 64 MiB of the file and must not become resident. Reading the padding
// through the mapping faulted in every page of the segment.
TEST(PerfReader, RestoringConstantsReadsOnlyTheirPadding) {
  const std::string dir = TempDir("perf_restore");
  const std::string src = dir + "/weights.bin";
  constexpr uint64_t kCount = 16384, kSize = 4095;
  WriteRandomFile(src, kCount * kSize, 4);
  std::vector<Const> consts;
  for (uint64_t i = 0; i < kCount; ++i) consts.push_back({i * kSize, kSize, ""});
  const std::string out = dir + "/model.pte";
  WritePackage(PackageOf(PackageFromSpecJson(SpecJson(src, consts), dir)), BackendConfig{}, out);
  auto pte = PteFile::Open(out);
  ASSERT_TRUE(pte->ok());
  ASSERT_EQ(
      pte->program()->constant_segment()->offsets()->Get(2) - pte->program()->constant_segment()->offsets()->Get(1),
      4096u)
      << "each constant padded to the default 16-byte alignment";
  if (!ResetPeakRss()) GTEST_SKIP() << "cannot reset the peak RSS counter";
  const uint64_t before = CurrentRss();
  PackageParts pkg = PackageFromPte(*pte);
  const prog::Program p{*pkg.program};
  ASSERT_EQ(p.constant_buffer().elems().size(), kCount + 1);
  for (uint64_t i = 1; i <= kCount; i += 1000) {
    EXPECT_EQ(prog::Buffer{*p.constant_buffer().elems()[i].table()}.get_storage().size, kSize) << "padding kept";
  }
  EXPECT_LT(PeakRss() - before, 32 * kMiB);
  std::filesystem::remove_all(dir);
}

// After a failed write: no output and no temporary file beside the source.
void ExpectNoOutputLeft(const std::string& dir, const std::string& out) {
  EXPECT_FALSE(std::filesystem::exists(out));
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files += e.path().filename() != "weights.bin";
  EXPECT_EQ(files, 0u) << "temporary file left behind";
  std::filesystem::remove_all(dir);
}

// A full disk while copying in the kernel: the write fails, nothing is left.
TEST(PerfStreamedWrite, InjectedFaultDuringKernelCopyLeavesNoFile) {
  const std::string dir = TempDir("perf_fault");
  const std::string src = dir + "/weights.bin";
  WriteRandomFile(src, 8 * kMiB, 4);
  PackageParts pkg = PackageFromSpecJson(SpecJson(src, {{0, 8 * kMiB, ""}}), dir);
  const std::string out = dir + "/out.pte";
  AtomicFile::SetFailAfterBytesForTesting(4 * kMiB);
  EXPECT_THROW(WritePackage(PackageOf(pkg), BackendConfig{}, out), Error);
  AtomicFile::SetFailAfterBytesForTesting(UINT64_MAX);
  ExpectNoOutputLeft(dir, out);
}

// A full disk while the unbuffered writer is writing: the write fails,
// nothing is left.
TEST(PerfStreamedWrite, InjectedFaultDuringUnbufferedWriteLeavesNoFile) {
  const std::string dir = TempDir("perf_fault_unbuffered");
  const std::string src = dir + "/weights.bin";
  WriteRandomFile(src, 24 * kMiB, 7);
  PackageParts pkg = PackageFromSpecJson(SpecJson(src, {{0, 24 * kMiB, ""}}), dir);
  const std::string out = dir + "/out.pte";
  UnbufferedAfter hook(0);
  AtomicFile::SetFailAfterBytesForTesting(12 * kMiB);
  try {
    WritePackage(PackageOf(pkg), BackendConfig{}, out);
    ADD_FAILURE() << "24 MiB written past an injected full disk at 12 MiB";
  } catch (const Error& e) {
    EXPECT_EQ(e.finding().code, "write-failed");
    EXPECT_NE(std::string(e.what()).find("No space left"), std::string::npos) << e.what();
  }
  AtomicFile::SetFailAfterBytesForTesting(UINT64_MAX);
  ExpectNoOutputLeft(dir, out);
}

// A directory of this test's own on /dev/shm, or "" when that is not a tmpfs.
std::string TmpfsDir(const std::string& name) {
  struct statfs fs {};
  if (::statfs("/dev/shm", &fs) != 0 || fs.f_type != TMPFS_MAGIC) return "";
  const std::string d = "/dev/shm/ptepack-test-" + name + "-" + std::to_string(::getpid());
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// An output on a tmpfs (issue 27 goal 2): no O_DIRECT there, even where
// unbuffered writing would start at the first byte, and the constants
// spliced in from the source file (copy_file_range refuses to cross file
// systems) give the in-memory rendering byte for byte: odd sizes and
// offsets, ExecuTorch's default alignments and page-aligned ones.
TEST(PerfStreamedWrite, TmpfsOutputIsSplicedNotDirect) {
  const std::string shm = TmpfsDir("splice");
  if (shm.empty()) GTEST_SKIP() << "/dev/shm is not a tmpfs";
  const std::string dir = TempDir("perf_tmpfs");
  const std::string src = dir + "/weights.bin";
  WriteRandomFile(src, 8 * kMiB, 8);
  std::vector<Const> consts = {
      {0, 2 * kMiB + 17, ""},          {2 * kMiB + 17, 3, ""}, {0, 0, "aabbccddeeff"},
      {3 * kMiB, 3 * kMiB + 4095, ""}, {3, 1 * kMiB, ""},      {100, 8 * 1024, ""},
  };
  BackendConfig aligned;
  aligned.segment_alignment = 4096;
  aligned.constant_tensor_alignment = 4096;
  for (const BackendConfig& cfg : {BackendConfig{}, aligned}) {
    for (uint64_t after : {AtomicFile::kUnbufferedAfter, uint64_t{0}}) {
      UnbufferedAfter hook(after);
      PackageParts pkg = PackageFromSpecJson(SpecJson(src, consts), dir);
      PteLayout layout = LayoutPte(pkg, cfg);
      const std::string out = shm + "/spliced.pte";
      WritePteLayout(layout, out, WriteOptions{});
      const std::string what =
          "segment alignment " + std::to_string(cfg.segment_alignment) + ", unbuffered after " + std::to_string(after);
      std::vector<uint8_t> want = RenderPte(layout);
      std::vector<uint8_t> got = ReadFile(out);
      ASSERT_EQ(got.size(), want.size()) << what;
      EXPECT_TRUE(got == want) << what;
      EXPECT_EQ(AtomicFile::LastUnbufferedBytesForTesting(), 0u) << what;
    }
  }
  std::filesystem::remove_all(shm);
  std::filesystem::remove_all(dir);
}

// A full tmpfs while splicing: the write fails with a located error and
// nothing is left there.
TEST(PerfStreamedWrite, InjectedFaultWhileSplicingIntoTmpfsLeavesNoFile) {
  const std::string shm = TmpfsDir("splice_fault");
  if (shm.empty()) GTEST_SKIP() << "/dev/shm is not a tmpfs";
  const std::string dir = TempDir("perf_tmpfs_fault");
  const std::string src = dir + "/weights.bin";
  WriteRandomFile(src, 16 * kMiB, 9);
  PackageParts pkg = PackageFromSpecJson(SpecJson(src, {{0, 16 * kMiB, ""}}), dir);
  const std::string out = shm + "/out.pte";
  AtomicFile::SetFailAfterBytesForTesting(6 * kMiB);
  try {
    WritePackage(PackageOf(pkg), BackendConfig{}, out);
    ADD_FAILURE() << "16 MiB written past an injected full file system at 6 MiB";
  } catch (const Error& e) {
    EXPECT_EQ(e.finding().code, "write-failed");
    EXPECT_NE(std::string(e.what()).find(out), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No space left"), std::string::npos) << e.what();
  }
  AtomicFile::SetFailAfterBytesForTesting(UINT64_MAX);
  EXPECT_TRUE(std::filesystem::is_empty(shm)) << "output or temporary file left on the tmpfs";
  std::filesystem::remove_all(shm);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ptepack
