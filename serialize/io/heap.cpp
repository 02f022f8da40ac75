#include "serialize/io/heap.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#if defined(__GLIBC__) && defined(__linux__)
#include <fcntl.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#endif

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PTEPACK_HEAP_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define PTEPACK_HEAP_SANITIZED 1
#endif
#endif

namespace ptepack {
namespace {

// 64-bit glibc 2.33 or later (mallinfo2) on Linux: a reserve of 1 GiB of
// address space is nothing there.
#if defined(__GLIBC__) && defined(__linux__) && !defined(PTEPACK_HEAP_SANITIZED) && defined(__LP64__) && \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#define PTEPACK_HEAP_POLICY 1

constexpr size_t kHugePage = size_t{2} << 20;
// Address space the heap takes when it is prepared (M_TOP_PAD for that one
// growth): untouched, it costs no memory. Later growths take glibc's default.
constexpr int kReserve = 1 << 30;
constexpr int kDefaultTopPad = 128 << 10;
constexpr int kDefaultMmapMax = 65536;  // glibc's DEFAULT_MMAP_MAX

// Whether reserving address space could fail an allocation later: a limit
// on the process's address space or data (ulimit -v, -d), or the kernel's
// strict accounting (vm.overcommit_memory = 2), where a reserve counts as
// memory committed.
bool ReserveMayFail() {
  for (int resource : {RLIMIT_AS, RLIMIT_DATA}) {
    struct rlimit r {};
    if (::getrlimit(resource, &r) != 0 || r.rlim_cur != RLIM_INFINITY) return true;
  }
  char mode = '0';
  const int fd = ::open("/proc/sys/vm/overcommit_memory", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    if (::read(fd, &mode, 1) != 1) mode = '0';
    ::close(fd);
  }
  return mode == '2';
}

std::atomic<bool> g_prepared{false};
uintptr_t g_heap_from = 0;  // where the heap's free top began when it was prepared: marked from here on

// Grows the heap by kReserve of address space and asks for huge pages from
// g_heap_from to its new end. A block larger than the heap's free top makes
// glibc extend the heap by the block plus M_TOP_PAD; freeing it leaves that as
// the free top. (The kernel keeps the advice per mapping, and a later growth
// of the heap is a new mapping without it: hence the reserve.)
//
// The block is larger than all the heap's free memory together, so no free
// chunk inside the heap can serve it: it comes from the top. Blocks of 2 MiB
// did, after a trim: each was cut from a free chunk whose pages the trim had
// just given back, and glibc wrote the header of the rest of that chunk into
// an empty 2 MiB range of the advised heap, which the kernel filled with a
// huge page. A `split` of 300,000 constants got 84 MB back that way each time
// (RSS 91 -> 175 MB before its .ptd's layout; peak 248 MB, 193 MB with
// glibc's own heap). M_MMAP_MAX is 0 meanwhile: a block past M_MMAP_THRESHOLD
// would be a mapping of its own.
//
// The block ends just below a 2 MiB boundary. glibc writes the header of the
// free chunk after a block when it splits the block off -- before the
// advice -- and a 2 MiB range that already has a page stays in 4 KiB pages
// (its page table exists: a huge page is only taken for an empty range). A
// block of 2 MiB put that header into the first whole 2 MiB range of the
// reserve: every command faulted it in 512 times instead of once (`pack` of
// the meta spec: 870-1,020 faults, 180-350 with this block).
void ReserveAhead() {
  char* const before = static_cast<char*>(::sbrk(0));
  if (before == reinterpret_cast<char*>(-1)) return;
  const struct mallinfo2 mi = ::mallinfo2();
  const uintptr_t end = reinterpret_cast<uintptr_t>(before);
  const uintptr_t top = end - mi.keepcost;  // the free top ends there
  // A chunk from `top` to 16 bytes below the boundary (its size is the request
  // plus 8, rounded up to 16; chunks start 16-aligned): larger than the free
  // top and than any other free chunk, so the heap grows; the next chunk's
  // header is below the boundary.
  const uintptr_t boundary = (top + mi.fordblks + 64 + kHugePage - 1) & ~(kHugePage - 1);
  ::mallopt(M_TOP_PAD, kReserve);
  ::mallopt(M_MMAP_MAX, 0);
  void* volatile block = std::malloc(static_cast<size_t>(boundary - top - 32));  // volatile: not optimized away
  ::mallopt(M_MMAP_MAX, kDefaultMmapMax);
  ::mallopt(M_TOP_PAD, kDefaultTopPad);
  char* const after = static_cast<char*>(::sbrk(0));
  if (block == nullptr) return;
  // The block, when it holds only the rest of the 2 MiB range the heap's
  // memory so far is in (4 KiB pages), is kept, so what the heap gives next
  // starts on the boundary, in a range of its own. Untouched but for its
  // header it costs no memory; a command's peak RSS starts 2 MiB higher
  // (`inspect` of add.pte 6.1 -> 8.0 MB), its faults lower (`pack` of the
  // meta spec 270-330 -> 150-176, `inspect` 180-195 -> 140). A larger one
  // (free memory inside the heap) goes back to the top.
  const bool keep = reinterpret_cast<uintptr_t>(block) == top + 2 * sizeof(size_t) && boundary - top <= kHugePage;
  if (!keep) std::free(block);  // the reserve stays: no trim below 2 GiB
  if (g_heap_from == 0 || top < g_heap_from) g_heap_from = top;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t from = g_heap_from & ~(page - 1);
  const uintptr_t to = reinterpret_cast<uintptr_t>(after) & ~(page - 1);
  if (to > from) (void)::madvise(reinterpret_cast<void*>(from), to - from, MADV_HUGEPAGE);
}
#endif

}  // namespace

bool PrepareHeap() {
#ifdef PTEPACK_HEAP_POLICY
  const char* opt_out = std::getenv("PTEPACK_DEFAULT_HEAP");
  if ((opt_out != nullptr && std::strcmp(opt_out, "0") != 0 && opt_out[0] != '\0') || ReserveMayFail() ||
      g_prepared.exchange(true)) {
    return false;
  }
  // Blocks up to 32 MiB (glibc's largest threshold) from the heap: a mapping
  // of their own would get neither the huge pages nor the reuse.
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  // Freed memory at the top goes back only past 2 GiB (explicitly, below).
  ::mallopt(M_TRIM_THRESHOLD, INT32_MAX);
  ReserveAhead();
  return true;
#else
  return false;
#endif
}

void ReturnFreePages() {
#if defined(__GLIBC__) && defined(__linux__)
  ::malloc_trim(0);
#endif
#ifdef PTEPACK_HEAP_POLICY
  if (g_prepared.load()) ReserveAhead();
#endif
}

}  // namespace ptepack
