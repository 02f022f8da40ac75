// The memory-bandwidth anchor of scripts/bench.sh's tmpfs rows (issue 27
// goal 2): seconds to memcpy N bytes between two buffers whose pages are
// already resident, in 8 MiB pieces (the best of --repeat passes). Prints
// JSON: {"bytes": N, "seconds": s, "gb_per_s": g}.
//
//   ptepack_memcpy_bench [--mib N] [--repeat K]
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  size_t mib = 1024;
  int repeat = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--mib") {
      mib = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (a == "--repeat") {
      repeat = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "ptepack_memcpy_bench: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const size_t n = mib << 20, piece = 8 << 20;
  auto* src = static_cast<unsigned char*>(
      ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0));
  auto* dst = static_cast<unsigned char*>(
      ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0));
  if (src == MAP_FAILED || dst == MAP_FAILED) {
    std::perror("ptepack_memcpy_bench: mmap");
    return 1;
  }
  for (size_t i = 0; i < n; i += 4096) src[i] = static_cast<unsigned char>(i >> 12), dst[i] = 1;
  double best = 1e30;
  for (int r = 0; r < std::max(1, repeat); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t off = 0; off < n; off += piece) std::memcpy(dst + off, src + off, std::min(piece, n - off));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
  }
  unsigned sum = 0;
  for (size_t i = 0; i < n; i += 4096) sum += dst[i];
  std::printf("{\"bytes\": %zu, \"seconds\": %.6f, \"gb_per_s\": %.3f, \"check\": %u}\n", n, best, n / best / 1e9, sum);
  return 0;
}
