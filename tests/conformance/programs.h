// Small programs built with ProgramBuilder for the conformance tests, with the bytes they were
// given (so a test can check what the runtime resolved against what went in).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ptepack/package.h"

namespace ptepack::testing {

struct BuiltProgram {
  Package package;
  // Constant tensors: (method, value index) -> the bytes given to the builder.
  std::map<std::pair<std::string, uint32_t>, std::vector<uint8_t>> constants;
  // Mutable buffers' initial state: (method, value index) -> bytes.
  std::map<std::pair<std::string, uint32_t>, std::vector<uint8_t>> initial_state;
  // Delegate payloads in the order the runtime initialises them, and their compile specs.
  struct Delegate {
    std::string backend;
    std::vector<uint8_t> payload;
    std::vector<std::pair<std::string, std::vector<uint8_t>>> specs;
  };
  std::vector<Delegate> delegates;
  std::vector<std::string> named_data_keys;
};

// forward(x[2,3]) = x * W + b + 2 * state, with W named, b unnamed and `state` a mutable buffer
// with an initial value; scale(x[2,3]) = x * W' where W' has W's bytes (stored once). Runs with
// the harness's float kernels (aten::mul.out, aten::add.out).
BuiltProgram AffineProgram();

// Two methods calling three delegates of two backends (one payload shared), compile specs, a
// named blob in the .pte and a constant. Loads; not executable (the backends are stubs).
BuiltProgram DelegateProgram();

// The payload of a delegate whose stub in the runtime oracle's --clobber mode writes its last
// `outputs` arguments (tests/oracle/clobber.h, kDelegateMagic), then 16 bytes of "compiled" code.
std::vector<uint8_t> ClobberDelegatePayload(int outputs);

// The little-endian bytes of float values.
std::vector<uint8_t> Floats(const std::vector<float>& v);

// XXH64 (seed 0) as the harness prints it.
std::string Xxh64Hex(const std::vector<uint8_t>& bytes);

}  // namespace ptepack::testing
