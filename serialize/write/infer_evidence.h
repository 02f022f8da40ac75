// Where each object of a flatbuffer sits: the evidence config inference
// reads padding from.
//
// A FlatBuffers builder writes objects back to back (downward) and pads only
// to meet an alignment, so the zero bytes between the end of a vector's data
// and the next object are exactly the padding its alignment asked for. The
// walk collects every object start (tables, vtables, vectors, strings) and
// every scalar vector (where its length prefix is, how many elements, which
// schema field it is), for a flatbuffer the reader has already verified.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "serialize/format/fbtree.h"

namespace ptepack {

// A scalar vector of the flatbuffer: 12 bytes (offsets fit 32 bits: a
// flatbuffer is under 2 GiB, which the reader verified).
struct FbVectorAt {
  uint32_t length_pos = 0;  // offset of the u32 element count; data follows
  uint32_t count = 0;
  uint16_t field = 0;  // index in FbObjects::names: "Object.field" (unqualified object name)
  uint8_t elem_size = 1;
  uint64_t data_start() const { return uint64_t{length_pos} + 4; }
  uint64_t data_end() const { return data_start() + uint64_t{count} * elem_size; }
};

// A program of 300,000 tensors has 1.8 million object starts and 900,000
// scalar vectors: they are held in deques (no copy of the whole list as it
// grows), 4 and 12 bytes each (8 and 32 bytes each, with a view of the
// field's name in every vector record, held 43 MB at the end of the walk,
// the peak of a split's config inference; a string in each record and the
// lists' doubling held 90 MB before that).
struct FbObjects {
  FbObjects() = default;
  FbObjects(const FbObjects&) = delete;
  FbObjects& operator=(const FbObjects&) = delete;
  FbObjects(FbObjects&&) = default;
  FbObjects& operator=(FbObjects&&) = default;

  std::deque<uint32_t> starts;  // sorted, unique
  std::deque<FbVectorAt> vectors;
  std::vector<std::string> names;  // the fields `vectors` name
  uint64_t end = 0;                // size of the flatbuffer
  // The first object start at or after `pos` (`end` if none).
  uint64_t NextStart(uint64_t pos) const;
  std::string_view FieldOf(const FbVectorAt& v) const { return names[v.field]; }
};

// Walks the verified flatbuffer `buf[0, size)` of `schema`'s root type.
FbObjects WalkFlatbuffer(const fb::Schema& schema, const uint8_t* buf, uint64_t size);

}  // namespace ptepack
