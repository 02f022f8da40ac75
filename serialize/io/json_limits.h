// Limits on JSON text ptepack reads (specs, configs, manifests, bundle indexes), and the one
// scanner of JSON tokens that looks at text without parsing it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>

namespace ptepack {

// Deepest nesting of arrays/objects accepted in any JSON ptepack reads.
// Real programs nest about 10 deep; the bound keeps a hostile file from
// exhausting the stack.
inline constexpr size_t kMaxJsonDepth = 256;

// The tokens of JSON text, without parsing it: each string (its quotes included, escapes
// skipped; an unterminated one runs to the end) and each other character that is not
// whitespace (brackets, colons, commas, the characters of numbers and literals). Calls
// `fn(begin, end)` with each token's byte range in `text`; `fn` returns false to stop.
template <typename Fn>
void ScanJsonTokens(const std::string& text, Fn&& fn) {
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    size_t end = i + 1;
    if (c == '"') {
      while (end < text.size() && text[end] != '"') end += text[end] == '\\' ? 2 : 1;
      end = std::min(end + 1, text.size());
    }
    if (!fn(i, end)) return;
    i = end - 1;
  }
}

// Scans JSON text (without parsing it) and throws Error(code) located at the
// byte offset where nesting first exceeds `max_depth`.
void CheckJsonDepth(const std::string& text, const std::string& file, const std::string& code,
                    size_t max_depth = kMaxJsonDepth);

}  // namespace ptepack
