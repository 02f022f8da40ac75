// The typed description's pieces (ptepack/program_info.h) read from a
// verified program: one source for ptepack::Describe and for `inspect`.
#pragma once

#include <optional>
#include <vector>

#include "ptepack/program_info.h"
#include "serialize/read/pte_reader.h"

namespace ptepack {

// A flatbuffer vector's items (none when the vector is absent).
template <typename T, typename V>
std::vector<T> VecOf(const V* v) {
  return v ? std::vector<T>(v->begin(), v->end()) : std::vector<T>{};
}

// Where a delegate's payload lies (`info` names it: location and index):
// its bytes when the index is in range, and where it starts in the file
// (unknown for an inline entry without data).
struct DelegatePayload {
  std::optional<uint64_t> size;
  std::optional<uint64_t> file_offset;
};
DelegatePayload PayloadOf(const DelegateInfo& info, const PteFile& pte);

// The kind of a value with the schema's tag `t` (kUnknown for a tag this
// version does not know).
ValueKind ValueKindOf(executorch_flatbuffer::KernelTypes t);

// A method's values, inputs, outputs, operators, delegates, instruction count
// and memory plan, as the runtime would read them from `plan`.
MethodInfo MethodInfoOf(const executorch_flatbuffer::ExecutionPlan& plan, const PteFile& pte);

}  // namespace ptepack
