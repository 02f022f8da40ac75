#include "serialize/format/program_json.h"

#include <flatbuffers/idl.h>

#include <cctype>

#include "ptepack/error.h"

namespace ptepack::schema {
extern const uint8_t k_program_bfbs[];
extern const size_t k_program_bfbs_size;
}  // namespace ptepack::schema

namespace ptepack {

namespace {

// flatc prints infinite and NaN doubles as bare inf/nan, which is not JSON:
// quote them ("inf", "-inf", "nan"); FlatBuffers' parser reads them back.
std::string QuoteNonFinite(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) {
        out += text[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      continue;
    }
    if (c == '-' || c == '+' || c == 'i' || c == 'n') {
      size_t j = i + ((c == '-' || c == '+') ? 1 : 0);
      size_t k = j;
      while (k < text.size() && std::isalpha(static_cast<unsigned char>(text[k]))) ++k;
      const std::string word = text.substr(j, k - j);
      if (word == "inf" || word == "nan" || word == "infinity") {
        out += '"';
        if (c == '-') out += '-';
        out += word;
        out += '"';
        i = k - 1;
        continue;
      }
    }
    out += c;
  }
  return out;
}

}  // namespace

std::unique_ptr<flatbuffers::Parser> ProgramJsonParser() {
  flatbuffers::IDLOptions opts;
  opts.strict_json = true;
  auto p = std::make_unique<flatbuffers::Parser>(opts);
  if (!p->Deserialize(schema::k_program_bfbs, schema::k_program_bfbs_size)) {
    throw Error("internal-schema", "cannot load the embedded program schema");
  }
  return p;
}

std::string ProgramFlatbufferToJson(const uint8_t* flatbuffer) {
  auto parser = ProgramJsonParser();
  std::string out;
  if (!flatbuffers::GenerateText(*parser, flatbuffer, &out)) {
    throw Error("internal-json", "cannot print program as JSON");
  }
  return QuoteNonFinite(out);
}

}  // namespace ptepack
