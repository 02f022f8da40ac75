// Encoding .bpte files and the tests directory form (see bpte.h).
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "bundled_program_views_generated.h"
#include "serialize/bpte/bpte.h"
#include "serialize/format/fbtree.h"
#include "serialize/io/json_reader.h"

namespace ptepack::bpte {
namespace bfb = bundled_program_flatbuffer;
namespace efb = executorch_flatbuffer;

namespace {

fb::Value Objs(std::vector<fb::Value> v) { return fb::OffsetVector(std::move(v), reflection::Obj); }

fb::Value EncodeValue(const TestValue& v) {
  auto node = bp::Value<>::New();
  bp::Value value(*node);
  std::shared_ptr<fb::Table> member;
  switch (v.kind) {
    case ValueKind::kTensor: {
      member = bp::Tensor<>::New();
      bp::Tensor t(*member);
      t.set_scalar_type(static_cast<efb::ScalarType>(v.tensor.scalar_type));
      t.set_sizes(v.tensor.sizes);
      t.set_data(v.tensor.data);
      t.set_dim_order(Bytes::Copy(v.tensor.dim_order.data(), v.tensor.dim_order.size()));
      break;
    }
    case ValueKind::kInt:
      member = bp::Int<>::New();
      bp::Int(*member).set_int_val(v.int_val);
      break;
    case ValueKind::kBool:
      member = bp::Bool<>::New();
      bp::Bool(*member).set_bool_val(v.bool_val);
      break;
    case ValueKind::kDouble:
      member = bp::Double<>::New();
      bp::Double(*member).set_double_val(v.double_val);
      break;
    default:
      break;
  }
  if (member) {
    value.set_val_type(static_cast<bfb::ValueUnion>(v.kind));
    value.val() = fb::TableValue(member);
  }
  return fb::TableValue(node);
}

fb::Value EncodeValues(const std::vector<TestValue>& vs) {
  std::vector<fb::Value> out;
  out.reserve(vs.size());
  for (const auto& v : vs) out.push_back(EncodeValue(v));
  return Objs(std::move(out));
}

}  // namespace

// Every field ExecuTorch's serializer emits is present (its JSON and its
// Python builder both write every vector, empty or not); scalars equal to
// their default are left out, as both producers do.
std::vector<uint8_t> EncodeBpte(const BundledProgramData& data, FlatbufferOrder order) {
  auto root = bp::BundledProgram<>::New();
  bp::BundledProgram r(*root);
  r.set_version(data.version);
  std::vector<fb::Value> suites;
  for (const MethodTestSuite& s : data.suites) {
    auto node = bp::BundledMethodTestSuite<>::New();
    bp::BundledMethodTestSuite suite(*node);
    suite.set_method_name(s.method_name);
    std::vector<fb::Value> cases;
    for (const TestCase& c : s.test_cases) {
      auto cn = bp::BundledMethodTestCase<>::New();
      bp::BundledMethodTestCase tc(*cn);
      tc.inputs() = EncodeValues(c.inputs);
      tc.expected_outputs() = EncodeValues(c.expected_outputs);
      cases.push_back(fb::TableValue(cn));
    }
    suite.test_cases() = Objs(std::move(cases));
    suites.push_back(fb::TableValue(node));
  }
  r.method_test_suites() = Objs(std::move(suites));
  r.set_program(data.program);
  fb::EncodeOptions eo;
  eo.order = order;
  // The schema's force_align attributes (a binary schema does not carry
  // flatc's built-in attributes, so they are given here).
  eo.force_align = {{"Tensor.data", 16}, {"BundledProgram.program", 32}};
  return fb::Encode(fb::BundledProgramSchema(), *root, eo).data;
}

const char kTestsJsonHelp[] = R"(tests.json (what `bpte extract-tests` writes and `bpte build` reads):
  {
    "version": 2,                        BundledProgram schema version (default 2)
    "method_test_suites": [
      {"method_name": "forward",         a method of the program
       "test_cases": [
         {"inputs": [VALUE, ...], "expected_outputs": [VALUE, ...]}
       ]}
    ]
  }
  VALUE is one of
    {"tensor": {"dtype": "FLOAT", "sizes": [2, 2], "dim_order": [0, 1], "data": "x.bin"}}
                                         dtype: a ScalarType name (BYTE CHAR SHORT INT LONG HALF FLOAT
                                         DOUBLE BOOL ...); data: a file of the raw little-endian
                                         elements, relative to tests.json's folder (dim_order
                                         defaults to 0..rank-1)
    {"int": 3}   {"bool": true}   {"double": 0.5}   {"double_bits": "0x7ff8000000000000"}
)";

namespace {

std::string DtypeName(int t) {
  const char* n = t >= 0 && t <= static_cast<int>(efb::ScalarType::MAX)
                      ? efb::EnumNameScalarType(static_cast<efb::ScalarType>(t))
                      : "";
  return n && *n ? n : std::to_string(t);
}

nlohmann::ordered_json ValueJson(const TestValue& v, const std::string& file) {
  nlohmann::ordered_json j;
  switch (v.kind) {
    case ValueKind::kTensor:
      j["tensor"] = {{"dtype", DtypeName(v.tensor.scalar_type)},
                     {"sizes", v.tensor.sizes},
                     {"dim_order", v.tensor.dim_order},
                     {"data", file}};
      break;
    case ValueKind::kInt:
      j["int"] = v.int_val;
      break;
    case ValueKind::kBool:
      j["bool"] = v.bool_val;
      break;
    case ValueKind::kDouble:
      if (std::isfinite(v.double_val)) {
        j["double"] = v.double_val;
      } else {
        uint64_t bits;
        std::memcpy(&bits, &v.double_val, 8);
        j["double_bits"] = Hex(bits);
      }
      break;
    default:
      j["none"] = nullptr;
      break;
  }
  return j;
}

}  // namespace

std::vector<std::pair<std::string, Bytes>> TestsToFiles(const BundledProgramData& data, const std::string& source) {
  std::vector<std::pair<std::string, Bytes>> files;
  nlohmann::ordered_json doc;
  doc["version"] = data.version;
  doc["method_test_suites"] = nlohmann::ordered_json::array();
  for (size_t s = 0; s < data.suites.size(); ++s) {
    const MethodTestSuite& suite = data.suites[s];
    if (!IsValidUtf8(suite.method_name.data(), suite.method_name.size())) {
      throw Error("bpte-method-name-utf8",
                  "test suite " + std::to_string(s) + "'s method name is not valid UTF-8 (tests.json holds text)",
                  source, suite.offset, "UTF-8 text", "other bytes");
    }
    nlohmann::ordered_json js{{"method_name", suite.method_name}, {"test_cases", nlohmann::ordered_json::array()}};
    for (size_t c = 0; c < suite.test_cases.size(); ++c) {
      nlohmann::ordered_json jc{{"inputs", nlohmann::ordered_json::array()},
                                {"expected_outputs", nlohmann::ordered_json::array()}};
      for (int io = 0; io < 2; ++io) {
        const auto& list = io == 0 ? suite.test_cases[c].inputs : suite.test_cases[c].expected_outputs;
        for (size_t i = 0; i < list.size(); ++i) {
          std::string name;
          if (list[i].kind == ValueKind::kTensor) {
            name = "suite" + std::to_string(s) + "_case" + std::to_string(c) + (io == 0 ? "_input" : "_output") +
                   std::to_string(i) + ".bin";
            files.emplace_back(name, list[i].tensor.data);
          }
          jc[io == 0 ? "inputs" : "expected_outputs"].push_back(ValueJson(list[i], name));
        }
      }
      js["test_cases"].push_back(std::move(jc));
    }
    doc["method_test_suites"].push_back(std::move(js));
  }
  std::string text = doc.dump(2) + "\n";
  files.insert(files.begin(), {"tests.json", Bytes::Own(std::vector<uint8_t>(text.begin(), text.end()))});
  return files;
}

namespace {

// A ScalarType name, or its number (as a number, or as the text extract-tests
// writes for a type without a name).
int DtypeOf(const JsonField& j) {
  if (j.is_number()) return static_cast<int>(j.I64(INT8_MIN, INT8_MAX));
  const std::string n = j.String();
  for (int t = 0; t <= static_cast<int>(efb::ScalarType::MAX); ++t) {
    const char* name = efb::EnumNameScalarType(static_cast<efb::ScalarType>(t));
    if (name && *name && n == name) return t;
  }
  char* end = nullptr;
  const long t = n.empty() ? 0 : std::strtol(n.c_str(), &end, 10);
  if (!n.empty() && *end == '\0' && t >= INT8_MIN && t <= INT8_MAX) return static_cast<int>(t);
  j.Fail("unknown dtype \"" + n + "\"", "a ScalarType name (FLOAT, INT, ...)");
}

TestValue LoadValue(const std::filesystem::path& dir, const JsonField& j) {
  TestValue v;
  if (!j.is_object() || j.size() != 1) j.Fail("a value is an object with one key: tensor, int, bool or double");
  const auto [key, x] = j.Members().front();
  if (key == "int") {
    v.kind = ValueKind::kInt;
    v.int_val = x.I64();
  } else if (key == "bool") {
    v.kind = ValueKind::kBool;
    v.bool_val = x.Bool();
  } else if (key == "double") {
    v.kind = ValueKind::kDouble;
    v.double_val = x.Number();
  } else if (key == "double_bits") {
    v.kind = ValueKind::kDouble;
    const std::string text = x.String();
    char* end = nullptr;
    errno = 0;
    const unsigned long long bits = std::strtoull(text.c_str(), &end, 0);
    if (text.empty() || *end != '\0' || errno == ERANGE || text[0] == '-') {
      x.Fail("must be the double's 64 bits as a number (\"0x7ff8000000000000\")", "", x.Shown());
    }
    const uint64_t b = bits;
    std::memcpy(&v.double_val, &b, 8);
  } else if (key == "tensor") {
    v.kind = ValueKind::kTensor;
    x.RejectUnknown({"dtype", "sizes", "dim_order", "data"});
    v.tensor.scalar_type = static_cast<int8_t>(DtypeOf(x["dtype"]));
    for (int64_t d : x["sizes"].Ints(INT32_MIN, INT32_MAX)) v.tensor.sizes.push_back(static_cast<int32_t>(d));
    if (auto d = x.Find("dim_order")) {
      for (int64_t e : d->Ints(0, 255)) v.tensor.dim_order.push_back(static_cast<uint8_t>(e));
    } else {
      for (size_t i = 0; i < v.tensor.sizes.size(); ++i) v.tensor.dim_order.push_back(static_cast<uint8_t>(i));
    }
    const std::string raw = ReadSmallFile((dir / x["data"].String()).string(), uint64_t{1} << 31);
    v.tensor.data = Bytes::Own(std::vector<uint8_t>(raw.begin(), raw.end()));
  } else {
    j.Fail("unknown value kind \"" + key + "\"", "tensor, int, bool, double or double_bits");
  }
  return v;
}

}  // namespace

BundledProgramData LoadTests(const std::string& path) {
  const JsonDocument doc = JsonDocument::Load(path, "bad-json");
  const JsonField root = doc.root();
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  BundledProgramData d;
  root.Object();
  if (auto v = root.Find("version")) d.version = static_cast<uint32_t>(v->U64(UINT32_MAX));
  for (const JsonField& suite : root["method_test_suites"].Elements()) {
    MethodTestSuite ms;
    ms.method_name = suite["method_name"].String();
    for (const JsonField& c : suite["test_cases"].Elements()) {
      TestCase tc;
      for (const JsonField& e : c["inputs"].Elements()) tc.inputs.push_back(LoadValue(dir, e));
      for (const JsonField& e : c["expected_outputs"].Elements()) tc.expected_outputs.push_back(LoadValue(dir, e));
      ms.test_cases.push_back(std::move(tc));
    }
    d.suites.push_back(std::move(ms));
  }
  return d;
}

}  // namespace ptepack::bpte
