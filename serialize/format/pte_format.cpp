#include "serialize/format/pte_format.h"

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
  if (fb.size() < 8) throw Error("internal-layout", "flatbuffer shorter than 8 bytes");
  std::vector<uint8_t> out;
  out.reserve(fb.size() + header.size());
  out.resize(8);
  StoreU32(out.data(), LoadU32(fb.data()) + static_cast<uint32_t>(header.size()));
  std::memcpy(out.data() + 4, fb.data() + 4, 4);
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), fb.begin() + 8, fb.end());
  return out;
}

size_t ScalarTypeSize(int t) {
  switch (t) {
    case 0:
    case 1:
    case 11:
    case 12:
    case 13:
    case 16:
    case 17:
    case 23:
    case 24:
    case 25:
    case 26:
      return 1;
    case 2:
    case 5:
    case 15:
    case 22:
    case 27:
      return 2;
    case 3:
    case 6:
    case 14:
    case 28:
      return 4;
    case 4:
    case 7:
    case 29:
      return 8;
    default:
      return 0;
  }
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

}  // namespace ptepack
