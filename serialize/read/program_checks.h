// The checks of a verified Program's tables that ExecuTorch's runtime makes
// (or crashes without) while it loads a program and its methods: Program::load
// with InternalConsistency, then Program::load_method. Each check reports one
// kind of problem at the file offset of the table it is about; the reader
// (pte_reader.cpp) runs them after the FlatBuffers verifier.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "program_generated.h"
#include "ptepack/bytes.h"
#include "serialize/format/pte_format.h"
#include "serialize/io/report.h"
#include "serialize/read/pte_reader.h"

namespace ptepack {

// Where findings go and how table pointers become file offsets.
struct Where {
  Report& r;
  const Bytes& file;   // the bytes in memory (at least the flatbuffer)
  uint64_t file_size;  // the whole file's size
  uint64_t at(const void* p) const { return static_cast<uint64_t>(static_cast<const uint8_t*>(p) - file.data); }
};

// What the program checks need to know about the file around the flatbuffer.
struct ProgramFrame {
  const executorch_flatbuffer::Program& program;
  const std::optional<ExtendedHeader>& header;
  uint64_t segment_base_offset = 0;
};

// Runs every check on `frame.program` and returns the segments it lists, each
// with its file offset and whether it lies within the file.
std::vector<SegmentSpan> CheckProgramTables(const Where& w, const ProgramFrame& frame, const ReadOptions& opts);

}  // namespace ptepack
