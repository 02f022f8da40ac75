#include "serialize/model/spec.h"

#include <flatbuffers/idl.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
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
#include "serialize/format/program_verify.h"
#include "serialize/io/file_io.h"
#include "serialize/io/json_limits.h"
#include "serialize/io/json_reader.h"

namespace ptepack {

namespace {

[[noreturn]] void BadSpec(const std::string& where, const std::string& msg) { throw Error("bad-spec", msg, where); }

// Each data file is mapped once, however many blobs it holds.
std::shared_ptr<MappedFile> MapOnce(const std::string& path) {
  thread_local std::map<std::string, std::weak_ptr<MappedFile>> cache;
  if (auto m = cache[path].lock()) return m;
  auto m = MappedFile::Open(path);
  cache[path] = m;
  return m;
}

// Where a spec's data files are: beside it on disk, or given in memory.
struct SpecContext {
  std::string base;
  SpecFileResolver files;
};

// DATA: {"file": PATH[, "offset": N, "size": N]}, {"hex": "..."} or {"zeros": N}.
Bytes Data(const JsonField& j, const SpecContext& ctx) {
  j.Object();
  if (auto file = j.Find("file")) {
    std::string p = file->String();
    Bytes whole;
    if (ctx.files) {
      std::optional<Bytes> b = ctx.files(p);
      if (!b) file->Fail("no such data file", "", p);
      whole = std::move(*b);
    } else {
      if (p.empty() || p[0] != '/') p = ctx.base + "/" + p;
      whole = MapOnce(p)->All();
    }
    const uint64_t off = j.Has("offset") ? j["offset"].U64() : 0;
    const uint64_t size = j.Has("size") ? j["size"].U64() : (whole.size >= off ? whole.size - off : 0);
    if (off > whole.size || size > whole.size - off) {
      j.Fail("range " + std::to_string(off) + "+" + std::to_string(size) + " is outside " + p, "",
             std::to_string(whole.size) + " bytes");
    }
    return whole.Sub(off, size);
  }
  if (auto hex = j.Find("hex")) {
    const std::string h = hex->String();
    if (h.size() % 2) hex->Fail("hex string has an odd length");
    std::vector<uint8_t> v(h.size() / 2);
    for (size_t i = 0; i < h.size(); ++i) {
      const char c = h[i];
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) hex->Fail("bad hex digit at character " + std::to_string(i));
      v[i / 2] = static_cast<uint8_t>(v[i / 2] << 4 | d);
    }
    return Bytes::Own(std::move(v));
  }
  if (auto zeros = j.Find("zeros")) return Bytes::Zeros(zeros->U64(Bytes::kMaxZeros));
  j.Fail("expected {\"file\": ...}, {\"hex\": ...} or {\"zeros\": N}");
}

// The program `parser` has parsed, verified, as a tree decoded on demand.
std::shared_ptr<fb::Table> ProgramFromParser(flatbuffers::Parser& parser, const std::string& base) {
  std::vector<uint8_t> fbb(parser.builder_.GetBufferPointer(),
                           parser.builder_.GetBufferPointer() + parser.builder_.GetSize());
  // FlatBuffers' default limits (64 levels, a million tables), as the reader's.
  constexpr uint32_t kMaxDepth = 64, kMaxTables = 1'000'000;
  switch (VerifyProgramBytes(fbb.data(), fbb.size(), kMaxDepth, kMaxTables, true)) {
    case ProgramVerdict::kValid:
      break;
    case ProgramVerdict::kTooManyTables:
      BadSpec(base, "the program has more than " + std::to_string(kMaxTables) +
                        " tables: FlatBuffers' verifier limit, which ExecuTorch's runtime applies too when it "
                        "verifies a program (Verification::InternalConsistency), and ptepack's reader when it "
                        "checks what it wrote");
    case ProgramVerdict::kInvalid:
      BadSpec(base, "program failed verification after parsing");
  }
  Bytes owned = Bytes::Own(std::move(fbb));
  return fb::DecodeOnDemand(prog::S(), owned.data, owned.size, owned.owner);  // as the direct reader's
}

// The spec's "program" (program.fbs as JSON) as a verified tree: read
// directly (json_tree.h) where it can be, else by FlatBuffers' parser.
std::shared_ptr<fb::Table> ProgramFromJson(const JsonField& program, const std::string& file) {
  program.Object();
  std::string program_json = program.json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (auto tree = fb::TreeFromJson(fb::ProgramSchema(), program_json)) return tree;
  auto parser = ProgramJsonParser();
  if (!parser->Parse(program_json.c_str())) program.Fail("does not match program.fbs: " + parser->error_);
  return ProgramFromParser(*parser, file);
}

// One pass over a spec's text (strings skipped as ScanJsonTokens does, no
// parse): throws CheckJsonDepth's error where nesting first exceeds
// kMaxJsonDepth, and returns the byte range of the value of the top-level key
// "program" if the text is an object with exactly one such key whose value is
// an object with balanced braces. The program is then read by itself, and
// nlohmann::json reads only the rest. Anything unusual: nullopt, and the old
// path runs.
//
// The program is read where the scan finds it (fb::TreeFromJsonPrefix, into
// *program), and the scan goes on after its end: its text (nearly all of a
// spec) is read once, not scanned first. A program that reader takes nests
// no deeper than 2 x 64 tables + 64 skipped levels, far under kMaxJsonDepth,
// so no depth error is missed; one it does not take is scanned as before.
std::optional<std::pair<size_t, size_t>> ScanSpec(const std::string& text, const std::string& name,
                                                  std::shared_ptr<fb::Table>* program) {
  std::optional<std::pair<size_t, size_t>> span;
  size_t depth = 0;
  bool want_value = false;  // just saw the top-level key "program" and its colon
  bool after_program_key = false;
  bool unusual = false;
  const char* const t = text.data();
  const size_t n = text.size();
  // Bytes that end a run of skipped ones: outside strings, a quote or a
  // bracket (anything else only matters right after the key "program", the
  // start of the text, scanned a token at a time); inside, a quote or a
  // backslash.
  static const auto kStops = [] {
    std::array<std::array<bool, 256>, 2> stop{};
    for (unsigned char c : {'"', '{', '[', '}', ']'}) stop[0][c] = true;
    for (unsigned char c : {'"', '\\'}) stop[1][c] = true;
    return stop;
  }();
  const auto& token_stop = kStops[0];
  const auto& string_stop = kStops[1];
  for (size_t i = 0; i < n; ++i) {
    if (!after_program_key && !want_value) {
      while (i < n && !token_stop[static_cast<unsigned char>(t[i])]) ++i;
      if (i == n) break;
    }
    const char c = t[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    size_t end = i + 1;
    if (c == '"') {
      while (true) {
        while (end < n && !string_stop[static_cast<unsigned char>(t[end])]) ++end;
        if (end >= n || t[end] == '"') break;
        end += 2;  // a backslash and the byte it escapes
      }
      end = std::min(end + 1, n);
    }
    if ((c == '[' || c == '{') && ++depth > kMaxJsonDepth) CheckJsonDepth(text, name, "bad-spec");  // throws
    if (!unusual) {
      if (after_program_key) {
        after_program_key = false;
        want_value = c == ':';
        unusual = !want_value;
      } else {
        if (want_value) {
          want_value = false;
          unusual = c != '{';
          if (!unusual) {
            span = std::make_pair(i, size_t{0});
            size_t len = 0;
            if (auto tree = fb::TreeFromJsonPrefix(fb::ProgramSchema(), std::string_view(t + i, n - i), &len)) {
              *program = std::move(tree);
              span->second = i + len;  // just past its closing brace, at depth 1 again
              --depth;
              i += len - 1;
              continue;
            }
          }
        }
        if (!unusual && c == '"' && depth == 1 && end - i == 9 && std::memcmp(t + i, "\"program\"", 9) == 0) {
          if (span) unusual = true;  // a second "program": nlohmann keeps the last one
          after_program_key = true;
        }
      }
    }
    if (c == '}' || c == ']') {
      if (depth == 0) {
        unusual = true;
      } else {
        --depth;
        if (depth == 1 && span && span->second == 0 && c == '}') span->second = i + 1;
      }
    }
    i = end - 1;
  }
  if (unusual || !span || span->second == 0) return std::nullopt;
  return span;
}

// Fast path: the program text is read by itself (json_tree.h, else
// FlatBuffers' parser) and the JSON reader reads only the rest (the
// program's inside cut out; JsonDocument::WithGap moves offsets in errors
// back to those of the text). Any problem with the program: nullopt, and the
// full path runs, so its errors read as they always did.
struct ParsedSpec {
  std::unique_ptr<JsonDocument> doc;
  std::shared_ptr<fb::Table> program;
};

std::optional<ParsedSpec> ParseSpecFast(const std::string& text, const std::string& file,
                                        std::optional<std::pair<size_t, size_t>> span,
                                        std::shared_ptr<fb::Table> scanned) {
  if (!span) return std::nullopt;
  const std::string_view program(text.data() + span->first, span->second - span->first);
  ParsedSpec out;
  if (scanned) {
    out.program = std::move(scanned);  // ScanSpec read it (TreeFromJson would give the same tree)
  } else {
    auto parser = ProgramJsonParser();
    if (!parser->Parse(std::string(program).c_str())) return std::nullopt;
    out.program = ProgramFromParser(*parser, file);
  }
  // The rest: the text with the program's inside cut out ("program": {}).
  const size_t inside = span->first + 1, inside_size = span->second - 1 - inside;
  std::string rest;
  rest.reserve(text.size() - inside_size);
  rest.append(text, 0, inside).append(text, span->second - 1, std::string::npos);
  out.doc = std::make_unique<JsonDocument>(
      JsonDocument::WithGap(std::move(rest), file, "bad-spec", inside, inside_size, text));
  return out;
}

// "constants" -> constant_buffer (after the reserved empty entry 0).
void AddConstants(const JsonField& constants, const SpecContext& ctx, prog::Program<>& p) {
  auto& cb = p.constant_buffer();
  if (!cb.elems().empty()) constants.Fail("give constants either in program.constant_buffer or in \"constants\"");
  std::vector<fb::Value> bufs;
  auto placeholder = prog::Buffer<>::New();
  prog::Buffer{*placeholder}.set_storage(Bytes{});
  bufs.push_back(fb::TableValue(placeholder));
  for (const JsonField& c : constants.Elements()) {
    auto b = prog::Buffer<>::New();
    prog::Buffer{*b}.set_storage(Data(c, ctx));
    bufs.push_back(fb::TableValue(b));
  }
  cb = fb::OffsetVector(std::move(bufs), reflection::Obj);
}

// "delegate_data" -> backend_delegate_data.
void AddDelegateData(const JsonField& data, const SpecContext& ctx, prog::Program<>& p) {
  std::vector<fb::Value> items;
  for (const JsonField& e : data.Elements()) {
    auto d = prog::BackendDelegateInlineData<>::New();
    prog::BackendDelegateInlineData{*d}.set_data(Data(e, ctx));
    items.push_back(fb::TableValue(d));
  }
  p.backend_delegate_data() = fb::OffsetVector(std::move(items), reflection::Obj);
}

// {"scalar_type": N, "sizes": [...], "dim_order": [...]}: a .ptd entry's
// flat_tensor_flatbuffer.TensorLayout.
std::shared_ptr<fb::Table> LayoutOf(const JsonField& j) {
  auto tl = ptd::TensorLayout<>::New();
  ptd::TensorLayout layout{*tl};
  layout.set_scalar_type(static_cast<executorch_flatbuffer::ScalarType>(j["scalar_type"].I64(-128, 127)));
  std::vector<int32_t> sizes;
  for (int64_t v : j["sizes"].Ints(INT32_MIN, INT32_MAX)) sizes.push_back(static_cast<int32_t>(v));
  layout.set_sizes(sizes);
  std::vector<uint8_t> dims;
  for (int64_t v : j["dim_order"].Ints(0, 255)) dims.push_back(static_cast<uint8_t>(v));
  layout.set_dim_order(Bytes::Own(std::move(dims)));
  return tl;
}

NamedBlob BlobOf(const JsonField& e, const SpecContext& ctx) {
  NamedBlob b;
  b.key = e["key"].String();
  if (auto a = e.Find("alignment")) b.alignment = a->U64();
  b.data = Data(e, ctx);
  if (auto l = e.Find("tensor_layout")) b.tensor_layout = LayoutOf(*l);
  if (auto l = e.Find("legacy_tensor")) b.legacy_tensor = l->Bool();
  return b;
}

// "external": {"TAG": [ENTRY, ...]}, or {"TAG": {"legacy": {...}, "entries":
// [...]}} for a .ptd in the FlatTensor layout of before June 2025.
ExternalFile ExternalOf(const std::string& tag, const JsonField& v, const SpecContext& ctx) {
  ExternalFile ef;
  ef.tag = tag;
  JsonField entries = v;
  if (v.is_object()) {
    entries = v["entries"];
    if (auto l = v.Find("legacy")) {
      ef.legacy = true;
      ef.legacy_tensor_alignment = 16;
      ef.legacy_named_data_field = true;
      if (auto a = l->Find("tensor_alignment")) ef.legacy_tensor_alignment = static_cast<uint32_t>(a->U64(UINT32_MAX));
      if (auto n = l->Find("named_data_field")) ef.legacy_named_data_field = n->Bool();
    }
  }
  for (const JsonField& e : entries.Elements()) ef.entries.push_back(BlobOf(e, ctx));
  return ef;
}

// The byte offset of `"key"` directly inside the top-level "program" object
// of a spec's text (0 if not found): where a rejected field is.
uint64_t ProgramKeyOffset(const std::string& text, const std::string& key) {
  const std::string quoted = "\"" + key + "\"";
  size_t depth = 0;
  bool in_program = false;
  uint64_t found = 0;
  ScanJsonTokens(text, [&](size_t at, size_t end) {
    const char c = text[at];
    if (c == '"') {
      if (depth == 1) in_program = text.compare(at, end - at, "\"program\"") == 0;
      if (depth == 2 && in_program && text.compare(at, end - at, quoted) == 0) found = at;
      return found == 0;
    }
    if (c == '{' || c == '[') ++depth;
    if ((c == '}' || c == ']') && depth > 0) --depth;
    return true;
  });
  return found;
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
  throw Error("bad-spec",
              std::string("program.") + field +
                  " is already laid out (pack places segments itself); this looks like extract's program.json: "
                  "use the spec.json beside it",
              base, ProgramKeyOffset(text, field), std::string("no ") + field, found);
}

}  // namespace

PackageParts PackageFromSpecJson(const std::string& text, const std::string& base, const std::string& file,
                                 const SpecFileResolver& files) {
  const std::string name = file.empty() ? base : file;
  const SpecContext ctx{base, files};
  std::shared_ptr<fb::Table> scanned;
  auto span = ScanSpec(text, name, &scanned);  // checks the depth too
  std::unique_ptr<JsonDocument> doc;
  PackageParts pkg;
  if (auto fast = ParseSpecFast(text, name, span, std::move(scanned))) {
    doc = std::move(fast->doc);
    pkg.program = std::move(fast->program);
  } else {
    doc = std::make_unique<JsonDocument>(text, name, "bad-spec");
    if (!doc->root().is_object() || !doc->root().Has("program")) {
      doc->root().Fail("a spec is an object with a \"program\"");
    }
    pkg.program = ProgramFromJson(doc->root()["program"], name);
  }
  const JsonField spec = doc->root();
  prog::Program p{*pkg.program};
  RejectLaidOut(p, text, name);
  if (auto c = spec.Find("constants")) AddConstants(*c, ctx, p);
  if (auto d = spec.Find("delegate_data")) AddDelegateData(*d, ctx, p);
  if (auto m = spec.Find("mutable_data")) {
    std::vector<Bytes> data;
    for (const JsonField& e : m->Elements()) data.push_back(Data(e, ctx));
    pkg.mutable_data = std::move(data);
  }
  if (auto n = spec.Find("named_data")) {
    for (const JsonField& e : n->Elements()) pkg.named_data.push_back(BlobOf(e, ctx));
  }
  if (auto x = spec.Find("external")) {
    for (const auto& [tag, v] : x->Members()) pkg.external.push_back(ExternalOf(tag, v, ctx));
  }
  return pkg;
}

PackageParts LoadSpec(const std::string& path) {
  const std::string text = ReadSmallFile(path);
  std::string base = path.find('/') == std::string::npos ? "." : path.substr(0, path.find_last_of('/'));
  return PackageFromSpecJson(text, base, path);
}

}  // namespace ptepack
