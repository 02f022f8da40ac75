// JSON descriptions of programs: reading a `pack` spec into a PackageParts and
// printing a program's flatbuffer as JSON.
//
// A spec is a JSON object:
//   "program":   the Program in ExecuTorch's JSON form (field names of
//                program.fbs; what `flatc --json` prints). Constants may be
//                given inline as constant_buffer[i].storage byte arrays, or:
//   "constants": [DATA, ...]  data of constant buffer 1, 2, ... (buffer 0 is
//                the reserved empty placeholder and is added for you);
//   "delegate_data": [DATA, ...] payloads of backend_delegate_data, in order
//                (delegates refer to them as INLINE index i);
//   "mutable_data": [DATA, ...]  initial state of mutable buffers;
//   "named_data": [{"key": K, "alignment": A, DATA}, ...];
//   "external": {"TAG": [{"key": K, DATA}, ...]}  blobs for TAG.ptd.
// DATA is one of {"file": PATH[, "offset": N, "size": N]} (PATH relative to
// the spec), {"hex": "00ff..."} or {"zeros": N}. Files are mapped, not read.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "serialize/model/program_parts.h"

namespace ptepack {

// Errors ("bad-spec") name the field at fault and its byte offset in the
// spec (serialize/io/json_reader.h); `file` names the spec in them (default
// `base_dir`).
PackageParts LoadSpec(const std::string& path);
// How {"file": NAME} data are found: mapped from disk (NAME relative to
// base_dir) by default; a resolver gives NAME's bytes instead, or nullopt
// when there is no such file (an error located at the field).
using SpecFileResolver = std::function<std::optional<Bytes>(const std::string& name)>;
PackageParts PackageFromSpecJson(const std::string& json_text, const std::string& base_dir,
                                 const std::string& file = "", const SpecFileResolver& files = nullptr);

}  // namespace ptepack
