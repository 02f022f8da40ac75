// A semantic diff of two programs (`ptepack diff`).
//
// Each side is summarised from its typed flatbuffer view: the config it was
// written with (as InferConfig finds it), sizes, methods (operators,
// instruction and value counts, inputs/outputs, planned memory), constant
// tensors by content hash (XXH3) and where they are stored, delegates
// (backend id, payload hash, compile specs), named data and mutable state.
// The summaries are compared into a flat list of changes, each marked as a
// change of content or of layout only.
//
// "Content" is what ExecuTorch's runtime computes with: the program tree
// without the fields that only say where bytes are (segments, offsets,
// buffer indices, delegate data references, extra tensor info) and without
// debug data (stack traces), plus the bytes of every constant, delegate
// payload, named blob and mutable initial state. Two programs with the same
// content in another layout (alignment, flatbuffer order, constants inline or
// in a segment or in a differently named .ptd) are "layout only". The memory
// plan (each planned tensor's offset in its buffer, non_const_buffer_sizes;
// not its memory_id) is content marked apart: two programs that differ in it
// and in layout only are "memory plan only" (what `ptepack plan -o` writes).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ptepack {

class PteFile;
class PtdFile;

struct DiffChange {
  std::string category;  // config, size, method, operators, counts, io, memory,
                         // constant, delegate, named_data, program
  std::string subject;   // the method, tensor, key or field concerned
  std::string kind;      // added, removed, changed, moved
  std::string a, b;      // each side's value (empty for added/removed)
  bool layout = false;   // true: where bytes are, not what they are
  // true: the memory plan only (planned tensors' offsets in their buffers,
  // planned buffer sizes); never with `layout`
  bool plan = false;
};

enum class DiffVerdict {
  kIdentical,   // every file byte for byte the same
  kLayoutOnly,  // same content, stored differently
  // The same content except the memory plan: planned tensors at other offsets
  // of the same buffers, planned buffers of other sizes (`ptepack plan -o`).
  kMemoryPlanOnly,
  kDifferent,  // content differs
};
// "identical", "layout only", "memory plan only", "different"
const char* DiffVerdictName(DiffVerdict v);

struct DiffSide {
  std::string name;
  nlohmann::json summary;  // files and sizes, inferred config, methods
};

struct DiffResult {
  DiffVerdict verdict = DiffVerdict::kIdentical;
  DiffSide a, b;
  std::vector<DiffChange> changes;
  size_t content_changes() const;  // changes that are neither layout nor memory plan
  size_t plan_changes() const;
};

// Compares two checked programs (each with the .ptd files it is loaded with).
// Throws ptepack::Error if either has errors.
DiffResult DiffPrograms(const PteFile& a, const std::vector<const PtdFile*>& ptds_a, const PteFile& b,
                        const std::vector<const PtdFile*>& ptds_b);

nlohmann::json DiffJson(const DiffResult& r);
std::string RenderDiffText(const DiffResult& r);

}  // namespace ptepack
