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

Package LoadSpec(const std::string& path);
Package PackageFromSpecJson(const std::string& json_text, const std::string& base_dir);

// A BackendConfig from a JSON file (keys are ExecutorchBackendConfig's field
// names); Error("bad-config") located in the file.
BackendConfig LoadConfigFile(const std::string& path);

}  // namespace ptepack
