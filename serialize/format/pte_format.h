// On-disk constants and headers of .pte and .ptd files.
//
// .pte: [u32 root offset][4-byte id "ET12"][optional extended header]...
//   Extended header ("eh00"), little-endian, inserted after the file id:
//     char magic[4] = "eh00"; u32 length; u64 program_size;
//     u64 segment_base_offset; u64 segment_data_size (only if length >= 32)
//   It is padded to the largest force_align of the schema so the flatbuffer
//   keeps its internal alignment; program_size counts the header.
// .ptd: [u32 root offset]["FT01"][FlatTensor header][flatbuffer][segments]
//   FlatTensor header ("FH01"): char magic[4]; u32 length (40);
//     u64 flatbuffer_offset; u64 flatbuffer_size; u64 segment_base_offset;
//     u64 segment_data_size. The flatbuffer region is
//     [0, flatbuffer_offset + flatbuffer_size).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "ptepack/scalar_type.h"

namespace executorch_flatbuffer {
struct Operator;
}  // namespace executorch_flatbuffer

namespace ptepack {

inline constexpr char kProgramId[] = "ET12";
inline constexpr char kExtendedHeaderMagic[] = "eh00";
inline constexpr uint32_t kExtendedHeaderMinLength = 24;  // without segment_data_size
inline constexpr uint32_t kExtendedHeaderLength = 32;
// ExecuTorch's loaders first read this many bytes (the space for an extended
// header) and refuse a shorter .pte or .ptd file.
inline constexpr uint64_t kRuntimeHeadBytes = 64;
inline constexpr char kFlatTensorId[] = "FT01";
inline constexpr char kFlatTensorHeaderMagic[] = "FH01";
inline constexpr uint32_t kFlatTensorHeaderLength = 40;
inline constexpr size_t kFlatTensorFlatbufferAlignment = 16;

struct ExtendedHeader {
  uint32_t length = kExtendedHeaderLength;
  uint64_t program_size = 0;
  uint64_t segment_base_offset = 0;
  uint64_t segment_data_size = 0;
  bool has_segment_data_size = true;
};

struct FlatTensorHeader {
  uint32_t length = kFlatTensorHeaderLength;
  uint64_t flatbuffer_offset = 0;
  uint64_t flatbuffer_size = 0;
  uint64_t segment_base_offset = 0;
  uint64_t segment_data_size = 0;
};

inline uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t LoadU64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline void StoreU32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
inline void StoreU64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }

// Serialized header bytes (unpadded).
std::vector<uint8_t> EncodeExtendedHeader(const ExtendedHeader& h);
std::vector<uint8_t> EncodeFlatTensorHeader(const FlatTensorHeader& h);

// Inserts `header` (already padded) after the first 8 bytes of a finished
// flatbuffer and fixes up the root offset.
std::vector<uint8_t> InsertHeader(const std::vector<uint8_t>& flatbuffer, const std::vector<uint8_t>& header);
// The same in the flatbuffer's own buffer, grown at most once, to
// `capacity` (room for what the caller appends next): the writers' heads,
// where a copy per step put two or three of a large flatbuffer at the peak.
void InsertHeaderInPlace(std::vector<uint8_t>& flatbuffer, const std::vector<uint8_t>& header, size_t capacity);

// Bytes per element of `t` as ExecuTorch's runtime counts them (elementSize in
// runtime/core/exec_aten/util/scalar_type_util.h): every ScalarType below
// Undefined (30), the complex and bits types program.fbs does not name
// included; 0 for any other value (the runtime rejects it).
size_t ElementSize(ScalarType t);
// Bytes of a tensor of type `t` whose `rank` dimensions are the little-endian
// int32 values at `sizes` (as a flatbuffer stores them), computed as the
// runtime does: the element count in a signed 64-bit integer, given up at the
// first overflow even if a later dimension is 0, then times the element size
// in 64 unsigned bits. nullopt for a type the runtime rejects, a negative
// dimension or an overflow. The one tensor size of the library: the reader,
// the program tree (prog::TensorNbytes), the builder, placement and restore
// all come here.
std::optional<uint64_t> TensorNbytes(ScalarType t, const void* sizes, size_t rank);
// Element size of a ScalarType program.fbs names (ElementSize without the
// complex and bits types), 0 otherwise: what a program we build may use.
size_t ScalarTypeSize(int scalar_type);
const char* ScalarTypeName(int scalar_type);

// Largest power of two dividing v (v == 0 gives 2^63).
uint64_t AlignmentOf(uint64_t v);

// An operator's name as the runtime looks its kernel up: "name", or
// "name.overload" when the overload is not empty (program.fbs, Operator).
// `no_name` stands for a missing name.
std::string OperatorName(const executorch_flatbuffer::Operator& op, const char* no_name = "");

}  // namespace ptepack
