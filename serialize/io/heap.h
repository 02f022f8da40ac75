// The process heap's policy: how the memory ptepack allocates is faulted in
// and given back. One place for it: the CLI prepares its heap at start, the
// writer gives free pages back between the phases of a large write.
#pragma once

namespace ptepack {

// For a process that ptepack's work owns (the CLI, a benchmark), on 64-bit
// Linux with glibc 2.33 or later, outside sanitizer builds: blocks up to
// 32 MiB come from the heap instead of a mapping each, the heap reserves
// 1 GiB of address space ahead (nothing is touched) and asks the kernel for
// transparent huge pages there (madvise MADV_HUGEPAGE), and freed memory
// stays for reuse instead of going back at every free. A new page costs one
// fault per 2 MiB instead of per 4 KiB: on this project's VM a fault costs
// about 8 us, and `pack` of the bench's 20,002-value spec took 7,600 of them
// (0.06 s of 0.12 s). What the heap gives after this starts on a 2 MiB
// boundary (a command's peak RSS starts about 2 MiB higher). Where the kernel
// gives no huge pages (THP "never") the heap works as before. Does
// nothing elsewhere, where a reserve could make a later allocation fail (a
// limit on address space or data: ulimit -v, -d; vm.overcommit_memory = 2),
// or with PTEPACK_DEFAULT_HEAP=1 in the environment.
// Call before anything large is allocated; returns whether it did anything.
bool PrepareHeap();

// Gives the heap's free pages back to the kernel (glibc's malloc_trim), and
// reserves a prepared heap's address space ahead again (the trim gave that
// back too). For the phases of a large write whose freed memory is not
// needed again (see pte_writer.cpp).
void ReturnFreePages();

}  // namespace ptepack
