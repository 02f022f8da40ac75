// libFuzzer target: .pte reader, description, restore and re-layout (see
// pipeline.h for what must hold). Run with scripts/fuzz.sh.
#include <cstdio>
#include <cstdlib>

#include "tests/fuzz/pipeline.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string problem = ptepack::fuzz::CheckPteBytes(data, size);
  if (!problem.empty()) {
    std::fprintf(stderr, "FUZZ INVARIANT BROKEN: %s\n", problem.c_str());
    std::abort();
  }
  return 0;
}
