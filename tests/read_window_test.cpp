// Small reads of a source file served from a window read ahead
// (serialize/io/file_io.h, ReadWindow): what each reader gets is the file's
// bytes as the test wrote them, at every edge of a window and of the file;
// the hashers and the writer that read through it give the same digests and
// the same output bytes; and a file that ends early is still an error.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <random>
#include <string>
#include <vector>

#include "ptepack/error.h"
#include "serialize/io/file_io.h"
#include "serialize/io/hash.h"
#include "tests/test_util.h"

namespace ptepack {
namespace {

using testing::TempDir;
using testing::WriteFile;

std::vector<uint8_t> RandomBytes(size_t n, unsigned seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

struct Fd {
  int fd;
  explicit Fd(const std::string& path) : fd(::open(path.c_str(), O_RDONLY)) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

TEST(ReadWindow, GivesTheFilesBytesAtEveryEdge) {
  const size_t kW = ReadWindow::kSize;
  const auto bytes = RandomBytes(3 * kW + 1000, 1);
  const std::string path = TempDir("read_window") + "/f";
  WriteFile(path, bytes);
  Fd f(path);
  ASSERT_GE(f.fd, 0);
  ReadWindow w;
  // Pieces in file order, then ones that straddle where a window read at an
  // earlier piece ends, the file's last bytes, and a jump backwards.
  std::vector<std::pair<uint64_t, size_t>> reads = {{0, 16}, {16, 16}, {4096, 4095}, {kW - 8, 16}, {kW + 5, 1}};
  for (uint64_t off = kW; off < 2 * kW; off += 16 * 1024 + 16) reads.push_back({off, 16 * 1024});
  reads.push_back({bytes.size() - 16, 16});
  reads.push_back({bytes.size() - ReadWindow::kMaxPiece, ReadWindow::kMaxPiece});
  reads.push_back({7, 9});
  for (const auto& [off, n] : reads) {
    const uint8_t* p = w.Get(f.fd, off, n);
    ASSERT_NE(p, nullptr) << off << " + " << n;
    EXPECT_EQ(std::vector<uint8_t>(p, p + n), std::vector<uint8_t>(bytes.begin() + off, bytes.begin() + off + n))
        << off << " + " << n;
  }
  // Larger pieces, bytes past the end, and a descriptor that is not open are
  // the caller's to read (and to report).
  EXPECT_EQ(w.Get(f.fd, 0, ReadWindow::kMaxPiece + 1), nullptr);
  EXPECT_EQ(w.Get(f.fd, bytes.size() - 8, 16), nullptr);
  EXPECT_EQ(w.Get(f.fd, bytes.size() + 100, 1), nullptr);
  EXPECT_EQ(w.Get(-1, 0, 1), nullptr);
  // The last one left no window behind: the file's bytes again.
  const uint8_t* p = w.Get(f.fd, 100, 8);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(std::vector<uint8_t>(p, p + 8), std::vector<uint8_t>(bytes.begin() + 100, bytes.begin() + 108));
}

// The window is a copy: once the file under a descriptor changes (or the
// descriptor is another file's), Forget makes the next piece come from the
// file. The readers that own a window call it when they reopen.
TEST(ReadWindow, ForgetReadsTheFileAgain) {
  const auto bytes = RandomBytes(8192, 2);
  const std::string path = TempDir("read_window_forget") + "/f";
  WriteFile(path, bytes);
  Fd f(path);
  ReadWindow w;
  ASSERT_NE(w.Get(f.fd, 0, 4), nullptr);
  const int rw = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(rw, 0);
  const uint8_t four[4] = {1, 2, 3, 4};
  ASSERT_EQ(::pwrite(rw, four, 4, 0), 4);
  ::close(rw);
  const uint8_t* stale = w.Get(f.fd, 0, 4);
  ASSERT_NE(stale, nullptr);
  EXPECT_EQ(std::vector<uint8_t>(stale, stale + 4), std::vector<uint8_t>(bytes.begin(), bytes.begin() + 4));
  w.Forget();
  const uint8_t* fresh = w.Get(f.fd, 0, 4);
  ASSERT_NE(fresh, nullptr);
  EXPECT_EQ(std::vector<uint8_t>(fresh, fresh + 4), std::vector<uint8_t>(four, four + 4));
}

// Many small pieces of a mapped file, as dedup hashes them (300,000
// constants in a split): each digest is XXH3_64bits of the piece's bytes,
// in file order and out of it; and a piece past the end of a file cut short
// after mapping is read-failed, naming the file.
TEST(ReadWindow, BytesHasherHashesEachSmallPieceAsXxh3) {
  const auto bytes = RandomBytes(600 * 1024, 3);
  const std::string path = TempDir("read_window_hash") + "/f";
  WriteFile(path, bytes);
  auto m = MappedFile::Open(path);
  const Bytes all = m->All();
  BytesHasher h;
  std::vector<size_t> offsets;
  for (size_t off = 0; off + 16 <= bytes.size(); off += 1000) offsets.push_back(off);
  for (size_t i = offsets.size(); i-- > 0;) offsets.push_back(offsets[i]);  // and backwards
  for (size_t off : offsets) {
    const size_t n = 16 + off % 200;
    if (off + n > bytes.size()) continue;
    ASSERT_EQ(h.Hash(all.Sub(off, n)), XXH3_64bits(bytes.data() + off, n)) << off;
  }
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  BytesHasher cut;
  EXPECT_EQ(cut.Hash(all.Sub(100, 16)), XXH3_64bits(bytes.data() + 100, 16));  // still in the file
  try {
    cut.Hash(all.Sub(300 * 1024, 16));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.finding().code, "read-failed");
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

// An output written from many small views of a mapped source (a .ptd's
// constants): the bytes are the source's pieces back to back, the same as
// the test cuts them out itself.
TEST(ReadWindow, AWriteOfSmallViewsIsTheirBytesInOrder) {
  const auto bytes = RandomBytes(700 * 1024, 4);
  const std::string dir = TempDir("read_window_write");
  WriteFile(dir + "/src", bytes);
  auto m = MappedFile::Open(dir + "/src");
  std::vector<uint8_t> expected;
  {
    AtomicFile out(dir + "/out");
    std::mt19937 rng(5);
    for (size_t off = 0; off < bytes.size();) {
      const size_t n = std::min<size_t>(bytes.size() - off, 1 + rng() % 3000);
      out.Write(m->All().Sub(off, n));
      expected.insert(expected.end(), bytes.begin() + off, bytes.begin() + off + n);
      off += n + rng() % 64;  // gaps, as alignment padding leaves
    }
    out.Write(m->All().Sub(5, 16));  // and one from before
    expected.insert(expected.end(), bytes.begin() + 5, bytes.begin() + 21);
    out.Commit();
  }
  EXPECT_EQ(testing::ReadFile(dir + "/out"), expected);
}

}  // namespace
}  // namespace ptepack
