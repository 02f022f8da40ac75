// Where tensor data goes: the config's external_constants /
// external_mutable_weights decisions and the emit_* flags, applied to a
// package whose program root the caller owns (deeper tables may be shared
// with another tree: they are changed copy-on-write, fb::Own).
#pragma once

#include "config/backend_config.h"
#include "serialize/model/program_parts.h"

namespace ptepack {

// - drops Chain.stacktrace unless emit_stacktrace;
// - drops mutable buffer names unless emit_mutable_buffer_names;
// - moves constants chosen by external_constants (true: every constant to
//   external_tag; callback: per tensor) into ExternalFile entries keyed by
//   the tensor's name (or "constant_<buffer index>" when it has none), marks
//   those tensors EXTERNAL and renumbers the remaining constants;
// - moves mutable weights with an initial state likewise when
//   external_mutable_weights is set.
void ApplyPlacement(PackageParts& pkg, const BackendConfig& config);

}  // namespace ptepack
