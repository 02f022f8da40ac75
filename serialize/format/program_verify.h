// FlatBuffers' verifier over an executorch_flatbuffer.Program, the check
// ExecuTorch's runtime runs under Verification::InternalConsistency (its
// default, Minimal, runs none), with what a failure was.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ptepack {

enum class ProgramVerdict {
  kValid,
  kInvalid,        // bad offsets, sizes, depth, alignment or a truncated buffer
  kTooManyTables,  // valid but for having more than max_tables tables
};

// Verifies the `n` bytes at `d` (a Program flatbuffer). A failure is verified
// again without the table limit to tell kTooManyTables from kInvalid: a
// program of a million values has several million tables (an EValue, a
// Tensor and its AllocationDetails each), which is no damage.
ProgramVerdict VerifyProgramBytes(const uint8_t* d, size_t n, uint32_t max_depth, uint32_t max_tables,
                                  bool check_alignment);

}  // namespace ptepack
