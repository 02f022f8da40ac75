// Where the bytes of a .pte (and its .ptd files) go: `ptepack size`.
//
// Every byte of a file is attributed to exactly one part: the header, a part
// of the flatbuffer (measured by walking the tables, vectors and strings each
// part owns; what no part owns -- vtables, the root offset, alignment -- is
// "other"), a segment by kind, or padding by cause. The parts of a file add up
// to its size exactly.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serialize/insight/memory.h"

namespace ptepack {

class PteFile;
class PtdFile;

struct SizePart {
  std::string group;  // "header", "flatbuffer", "segments", "padding", "data"
  std::string name;   // e.g. "values", "delegate QnnBackend", "segment alignment"
  uint64_t bytes = 0;
  double percent = 0;  // of the file, rounded to 0.1 so that a file's parts add to 100.0
};

// A contiguous range of the file as `map` draws it: the header, the
// flatbuffer, a segment, or padding between them. Bands cover the file in
// order, without gaps or overlaps.
struct SizeBand {
  std::string kind;   // "header", "flatbuffer", "constants", "delegate", "named data", "mutable data",
                      // "segment", "padding", "tensor" (.ptd), "metadata" (.ptd)
  std::string label;  // e.g. "segment 2: delegate QnnBackend"
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct FileSize {
  std::string file;
  uint64_t file_size = 0;
  std::vector<SizePart> parts;  // non-empty parts only; sum of bytes == file_size
  std::vector<SizeBand> bands;
  // Bytes owned by more than one object (a string or segment stored once and
  // referenced twice); each counts once, for the part that starts first.
  uint64_t shared_bytes = 0;
};

// A stored tensor (or named blob): one entry per stored copy.
struct SizeTensor {
  std::string method;        // first method that uses it ("" for named data)
  int64_t value_index = -1;  // in that method (-1 for named data)
  std::string name;          // FQN, named-data key or .ptd key; may be empty
  std::string dtype;         // "" for named data
  std::vector<int64_t> shape;
  std::string location;  // "constant segment", "constant_buffer (inline)", "mutable data", "external X.ptd", ...
  uint64_t bytes = 0;
  uint32_t uses = 1;  // tensors (over all methods) that share this copy
};

struct SizeDelegate {
  std::string method;
  uint32_t index = 0;  // in the method's delegates
  std::string backend_id;
  std::string location;  // "segment N" or "inline N"
  uint64_t bytes = 0;
  uint32_t compile_specs = 0;
};

struct SizeReport {
  FileSize pte;
  std::vector<FileSize> ptds;
  std::vector<SizeTensor> tensors;  // by bytes, largest first
  std::vector<SizeDelegate> delegates;
  MemoryReport memory;  // what the runtime allocates and maps (memory.h)
};

// Needs a program that passed the FlatBuffers verifier (pte.program() != nullptr);
// throws ptepack::Error otherwise. Out-of-file ranges are clipped, never read.
SizeReport AnalyzeSize(const PteFile& pte, const std::vector<const PtdFile*>& ptds);
FileSize AnalyzePtdSize(const PtdFile& ptd);

enum class SizeSort { kBytes, kName };

nlohmann::json SizeJson(const SizeReport& r, size_t top, SizeSort sort);
std::string RenderSizeText(const SizeReport& r, size_t top, SizeSort sort);

// "1.2 MiB", "512 B".
std::string HumanBytes(uint64_t n);

}  // namespace ptepack
