#include "serialize/io/json_limits.h"

#include "ptepack/error.h"

namespace ptepack {

void CheckJsonDepth(const std::string& text, const std::string& file, const std::string& code, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        Finding f;
        f.code = code;
        f.file = file;
        f.offset = i;
        f.message = "JSON nests too deeply";
        f.expected = "at most " + std::to_string(max_depth) + " levels of arrays/objects";
        f.found = "more";
        throw Error(std::move(f));
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

}  // namespace ptepack
