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
#include <string>
#include <vector>

#include "serialize/format/fbtree.h"

namespace ptepack {

struct FbVectorAt {
  uint64_t length_pos = 0;  // offset of the u32 element count; data follows
  uint64_t count = 0;
  size_t elem_size = 1;
  std::string field;  // "Object.field" (unqualified object name)
  uint64_t data_start() const { return length_pos + 4; }
  uint64_t data_end() const { return data_start() + count * elem_size; }
};

struct FbObjects {
  std::vector<uint64_t> starts;  // sorted, unique
  std::vector<FbVectorAt> vectors;
  uint64_t end = 0;  // size of the flatbuffer
  // The first object start at or after `pos` (`end` if none).
  uint64_t NextStart(uint64_t pos) const;
};

// Walks the verified flatbuffer `buf[0, size)` of `schema`'s root type.
FbObjects WalkFlatbuffer(const fb::Schema& schema, const uint8_t* buf, uint64_t size);

}  // namespace ptepack
