// ExecuTorch's BundledProgram (.bpte): a .pte program wrapped with test inputs
// and expected outputs per method (schema: serialize/format/schema/
// bundled_program.fbs, file identifier "BP08").
//
// BpteFile maps a file (or wraps bytes), runs the FlatBuffers verifier over
// the outer buffer, checks every test case against the wrapped program the
// way ExecuTorch's bundled_program.cpp will use it (method names, input and
// output counts, value kinds, tensor dtype/shape/dim order/data size), and
// reads the wrapped program with PteFile (its findings are reported too, at
// their offsets in the .bpte). Nothing is read outside the file.
//
// BundledProgramData is the decoded content; EncodeBpte writes it back the
// way ExecuTorch's producer did (flatc's JSON -> binary order reproduces the
// real files byte for byte), and the tests directory form (tests.json + raw
// tensor files) is what `ptepack bpte extract-tests` and `build` exchange.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/backend_config.h"
#include "serialize/io/file_io.h"
#include "serialize/io/report.h"
#include "serialize/read/pte_reader.h"

namespace ptepack::bpte {

inline constexpr char kIdentifier[] = "BP08";
// What ExecuTorch's serializer writes today (BUNDLED_PROGRAM_SCHEMA_VERSION).
inline constexpr uint32_t kDefaultVersion = 2;

// True if `data` carries the BundledProgram file identifier at offset 4.
bool HasIdentifier(const uint8_t* data, size_t size);
// True if the file at `path` is a regular file starting with a BundledProgram
// identifier (reads 8 bytes; false for anything it cannot read).
bool IsBpteFile(const std::string& path);

enum class ValueKind : uint8_t { kNone = 0, kTensor = 1, kInt = 2, kBool = 3, kDouble = 4 };
const char* KindName(ValueKind k);

struct TensorValue {
  int8_t scalar_type = 0;
  std::vector<int32_t> sizes;
  Bytes data;
  std::vector<uint8_t> dim_order;
};

struct TestValue {
  ValueKind kind = ValueKind::kNone;
  TensorValue tensor;  // kTensor
  int64_t int_val = 0;
  bool bool_val = false;
  double double_val = 0;
  uint64_t offset = 0;  // file offset of the Value table (when read)
};

struct TestCase {
  std::vector<TestValue> inputs;
  std::vector<TestValue> expected_outputs;
};

struct MethodTestSuite {
  std::string method_name;
  std::vector<TestCase> test_cases;
  uint64_t offset = 0;  // file offset of the suite table (when read)
};

struct BundledProgramData {
  uint32_t version = kDefaultVersion;
  std::vector<MethodTestSuite> suites;
  Bytes program;  // the wrapped .pte, byte for byte
};

class BpteFile {
 public:
  // Maps `path`. I/O errors throw ptepack::Error; content problems are
  // collected in report().
  static std::unique_ptr<BpteFile> Open(const std::string& path, const ReadOptions& opts = {});
  static std::unique_ptr<BpteFile> FromBytes(Bytes data, std::string name, const ReadOptions& opts = {});

  // Findings about the whole file: the outer buffer, the test cases, and the
  // wrapped program's (offsets in this file).
  const Report& report() const { return report_; }
  bool ok() const { return report_.ok(); }
  const std::string& name() const { return name_; }
  uint64_t file_size() const { return file_.size; }
  // False when the outer flatbuffer could not be trusted (content() is empty).
  bool decoded() const { return decoded_; }
  const BundledProgramData& content() const { return content_; }
  // File offset of the wrapped program's first byte.
  uint64_t program_offset() const { return program_offset_; }
  // The wrapped program as PteFile read it (nullptr when there is none).
  const PteFile* program() const { return program_.get(); }
  // True when the wrapped program itself has no error findings.
  bool program_ok() const { return program_ && program_->ok(); }

 private:
  BpteFile() = default;
  void Parse(const ReadOptions& opts);
  void CheckSuites();
  void CheckCase(const MethodTestSuite& s, size_t case_index, const TestCase& c, int plan_index);
  void CheckValue(const TestValue& v, const std::string& where, int value_index);

  std::string name_;
  Bytes file_;
  Report report_;
  bool decoded_ = false;
  BundledProgramData content_;
  uint64_t program_offset_ = 0;
  std::unique_ptr<PteFile> program_;
};

// inspect's document: the wrapper, the wrapped program's description
// (DescribePte) and every test case; and its text form.
nlohmann::json DescribeBpte(const BpteFile& f);
std::string RenderBpteText(const nlohmann::json& d);

// The BundledProgram flatbuffer for `data`. kFlatc is the order of ExecuTorch's
// flatc JSON -> binary path (which wrote the real files); kPythonObjectApi
// that of its Python builder.
std::vector<uint8_t> EncodeBpte(const BundledProgramData& data, FlatbufferOrder order = FlatbufferOrder::kFlatc);

// The tests directory: tests.json (format: kTestsJsonHelp) and one raw file
// per tensor. TestsToFiles returns (relative name, bytes), tests.json first.
// `source` names the .bpte in errors (a method name that is not UTF-8).
std::vector<std::pair<std::string, Bytes>> TestsToFiles(const BundledProgramData& data, const std::string& source = {});
// Reads tests.json and the tensor files it names (relative to its folder).
// Throws Error (bad-json / open-failed / ...) with the file and what is wrong.
BundledProgramData LoadTests(const std::string& tests_json_path);

extern const char kTestsJsonHelp[];

}  // namespace ptepack::bpte

namespace ptepack::bpte {

// Writes `data` to `out` through AtomicFile (temp file + rename; a symbolic
// link or an output that is one of `inputs` is refused).
void WriteOutputFile(const std::string& out, const Bytes& data, const std::vector<std::string>& inputs);

// Writes the tests directory (TestsToFiles) into `dir`: filled under a
// temporary name beside it and renamed into place. An existing non-empty
// directory is replaced only with `force`, and only if it holds tests.json.
void WriteTestsDirectory(const std::string& dir, const BundledProgramData& data, bool force,
                         const std::string& source = {});

}  // namespace ptepack::bpte
