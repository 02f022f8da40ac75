// FlatBuffers JSON straight into a flatbuffer, without flatbuffers::Parser.
//
// `pack` reads a spec's program (program.fbs as JSON). FlatBuffers' parser
// builds a binary that ptepack then verifies and decodes; on a program of
// 20,000 values that parser was about 60% of `pack` (issue 16's profile). This
// reader builds a binary that decodes to the tree the parser's gives (each
// table built when its JSON ends: nothing but the buffer is kept), for the
// JSON that ExecuTorch tooling and ptepack itself write: strict JSON, enum
// values by name or number, a union's `_type` before its value, ASCII strings.
//
// It reads nothing it is not sure of. Anything else (another escape or byte,
// a number out of range or rounding to a subnormal, an unknown or repeated
// field, a missing required field, a union value before its type, trailing
// text, more tables than the verifier takes, and every error) gives nothing
// (nullopt, nullptr), and the caller runs FlatBuffers' parser, whose error
// messages say where.
// tests/json_tree_test.cpp checks both give the same tree.
#pragma once

#include <memory>
#include <optional>
#include <string_view>

#include "serialize/format/fbtree.h"

namespace ptepack::fb {

// The flatbuffer of the root table of `schema` written as `json` (what
// FlatBuffers' parser builds, its fields and vectors perhaps in another
// order), or nullopt. With `end`, other text may follow the table (a spec's
// "program"), and *end is the offset just past its closing brace.
std::optional<Bytes> FlatbufferFromJson(const Schema& schema, std::string_view json, size_t* end = nullptr);

// That flatbuffer decoded (fb::Decode), or nullptr.
std::shared_ptr<Table> TreeFromJson(const Schema& schema, std::string_view json);
// The same for a root table at the start of `json` that other text follows,
// decoded on demand (fb::DecodeOnDemand): a program read for `pack` is held
// as its flatbuffer (a third of its JSON), not as a tree (three times it),
// and its tables are decoded as the layout reads them. A text TreeFromJson
// gives nullptr for gives nullptr here too.
std::shared_ptr<Table> TreeFromJsonPrefix(const Schema& schema, std::string_view json, size_t* end);

}  // namespace ptepack::fb
