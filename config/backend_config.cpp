#include "config/backend_config.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "config/numbers.h"
#include "ptepack/error.h"
#include "serialize/io/json_reader.h"

namespace ptepack {

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
  j["dedup_inline_delegate_data"] = c.dedup_inline_delegate_data;
  return j;
}

namespace {

const std::initializer_list<const char*> kConfigFields = {"extract_delegate_segments",
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
                                                          "legacy_extended_header",
                                                          "dedup_inline_delegate_data"};

// Typed reads of one config object's fields (a missing field keeps the
// default); errors name the field, through the JSON reader.
void ReadBool(const JsonField& j, const char* k, bool* out) {
  if (auto f = j.Find(k)) *out = f->Bool();
}
void ReadU64(const JsonField& j, const char* k, uint64_t* out) {
  if (auto f = j.Find(k)) *out = f->U64();
}
void ReadOptionalU64(const JsonField& j, const char* k, std::optional<uint64_t>* out) {
  if (auto f = j.Find(k, /*null_is_absent=*/true)) *out = f->U64();
}

// external_constants: true, false, or a tag (every constant goes to "<tag>.ptd").
void ReadExternalConstants(const JsonField& j, BackendConfig& c) {
  auto e = j.Find("external_constants");
  if (!e) return;
  if (e->is_bool()) {
    c.external_constants = e->Bool();
  } else if (e->is_string()) {
    c.external_constants = true;
    c.external_tag = e->String();
  } else {
    e->Fail("must be true, false or a tag string", "", e->Shown());
  }
}

void ReadEnums(const JsonField& j, BackendConfig& c) {
  if (auto m = j.Find("dynamic_memory_planning_mode")) {
    const std::string v = m->is_string() ? m->String() : "";
    if (v == "UPPER_BOUND") {
      c.dynamic_memory_planning_mode = DynamicMemoryPlanningMode::kUpperBound;
    } else if (v == "SYMBOLIC") {
      c.dynamic_memory_planning_mode = DynamicMemoryPlanningMode::kSymbolic;
    } else {
      m->Fail("must be \"UPPER_BOUND\" or \"SYMBOLIC\"", "", m->Shown());
    }
  }
  if (auto o = j.Find("flatbuffer_order")) {
    if (!o->is_string() || !ParseFlatbufferOrder(o->String(), &c.flatbuffer_order)) {
      o->Fail("must be \"flatc\", \"flatc-legacy\", \"python\" or \"python-2026\"", "", o->Shown());
    }
  }
}

// A config that reads but does not validate: the error names the field
// (and, in a config file, its offset).
void Revalidate(const BackendConfig& c, const JsonField& j) {
  try {
    c.Validate();
  } catch (const Error& e) {
    Finding f = e.finding();
    const std::string field = f.message.substr(0, f.message.find(':'));
    if (auto v = j.Find(field)) {
      if (auto off = v->Offset()) f.offset = off;
    }
    f.file = j.file();
    throw Error(std::move(f));
  }
}

}  // namespace

BackendConfig ConfigFromJsonField(const JsonField& j) {
  j.Object();
  j.RejectUnknown(kConfigFields);
  BackendConfig c;
  ReadBool(j, "extract_delegate_segments", &c.extract_delegate_segments);
  ReadU64(j, "segment_alignment", &c.segment_alignment);
  ReadOptionalU64(j, "constant_tensor_alignment", &c.constant_tensor_alignment);
  ReadOptionalU64(j, "delegate_alignment", &c.delegate_alignment);
  ReadExternalConstants(j, c);
  ReadBool(j, "external_mutable_weights", &c.external_mutable_weights);
  ReadBool(j, "emit_mutable_buffer_names", &c.emit_mutable_buffer_names);
  ReadBool(j, "emit_stacktrace", &c.emit_stacktrace);
  if (auto t = j.Find("external_tag")) c.external_tag = t->String();
  ReadU64(j, "ptd_segment_alignment", &c.ptd_segment_alignment);
  ReadEnums(j, c);
  ReadBool(j, "inline_constants", &c.inline_constants);
  ReadBool(j, "legacy_extended_header", &c.legacy_extended_header);
  ReadBool(j, "dedup_inline_delegate_data", &c.dedup_inline_delegate_data);
  Revalidate(c, j);
  return c;
}

BackendConfig ConfigFromJson(const nlohmann::json& j) {
  const JsonDocument doc = JsonDocument::OfValue(j, "", "bad-config");
  return ConfigFromJsonField(doc.root());
}

BackendConfig LoadConfigFile(const std::string& path) {
  const JsonDocument doc = JsonDocument::Load(path, "bad-config");
  return ConfigFromJsonField(doc.root());
}

std::string BackendConfig::ToJsonString(int indent) const { return ConfigToJson(*this).dump(indent); }

BackendConfig BackendConfig::FromJsonString(const std::string& json) {
  const JsonDocument doc(json, "config", "bad-config");
  return ConfigFromJsonField(doc.root());
}

}  // namespace ptepack
