#include "serialize/format/pte_format.h"

#include <algorithm>

#include "program_generated.h"
#include "ptepack/error.h"

namespace ptepack {

std::vector<uint8_t> EncodeExtendedHeader(const ExtendedHeader& h) {
  std::vector<uint8_t> out(h.has_segment_data_size ? kExtendedHeaderLength : kExtendedHeaderMinLength);
  std::memcpy(out.data(), kExtendedHeaderMagic, 4);
  StoreU32(out.data() + 4, static_cast<uint32_t>(out.size()));
  StoreU64(out.data() + 8, h.program_size);
  StoreU64(out.data() + 16, h.segment_base_offset);
  if (h.has_segment_data_size) StoreU64(out.data() + 24, h.segment_data_size);
  return out;
}

std::vector<uint8_t> EncodeFlatTensorHeader(const FlatTensorHeader& h) {
  std::vector<uint8_t> out(kFlatTensorHeaderLength);
  std::memcpy(out.data(), kFlatTensorHeaderMagic, 4);
  StoreU32(out.data() + 4, kFlatTensorHeaderLength);
  StoreU64(out.data() + 8, h.flatbuffer_offset);
  StoreU64(out.data() + 16, h.flatbuffer_size);
  StoreU64(out.data() + 24, h.segment_base_offset);
  StoreU64(out.data() + 32, h.segment_data_size);
  return out;
}

std::vector<uint8_t> InsertHeader(const std::vector<uint8_t>& fb, const std::vector<uint8_t>& header) {
  std::vector<uint8_t> out = fb;
  InsertHeaderInPlace(out, header, fb.size() + header.size());
  return out;
}

void InsertHeaderInPlace(std::vector<uint8_t>& flatbuffer, const std::vector<uint8_t>& header, size_t capacity) {
  if (flatbuffer.size() < 8) throw Error("internal-layout", "flatbuffer shorter than 8 bytes");
  flatbuffer.reserve(std::max(capacity, flatbuffer.size() + header.size()));
  StoreU32(flatbuffer.data(), LoadU32(flatbuffer.data()) + static_cast<uint32_t>(header.size()));
  flatbuffer.insert(flatbuffer.begin() + 8, header.begin(), header.end());
}

size_t ElementSize(ScalarType t) {
  // The values program.fbs does not name (ExecuTorch's ET_FORALL_SCALAR_TYPES numbering).
  constexpr int kComplexHalf = 8, kComplexFloat = 9, kComplexDouble = 10, kBits1x8 = 18, kBits8 = 21;
  const int v = static_cast<int>(t);
  if (v == kComplexHalf) return 4;
  if (v == kComplexFloat) return 8;
  if (v == kComplexDouble) return 16;
  if (v >= kBits1x8 && v <= kBits8) return 1;  // Bits1x8, Bits2x4, Bits4x2, Bits8
  switch (t) {
    case ScalarType::kByte:
    case ScalarType::kChar:
    case ScalarType::kBool:
    case ScalarType::kQInt8:
    case ScalarType::kQUInt8:
    case ScalarType::kQUInt4x2:
    case ScalarType::kQUInt2x4:
    case ScalarType::kFloat8_e5m2:
    case ScalarType::kFloat8_e4m3fn:
    case ScalarType::kFloat8_e5m2fnuz:
    case ScalarType::kFloat8_e4m3fnuz:
      return 1;
    case ScalarType::kShort:
    case ScalarType::kHalf:
    case ScalarType::kBFloat16:
    case ScalarType::kBits16:
    case ScalarType::kUInt16:
      return 2;
    case ScalarType::kInt:
    case ScalarType::kFloat:
    case ScalarType::kQInt32:
    case ScalarType::kUInt32:
      return 4;
    case ScalarType::kLong:
    case ScalarType::kDouble:
    case ScalarType::kUInt64:
      return 8;
  }
  return 0;
}

std::optional<uint64_t> TensorNbytes(ScalarType t, const void* sizes, size_t rank) {
  const size_t es = ElementSize(t);
  if (es == 0) return std::nullopt;
  const auto* p = static_cast<const uint8_t*>(sizes);
  int64_t numel = 1;
  for (size_t i = 0; i < rank; ++i) {
    const auto d = static_cast<int32_t>(LoadU32(p + 4 * i));
    if (d < 0) return std::nullopt;
    if (__builtin_mul_overflow(numel, static_cast<int64_t>(d), &numel)) return std::nullopt;
  }
  uint64_t n = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel), static_cast<uint64_t>(es), &n)) return std::nullopt;
  return n;
}

size_t ScalarTypeSize(int t) {
  const bool named = t >= 0 && t < 30 && !(t >= 8 && t <= 10) && !(t >= 18 && t <= 21);
  return named ? ElementSize(static_cast<ScalarType>(t)) : 0;
}

const char* ScalarTypeName(int t) {
  switch (t) {
    case 0:
      return "BYTE";
    case 1:
      return "CHAR";
    case 2:
      return "SHORT";
    case 3:
      return "INT";
    case 4:
      return "LONG";
    case 5:
      return "HALF";
    case 6:
      return "FLOAT";
    case 7:
      return "DOUBLE";
    case 11:
      return "BOOL";
    case 12:
      return "QINT8";
    case 13:
      return "QUINT8";
    case 14:
      return "QINT32";
    case 15:
      return "BFLOAT16";
    case 16:
      return "QUINT4X2";
    case 17:
      return "QUINT2X4";
    case 22:
      return "BITS16";
    case 23:
      return "FLOAT8E5M2";
    case 24:
      return "FLOAT8E4M3FN";
    case 25:
      return "FLOAT8E5M2FNUZ";
    case 26:
      return "FLOAT8E4M3FNUZ";
    case 27:
      return "UINT16";
    case 28:
      return "UINT32";
    case 29:
      return "UINT64";
    default:
      return "UNKNOWN";
  }
}

uint64_t AlignmentOf(uint64_t v) { return v == 0 ? (1ull << 63) : (v & (~v + 1)); }

std::string OperatorName(const executorch_flatbuffer::Operator& op, const char* no_name) {
  std::string n = op.name() ? op.name()->str() : no_name;
  if (op.overload() && op.overload()->size()) n += "." + op.overload()->str();
  return n;
}

}  // namespace ptepack
