// The CLI's heap (serialize/io/heap.h): after PrepareHeap, touching a new
// 16 MiB block costs the kernel's fault count a few faults instead of 4,096,
// and the block lies in a mapping marked for transparent huge pages
// (/proc/self/smaps VmFlags "hg") backed by them (AnonHugePages); the same
// for memory the heap gets after ReturnFreePages' trim; PTEPACK_DEFAULT_HEAP=1
// leaves the heap as it was. Only on 64-bit Linux with glibc 2.33 or later,
// without sanitizers, where the policy applies; elsewhere PrepareHeap does
// nothing and says so.
#include "serialize/io/heap.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace ptepack {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// Where the heap policy is meant to apply: 64-bit Linux with glibc 2.33 or later.
#if defined(__GLIBC__) && defined(__linux__) && defined(__LP64__) && \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
constexpr bool kPolicyPlatform = true;
#else
constexpr bool kPolicyPlatform = false;
#endif
constexpr const char* kNotPolicyPlatform = "the heap policy is for 64-bit Linux with glibc 2.33 or later";

struct Mapping {
  bool found = false;
  bool huge_flag = false;  // VmFlags has "hg"
  long anon_huge_kb = 0;
};

// What /proc/self/smaps says of the mapping holding `p`.
Mapping SmapsEntryOf(const void* p) {
  Mapping m;
  std::ifstream f("/proc/self/smaps");
  std::string line;
  bool in = false;
  while (std::getline(f, line)) {
    unsigned long lo, hi;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) {  // a mapping's first line
      in = reinterpret_cast<uintptr_t>(p) >= lo && reinterpret_cast<uintptr_t>(p) < hi;
      m.found = m.found || in;
      continue;
    }
    if (!in) continue;
    long kb = 0;
    if (std::sscanf(line.c_str(), "AnonHugePages: %ld kB", &kb) == 1) m.anon_huge_kb = kb;
    if (line.compare(0, 8, "VmFlags:") == 0) m.huge_flag = (line + " ").find(" hg ") != std::string::npos;
  }
  return m;
}

long MinorFaults() {
  struct rusage u {};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// The kernel's THP mode, the bracketed word of .../transparent_hugepage/enabled.
std::string ThpMode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(f, s);
  const auto a = s.find('['), b = s.find(']');
  return a == std::string::npos || b == std::string::npos ? "" : s.substr(a + 1, b - a - 1);
}

// Why huge pages cannot be seen here, or "" where they can.
std::string NoHugePages() {
  const std::string mode = ThpMode();
  return mode == "never" || mode.empty() ? "this kernel gives no transparent huge pages (mode \"" + mode + "\")" : "";
}

// Why the policy's huge pages cannot be watched in this build or on this
// kernel, or "" where they can: the death tests below skip then.
std::string NoHugePagePolicy() {
  if (!kPolicyPlatform) return kNotPolicyPlatform;
  if (kSanitized) return "sanitizer build: PrepareHeap leaves the sanitizer's allocator alone";
  return NoHugePages();
}

// 16 MiB (below the 32 MiB mapping threshold) touched: 4,096 faults with
// 4 KiB pages. With 2 MiB ones, one per 2 MiB, but for the 2 MiB ranges at
// the block's two ends that other memory of the heap (4 KiB pages) shares:
// at most 512 each.
constexpr size_t kBlock = size_t{16} << 20;
constexpr long kMost = 2 * 512 + kBlock / (size_t{2} << 20) + 16;

TEST(Heap, PreparedHeapIsMarkedForHugePagesAndStaysSoAfterATrim) {
  ::unsetenv("PTEPACK_DEFAULT_HEAP");
  const bool did = PrepareHeap();
  if (!kPolicyPlatform) {
    EXPECT_FALSE(did);
    GTEST_SKIP() << kNotPolicyPlatform;
  }
  if (kSanitized) {
    EXPECT_FALSE(did) << "sanitizers bring their own allocator";
    GTEST_SKIP() << "sanitizer build: PrepareHeap leaves the sanitizer's allocator alone";
  }
  ASSERT_TRUE(did);
  EXPECT_FALSE(PrepareHeap()) << "once per process";
  if (const std::string why = NoHugePages(); !why.empty()) GTEST_SKIP() << why;
  // A new block, touched: its faults and its mapping. `a` stays allocated,
  // so `b`, after the trim, is memory the heap gets anew.
  auto fresh = [](const char* when) {
    char* p = static_cast<char*>(std::malloc(kBlock));
    if (p == nullptr) return p;
    const long before = MinorFaults();
    std::memset(p, 1, kBlock);
    EXPECT_LE(MinorFaults() - before, kMost) << "faults for 16 MiB " << when;
    const Mapping m = SmapsEntryOf(p + kBlock / 2);
    EXPECT_TRUE(m.huge_flag) << when;
    EXPECT_GE(m.anon_huge_kb, 2048) << when;
    return p;
  };
  char* a = fresh("after PrepareHeap");
  ASSERT_NE(a, nullptr);
  ReturnFreePages();
  char* b = fresh("after a trim");
  ASSERT_NE(b, nullptr);
  std::free(a);
  std::free(b);
}

// Run in a process of its own (the policy is per process and once).
TEST(HeapDeathTest, DefaultHeapOnRequest) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ::setenv("PTEPACK_DEFAULT_HEAP", "1", 1);
        const bool did = PrepareHeap();
        char* a = static_cast<char*>(std::malloc(size_t{8} << 20));
        std::memset(a, 1, size_t{8} << 20);
        std::exit(!did && !SmapsEntryOf(a).huge_flag ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// Every whole 2 MiB range of a block the heap gives right after it was
// prepared (and again after a trim) is one huge page: touched, one fault each.
// The first of them too: the reserve is made by allocating a block, and glibc
// writes the header of the chunk after that block before the advice is given;
// a range that already has a page keeps 4 KiB pages (512 faults). Only the
// whole ranges are touched here: the block's two ends share their ranges with
// other memory of the heap.
TEST(HeapDeathTest, EveryWholeRangeOfTheReserveIsOneHugePage) {
  if (const std::string why = NoHugePagePolicy(); !why.empty()) GTEST_SKIP() << why;
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ::unsetenv("PTEPACK_DEFAULT_HEAP");
        if (!PrepareHeap()) std::exit(2);
        constexpr uintptr_t kRange = uintptr_t{2} << 20;
        // Exit code 0 when the whole ranges of a new block fault once each.
        auto one_fault_a_range = [](const char* when) {
          char* p = static_cast<char*>(std::malloc(kBlock));
          if (p == nullptr) std::exit(3);
          const uintptr_t from = (reinterpret_cast<uintptr_t>(p) + kRange - 1) & ~(kRange - 1);
          const uintptr_t to = (reinterpret_cast<uintptr_t>(p) + kBlock) & ~(kRange - 1);
          const long ranges = static_cast<long>((to - from) / kRange);
          const long before = MinorFaults();
          std::memset(reinterpret_cast<void*>(from), 1, to - from);
          const long faults = MinorFaults() - before;
          std::fprintf(stderr, "%s: %ld faults for %ld whole 2 MiB ranges\n", when, faults, ranges);
          return faults <= ranges + 4;
        };
        if (!one_fault_a_range("after PrepareHeap")) std::exit(1);
        ReturnFreePages();
        std::exit(one_fault_a_range("after a trim") ? 0 : 4);
      },
      ::testing::ExitedWithCode(0), "");
}

// The resident memory of this process (VmRSS), in KiB.
long ResidentKb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  long kb = -1;
  while (std::getline(f, line)) {
    if (std::sscanf(line.c_str(), "VmRSS: %ld kB", &kb) == 1) break;
  }
  return kb;
}

// Memory freed inside the heap (a block with live memory after it, so not the
// free top) goes back to the kernel with ReturnFreePages and stays back: the
// address space ReturnFreePages reserves again afterwards is not cut from the
// pages it just gave back. It was, in blocks of 2 MiB, each of whose
// remainders glibc gave a header in an empty 2 MiB range of the advised
// heap: a huge page each, as much memory resident again as was given back.
TEST(HeapDeathTest, FreedPagesStayGivenBack) {
  if (const std::string why = NoHugePagePolicy(); !why.empty()) GTEST_SKIP() << why;
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ::unsetenv("PTEPACK_DEFAULT_HEAP");
        if (!PrepareHeap()) std::exit(2);
        // 24 MiB in blocks of 1 MiB, then one block after them that stays.
        constexpr int kBlocks = 24;
        constexpr size_t kOne = size_t{1} << 20;
        char* blocks[kBlocks];
        for (auto& b : blocks) {
          b = static_cast<char*>(std::malloc(kOne));
          if (b == nullptr) std::exit(3);
          std::memset(b, 1, kOne);
        }
        char* volatile after = static_cast<char*>(std::malloc(kOne));
        if (after == nullptr) std::exit(3);
        std::memset(after, 1, kOne);
        for (auto& b : blocks) std::free(b);
        const long before = ResidentKb();
        ReturnFreePages();
        const long now = ResidentKb();
        std::fprintf(stderr, "RSS %ld KiB -> %ld KiB after ReturnFreePages\n", before, now);
        std::free(after);
        // At least 20 of the 24 MiB given back (the ranges at the ends are
        // shared with memory still in use).
        std::exit(before - now >= 20 * 1024 ? 0 : 4);
      },
      ::testing::ExitedWithCode(0), "");
}

// Nor where a reserve of address space could make a later allocation fail:
// a limit on the process's data (ulimit -d), however generous.
TEST(HeapDeathTest, NoReserveUnderALimit) {
  if (kSanitized) {
    // Nothing to check (PrepareHeap does nothing there), and the sanitizer's
    // runtime cannot map its memory under a data limit.
    GTEST_SKIP() << "sanitizer build: no heap policy, and ASan's mappings fail under RLIMIT_DATA";
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ::unsetenv("PTEPACK_DEFAULT_HEAP");
        struct rlimit r {};
        ::getrlimit(RLIMIT_DATA, &r);
        r.rlim_cur = rlim_t{64} << 30;
        if (r.rlim_max != RLIM_INFINITY && r.rlim_cur > r.rlim_max) r.rlim_cur = r.rlim_max;
        if (::setrlimit(RLIMIT_DATA, &r) != 0) std::exit(2);
        std::exit(PrepareHeap() ? 1 : 0);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace ptepack
