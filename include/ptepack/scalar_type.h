// ExecuTorch's ScalarType: the values of scalar_type.fbs (c10::ScalarType numbering).
#pragma once

#include <cstdint>

namespace ptepack {

// The element types a tensor may have. The values are the wire values; a file
// may carry other values of the schema, which convert with static_cast.
enum class ScalarType : int8_t {
  kByte = 0,
  kChar = 1,
  kShort = 2,
  kInt = 3,
  kLong = 4,
  kHalf = 5,
  kFloat = 6,
  kDouble = 7,
  kBool = 11,
  kQInt8 = 12,
  kQUInt8 = 13,
  kQInt32 = 14,
  kBFloat16 = 15,
  kQUInt4x2 = 16,
  kQUInt2x4 = 17,
  kBits16 = 22,
  kFloat8_e5m2 = 23,
  kFloat8_e4m3fn = 24,
  kFloat8_e5m2fnuz = 25,
  kFloat8_e4m3fnuz = 26,
  kUInt16 = 27,
  kUInt32 = 28,
  kUInt64 = 29,
};

}  // namespace ptepack
