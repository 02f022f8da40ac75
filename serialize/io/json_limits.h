// Limits on JSON text ptepack reads (specs, configs, manifests, bundle indexes).
#pragma once

#include <cstddef>
#include <string>

namespace ptepack {

// Deepest nesting of arrays/objects accepted in any JSON ptepack reads.
// Real programs nest about 10 deep; the bound keeps a hostile file from
// exhausting the stack.
inline constexpr size_t kMaxJsonDepth = 256;

// Scans JSON text (without parsing it) and throws Error(code) located at the
// byte offset where nesting first exceeds `max_depth`.
void CheckJsonDepth(const std::string& text, const std::string& file, const std::string& code,
                    size_t max_depth = kMaxJsonDepth);

}  // namespace ptepack
