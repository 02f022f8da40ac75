// The program flatbuffer as JSON text and back, through FlatBuffers' own
// parser and printer driven by the embedded program.fbs (field names as in
// the schema).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace flatbuffers {
class Parser;
}

namespace ptepack {

// A parser for JSON of executorch_flatbuffer.Program (strict JSON).
std::unique_ptr<flatbuffers::Parser> ProgramJsonParser();

// The Program flatbuffer at `flatbuffer` (already verified) as JSON, with
// infinite and NaN doubles quoted so the text is valid JSON.
std::string ProgramFlatbufferToJson(const uint8_t* flatbuffer);

}  // namespace ptepack
