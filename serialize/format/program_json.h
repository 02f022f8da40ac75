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

// The doubles of a program tree that its JSON cannot give back bit for bit:
// NaNs other than the one FlatBuffers' parser reads "nan" as (0x7ff8...,
// JSON has no way to give a NaN's sign or payload). `first` is where the first
// is, as a path of field names and indexes ("execution_plan[0].values[3].val.
// double_val"), with its bits; count 0: every double prints exactly.
struct DoublesJsonLoses {
  size_t count = 0;
  std::string first;
  uint64_t first_bits = 0;
};

// A program tree (executorch_flatbuffer.Program) as JSON that FlatBuffers'
// parser reads back to the same values: every double printed exactly (the
// shortest text that reads back as the same bits; infinite and NaN quoted,
// "inf", "-inf", "nan", so the text is valid JSON) but for the NaNs `lost`
// (when given) tells of.
std::string ProgramToJson(const fb::Table& program, DoublesJsonLoses* lost = nullptr);

// The bits FlatBuffers' parser gives a double written "nan".
uint64_t JsonNanBits();

}  // namespace ptepack
