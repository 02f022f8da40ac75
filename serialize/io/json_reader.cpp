#include "serialize/io/json_reader.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <utility>

#include "ptepack/error.h"
#include "serialize/io/file_io.h"
#include "serialize/io/json_limits.h"

namespace ptepack {
namespace {

// One step of a path: a member key, or an array index when `is_index`.
struct Step {
  bool is_index = false;
  std::string key;
  size_t index = 0;
};

// The steps from `root` down to `target` (a value inside it), found by
// walking the tree: only done when a failure is reported.
bool FindPath(const nlohmann::json& root, const nlohmann::json* target, std::vector<Step>& path) {
  if (&root == target) return true;
  if (root.is_object()) {
    for (auto it = root.begin(); it != root.end(); ++it) {
      path.push_back({false, it.key(), 0});
      if (FindPath(it.value(), target, path)) return true;
      path.pop_back();
    }
  } else if (root.is_array()) {
    for (size_t i = 0; i < root.size(); ++i) {
      path.push_back({true, {}, i});
      if (FindPath(root[i], target, path)) return true;
      path.pop_back();
    }
  }
  return false;
}

bool PlainKey(const std::string& k) {
  if (k.empty()) return false;
  for (char c : k) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

std::string Render(const std::vector<Step>& path) {
  std::string s;
  for (const Step& st : path) {
    if (st.is_index) {
      s += "[" + std::to_string(st.index) + "]";
    } else if (PlainKey(st.key)) {
      s += (s.empty() ? "" : ".") + st.key;
    } else {
      s += "[" + nlohmann::json(st.key).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "]";
    }
  }
  return s;
}

// ---- Where a path is in the text (the text parsed, so it is valid JSON) ----

size_t SkipWs(const std::string& t, size_t i) {
  while (i < t.size() && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r')) ++i;
  return i;
}

// `i` at the opening quote; returns the index after the closing one.
size_t SkipString(const std::string& t, size_t i) {
  for (++i; i < t.size(); ++i) {
    if (t[i] == '\\') {
      ++i;
    } else if (t[i] == '"') {
      return i + 1;
    }
  }
  return t.size();
}

size_t SkipValue(const std::string& t, size_t i) {
  if (i >= t.size()) return i;
  if (t[i] == '"') return SkipString(t, i);
  if (t[i] == '{' || t[i] == '[') {
    size_t depth = 0;
    for (; i < t.size(); ++i) {
      const char c = t[i];
      if (c == '"') {
        i = SkipString(t, i) - 1;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) return i + 1;
      }
    }
    return i;
  }
  while (i < t.size() && !std::strchr(",]} \t\n\r", t[i])) ++i;
  return i;
}

std::string KeyAt(const std::string& t, size_t start, size_t end) {
  std::string raw = t.substr(start + 1, end - start - 2);
  if (raw.find('\\') == std::string::npos) return raw;
  nlohmann::json k = nlohmann::json::parse(t.substr(start, end - start), nullptr, false);
  return k.is_string() ? k.get<std::string>() : raw;
}

// The offset of the value at `path` (the deepest step found: a missing
// step leaves the offset of its container). Duplicate keys: the last one,
// as the parser keeps it.
uint64_t Locate(const std::string& t, const std::vector<Step>& path) {
  size_t i = SkipWs(t, t.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0);
  for (const Step& st : path) {
    if (i >= t.size()) return i;
    std::optional<size_t> found;
    if (!st.is_index && t[i] == '{') {
      size_t k = SkipWs(t, i + 1);
      while (k < t.size() && t[k] == '"') {
        const size_t key_end = SkipString(t, k);
        const bool match = KeyAt(t, k, key_end) == st.key;
        k = SkipWs(t, key_end);
        if (k < t.size() && t[k] == ':') k = SkipWs(t, k + 1);
        if (match) found = k;
        k = SkipWs(t, SkipValue(t, k));
        if (k < t.size() && t[k] == ',') k = SkipWs(t, k + 1);
      }
    } else if (st.is_index && t[i] == '[') {
      size_t k = SkipWs(t, i + 1);
      for (size_t n = 0; k < t.size() && t[k] != ']'; ++n) {
        if (n == st.index) {
          found = k;
          break;
        }
        k = SkipWs(t, SkipValue(t, k));
        if (k < t.size() && t[k] == ',') k = SkipWs(t, k + 1);
      }
    }
    if (!found) return i;
    i = *found;
  }
  return i;
}

[[noreturn]] void Throw(const JsonDocument& doc, std::optional<uint64_t> offset, const std::string& message,
                        const std::string& expected = {}, const std::string& found = {}) {
  throw Error(doc.code(), message, doc.file(), offset, expected, found);
}

const char* KindOf(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::object:
      return "an object";
    case nlohmann::json::value_t::array:
      return "an array";
    case nlohmann::json::value_t::string:
      return "a string";
    case nlohmann::json::value_t::boolean:
      return "a boolean";
    case nlohmann::json::value_t::number_float:
      return "a fractional number";
    default:
      return j.is_number_unsigned() ? "an unsigned integer" : "a negative integer";
  }
}

// nlohmann's "at line L, column C" in `what`, counted again in `whole` after
// `chars_read` characters (its count: a newline starts column 0 of the next
// line; at the end, one past the text).
std::string LineColumnIn(std::string what, std::string_view whole, uint64_t chars_read) {
  const size_t at = what.find("at line ");
  const size_t colon = at == std::string::npos ? std::string::npos : what.find(':', at);
  if (colon == std::string::npos) return what;
  const size_t end = static_cast<size_t>(std::min<uint64_t>(chars_read, whole.size()));
  const std::string_view read = whole.substr(0, end);
  const size_t nl = read.rfind('\n');
  const size_t line_start = nl == std::string_view::npos ? 0 : nl + 1;
  const uint64_t line = 1 + static_cast<uint64_t>(std::count(read.begin(), read.end(), '\n'));
  return what.replace(at, colon - at,
                      "at line " + std::to_string(line) + ", column " + std::to_string(chars_read - line_start));
}

}  // namespace

JsonDocument::JsonDocument(std::string text, std::string file, std::string code, uint64_t base_offset)
    : JsonDocument(std::move(text), std::move(file), std::move(code), base_offset, Gap{}) {}

JsonDocument JsonDocument::WithGap(std::string text, std::string file, std::string code, uint64_t gap_at,
                                   uint64_t gap_size, std::string_view whole) {
  JsonDocument doc(std::move(text), std::move(file), std::move(code), 0, Gap{gap_at, gap_size, whole});
  doc.gap_.whole = {};
  return doc;
}

JsonDocument::JsonDocument(std::string text, std::string file, std::string code, uint64_t base_offset, Gap gap)
    : text_(std::move(text)), file_(std::move(file)), code_(std::move(code)), base_offset_(base_offset), gap_(gap) {
  try {
    CheckJsonDepth(text_, file_, code_);
  } catch (const Error& e) {
    Finding f = e.finding();
    if (f.offset) f.offset = InFile(*f.offset);
    throw Error(std::move(f));
  }
  try {
    json_ = nlohmann::json::parse(text_);
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's texts start with "[json.exception.parse_error.101] parse error at line 1, column 2: ".
    std::string what = e.what();
    auto close = what.find("] ");
    if (what.rfind("[json.exception", 0) == 0 && close != std::string::npos) what = what.substr(close + 2);
    std::optional<uint64_t> at;
    if (const auto* pe = dynamic_cast<const nlohmann::json::parse_error*>(&e)) {
      at = InFile(pe->byte > 0 ? pe->byte - 1 : 0);
      if (!gap_.whole.empty()) what = LineColumnIn(std::move(what), gap_.whole, pe->byte > 0 ? *at + 1 : 0);
    }
    Throw(*this, at, "not valid JSON: " + what);
  }
}

JsonDocument::JsonDocument(ValueTag, nlohmann::json value, std::string file, std::string code)
    : file_(std::move(file)), code_(std::move(code)), json_(std::move(value)), has_text_(false) {}

JsonDocument JsonDocument::OfValue(nlohmann::json value, std::string file, std::string code) {
  return JsonDocument(ValueTag{}, std::move(value), std::move(file), std::move(code));
}

JsonDocument JsonDocument::Load(const std::string& path, const std::string& code, uint64_t max_bytes) {
  return JsonDocument(ReadSmallFile(path, max_bytes), path, code);
}

JsonField JsonDocument::root() const { return JsonField(this, &json_); }

std::string JsonField::Path() const {
  std::vector<Step> path;
  FindPath(doc_->json_, j_, path);
  return Render(path);
}

std::optional<uint64_t> JsonField::Offset() const {
  if (!doc_->has_text_) return std::nullopt;
  std::vector<Step> path;
  FindPath(doc_->json_, j_, path);
  return doc_->InFile(Locate(doc_->text_, path));
}

std::string JsonField::Shown() const {
  std::string s = j_->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

void JsonField::Fail(const std::string& message, const std::string& expected, const std::string& found) const {
  const std::string path = Path();
  Throw(*doc_, Offset(), (path.empty() ? "top level" : path) + ": " + message, expected, found);
}

void JsonField::FailType(const char* wanted) const {
  Fail(std::string("must be ") + wanted, "", Shown() + ", " + KindOf(*j_));
}

JsonField JsonField::operator[](const std::string& key) const {
  if (auto f = Find(key)) return *f;
  const std::string path = Path();
  std::vector<Step> steps{{false, key, 0}};
  Throw(*doc_, Offset(), (path.empty() ? "" : path + ".") + Render(steps) + ": required field is missing");
}

std::optional<JsonField> JsonField::Find(const std::string& key, bool null_is_absent) const {
  Object();
  auto it = j_->find(key);
  if (it == j_->end() || (null_is_absent && it->is_null())) return std::nullopt;
  return JsonField(doc_, &*it);
}

std::vector<std::pair<std::string, JsonField>> JsonField::Members() const {
  Object();
  std::vector<std::pair<std::string, JsonField>> out;
  for (auto it = j_->begin(); it != j_->end(); ++it) out.emplace_back(it.key(), JsonField(doc_, &it.value()));
  return out;
}

void JsonField::RejectUnknown(std::initializer_list<const char*> known) const {
  for (const auto& [key, value] : Members()) {
    bool ok = false;
    for (const char* k : known) ok = ok || key == k;
    if (!ok) value.Fail("unknown field", "", value.Shown());
  }
}

std::vector<JsonField> JsonField::Elements() const {
  Array();
  std::vector<JsonField> out;
  out.reserve(j_->size());
  for (const auto& e : *j_) out.push_back(JsonField(doc_, &e));
  return out;
}

JsonField JsonField::At(size_t i) const {
  Array();
  if (i >= j_->size()) {
    Fail("has no element " + std::to_string(i), "more than " + std::to_string(i) + " elements",
         std::to_string(j_->size()));
  }
  return JsonField(doc_, &(*j_)[i]);
}

size_t JsonField::size() const { return j_->is_array() || j_->is_object() ? j_->size() : 0; }

const JsonField& JsonField::Object() const {
  if (!j_->is_object()) FailType("an object");
  return *this;
}

const JsonField& JsonField::Array() const {
  if (!j_->is_array()) FailType("an array");
  return *this;
}

std::string JsonField::String() const {
  if (!j_->is_string()) FailType("a string");
  return j_->get<std::string>();
}

bool JsonField::Bool() const {
  if (!j_->is_boolean()) FailType("true or false");
  return j_->get<bool>();
}

uint64_t JsonField::U64(uint64_t max) const {
  if (j_->is_number_integer() && !j_->is_number_unsigned()) {
    Fail("must not be negative", "an integer >= 0", Shown());
  }
  if (j_->is_number_float()) Fail("must be a whole number", "an integer", Shown());
  if (!j_->is_number_unsigned()) FailType("an integer");
  const uint64_t v = j_->get<uint64_t>();
  if (v > max) Fail("is too large", "at most " + std::to_string(max), Shown());
  return v;
}

int64_t JsonField::I64(int64_t min, int64_t max) const {
  if (j_->is_number_float()) Fail("must be a whole number", "an integer", Shown());
  if (!j_->is_number_integer()) FailType("an integer");
  if (j_->is_number_unsigned() && j_->get<uint64_t>() > static_cast<uint64_t>(max)) {
    Fail("is out of range", std::to_string(min) + ".." + std::to_string(max), Shown());
  }
  const int64_t v = j_->get<int64_t>();
  if (v < min || v > max) {
    Fail("is out of range", std::to_string(min) + ".." + std::to_string(max), Shown());
  }
  return v;
}

double JsonField::Number() const {
  if (!j_->is_number()) FailType("a number");
  return j_->get<double>();
}

std::vector<int64_t> JsonField::Ints(int64_t min, int64_t max) const {
  std::vector<int64_t> out;
  for (const JsonField& e : Elements()) out.push_back(e.I64(min, max));
  return out;
}

}  // namespace ptepack
