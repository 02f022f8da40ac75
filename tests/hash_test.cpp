// XXH3-64 of long ranges and regions, hashed on two threads: every digest is
// checked against libxxhash's one-shot XXH3_64bits and against `xxhsum -H3`
// of the same bytes cut out into a file of their own.
#include "serialize/io/hash.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "ptepack/error.h"
#include "serialize/io/file_io.h"
#include "tests/test_util.h"

namespace ptepack {
namespace {

using testing::ShellQuote;
using testing::TempDir;
using testing::WriteFile;

std::vector<uint8_t> RandomBytes(size_t n, unsigned seed) {
  std::vector<uint8_t> v(n);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t x = rng();
    for (size_t j = 0; j < 8 && i + j < n; ++j) v[i + j] = static_cast<uint8_t>(x >> (8 * j));
  }
  return v;
}

// `xxhsum -H3 FILE`'s digest of FILE, or "" when xxhsum is not installed.
std::string Xxhsum(const std::string& path) {
  FILE* p = ::popen(("xxhsum -H3 " + ShellQuote(path) + " 2>/dev/null").c_str(), "r");
  if (p == nullptr) return "";
  char line[512] = {};
  std::string out = std::fgets(line, sizeof line, p) ? line : "";
  ::pclose(p);
  // "XXH3 (FILE) = 16 hex digits" (BSD style, xxhsum 0.8) or "digits  FILE".
  auto eq = out.rfind("= ");
  if (eq != std::string::npos) return out.substr(eq + 2, 16);
  return out.size() >= 16 ? out.substr(0, 16) : "";
}

// Sizes from the two-thread threshold up: every way the last 1..1024 bytes
// (XXH3's last partial block and last stripe) fall, and chunk edges.
TEST(TwoThreadHash, MatchesOneShotXxh3AtEveryTailLength) {
  const std::string dir = TempDir("hash_tails");
  const size_t base = static_cast<size_t>(kHashTwoThreadsFrom);
  const std::vector<uint8_t> v = RandomBytes(base + (1 << 20) + 2048, 27);
  WriteFile(dir + "/data", v);
  auto m = MappedFile::Open(dir + "/data");
  int fd = ::open((dir + "/data").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  for (size_t extra : {0, 1, 63, 64, 65, 191, 240, 1023, 1024, 1025, 4096 + 17, (1 << 20) - 1, 1 << 20, (1 << 20) + 1,
                       (1 << 20) + 2047}) {
    const size_t n = base + extra;
    const uint64_t want = XXH3_64bits(v.data(), n);
    EXPECT_EQ(HashFileRange(fd, 0, n), want) << n;                          // pread, two threads
    EXPECT_EQ(HashFileRange(fd, 1, n), XXH3_64bits(v.data() + 1, n)) << n;  // unaligned start
    EXPECT_EQ(HashBytes(m->View(0, n)), want) << n;                         // a mapped view
    EXPECT_EQ(HashBytes(Bytes::View(v.data(), n)), want) << n;              // memory only
  }
  // Just under the threshold: one stream, the same value.
  EXPECT_EQ(HashFileRange(fd, 0, base - 1), XXH3_64bits(v.data(), base - 1));
  ::close(fd);
}

// A range read from a file in more chunks of work than the two threads keep
// summed ahead of the scrambles (hash.cpp: 64 chunks of 1 MiB), so the sums'
// ring is reused, from an offset off every boundary: XXH3-64 of its bytes.
TEST(TwoThreadHash, ARangeLongerThanTheRingIsXxh3OfItsBytes) {
  const std::string dir = TempDir("hash_ring");
  const std::vector<uint8_t> v = RandomBytes((80 << 20) + 5000, 29);
  WriteFile(dir + "/file", v);
  const int fd = ::open((dir + "/file").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const size_t off = 4097, n = (73 << 20) + 333;
  EXPECT_EQ(HashFileRange(fd, off, n), XXH3_64bits(v.data() + off, n));
  ::close(fd);
}

// A file of several regions, two of them long enough to be hashed on two
// threads (one of them 5 MiB + 37 bytes, beyond one 1 MiB chunk of work), and
// the padding between them: each digest is xxhsum's of the region's bytes.
TEST(TwoThreadHash, RegionsMatchXxhsumOfTheCutOutBytes) {
  const std::string dir = TempDir("hash_regions");
  const std::vector<uint8_t> v = RandomBytes((12 << 20) + 4096, 5);
  WriteFile(dir + "/file", v);
  std::vector<RegionSum> regions = {
      {"program", 0, 1000, 0},
      {"segments[0]", 1024, (5 << 20) + 37, 0},
      {"segments[1]", (6 << 20), static_cast<uint64_t>(kHashTwoThreadsFrom), 0},
      {"segments[2]", (11 << 20), 3000, 0},
  };
  auto m = MappedFile::Open(dir + "/file");
  HashRegions(m->All(), &regions);
  ASSERT_EQ(regions.size(), 5u);
  // The padding: every byte outside the regions, in file order.
  std::vector<uint8_t> pad;
  uint64_t at = 0;
  for (size_t i = 0; i < 4; ++i) {
    pad.insert(pad.end(), v.begin() + at, v.begin() + regions[i].offset);
    at = regions[i].offset + regions[i].size;
  }
  pad.insert(pad.end(), v.begin() + at, v.end());
  EXPECT_EQ(regions[4].name, "padding");
  EXPECT_EQ(regions[4].size, pad.size());
  EXPECT_EQ(regions[4].xxh3, XXH3_64bits(pad.data(), pad.size()));
  bool have_xxhsum = true;
  for (size_t i = 0; i < 4; ++i) {
    const RegionSum& r = regions[i];
    EXPECT_EQ(r.xxh3, XXH3_64bits(v.data() + r.offset, r.size)) << r.name;
    const std::string cut = dir + "/cut" + std::to_string(i);
    WriteFile(cut, std::vector<uint8_t>(v.begin() + r.offset, v.begin() + r.offset + r.size));
    const std::string x = Xxhsum(cut);
    if (x.empty()) {
      have_xxhsum = false;
      continue;
    }
    EXPECT_EQ(HexDigest(r.xxh3), x) << r.name;
  }
  // The same file held in memory (no file to pread from) gives the same digests.
  std::vector<RegionSum> mem = {regions[0], regions[1], regions[2], regions[3]};
  HashRegions(Bytes::View(v.data(), v.size()), &mem);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(mem[i].xxh3, regions[i].xxh3) << regions[i].name;
  if (!have_xxhsum) GTEST_SKIP() << "xxhsum not installed: checked against XXH3_64bits only";
}

// Many regions of every size below the two-thread one, some longer than a
// read (1 MiB), some overlapping, with gaps from none to beyond what is read
// together (64 KiB), given out of order: each digest is XXH3-64 of its bytes
// and the padding XXH3-64 of the bytes outside every region, in file order,
// read from the file (in batches on two threads) and from memory alike. A
// region's digest taken from another's bytes, a batch or a piece skipped, or
// a gap read twice or not at all changes one of them.
TEST(TwoThreadHash, ManyShortRegionsAreEachXxh3OfTheirBytes) {
  const std::string dir = TempDir("hash_many");
  const std::vector<uint8_t> v = RandomBytes(48 << 20, 31);
  WriteFile(dir + "/file", v);
  std::mt19937_64 rng(7);
  std::vector<RegionSum> regions;
  const uint64_t sizes[] = {0, 1, 255, 4096, 70000, (1 << 20) - 3, (1 << 20) + 5, (3 << 20) + 11};
  const uint64_t gaps[] = {0, 0, 1, 13, 4000, (64 << 10) + 1, 200000};
  uint64_t at = 100;
  while (true) {
    const uint64_t size = rng() % 32 == 0 ? sizes[rng() % 8] : rng() % 3000;
    if (at + size > v.size() - 300000) break;
    regions.push_back({"r" + std::to_string(regions.size()), at, size, 0});
    // Now and then the next region starts inside this one.
    at = rng() % 16 == 0 && size > 2 ? at + size / 2 : at + size + gaps[rng() % 7];
  }
  regions.push_back({"long", v.size() - (5 << 20), 4 << 20, 0});  // a two-thread one among them
  ASSERT_GT(regions.size(), 500u);
  std::shuffle(regions.begin(), regions.end(), rng);
  const size_t n = regions.size();
  std::vector<uint8_t> outside(v.size(), 1);
  for (const auto& r : regions) std::fill(outside.begin() + r.offset, outside.begin() + r.offset + r.size, 0);
  std::vector<uint8_t> pad;
  for (size_t i = 0; i < v.size(); ++i) {
    if (outside[i]) pad.push_back(v[i]);
  }
  std::vector<RegionSum> from_file = regions, from_memory = regions;
  auto m = MappedFile::Open(dir + "/file");
  HashRegions(m->All(), &from_file);
  HashRegions(Bytes::View(v.data(), v.size()), &from_memory);
  ASSERT_EQ(from_file.size(), n + 1);
  for (size_t i = 0; i < n; ++i) {
    const RegionSum& r = from_file[i];
    ASSERT_EQ(r.xxh3, XXH3_64bits(v.data() + r.offset, r.size)) << r.name << " at " << r.offset << ", " << r.size;
    ASSERT_EQ(from_memory[i].xxh3, r.xxh3) << r.name;
  }
  EXPECT_EQ(from_file[n].name, "padding");
  EXPECT_EQ(from_file[n].size, pad.size());
  EXPECT_EQ(from_file[n].xxh3, XXH3_64bits(pad.data(), pad.size()));
  EXPECT_EQ(from_memory[n].xxh3, from_file[n].xxh3);
}

// A file that ends before the range does (truncated while hashed): the
// helper thread's read error is the one reported, nothing hangs.
TEST(TwoThreadHash, ATruncatedRangeIsAReadError) {
  const std::string dir = TempDir("hash_short");
  WriteFile(dir + "/short", RandomBytes(static_cast<size_t>(kHashTwoThreadsFrom), 9));
  int fd = ::open((dir + "/short").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  try {
    HashFileRange(fd, 0, 3 * kHashTwoThreadsFrom);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.finding().code, "read-failed");
    EXPECT_NE(std::string(e.what()).find("input ended early"), std::string::npos) << e.what();
  }
  ::close(fd);
}

// The same through a mapping: large mapped pieces are hashed through the
// mapping, so a file cut short under us raises SIGBUS at the first page past
// its new end. Each way of hashing reports read-failed, naming the file; the
// process lives on, and a later fault outside a hash is not swallowed (death
// test).
TEST(MappedHash, AFileTruncatedWhileMappedIsAReadErrorNotACrash) {
  const std::string dir = TempDir("hash_cut");
  const std::string path = dir + "/cut";
  const auto bytes = RandomBytes(static_cast<size_t>(3 * kHashTwoThreadsFrom), 11);
  for (int way = 0; way < 4; ++way) {
    WriteFile(path, bytes);
    auto m = MappedFile::Open(path);
    const Bytes all = m->All();
    ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
    try {
      switch (way) {
        case 0:
          HashBytes(all);  // two threads
          break;
        case 1:
          HashBytes(all.Sub(0, static_cast<size_t>(kHashTwoThreadsFrom) - 1));  // one thread
          break;
        case 2: {
          BytesHasher h;
          h.Hash(all);
          break;
        }
        default: {
          std::vector<RegionSum> r = {{"segment 0", 8192, 2 * kHashTwoThreadsFrom, 0}};
          HashRegions(all, &r);
        }
      }
      ADD_FAILURE() << "way " << way << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.finding().code, "read-failed") << way;
      EXPECT_NE(std::string(e.what()).find(path + ": input ended early"), std::string::npos) << e.what();
    }
  }
  // Hashed whole again once the file is back: the digest is XXH3_64bits'.
  WriteFile(path, bytes);
  auto m = MappedFile::Open(path);
  EXPECT_EQ(HashBytes(m->All()), XXH3_64bits(bytes.data(), bytes.size()));
  BytesHasher h;
  EXPECT_EQ(h.Hash(m->All()), XXH3_64bits(bytes.data(), bytes.size()));
}

// The kernel's count (/proc/self/smaps, "Rss:") of the pages of the mapping
// holding `p` that this process has mapped; -1 if not found.
long ResidentKb(const uint8_t* p) {
  FILE* f = std::fopen("/proc/self/smaps", "r");
  if (f == nullptr) return -1;
  char line[512];
  bool in = false;
  long kb = -1;
  while (std::fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {  // a mapping's first line
      in = reinterpret_cast<uintptr_t>(p) >= lo && reinterpret_cast<uintptr_t>(p) < hi;
    } else if (in && std::sscanf(line, "Rss: %ld kB", &kb) == 1) {
      break;
    }
  }
  std::fclose(f);
  return kb;
}

// A mapped file is hashed from the file (pread); only when it cannot be
// opened again (here: removed after mapping) through its mapping. Then a large
// range leaves none of its pages mapped: they are dropped behind the hash as
// it goes (else hashing a 40 GiB file would map all of it), including at a
// range start and end that are not on a page or window boundary.
TEST(MappedHash, DropsTheMappedPagesItRead) {
  const std::string dir = TempDir("hash_drop");
  const std::string path = dir + "/big";
  const auto bytes = RandomBytes(static_cast<size_t>(40 << 20) + 777, 13);
  WriteFile(path, bytes);
  auto m = MappedFile::Open(path);
  ASSERT_EQ(::unlink(path.c_str()), 0);
  for (size_t off : {size_t{0}, size_t{12345}}) {
    const size_t n = bytes.size() - 2 * off;
    const uint8_t* p = m->data();
    for (size_t i = 0; i < bytes.size(); i += 4096) (void)*reinterpret_cast<const volatile uint8_t*>(p + i);
    ASSERT_GE(ResidentKb(p), 40 << 10) << "every page mapped before";
    EXPECT_EQ(HashBytes(m->View(off, n)), XXH3_64bits(bytes.data() + off, n)) << off;
    // The first and last pages (outside the range when off > 0) may stay.
    EXPECT_LE(ResidentKb(p), 8) << off;
  }
}

TEST(MappedHashDeathTest, AFaultOutsideAHashStillKills) {
  const std::string dir = TempDir("hash_cut_death");
  const std::string path = dir + "/cut";
  WriteFile(path, RandomBytes(static_cast<size_t>(kHashTwoThreadsFrom), 12));
  auto m = MappedFile::Open(path);
  HashBytes(m->All());  // installs the handler
  EXPECT_DEATH(
      {
        if (::truncate(path.c_str(), 0) != 0) std::abort();
        volatile uint8_t x = m->data()[static_cast<size_t>(kHashTwoThreadsFrom) - 1];
        (void)x;
      },
      "");
}

}  // namespace
}  // namespace ptepack
