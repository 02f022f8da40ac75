// Where a ptepack::Bytes comes from, for the library alone: the mapped file its
// data point into (set by MappedFile::View, kept by Bytes::Sub), or zero pages
// (Bytes::Zeros). The public header keeps these private.
#pragma once

#include "ptepack/bytes.h"

namespace ptepack {

class MappedFile;

namespace detail {
struct BytesSource {
  static const MappedFile* Mapping(const Bytes& b) { return static_cast<const MappedFile*>(b.mapping_); }
  static bool Zeros(const Bytes& b) { return b.zeros_; }
  static void SetMapping(Bytes& b, const MappedFile* m) { b.mapping_ = m; }
  static void SetZeros(Bytes& b) { b.zeros_ = true; }
};
}  // namespace detail

// The mapping `b.data` points into, or null (not a view of a mapped file).
inline const MappedFile* MappingOf(const Bytes& b) { return detail::BytesSource::Mapping(b); }
// True for Bytes::Zeros: untouched anonymous memory that reads as zeros.
inline bool IsZeros(const Bytes& b) { return detail::BytesSource::Zeros(b); }

}  // namespace ptepack
