#include "serialize/format/program_verify.h"

#include <limits>

#include "program_generated.h"

namespace ptepack {

namespace {
bool Verifies(const uint8_t* d, size_t n, uint32_t max_depth, uint32_t max_tables, bool check_alignment) {
  flatbuffers::Verifier::Options vo;
  vo.max_depth = max_depth;
  vo.max_tables = max_tables;
  vo.check_alignment = check_alignment;
  flatbuffers::Verifier v(d, n, vo);
  return executorch_flatbuffer::VerifyProgramBuffer(v);
}
}  // namespace

ProgramVerdict VerifyProgramBytes(const uint8_t* d, size_t n, uint32_t max_depth, uint32_t max_tables,
                                  bool check_alignment) {
  if (Verifies(d, n, max_depth, max_tables, check_alignment)) return ProgramVerdict::kValid;
  if (Verifies(d, n, max_depth, std::numeric_limits<uint32_t>::max(), check_alignment)) {
    return ProgramVerdict::kTooManyTables;
  }
  return ProgramVerdict::kInvalid;
}

}  // namespace ptepack
