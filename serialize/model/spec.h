// JSON descriptions of programs: reading a `pack` spec into a Package and
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

#include <string>

#include "serialize/model/package.h"

namespace ptepack {

class PteFile;

// Deepest nesting of arrays/objects accepted in any JSON ptepack reads
// (specs, configs, manifests, bundle indexes). Real programs nest about 10
// deep; the bound keeps a hostile file from exhausting the stack.
inline constexpr size_t kMaxJsonDepth = 256;

// Scans JSON text (without parsing it) and throws Error(code) located at the
// byte offset where nesting first exceeds `max_depth`.
void CheckJsonDepth(const std::string& text, const std::string& file, const std::string& code,
                    size_t max_depth = kMaxJsonDepth);

Package LoadSpec(const std::string& path);
Package PackageFromSpecJson(const std::string& json_text, const std::string& base_dir);

// The program flatbuffer of `pte` as JSON (program.fbs field names).
std::string ProgramToJson(const PteFile& pte);

}  // namespace ptepack
