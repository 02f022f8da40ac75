// The one parser of numbers given as text for an option: the CLI's numeric flags
// (tools/args.h) and the Python module's keyword arguments (python/ptepack_module.cpp
// passes a Python int as its decimal text, so 2**70 and -1 reach the same checks).
//
// Every bad value gets the same located error, naming the option and quoting the text:
//   --segment-alignment: must be a power of two from 1 to 1073741824 (found "-1") [bad-number]
// for a negative, empty, non-decimal, overflowing or out-of-range value alike.
#pragma once

#include <cstdint>
#include <string>

namespace ptepack {

// Largest alignment a config may ask for (1 GiB), as BackendConfig::Validate enforces.
constexpr uint64_t kMaxAlignment = uint64_t{1} << 30;

// True for 1, 2, 4, ...: every alignment must be one.
constexpr bool IsPowerOfTwo(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// A whole number in [min, max] written in decimal digits only (no sign, no spaces, no
// 0x). `what` names the option ("--top", "segment_alignment"). Throws Error("bad-number").
uint64_t ParseNumber(const std::string& what, const std::string& text, uint64_t min, uint64_t max);

// A power of two from 1 to kMaxAlignment. Throws Error("bad-number").
uint64_t ParseAlignment(const std::string& what, const std::string& text);

// The same check of an alignment that is already a number (config files): the same
// message with `code` ("bad-config" for a config field).
void CheckAlignmentValue(const std::string& what, uint64_t value, const std::string& code);

}  // namespace ptepack
