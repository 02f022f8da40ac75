// Outputs are all-or-nothing: a write that fails part way (injected fault or
// a real full disk) leaves existing outputs byte for byte as they were and
// no temporary files behind; an output that is also an input is refused.
// Also the format's hard limits, which must fail before any byte is written.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "serialize/api/package_access.h"
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
using Buf = std::vector<uint8_t>;
using testing::FixturePath;
using testing::ReadFile;
using testing::WriteFile;

// Resets the fault hook however the test ends.
struct FailAfter {
  explicit FailAfter(uint64_t n) { AtomicFile::SetFailAfterBytesForTesting(n); }
  ~FailAfter() { AtomicFile::SetFailAfterBytesForTesting(UINT64_MAX); }
};

std::vector<std::string> TempFilesIn(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().find(".tmp-") != std::string::npos) out.push_back(e.path().string());
  }
  return out;
}

// A program read from fixtures, ready to write again.
struct Loaded {
  std::unique_ptr<PteFile> pte;
  std::vector<std::unique_ptr<PtdFile>> ptd_files;
  PackageParts pkg;
  BackendConfig config;
};

Loaded Load(const std::string& pte, const std::string& ptd = "") {
  Loaded l;
  l.pte = PteFile::Open(FixturePath(pte));
  std::vector<const PtdFile*> ptds;
  if (!ptd.empty()) {
    l.ptd_files.push_back(PtdFile::Open(FixturePath(ptd)));
    ptds.push_back(l.ptd_files.back().get());
  }
  l.pkg = PackageFromPte(*l.pte, ptds);
  InferredConfig inf = InferConfig(*l.pte, l.pkg, ptds);
  inf.ApplyBlobAlignments(l.pkg);
  l.config = inf.config;
  return l;
}

Buf OldBytes(size_t n, uint8_t fill) { return Buf(n, fill); }

TEST(AtomicWrite, FailedWriteKeepsOldOutput) {
  Loaded l = Load("keyword_spotting.pte");
  const uint64_t new_size = RenderPte(LayoutPte(l.pkg, l.config)).size();
  for (uint64_t fail_at : {uint64_t{0}, uint64_t{1}, uint64_t{8}, uint64_t{4096}, new_size / 2, new_size - 1}) {
    std::string dir = testing::TempDir("atomic_fail_" + std::to_string(fail_at));
    std::string out = dir + "/model.pte";
    const Buf old = OldBytes(5000, 0xAB);
    WriteFile(out, old);
    {
      FailAfter guard(fail_at);
      try {
        WritePackage(PackageOf(l.pkg), l.config, out);
        ADD_FAILURE() << "write did not fail at " << fail_at;
      } catch (const Error& e) {
        EXPECT_EQ(e.finding().code, "write-failed") << e.what();
      }
    }
    EXPECT_TRUE(ReadFile(out) == old) << "old output changed (fault at " << fail_at << ")";
    EXPECT_EQ(TempFilesIn(dir), std::vector<std::string>{}) << "fault at " << fail_at;
  }
}

TEST(AtomicWrite, NoOldOutputMeansNoOutput) {
  Loaded l = Load("arduino_add.pte");
  std::string dir = testing::TempDir("atomic_fail_new");
  {
    FailAfter guard(100);
    EXPECT_THROW(WritePackage(PackageOf(l.pkg), l.config, dir + "/model.pte"), Error);
  }
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(AtomicWrite, SucceedsWithoutFault) {
  Loaded l = Load("arduino_add.pte");
  std::string dir = testing::TempDir("atomic_ok");
  std::string out = dir + "/model.pte";
  WriteFile(out, OldBytes(100, 1));
  WritePackage(PackageOf(l.pkg), l.config, out);
  EXPECT_TRUE(ReadFile(out) == ReadFile(FixturePath("arduino_add.pte")));
  EXPECT_EQ(TempFilesIn(dir), std::vector<std::string>{});
}

// A .pte and its .ptd are one output: a failure while writing either must
// leave both old files, not a new .ptd next to an old .pte.
TEST(AtomicWrite, FailedWriteKeepsOldPteAndPtdTogether) {
  Loaded l = Load("linear.pte", "linear.ptd");
  PteLayout layout = LayoutPte(l.pkg, l.config);
  ASSERT_EQ(layout.external.size(), 1u);
  const uint64_t pte_size = RenderPte(layout).size();
  const uint64_t ptd_size = RenderPtd(LayoutPtd(layout.external[0], l.config.ptd_segment_alignment)).size();
  ASSERT_LT(ptd_size, pte_size);
  // Fail inside the .ptd, and inside the .pte after the .ptd is complete.
  for (uint64_t fail_at : {ptd_size / 2, ptd_size, (ptd_size + pte_size) / 2}) {
    std::string dir = testing::TempDir("atomic_pair_" + std::to_string(fail_at));
    const std::string tag = layout.external[0].tag;
    const Buf old_pte = OldBytes(2000, 0x11), old_ptd = OldBytes(700, 0x22);
    WriteFile(dir + "/model.pte", old_pte);
    WriteFile(dir + "/" + tag + ".ptd", old_ptd);
    {
      FailAfter guard(fail_at);
      EXPECT_THROW(WritePackage(PackageOf(l.pkg), l.config, dir + "/model.pte"), Error) << fail_at;
    }
    EXPECT_TRUE(ReadFile(dir + "/model.pte") == old_pte) << "old .pte changed (fault at " << fail_at << ")";
    EXPECT_TRUE(ReadFile(dir + "/" + tag + ".ptd") == old_ptd) << "old .ptd changed (fault at " << fail_at << ")";
    EXPECT_EQ(TempFilesIn(dir), std::vector<std::string>{}) << "fault at " << fail_at;
  }
}

TEST(AtomicWrite, RefusesToOverwriteInput) {
  std::string dir = testing::TempDir("atomic_overwrite");
  std::string in = dir + "/in.pte";
  WriteFile(in, ReadFile(FixturePath("arduino_add.pte")));
  const Buf before = ReadFile(in);
  auto pte = PteFile::Open(in);
  PackageParts pkg = PackageFromPte(*pte);
  InferredConfig inf = InferConfig(*pte, pkg);
  inf.ApplyBlobAlignments(pkg);
  BackendConfig cfg = inf.config;
  cfg.segment_alignment = 256;  // a different output, were it written

  WriteOptions o;
  o.inputs = {in};
  std::string alias = dir + "/alias.pte";  // the same inode under another name
  ASSERT_EQ(::link(in.c_str(), alias.c_str()), 0);
  for (const std::string& target : {in, alias}) {
    try {
      WritePackage(PackageOf(pkg), cfg, target, o);
      ADD_FAILURE() << "overwrote " << target;
    } catch (const Error& e) {
      EXPECT_EQ(e.finding().code, "overwrite-input");
    }
    EXPECT_TRUE(ReadFile(in) == before);
  }
  EXPECT_EQ(TempFilesIn(dir), std::vector<std::string>{});

  // Allowed explicitly, the input is replaced (atomically: the mapping of the
  // old file stays valid).
  o.allow_overwrite_input = true;
  WritePackage(PackageOf(pkg), cfg, in, o);
  EXPECT_TRUE(ReadFile(in) == RenderPte(LayoutPte(pkg, cfg)));
  EXPECT_TRUE(ReadFile(alias) == before);  // the alias still names the old inode
}

// A real full disk: a small tmpfs mounted for the test (needs root and
// CAP_SYS_ADMIN, skipped otherwise). With unbuffered_after 0 the constants
// go through the unbuffered (O_DIRECT) writer and its thread from the
// first byte, on kernels whose tmpfs accepts O_DIRECT.
void CheckRealDiskFull(uint64_t unbuffered_after) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a tmpfs";
  std::string dir = testing::TempDir("atomic_enospc");
  std::string cmd = "mount -t tmpfs -o size=32k ptepack-enospc " + dir + " 2>/dev/null";
  if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "cannot mount a tmpfs here";
  struct Unmount {
    std::string dir;
    ~Unmount() { (void)std::system(("umount " + dir).c_str()); }
  } unmount{dir};

  Loaded l = Load("keyword_spotting.pte");  // 54 KiB: does not fit in 32 KiB
  std::string out = dir + "/model.pte";
  const Buf old = ReadFile(FixturePath("add.pte"));
  WriteFile(out, old);
  struct Hook {
    explicit Hook(uint64_t n) { AtomicFile::SetUnbufferedAfterForTesting(n); }
    ~Hook() { AtomicFile::SetUnbufferedAfterForTesting(AtomicFile::kUnbufferedAfter); }
  } hook{unbuffered_after};
  try {
    WritePackage(PackageOf(l.pkg), l.config, out);
    ADD_FAILURE() << "54 KiB written to a 32 KiB file system";
  } catch (const Error& e) {
    EXPECT_EQ(e.finding().code, "write-failed");
    EXPECT_NE(std::string(e.what()).find("No space left"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(ReadFile(out) == old);
  EXPECT_EQ(TempFilesIn(dir), std::vector<std::string>{});
  // The space is free again: a small program still fits.
  Loaded small = Load("add.pte");
  WritePackage(PackageOf(small.pkg), small.config, out);
  EXPECT_TRUE(ReadFile(out) == old);
}

TEST(AtomicWrite, RealDiskFull) { CheckRealDiskFull(AtomicFile::kUnbufferedAfter); }
TEST(AtomicWrite, RealDiskFullUnbuffered) { CheckRealDiskFull(0); }

// ---------------------------------------------------------------- limits

TEST(FormatLimits, CheckFunction) {
  EXPECT_NO_THROW(CheckFormatLimits(kMaxProgramBytes, kMaxSegments));
  for (auto [bytes, segs] : {std::pair<uint64_t, uint64_t>{kMaxProgramBytes + 1, 1},
                             {1ull << 32, 1},
                             {1000, kMaxSegments + 1},
                             {1000, 1ull << 40}}) {
    try {
      CheckFormatLimits(bytes, segs);
      ADD_FAILURE() << bytes << " bytes, " << segs << " segments accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.finding().code, "limit-exceeded");
    }
  }
}

// A 2 GiB inline constant (a sparse file, mapped: no memory or disk used)
// makes the flatbuffer too large; WritePackage must say so before encoding
// and before creating any file.
TEST(FormatLimits, FlatbufferOverTwoGiBFailsBeforeWriting) {
  std::string dir = testing::TempDir("limits_2g");
  std::string big = dir + "/big.bin";
  int fd = ::open(big.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(1ull << 31)), 0);
  ::close(fd);
  auto mapping = MappedFile::Open(big);

  Loaded l = Load("arduino_add.pte");
  auto& cb = prog::F(*l.pkg.program, "constant_buffer").elems();
  ASSERT_GE(cb.size(), 2u);
  prog::F(*cb[1].table(), "storage").set_scalars(mapping->All());
  BackendConfig cfg = l.config;
  cfg.inline_constants = true;

  std::string out_dir = dir + "/out";
  fs::create_directories(out_dir);
  try {
    WritePackage(PackageOf(l.pkg), cfg, out_dir + "/model.pte");
    ADD_FAILURE() << "2 GiB flatbuffer accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.finding().code, "limit-exceeded") << e.what();
    EXPECT_NE(std::string(e.what()).find("2 GiB"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::is_empty(out_dir));
  fs::remove(big);
}

}  // namespace
}  // namespace ptepack
