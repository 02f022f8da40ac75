// libFuzzer target: the JSON readers of `pack` -- a spec (PackageFromSpecJson)
// and a BackendConfig -- on arbitrary text. Every input must end in a
// ptepack::Error (or be accepted), never a crash, a stack overflow or
// another exception (an nlohmann::json exception escaping aborts). Data files named by a spec are looked up in a
// directory that does not exist. The text is also read as a program by the direct JSON reader (fb::TreeFromJson): where
// it gives a tree, FlatBuffers' parser must take the text too and both trees must encode to the same bytes. Run with
// scripts/fuzz.sh fuzz_spec_reader.
#include <flatbuffers/idl.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "config/backend_config.h"
#include "program_generated.h"
#include "ptepack/error.h"
#include "serialize/format/json_tree.h"
#include "serialize/format/program_json.h"
#include "serialize/model/spec.h"

namespace {

// The direct reader against FlatBuffers' parser on `text` as a program.
void CheckDirectReader(const std::string& text) {
  auto direct = ptepack::fb::TreeFromJson(ptepack::fb::ProgramSchema(), text);
  if (!direct) return;
  auto parser = ptepack::ProgramJsonParser();
  if (!parser->Parse(text.c_str())) {
    std::fprintf(stderr, "direct JSON reader took a program FlatBuffers' parser refuses: %s\n", parser->error_.c_str());
    std::abort();
  }
  const uint8_t* buf = parser->builder_.GetBufferPointer();
  flatbuffers::Verifier v(buf, parser->builder_.GetSize());
  if (!executorch_flatbuffer::VerifyProgramBuffer(v)) {
    std::fprintf(stderr, "direct JSON reader took a program whose parsed binary does not verify\n");
    std::abort();
  }
  auto parsed = ptepack::fb::Decode(ptepack::fb::ProgramSchema(), buf, parser->builder_.GetSize(), nullptr);
  for (auto order : {ptepack::fb::Order::kFlatc, ptepack::fb::Order::kPythonObjectApi}) {
    ptepack::fb::EncodeOptions o;
    o.order = order;
    if (ptepack::fb::Encode(ptepack::fb::ProgramSchema(), *direct, o).data !=
        ptepack::fb::Encode(ptepack::fb::ProgramSchema(), *parsed, o).data) {
      std::fprintf(stderr, "direct JSON reader and FlatBuffers' parser give different programs\n");
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (size < (1 << 20)) {
    try {
      CheckDirectReader(text);
    } catch (const ptepack::Error&) {
    }
  }
  // Both go through the one JSON reader (serialize/io/json_reader.h): only
  // ptepack::Error may come out; a JSON library exception aborts the run.
  try {
    ptepack::PackageFromSpecJson(text, "/nonexistent-fuzz-dir");
  } catch (const ptepack::Error&) {
  }
  try {
    ptepack::BackendConfig::FromJsonString(text);
  } catch (const ptepack::Error&) {
  }
  return 0;
}
