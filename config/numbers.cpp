#include "config/numbers.h"

#include "ptepack/config.h"
#include "ptepack/error.h"

namespace ptepack {

namespace {

const char* const kAlignmentRule = "must be a power of two from 1 to 1073741824";

[[noreturn]] void Bad(const std::string& what, const std::string& rule, const std::string& found,
                      const std::string& code) {
  Finding f;
  f.code = code;
  f.message = what + ": " + rule;
  f.found = found;
  throw Error(std::move(f));
}

std::string Quoted(const std::string& text) {
  std::string q = "\"";
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
      static const char* kHex = "0123456789abcdef";
      q += "\\x";
      q += kHex[c >> 4];
      q += kHex[c & 15];
    } else {
      q += static_cast<char>(c);
    }
  }
  return q + "\"";
}

// Decimal digits only; false when empty, signed, not a number or above UINT64_MAX.
bool ParseDecimal(const std::string& text, uint64_t* out) {
  if (text.empty() || text.size() > 64) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

}  // namespace

uint64_t ParseNumber(const std::string& what, const std::string& text, uint64_t min, uint64_t max) {
  uint64_t v = 0;
  if (!ParseDecimal(text, &v) || v < min || v > max) {
    Bad(what, "must be a whole number from " + std::to_string(min) + " to " + std::to_string(max), Quoted(text),
        "bad-number");
  }
  return v;
}

uint64_t ParseAlignment(const std::string& what, const std::string& text) {
  uint64_t v = 0;
  if (!ParseDecimal(text, &v) || !IsPowerOfTwo(v) || v > kMaxAlignment) {
    Bad(what, kAlignmentRule, Quoted(text), "bad-number");
  }
  return v;
}

void CheckAlignmentValue(const std::string& what, uint64_t value, const std::string& code) {
  if (!IsPowerOfTwo(value) || value > kMaxAlignment) Bad(what, kAlignmentRule, std::to_string(value), code);
}

}  // namespace ptepack
