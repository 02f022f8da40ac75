// The one reader of every JSON document ptepack reads: configs, pack specs,
// checksum manifests, bundle indexes, BundledProgram tests.json.
//
//   JsonDocument doc = JsonDocument::Load(path, "bad-manifest");
//   JsonField files = doc.root()["files"];           // required: missing is an error
//   files.At(0)["name"].String();                    // element 0 (an array of at least 1)
//   for (const JsonField& f : files.Elements()) {
//     std::string name = f["name"].String();
//     uint64_t size = f["size"].U64();
//     if (auto o = f.Find("offset")) ... o->U64() ...
//   }
//
// The text is checked for nesting depth (kMaxJsonDepth) before it is parsed.
// Every failure -- a syntax error, a missing field, a value of the wrong type
// or out of range, an unknown field -- throws ptepack::Error with the
// document's code, its file, the byte offset of the value at fault in the
// text, and a message that starts with the field's path:
//
//   index.json: error at offset 57 (0x39): files[0].size: must be an
//   unsigned integer (found "12") [bad-bundle]
//
// Nothing else escapes: no nlohmann exception reaches the caller. A field
// knows only where it is in its document, which must outlive it; its path
// and offset are worked out when a failure is reported.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ptepack {

class JsonField;

class JsonDocument {
 public:
  // Parses `text`. `file` names the document in errors; `code` is the error
  // code of every failure ("bad-config", "bad-spec", ...); `base_offset` is
  // where the text starts in `file` (a bundle's index), added to offsets.
  JsonDocument(std::string text, std::string file, std::string code, uint64_t base_offset = 0);
  // Parses `text`, which is `whole` (`file`'s text) with `gap_size` bytes
  // cut out at `gap_at` (a spec whose program was read separately): offsets
  // in errors at or past the cut are moved back to where they are in `file`,
  // and a syntax error's line and column are counted in `whole` (read only
  // here).
  static JsonDocument WithGap(std::string text, std::string file, std::string code, uint64_t gap_at, uint64_t gap_size,
                              std::string_view whole);
  // A value parsed elsewhere (a Python dict, a config edited in memory):
  // failures name the field but no offset.
  static JsonDocument OfValue(nlohmann::json value, std::string file, std::string code);
  // Reads `path` (a regular file of at most `max_bytes`) and parses it.
  static JsonDocument Load(const std::string& path, const std::string& code, uint64_t max_bytes = uint64_t{256} << 20);
  JsonDocument(const JsonDocument&) = delete;
  JsonDocument& operator=(const JsonDocument&) = delete;
  JsonDocument(JsonDocument&&) = default;

  JsonField root() const;
  const std::string& file() const { return file_; }
  const std::string& code() const { return code_; }
  const std::string& text() const { return text_; }

 private:
  friend class JsonField;
  struct ValueTag {};
  JsonDocument(ValueTag, nlohmann::json value, std::string file, std::string code);
  struct Gap {
    uint64_t at = UINT64_MAX;
    uint64_t size = 0;
    std::string_view whole;  // during construction only
  };
  JsonDocument(std::string text, std::string file, std::string code, uint64_t base_offset, Gap gap);
  // Where byte `at` of text_ is in the file.
  uint64_t InFile(uint64_t at) const { return base_offset_ + at + (at >= gap_.at ? gap_.size : 0); }
  std::string text_;
  std::string file_;
  std::string code_;
  nlohmann::json json_;
  bool has_text_ = true;
  uint64_t base_offset_ = 0;
  Gap gap_;
};

class JsonField {
 public:
  // --- Objects ---
  // A required field: its absence is an error naming it.
  JsonField operator[](const std::string& key) const;
  JsonField operator[](const char* key) const { return (*this)[std::string(key)]; }
  // An optional field: nullopt when absent (or null, when `null_is_absent`).
  std::optional<JsonField> Find(const std::string& key, bool null_is_absent = false) const;
  bool Has(const std::string& key) const { return Find(key).has_value(); }
  // (key, value) of every member, in key order (sorted); requires an object.
  std::vector<std::pair<std::string, JsonField>> Members() const;
  // Fails naming the first member whose key is not in `known`; requires an object.
  void RejectUnknown(std::initializer_list<const char*> known) const;

  // --- Arrays ---
  // Every element; requires an array.
  std::vector<JsonField> Elements() const;
  // Element `i`; requires an array with more than i elements.
  JsonField At(size_t i) const;
  size_t size() const;  // elements of an array or members of an object (0 otherwise)

  // --- Values: each fails naming the field when the type or range is wrong ---
  std::string String() const;
  bool Bool() const;
  uint64_t U64(uint64_t max = UINT64_MAX) const;
  int64_t I64(int64_t min = INT64_MIN, int64_t max = INT64_MAX) const;
  double Number() const;  // any JSON number
  // An array of integers in [min, max].
  std::vector<int64_t> Ints(int64_t min = INT64_MIN, int64_t max = INT64_MAX) const;
  // Requirements on the kind, for a value read as a whole.
  const JsonField& Object() const;
  const JsonField& Array() const;

  bool is_null() const { return j_->is_null(); }
  bool is_object() const { return j_->is_object(); }
  bool is_array() const { return j_->is_array(); }
  bool is_string() const { return j_->is_string(); }
  bool is_bool() const { return j_->is_boolean(); }
  bool is_number() const { return j_->is_number(); }
  // The value itself, for code that hands it on (printing, another parser).
  const nlohmann::json& json() const { return *j_; }

  // "files[2].regions[0].xxh3" ("" for the root).
  std::string Path() const;
  // The byte offset of this value in the document's text (nullopt for a
  // document given as a value).
  std::optional<uint64_t> Offset() const;
  // Throws the document's error at this value: "PATH: message".
  [[noreturn]] void Fail(const std::string& message, const std::string& expected = {},
                         const std::string& found = {}) const;
  // The document's file ("" for a value given in memory).
  const std::string& file() const { return doc_->file(); }
  // The value as the message shows it (shortened JSON text).
  std::string Shown() const;

 private:
  friend class JsonDocument;
  JsonField(const JsonDocument* doc, const nlohmann::json* j) : doc_(doc), j_(j) {}
  [[noreturn]] void FailType(const char* wanted) const;
  const JsonDocument* doc_;
  const nlohmann::json* j_;
};

}  // namespace ptepack
