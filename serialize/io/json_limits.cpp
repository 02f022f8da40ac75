#include "serialize/io/json_limits.h"

#include "ptepack/error.h"

namespace ptepack {

void CheckJsonDepth(const std::string& text, const std::string& file, const std::string& code, size_t max_depth) {
  size_t depth = 0;
  ScanJsonTokens(text, [&](size_t at, size_t) {
    const char c = text[at];
    if ((c == '[' || c == '{') && ++depth > max_depth) {
      throw Error(code, "JSON nests too deeply", file, at,
                  "at most " + std::to_string(max_depth) + " levels of arrays/objects", "more");
    }
    if ((c == ']' || c == '}') && depth > 0) --depth;
    return true;
  });
}

}  // namespace ptepack
