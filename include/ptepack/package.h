// A program with its data held apart from its layout: what ProgramBuilder
// builds and WritePackage lays out (ExecuTorch's serializer starts from the
// same form, its PTEFile).
//
// The program tree itself is opaque here (a schema-driven FlatBuffers table
// that only the library reads); constants and delegate payloads live in it,
// mutable data and named blobs beside it. All data are byte views (into
// mapped files or caller buffers); nothing here copies tensor data.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ptepack/bytes.h"

namespace ptepack {

namespace fb {
struct Table;  // the library's reflection tree of a FlatBuffers table
}  // namespace fb

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

struct PackageParts {
  std::shared_ptr<fb::Table> program;  // executorch_flatbuffer.Program
  std::optional<std::vector<Bytes>> mutable_data;
  std::vector<NamedBlob> named_data;   // blobs stored in the .pte
  std::vector<ExternalFile> external;  // blobs stored in .ptd files
};
using Package = PackageParts;  // transitional: the library's functions take PackageParts

}  // namespace ptepack
