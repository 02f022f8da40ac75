// inspect's document for .bpte files (see bpte.h).
#include "program_generated.h"
#include "serialize/bpte/bpte.h"
#include "serialize/read/describe.h"

namespace ptepack::bpte {
namespace efb = executorch_flatbuffer;

namespace {

std::string DtypeName(int t) {
  const char* n = t >= 0 && t <= static_cast<int>(efb::ScalarType::MAX)
                      ? efb::EnumNameScalarType(static_cast<efb::ScalarType>(t))
                      : "";
  return n && *n ? n : "scalar type " + std::to_string(t);
}

nlohmann::json ValueDoc(const TestValue& v, const uint8_t* base) {
  nlohmann::json j{{"kind", KindName(v.kind)}, {"offset", v.offset}};
  switch (v.kind) {
    case ValueKind::kTensor:
      j["dtype"] = DtypeName(v.tensor.scalar_type);
      j["shape"] = v.tensor.sizes;
      j["dim_order"] = v.tensor.dim_order;
      j["bytes"] = v.tensor.data.size;
      if (v.tensor.data.size) j["data_offset"] = v.tensor.data.data - base;
      break;
    case ValueKind::kInt:
      j["value"] = v.int_val;
      break;
    case ValueKind::kBool:
      j["value"] = v.bool_val;
      break;
    case ValueKind::kDouble:
      j["value"] = v.double_val;
      break;
    default:
      j["type_tag"] = static_cast<int>(v.kind);
      break;
  }
  return j;
}

std::string ValueText(const nlohmann::json& v) {
  const std::string kind = v["kind"];
  if (kind != "tensor") return v.contains("value") ? kind + " " + v["value"].dump() : kind;
  std::string s = "tensor " + v["dtype"].get<std::string>() + " [";
  for (size_t i = 0; i < v["shape"].size(); ++i) s += (i ? ", " : "") + v["shape"][i].dump();
  return s + "] " + v["bytes"].dump() + " bytes";
}

}  // namespace

nlohmann::json DescribeBpte(const BpteFile& f) {
  nlohmann::json d;
  d["file"] = f.name();
  d["format"] = "bpte";
  d["file_identifier"] = kIdentifier;
  d["size"] = f.file_size();
  d["version"] = f.content().version;
  nlohmann::json prog{{"offset", f.program_offset()}, {"size", f.content().program.size}};
  if (f.program()) prog["description"] = DescribePte(*f.program(), {});
  d["program"] = prog;
  const uint8_t* base = f.content().program.data ? f.content().program.data - f.program_offset() : nullptr;
  nlohmann::json suites = nlohmann::json::array();
  for (const MethodTestSuite& s : f.content().suites) {
    nlohmann::json cases = nlohmann::json::array();
    for (const TestCase& c : s.test_cases) {
      nlohmann::json in = nlohmann::json::array(), out = nlohmann::json::array();
      for (const auto& v : c.inputs) in.push_back(ValueDoc(v, base));
      for (const auto& v : c.expected_outputs) out.push_back(ValueDoc(v, base));
      cases.push_back({{"inputs", in}, {"expected_outputs", out}});
    }
    suites.push_back({{"method_name", s.method_name}, {"offset", s.offset}, {"test_cases", cases}});
  }
  d["method_test_suites"] = suites;
  d["findings"] = FindingsJson({&f.report()});
  return d;
}

std::string RenderBpteText(const nlohmann::json& d) {
  std::string s = d["file"].get<std::string>() + ": BundledProgram (file identifier BP08), " + d["size"].dump() +
                  " bytes, schema version " + d["version"].dump() + "\n";
  const auto& p = d["program"];
  s += "wrapped program: " + p["size"].dump() + " bytes at offset " + p["offset"].dump() + " (" +
       Hex(p["offset"].get<uint64_t>()) + ")\n";
  if (p.contains("description")) {
    std::string inner = RenderPteText(p["description"]);
    size_t pos = 0;
    while (pos < inner.size()) {
      size_t nl = inner.find('\n', pos);
      if (nl == std::string::npos) nl = inner.size();
      s += "  | " + inner.substr(pos, nl - pos) + "\n";
      pos = nl + 1;
    }
  }
  size_t total = 0;
  for (const auto& suite : d["method_test_suites"]) total += suite["test_cases"].size();
  s += "test suites: " + std::to_string(d["method_test_suites"].size()) + " (" + std::to_string(total) +
       " test cases)\n";
  for (const auto& suite : d["method_test_suites"]) {
    s += "  method \"" + suite["method_name"].get<std::string>() + "\": " + std::to_string(suite["test_cases"].size()) +
         " test case(s)\n";
    for (size_t c = 0; c < suite["test_cases"].size(); ++c) {
      const auto& tc = suite["test_cases"][c];
      s += "    case " + std::to_string(c) + ":\n";
      for (size_t i = 0; i < tc["inputs"].size(); ++i) {
        s += "      input " + std::to_string(i) + ": " + ValueText(tc["inputs"][i]) + "\n";
      }
      for (size_t i = 0; i < tc["expected_outputs"].size(); ++i) {
        s += "      expected output " + std::to_string(i) + ": " + ValueText(tc["expected_outputs"][i]) + "\n";
      }
    }
  }
  size_t errors = 0, warnings = 0;
  for (const auto& f : d["findings"]) (f.value("severity", "") == "error" ? errors : warnings)++;
  s += "problems: " + std::to_string(errors) + " error(s), " + std::to_string(warnings) + " warning(s)\n";
  return s;
}

}  // namespace ptepack::bpte
