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
#include <unordered_map>

#include "serialize/format/fbtree.h"

namespace ptepack {

struct FbVectorAt {
  uint64_t length_pos = 0;  // offset of the u32 element count; data follows
  uint32_t count = 0;
  uint32_t elem_size = 1;
  std::string_view field;  // "Object.field" (unqualified object name), in FbObjects::names
  uint64_t data_start() const { return length_pos + 4; }
  uint64_t data_end() const { return data_start() + uint64_t{count} * elem_size; }
};

// A program of 300,000 tensors has 1.8 million object starts and 900,000
// scalar vectors: they are held in deques (no copy of the whole list as it
// grows) and a vector's field name is a view of one copy of it (a string in
// each record, and the lists' doubling, held 90 MB at the end of the walk,
// the peak of a split's config inference).
struct FbObjects {
  FbObjects() = default;
  FbObjects(const FbObjects&) = delete;  // `vectors` views `names`
  FbObjects& operator=(const FbObjects&) = delete;
  FbObjects(FbObjects&&) = default;
  FbObjects& operator=(FbObjects&&) = default;

  std::deque<uint64_t> starts;  // sorted, unique
  std::deque<FbVectorAt> vectors;
  std::unordered_map<const reflection::Field*, std::string> names;  // what `vectors` view
  uint64_t end = 0;                                                 // size of the flatbuffer
  // The first object start at or after `pos` (`end` if none).
  uint64_t NextStart(uint64_t pos) const;
};

// Walks the verified flatbuffer `buf[0, size)` of `schema`'s root type.
FbObjects WalkFlatbuffer(const fb::Schema& schema, const uint8_t* buf, uint64_t size);

}  // namespace ptepack
