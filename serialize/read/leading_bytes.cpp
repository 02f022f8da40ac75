#include "serialize/read/leading_bytes.h"

#include <algorithm>
#include <cstring>

#include "flatbuffers/base.h"
#include "serialize/format/pte_format.h"

namespace ptepack {

namespace {

// A .pte: up to the end of the program when the extended header says where it
// ends (and PteFile::ParseExtendedHeader accepts it); without a header, the
// program is the whole file.
uint64_t ProgramBytes(const uint8_t* d, uint64_t file_size, uint64_t first) {
  if (file_size < 12 || std::memcmp(d + 8, kExtendedHeaderMagic, 4) != 0) {
    return file_size > FLATBUFFERS_MAX_BUFFER_SIZE ? first : file_size;
  }
  if (file_size < 8 + kExtendedHeaderMinLength) return first;
  const uint32_t length = LoadU32(d + 12);
  const uint64_t program_size = LoadU64(d + 16);
  if (length < kExtendedHeaderMinLength || 8 + uint64_t{length} > file_size) return first;
  if (program_size < 8 + uint64_t{length} || program_size > file_size) return first;
  if (program_size > FLATBUFFERS_MAX_BUFFER_SIZE) return first;
  return std::max(first, program_size);
}

// A .ptd: up to the end of its flatbuffer, when PtdFile::ParseHeader gets to
// verifying it.
uint64_t FlatTensorBytes(const uint8_t* d, uint64_t file_size, uint64_t first) {
  if (file_size < 8 + kFlatTensorHeaderLength || std::memcmp(d + 8, kFlatTensorHeaderMagic, 4) != 0) return first;
  const uint32_t length = LoadU32(d + 12);
  const uint64_t fb_offset = LoadU64(d + 16), fb_size = LoadU64(d + 24);
  if (length < kFlatTensorHeaderLength || 8 + uint64_t{length} > file_size) return first;
  if (fb_offset > UINT64_MAX - fb_size || fb_offset + fb_size > file_size) return first;
  const uint64_t fb_end = fb_offset + fb_size;
  if (fb_end > FLATBUFFERS_MAX_BUFFER_SIZE) return first;
  return std::max(first, fb_end);
}

}  // namespace

uint64_t LeadingBytesNeeded(const uint8_t* head, size_t n, uint64_t file_size) {
  const uint64_t first = std::min<uint64_t>(kRuntimeHeadBytes, file_size);
  if (n < first || file_size < 8) return first;
  if (std::memcmp(head + 4, kFlatTensorId, 4) == 0) return FlatTensorBytes(head, file_size, first);
  if (std::memcmp(head + 4, "BP", 2) == 0) return file_size;    // a BundledProgram: one flatbuffer
  if (std::memcmp(head + 4, kProgramId, 4) != 0) return first;  // PteFile stops at the identifier
  return ProgramBytes(head, file_size, first);
}

void CheckLeadingBytes(const Bytes& head, uint64_t file_size, const std::string& name) {
  if (head.size > file_size) {
    throw Error("not-loaded", name + ": " + std::to_string(head.size) + " leading bytes given for a file of " +
                                  std::to_string(file_size) + " bytes");
  }
  const uint64_t need = LeadingBytesNeeded(head.data, head.size, file_size);
  if (head.size < need) {
    throw Error("not-loaded", name + ": the reader needs the first " + std::to_string(need) + " bytes of the file; " +
                                  std::to_string(head.size) + " were read");
  }
}

Error NotLoaded(const std::string& name, size_t segment, uint64_t in_memory) {
  return Error("not-loaded", name + ": the data of segment " + std::to_string(segment) +
                                 " was not read (only the first " + std::to_string(in_memory) +
                                 " bytes of the file are in memory)");
}

}  // namespace ptepack
