// The JSON forms of a repack's result, shared by `ptepack repack --json` and
// the Python module.
#pragma once

#include <nlohmann/json.hpp>

#include "ptepack/repack.h"

namespace ptepack {

// {"identical", "differences": [{file, offset, region, input_size,
// output_size}]}, or null when the output was not compared with the input.
nlohmann::json IdentityJson(const IdentityCheck& id);

// The files of a write: [{"path", "size"}] (.pte first), a .ptd left as it
// was with "kept": true.
nlohmann::json WrittenFilesJson(const WriteResult& r);

}  // namespace ptepack
