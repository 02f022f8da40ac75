#include "config/backend_config.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "config/numbers.h"
#include "ptepack/error.h"

namespace ptepack {

bool IsPowerOfTwo(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

const char* FlatbufferOrderName(FlatbufferOrder o) {
  switch (o) {
    case FlatbufferOrder::kFlatc:
      return "flatc";
    case FlatbufferOrder::kFlatcLegacy:
      return "flatc-legacy";
    case FlatbufferOrder::kPythonObjectApi:
      return "python";
    case FlatbufferOrder::kPythonObjectApi2026:
      return "python-2026";
  }
  return "?";
}

bool ParseFlatbufferOrder(const std::string& name, FlatbufferOrder* out) {
  for (FlatbufferOrder o : {FlatbufferOrder::kFlatc, FlatbufferOrder::kFlatcLegacy, FlatbufferOrder::kPythonObjectApi,
                            FlatbufferOrder::kPythonObjectApi2026}) {
    if (name == FlatbufferOrderName(o)) {
      *out = o;
      return true;
    }
  }
  return false;
}

namespace {

[[noreturn]] void Bad(const std::string& field, const std::string& msg, const std::string& found) {
  Finding f;
  f.code = "bad-config";
  f.message = field + ": " + msg;
  f.found = found;
  throw Error(std::move(f));
}

// The message of every alignment option (config/numbers.h), with this file's code.
void CheckAlignment(const std::string& field, uint64_t v) { CheckAlignmentValue(field, v, "bad-config"); }

}  // namespace

void BackendConfig::Validate() const {
  CheckAlignment("segment_alignment", segment_alignment);
  if (constant_tensor_alignment) CheckAlignment("constant_tensor_alignment", *constant_tensor_alignment);
  if (delegate_alignment) CheckAlignment("delegate_alignment", *delegate_alignment);
  CheckAlignment("ptd_segment_alignment", ptd_segment_alignment);
  if (external_constants && external_constants_fn) {
    Bad("external_constants", "give either true or a tagging callback, not both", "both");
  }
  if ((external_constants || external_mutable_weights) && external_tag.empty()) {
    Bad("external_tag", "external data needs a non-empty file tag", "\"\"");
  }
  if (external_tag.find('/') != std::string::npos || external_tag == "." || external_tag == "..") {
    Bad("external_tag", "a tag names a file next to the output and cannot contain '/'", external_tag);
  }
  if (inline_constants && (external_constants || external_constants_fn)) {
    Bad("inline_constants", "legacy inline constants cannot be combined with external constants", "true");
  }
}

nlohmann::json ConfigToJson(const BackendConfig& c) {
  nlohmann::json j;
  j["extract_delegate_segments"] = c.extract_delegate_segments;
  j["segment_alignment"] = c.segment_alignment;
  j["constant_tensor_alignment"] =
      c.constant_tensor_alignment ? nlohmann::json(*c.constant_tensor_alignment) : nlohmann::json(nullptr);
  j["delegate_alignment"] = c.delegate_alignment ? nlohmann::json(*c.delegate_alignment) : nlohmann::json(nullptr);
  j["external_constants"] =
      c.external_constants_fn ? nlohmann::json("<callback>") : nlohmann::json(c.external_constants);
  j["external_mutable_weights"] = c.external_mutable_weights;
  j["emit_mutable_buffer_names"] = c.emit_mutable_buffer_names;
  j["emit_stacktrace"] = c.emit_stacktrace;
  j["dynamic_memory_planning_mode"] =
      c.dynamic_memory_planning_mode == DynamicMemoryPlanningMode::kUpperBound ? "UPPER_BOUND" : "SYMBOLIC";
  j["external_tag"] = c.external_tag;
  j["ptd_segment_alignment"] = c.ptd_segment_alignment;
  j["flatbuffer_order"] = FlatbufferOrderName(c.flatbuffer_order);
  j["inline_constants"] = c.inline_constants;
  j["legacy_extended_header"] = c.legacy_extended_header;
  return j;
}

namespace {

// Typed reads of one config object's fields; a missing field keeps the default.
class ConfigFields {
 public:
  explicit ConfigFields(const nlohmann::json& j) : j_(j) {}

  void Bool(const char* k, bool* out) const {
    if (!j_.contains(k)) return;
    if (!j_[k].is_boolean()) Bad(k, "must be true or false", j_[k].dump());
    *out = j_[k].get<bool>();
  }
  void U64(const char* k, uint64_t* out) const {
    if (!j_.contains(k)) return;
    if (!j_[k].is_number_unsigned()) Bad(k, "must be a non-negative integer", j_[k].dump());
    *out = j_[k].get<uint64_t>();
  }
  void OptionalU64(const char* k, std::optional<uint64_t>* out) const {
    if (!j_.contains(k) || j_[k].is_null()) return;
    uint64_t v = 0;
    U64(k, &v);
    *out = v;
  }
  // A string field, "" when absent or not a string.
  std::string Text(const char* k) const { return j_.contains(k) && j_[k].is_string() ? j_[k].get<std::string>() : ""; }

  void RejectUnknown() const {
    static const char* kKnown[] = {"extract_delegate_segments",
                                   "segment_alignment",
                                   "constant_tensor_alignment",
                                   "delegate_alignment",
                                   "external_constants",
                                   "external_mutable_weights",
                                   "emit_mutable_buffer_names",
                                   "emit_stacktrace",
                                   "dynamic_memory_planning_mode",
                                   "external_tag",
                                   "ptd_segment_alignment",
                                   "flatbuffer_order",
                                   "inline_constants",
                                   "legacy_extended_header"};
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      bool known = false;
      for (const char* k : kKnown) known = known || it.key() == k;
      if (!known) Bad(it.key(), "unknown config field", it.value().dump());
    }
  }

  // external_constants: true, false, or a tag (every constant goes to "<tag>.ptd").
  void ExternalConstants(BackendConfig& c) const {
    if (!j_.contains("external_constants")) return;
    const auto& e = j_["external_constants"];
    if (e.is_boolean()) {
      c.external_constants = e.get<bool>();
    } else if (e.is_string()) {
      c.external_constants = true;
      c.external_tag = e.get<std::string>();
    } else {
      Bad("external_constants", "must be true, false or a tag string", e.dump());
    }
  }

  void Enums(BackendConfig& c) const {
    if (j_.contains("dynamic_memory_planning_mode")) {
      const std::string m = Text("dynamic_memory_planning_mode");
      if (m == "UPPER_BOUND") {
        c.dynamic_memory_planning_mode = DynamicMemoryPlanningMode::kUpperBound;
      } else if (m == "SYMBOLIC") {
        c.dynamic_memory_planning_mode = DynamicMemoryPlanningMode::kSymbolic;
      } else {
        Bad("dynamic_memory_planning_mode", "must be \"UPPER_BOUND\" or \"SYMBOLIC\"",
            j_["dynamic_memory_planning_mode"].dump());
      }
    }
    if (j_.contains("flatbuffer_order") && !ParseFlatbufferOrder(Text("flatbuffer_order"), &c.flatbuffer_order)) {
      Bad("flatbuffer_order", "must be \"flatc\", \"flatc-legacy\", \"python\" or \"python-2026\"",
          j_["flatbuffer_order"].dump());
    }
  }

 private:
  const nlohmann::json& j_;
};

}  // namespace

BackendConfig ConfigFromJson(const nlohmann::json& j) {
  if (!j.is_object()) Bad("config", "must be a JSON object", j.type_name());
  const ConfigFields f(j);
  f.RejectUnknown();
  BackendConfig c;
  f.Bool("extract_delegate_segments", &c.extract_delegate_segments);
  f.U64("segment_alignment", &c.segment_alignment);
  f.OptionalU64("constant_tensor_alignment", &c.constant_tensor_alignment);
  f.OptionalU64("delegate_alignment", &c.delegate_alignment);
  f.ExternalConstants(c);
  f.Bool("external_mutable_weights", &c.external_mutable_weights);
  f.Bool("emit_mutable_buffer_names", &c.emit_mutable_buffer_names);
  f.Bool("emit_stacktrace", &c.emit_stacktrace);
  if (j.contains("external_tag")) {
    if (!j["external_tag"].is_string()) Bad("external_tag", "must be a string", j["external_tag"].dump());
    c.external_tag = j["external_tag"].get<std::string>();
  }
  f.U64("ptd_segment_alignment", &c.ptd_segment_alignment);
  f.Enums(c);
  f.Bool("inline_constants", &c.inline_constants);
  f.Bool("legacy_extended_header", &c.legacy_extended_header);
  c.Validate();
  return c;
}

std::string BackendConfig::ToJsonString(int indent) const { return ConfigToJson(*this).dump(indent); }

BackendConfig BackendConfig::FromJsonString(const std::string& json) {
  // Nesting is bounded before parsing, as for config files (256 levels).
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    const char ch = json[i];
    if (in_string) {
      if (ch == '\\')
        ++i;
      else if (ch == '"')
        in_string = false;
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '{' || ch == '[') {
      if (++depth > 256) Bad("config", "nested more than 256 levels deep", "offset " + std::to_string(i));
    } else if (ch == '}' || ch == ']') {
      --depth;
    }
  }
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw Error("bad-config", "config: not valid JSON");
  return ConfigFromJson(j);
}

}  // namespace ptepack
