// A program with its data held apart from its layout.
//
// This is what ExecuTorch's serializer starts from (its PTEFile): the
// Program tree with constants in constant_buffer and delegate payloads in
// backend_delegate_data, plus mutable data and named blobs. Reading a file
// "restores" it to this form; writing lays it out again following a
// BackendConfig. All data are byte views (into mapped files or caller
// buffers); nothing here copies tensor data.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/backend_config.h"
#include "program_views_generated.h"
#include "ptepack/bytes.h"
#include "serialize/format/fbtree.h"
#include "serialize/io/file_io.h"
#include "support/inline_function.h"

namespace ptepack {

struct NamedBlob {
  std::string key;
  Bytes data;
  uint64_t alignment = 1;
  std::shared_ptr<fb::Table> tensor_layout;  // flat_tensor_flatbuffer.TensorLayout, optional
  bool legacy_tensor = false;                // legacy layout: goes in the shared tensor segment
};

// One .ptd file to write: "<tag>.ptd" next to the .pte.
struct ExternalFile {
  std::string tag;
  std::vector<NamedBlob> entries;
  // Write the FlatTensor layout of before June 2025 (tensors list with a
  // shared, tensor_alignment-padded segment), to reproduce such files.
  bool legacy = false;
  uint32_t legacy_tensor_alignment = 16;
  bool legacy_named_data_field = true;  // files before March 2025 had no named_data
};

// What a ptepack::Package holds (include/ptepack/package.h; the library
// reaches it through serialize/api/package_access.h).
struct PackageParts {
  std::shared_ptr<fb::Table> program;  // executorch_flatbuffer.Program
  std::optional<std::vector<Bytes>> mutable_data;
  std::vector<NamedBlob> named_data;   // blobs stored in the .pte
  std::vector<ExternalFile> external;  // blobs stored in .ptd files
};

// Turns a legacy-layout ExternalFile into the current layout: each tensor
// becomes a named blob of exactly its layout's size (legacy entries carry the
// padding up to the next tensor).
void UpgradeLegacy(ExternalFile& file);

// Bytes of a flat_tensor_flatbuffer.TensorLayout (TensorNbytes of
// serialize/format/pte_format.h), nullopt if unknown or overflowing.
std::optional<uint64_t> LayoutNbytes(const fb::Table& tensor_layout);

// Helpers on the program tree used by layout code. Typed views of its
// tables (prog::Tensor{table}.sizes() ...) are generated from the schema
// (program_views_generated.h, serialize/format/fbview.h); F() looks a field
// up by name and is kept for callers outside the library.
namespace prog {
const fb::Schema& S();
fb::Value& F(fb::Table& t, const char* name);
const fb::Value& F(const fb::Table& t, const char* name);
std::shared_ptr<fb::Table> New(const char* table);  // "executorch_flatbuffer.X" short name X
// Calls fn(plan, value_index, tensor_table) for every Tensor value.
void ForEachTensor(fb::Table& program,
                   const std::function<void(fb::Table& plan, uint32_t value_index, fb::Table& tensor)>& fn);
// The same on a copy-on-write tree (fb::Own; `program` itself is owned),
// reading a lazily decoded one (fb::DecodeOnDemand) a value at a time: fn
// gets the tensor read-only and `edit`, which changes it with a function of
// the tensor's table (owning its plan, EValue and Tensor tables first, or,
// where the value is still lazy, keeping the function: fb::EditTable). The
// table fn got does not show the change. A change of up to 40 bytes of
// captures is kept without a heap block of its own (InlineFunction).
using TensorChange = InlineFunction<void(fb::Table& tensor), 40>;
using EditTensorFn = std::function<void(TensorChange)>;
void ForEachTensorCow(fb::Table& program,
                      const std::function<void(const fb::Table& plan, uint32_t value_index, const fb::Table& tensor,
                                               const EditTensorFn& edit)>& fn);
// TensorNbytes (serialize/format/pte_format.h) of a Tensor table's type and shape.
std::optional<uint64_t> TensorNbytes(const fb::Table& tensor);
// The tensor's data is in a .ptd file (ExtraTensorInfo.location EXTERNAL).
bool IsExternal(const fb::Table& tensor);
// The tensor is memory planned (has allocation_info).
bool IsPlanned(const fb::Table& tensor);
}  // namespace prog

}  // namespace ptepack
