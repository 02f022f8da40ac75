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

namespace ptepack::fb {
struct Table;
}

namespace ptepack {

// A parser for JSON of executorch_flatbuffer.Program (strict JSON).
std::unique_ptr<flatbuffers::Parser> ProgramJsonParser();

// A program tree (executorch_flatbuffer.Program) as JSON that FlatBuffers'
// parser reads back to the same values: every double printed exactly (the
// shortest text that reads back as the same bits; infinite and NaN quoted,
// "inf", "-inf", "nan", so the text is valid JSON).
std::string ProgramToJson(const fb::Table& program);

}  // namespace ptepack
