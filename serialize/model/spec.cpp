#include "serialize/model/spec.h"

#include <flatbuffers/idl.h>

#include <cctype>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "flat_tensor_views_generated.h"
#include "program_generated.h"
#include "ptepack/error.h"
#include "serialize/format/json_tree.h"
#include "serialize/format/program_json.h"
#include "serialize/io/file_io.h"
#include "serialize/io/json_limits.h"

namespace ptepack {

namespace {

[[noreturn]] void BadSpec(const std::string& where, const std::string& msg) {
  Finding f;
  f.code = "bad-spec";
  f.file = where;
  f.message = msg;
  throw Error(std::move(f));
}

// A byte count in a spec: a non-negative JSON integer, at most `max`.
uint64_t SizeField(const nlohmann::json& j, const char* field, const std::string& base, const std::string& what,
                   uint64_t max) {
  const nlohmann::json& v = j[field];
  std::string shown = v.dump();
  if (shown.size() > 40) shown = shown.substr(0, 40) + "...";
  if (v.is_number_float()) {
    BadSpec(base,
            what + ": \"" + field + "\" must be a whole number of bytes (expected an integer, found " + shown + ")");
  }
  if (v.is_number_integer() && !v.is_number_unsigned()) {
    BadSpec(base, what + ": \"" + field + "\" must not be negative (expected an integer >= 0, found " + shown + ")");
  }
  if (!v.is_number_unsigned()) {
    BadSpec(base, what + ": \"" + field + "\" must be an integer (found " + shown + ")");
  }
  uint64_t n = v.get<uint64_t>();
  if (n > max) {
    BadSpec(base, what + ": \"" + field + "\" is too large (expected at most " + std::to_string(max) + ", found " +
                      shown + ")");
  }
  return n;
}

// Each data file is mapped once, however many blobs it holds.
std::shared_ptr<MappedFile> MapOnce(const std::string& path) {
  thread_local std::map<std::string, std::weak_ptr<MappedFile>> cache;
  if (auto m = cache[path].lock()) return m;
  auto m = MappedFile::Open(path);
  cache[path] = m;
  return m;
}

Bytes Data(const nlohmann::json& j, const std::string& base, const std::string& what) {
  if (j.contains("file")) {
    std::string p = j["file"].get<std::string>();
    if (p.empty() || p[0] != '/') p = base + "/" + p;
    auto m = MapOnce(p);
    uint64_t off = j.contains("offset") ? SizeField(j, "offset", p, what, UINT64_MAX) : 0;
    uint64_t size =
        j.contains("size") ? SizeField(j, "size", p, what, UINT64_MAX) : (m->size() >= off ? m->size() - off : 0);
    if (off > m->size() || size > m->size() - off) {
      BadSpec(p, what + ": range " + std::to_string(off) + "+" + std::to_string(size) + " is outside the file (" +
                     std::to_string(m->size()) + " bytes)");
    }
    return m->View(off, size);
  }
  if (j.contains("hex")) {
    std::string h = j["hex"].get<std::string>();
    if (h.size() % 2) BadSpec(base, what + ": hex string has an odd length");
    std::vector<uint8_t> v(h.size() / 2);
    for (size_t i = 0; i < v.size(); ++i) {
      try {
        v[i] = static_cast<uint8_t>(std::stoul(h.substr(2 * i, 2), nullptr, 16));
      } catch (...) {
        BadSpec(base, what + ": bad hex at character " + std::to_string(2 * i));
      }
    }
    return Bytes::Own(std::move(v));
  }
  if (j.contains("zeros")) return Bytes::Zeros(SizeField(j, "zeros", base, what, Bytes::kMaxZeros));
  BadSpec(base, what + ": expected {\"file\": ...}, {\"hex\": ...} or {\"zeros\": N}");
}

nlohmann::json ParseSpec(const std::string& text, const std::string& base) {
  CheckJsonDepth(text, base, "bad-spec");
  nlohmann::json spec;
  try {
    spec = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    Finding f;
    f.code = "bad-spec";
    f.file = base;
    f.offset = e.byte;
    f.message = std::string("not valid JSON: ") + e.what();
    throw Error(std::move(f));
  }
  if (!spec.is_object() || !spec.contains("program")) BadSpec(base, "spec must be an object with a \"program\"");
  return spec;
}

// The program `parser` has parsed, as a verified tree.
std::shared_ptr<fb::Table> ProgramFromParser(flatbuffers::Parser& parser, const std::string& base) {
  std::vector<uint8_t> fbb(parser.builder_.GetBufferPointer(),
                           parser.builder_.GetBufferPointer() + parser.builder_.GetSize());
  {
    flatbuffers::Verifier v(fbb.data(), fbb.size());
    if (!executorch_flatbuffer::VerifyProgramBuffer(v)) BadSpec(base, "program failed verification after parsing");
  }
  Bytes owned = Bytes::Own(std::move(fbb));
  return fb::Decode(prog::S(), owned.data, owned.size, owned.owner);
}

// The spec's "program" (program.fbs as JSON) as a verified tree: read
// directly (json_tree.h) where it can be, else by FlatBuffers' parser.
std::shared_ptr<fb::Table> ProgramFromJson(const nlohmann::json& program, const std::string& base) {
  std::string program_json = program.dump();
  if (auto tree = fb::TreeFromJson(fb::ProgramSchema(), program_json)) return tree;
  auto parser = ProgramJsonParser();
  if (!parser->Parse(program_json.c_str())) BadSpec(base, "program does not match program.fbs: " + parser->error_);
  return ProgramFromParser(*parser, base);
}

// The byte range of the value of the top-level key "program" in a spec, if
// the text is an object with exactly one such key whose value is an object
// with balanced braces (a string-aware scan, no parse). The program is then
// handed to FlatBuffers' parser as it is written, instead of being parsed by
// nlohmann::json and printed again (a quarter of `pack`'s time on a program
// of 20,000 values). Anything unusual: nullopt, and the old path runs.
std::optional<std::pair<size_t, size_t>> ProgramSpan(const std::string& text) {
  std::optional<std::pair<size_t, size_t>> span;
  size_t depth = 0;
  bool in_string = false;
  size_t string_start = 0;
  bool want_value = false;  // just saw the top-level key "program" and its colon
  bool after_program_key = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
        if (depth == 1 && text.compare(string_start, i + 1 - string_start, "\"program\"") == 0) {
          if (span) return std::nullopt;  // a second "program": nlohmann keeps the last one
          after_program_key = true;
        }
      }
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    if (after_program_key) {
      after_program_key = false;
      if (c != ':') return std::nullopt;
      want_value = true;
      continue;
    }
    if (want_value) {
      want_value = false;
      if (c != '{') return std::nullopt;
      span = std::make_pair(i, size_t{0});
    }
    if (c == '"') {
      in_string = true;
      string_start = i;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return std::nullopt;
      --depth;
      if (depth == 1 && span && span->second == 0 && c == '}') span->second = i + 1;
    }
  }
  if (!span || span->second == 0) return std::nullopt;
  return span;
}

// Fast path: the program text goes straight to FlatBuffers' parser and
// nlohmann::json reads only the rest. Any problem: nullopt, and the full path
// runs, so errors read as they always did.
std::optional<std::pair<nlohmann::json, std::shared_ptr<fb::Table>>> ParseSpecFast(const std::string& text,
                                                                                   const std::string& base) {
  auto span = ProgramSpan(text);
  if (!span) return std::nullopt;
  std::string rest = text.substr(0, span->first) + "{}" + text.substr(span->second);
  nlohmann::json spec = nlohmann::json::parse(rest, nullptr, /*allow_exceptions=*/false);
  if (spec.is_discarded() || !spec.is_object()) return std::nullopt;
  const std::string_view program(text.data() + span->first, span->second - span->first);
  if (auto tree = fb::TreeFromJson(fb::ProgramSchema(), program)) return std::make_pair(std::move(spec), tree);
  auto parser = ProgramJsonParser();
  if (!parser->Parse(std::string(program).c_str())) return std::nullopt;
  return std::make_pair(std::move(spec), ProgramFromParser(*parser, base));
}

// "constants" -> constant_buffer (after the reserved empty entry 0).
void AddConstants(const nlohmann::json& constants, const std::string& base, prog::Program<>& p) {
  auto& cb = p.constant_buffer();
  if (!cb.elems().empty()) BadSpec(base, "give constants either in program.constant_buffer or in \"constants\"");
  std::vector<fb::Value> bufs;
  auto placeholder = prog::Buffer<>::New();
  prog::Buffer{*placeholder}.set_storage(Bytes{});
  bufs.push_back(fb::TableValue(placeholder));
  for (size_t i = 0; i < constants.size(); ++i) {
    auto b = prog::Buffer<>::New();
    prog::Buffer{*b}.set_storage(Data(constants[i], base, "constants[" + std::to_string(i) + "]"));
    bufs.push_back(fb::TableValue(b));
  }
  cb = fb::OffsetVector(std::move(bufs), reflection::Obj);
}

// "delegate_data" -> backend_delegate_data.
void AddDelegateData(const nlohmann::json& data, const std::string& base, prog::Program<>& p) {
  std::vector<fb::Value> items;
  for (size_t i = 0; i < data.size(); ++i) {
    auto d = prog::BackendDelegateInlineData<>::New();
    prog::BackendDelegateInlineData{*d}.set_data(Data(data[i], base, "delegate_data[" + std::to_string(i) + "]"));
    items.push_back(fb::TableValue(d));
  }
  p.backend_delegate_data() = fb::OffsetVector(std::move(items), reflection::Obj);
}

// {"scalar_type": N, "sizes": [...], "dim_order": [...]}: a .ptd entry's
// flat_tensor_flatbuffer.TensorLayout.
std::shared_ptr<fb::Table> LayoutOf(const nlohmann::json& j) {
  auto tl = ptd::TensorLayout<>::New();
  ptd::TensorLayout layout{*tl};
  layout.set_scalar_type(static_cast<executorch_flatbuffer::ScalarType>(j.at("scalar_type").get<int>()));
  layout.set_sizes(j.at("sizes").get<std::vector<int32_t>>());
  layout.set_dim_order(Bytes::Own(j.at("dim_order").get<std::vector<uint8_t>>()));
  return tl;
}

NamedBlob BlobOf(const nlohmann::json& e, const std::string& base, const std::string& where) {
  NamedBlob b;
  b.key = e.at("key").get<std::string>();
  b.alignment = e.value("alignment", uint64_t{1});
  b.data = Data(e, base, where + "\"" + b.key + "\"");
  if (e.contains("tensor_layout")) b.tensor_layout = LayoutOf(e["tensor_layout"]);
  b.legacy_tensor = e.value("legacy_tensor", false);
  return b;
}

// "external": {"TAG": [ENTRY, ...]}, or {"TAG": {"legacy": {...}, "entries":
// [...]}} for a .ptd in the FlatTensor layout of before June 2025.
ExternalFile ExternalOf(const std::string& tag, const nlohmann::json& v, const std::string& base) {
  ExternalFile ef;
  ef.tag = tag;
  const nlohmann::json* entries = &v;
  if (v.is_object()) {
    entries = &v.at("entries");
    if (v.contains("legacy")) {
      const auto& l = v["legacy"];
      ef.legacy = true;
      ef.legacy_tensor_alignment = l.value("tensor_alignment", uint32_t{16});
      ef.legacy_named_data_field = l.value("named_data_field", true);
    }
  }
  for (const auto& e : *entries) ef.entries.push_back(BlobOf(e, base, ef.tag + ".ptd "));
  return ef;
}

// The byte offset of `"key"` directly inside the top-level "program" object
// of a spec's text (0 if not found): where a rejected field is.
uint64_t ProgramKeyOffset(const std::string& text, const std::string& key) {
  const std::string quoted = "\"" + key + "\"";
  size_t depth = 0;
  bool in_program = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      size_t j = i + 1;
      while (j < text.size() && text[j] != '"') j += text[j] == '\\' ? 2 : 1;
      if (depth == 1) in_program = text.compare(i, j + 1 - i, "\"program\"") == 0;
      if (depth == 2 && in_program && text.compare(i, j + 1 - i, quoted) == 0) return i;
      i = j;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return 0;
}

// A spec's program is the package form: its segments and constant segment
// are laid out by `pack`. extract's program.json (the file as laid out) has
// them filled in, and packing it would add segments on top of them.
void RejectLaidOut(const prog::Program<>& p, const std::string& text, const std::string& base) {
  const char* field = nullptr;
  std::string found;
  if (p.segments().present() && !p.segments().elems().empty()) {
    field = "segments";
    found = std::to_string(p.segments().elems().size()) + " segments";
  } else if (p.constant_segment().table() &&
             prog::SubsegmentOffsets{*p.constant_segment().table()}.get_offsets().size() > 1) {
    // (offsets [0] alone is the empty placeholder: nothing laid out)
    field = "constant_segment";
    found = std::to_string(prog::SubsegmentOffsets{*p.constant_segment().table()}.get_offsets().size()) +
            " constant offsets";
  }
  if (!field) return;
  Finding f;
  f.code = "bad-spec";
  f.file = base;
  f.offset = ProgramKeyOffset(text, field);
  f.message = std::string("program.") + field +
              " is already laid out (pack places segments itself); this looks like extract's program.json: "
              "use the spec.json beside it";
  f.expected = std::string("no ") + field;
  f.found = found;
  throw Error(std::move(f));
}

}  // namespace

Package PackageFromSpecJson(const std::string& text, const std::string& base) {
  CheckJsonDepth(text, base, "bad-spec");
  nlohmann::json spec;
  Package pkg;
  if (auto fast = ParseSpecFast(text, base)) {
    spec = std::move(fast->first);
    pkg.program = std::move(fast->second);
  } else {
    spec = ParseSpec(text, base);
    pkg.program = ProgramFromJson(spec["program"], base);
  }
  prog::Program p{*pkg.program};
  RejectLaidOut(p, text, base);
  if (spec.contains("constants")) AddConstants(spec["constants"], base, p);
  if (spec.contains("delegate_data")) AddDelegateData(spec["delegate_data"], base, p);
  if (spec.contains("mutable_data")) {
    std::vector<Bytes> m;
    for (size_t i = 0; i < spec["mutable_data"].size(); ++i) {
      m.push_back(Data(spec["mutable_data"][i], base, "mutable_data[" + std::to_string(i) + "]"));
    }
    pkg.mutable_data = std::move(m);
  }
  if (spec.contains("named_data")) {
    for (const auto& e : spec["named_data"]) pkg.named_data.push_back(BlobOf(e, base, "named_data "));
  }
  if (spec.contains("external")) {
    for (auto it = spec["external"].begin(); it != spec["external"].end(); ++it) {
      pkg.external.push_back(ExternalOf(it.key(), it.value(), base));
    }
  }
  return pkg;
}

Package LoadSpec(const std::string& path) {
  const std::string text = ReadSmallFile(path);
  std::string base = path.find('/') == std::string::npos ? "." : path.substr(0, path.find_last_of('/'));
  try {
    return PackageFromSpecJson(text, base);
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's texts start with "[json.exception.type_error.302] "; keep only what it says.
    std::string what = e.what();
    auto close = what.find("] ");
    if (what.rfind("[json.exception", 0) == 0 && close != std::string::npos) what = what.substr(close + 2);
    BadSpec(path, "malformed spec: " + what);
  } catch (Error& e) {
    Finding f = e.finding();
    if (f.file.empty() || f.file == base) f.file = path;
    throw Error(std::move(f));
  }
}

BackendConfig LoadConfigFile(const std::string& path) {
  const std::string text = ReadSmallFile(path);
  CheckJsonDepth(text, path, "bad-config");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    Finding f;
    f.code = "bad-config";
    f.file = path;
    f.offset = e.byte;
    f.message = std::string("not valid JSON: ") + e.what();
    throw Error(std::move(f));
  }
  try {
    return ConfigFromJson(j);
  } catch (Error& e) {
    Finding f = e.finding();
    f.file = path;
    throw Error(std::move(f));
  }
}

}  // namespace ptepack
