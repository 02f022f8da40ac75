// Reading and checking .bpte files (see bpte.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <set>

#include "bundled_program_generated.h"
#include "serialize/bpte/bpte.h"

namespace ptepack::bpte {
namespace bfb = bundled_program_flatbuffer;
namespace efb = executorch_flatbuffer;

bool HasIdentifier(const uint8_t* data, size_t size) { return size >= 8 && std::memcmp(data + 4, kIdentifier, 4) == 0; }

bool IsBpteFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  uint8_t head[8];
  ssize_t n = ::pread(fd, head, sizeof head, 0);
  ::close(fd);
  return n == 8 && HasIdentifier(head, 8);
}

const char* KindName(ValueKind k) {
  switch (k) {
    case ValueKind::kTensor:
      return "tensor";
    case ValueKind::kInt:
      return "int";
    case ValueKind::kBool:
      return "bool";
    case ValueKind::kDouble:
      return "double";
    default:
      return "none";
  }
}

std::unique_ptr<BpteFile> BpteFile::Open(const std::string& path, const ReadOptions& opts) {
  auto m = MappedFile::Open(path);
  return FromBytes(m->All(), path, opts);
}

std::unique_ptr<BpteFile> BpteFile::FromBytes(Bytes data, std::string name, const ReadOptions& opts) {
  std::unique_ptr<BpteFile> f(new BpteFile());
  f->name_ = std::move(name);
  f->file_ = std::move(data);
  f->report_ = Report(f->name_);
  f->Parse(opts);
  return f;
}

namespace {

std::string IdentAt(const uint8_t* d, size_t size) {
  std::string s;
  for (size_t i = 4; i < 8 && i < size; ++i) {
    char c = static_cast<char>(d[i]);
    s += (c >= 0x20 && c < 0x7f) ? std::string(1, c) : "\\x" + Hex(d[i]).substr(2);
  }
  return "\"" + s + "\"";
}

TestValue ReadValue(const bfb::Value& v, const uint8_t* base, const Bytes& file) {
  TestValue out;
  out.offset = reinterpret_cast<const uint8_t*>(&v) - base;
  out.kind = static_cast<ValueKind>(v.val_type());
  switch (v.val_type()) {
    case bfb::ValueUnion::Tensor: {
      const bfb::Tensor* t = v.val_as_Tensor();
      if (t == nullptr) break;
      out.tensor.scalar_type = static_cast<int8_t>(t->scalar_type());
      if (t->sizes()) out.tensor.sizes.assign(t->sizes()->begin(), t->sizes()->end());
      if (t->data()) out.tensor.data = file.Sub(t->data()->Data() - base, t->data()->size());
      if (t->dim_order()) out.tensor.dim_order.assign(t->dim_order()->begin(), t->dim_order()->end());
      break;
    }
    case bfb::ValueUnion::Int:
      if (v.val_as_Int()) out.int_val = v.val_as_Int()->int_val();
      break;
    case bfb::ValueUnion::Bool:
      if (v.val_as_Bool()) out.bool_val = v.val_as_Bool()->bool_val();
      break;
    case bfb::ValueUnion::Double:
      if (v.val_as_Double()) out.double_val = v.val_as_Double()->double_val();
      break;
    default:
      break;
  }
  return out;
}

// Fields the runtime dereferences without a null check (bundled_program.cpp):
// reports each absent one.
void CheckPresent(Report& r, const bfb::BundledProgram& root, const uint8_t* base) {
  auto at = [&](const void* p) { return static_cast<uint64_t>(reinterpret_cast<const uint8_t*>(p) - base); };
  if (!root.method_test_suites()) {
    r.Error("bpte-field-missing", "BundledProgram has no method_test_suites (the runtime reads it unchecked)",
            at(&root), "a vector of BundledMethodTestSuite", "absent");
    return;
  }
  for (const bfb::BundledMethodTestSuite* s : *root.method_test_suites()) {
    if (!s->method_name()) {
      r.Error("bpte-field-missing", "test suite has no method_name", at(s), "a string", "absent");
    }
    if (!s->test_cases()) {
      r.Error("bpte-field-missing", "test suite has no test_cases", at(s), "a vector of test cases", "absent");
      continue;
    }
    for (const bfb::BundledMethodTestCase* c : *s->test_cases()) {
      if (!c->inputs()) r.Error("bpte-field-missing", "test case has no inputs", at(c), "a vector of Value", "absent");
      if (!c->expected_outputs()) {
        r.Error("bpte-field-missing", "test case has no expected_outputs", at(c), "a vector of Value", "absent");
      }
      for (auto* vs : {c->inputs(), c->expected_outputs()}) {
        if (!vs) continue;
        for (const bfb::Value* v : *vs) {
          if (v->val() == nullptr && v->val_type() != bfb::ValueUnion::NONE) {
            r.Error("bpte-field-missing", "value has a type tag but no value", at(v), "a value table", "absent");
          }
          const bfb::Tensor* t = v->val_as_Tensor();
          if (t && (!t->sizes() || !t->data() || !t->dim_order())) {
            r.Error("bpte-field-missing", "tensor value lacks sizes, data or dim_order (the runtime reads all three)",
                    at(t), "sizes, data and dim_order", "a missing field");
          }
        }
      }
    }
  }
}

}  // namespace

void BpteFile::Parse(const ReadOptions& opts) {
  const uint8_t* d = file_.data;
  const size_t size = file_.size;
  if (size < 8) {
    report_.Error("truncated", "file is too short for a BundledProgram flatbuffer", 0, ">= 8 bytes",
                  std::to_string(size) + " bytes");
    return;
  }
  if (!HasIdentifier(d, size)) {
    report_.Error("bpte-identifier", "not a BundledProgram: wrong file identifier", 4, "\"BP08\"", IdentAt(d, size));
    return;
  }
  if (size > FLATBUFFERS_MAX_BUFFER_SIZE) {
    report_.Error("flatbuffer-too-large", "BundledProgram exceeds the FlatBuffers 2 GiB limit", 0, "< 2 GiB",
                  std::to_string(size) + " bytes");
    return;
  }
  flatbuffers::Verifier::Options vo;
  vo.max_depth = opts.max_depth;
  vo.max_tables = opts.max_tables;
  vo.check_alignment = true;
  flatbuffers::Verifier v(d, size, vo);
  if (!bfb::VerifyBundledProgramBuffer(v)) {
    report_.Error("flatbuffer-invalid",
                  "FlatBuffers verifier rejected the BundledProgram (bad offsets, sizes, depth, alignment or a "
                  "truncated buffer)",
                  0, "a valid bundled_program_flatbuffer.BundledProgram", "verification failure");
    return;
  }
  const bfb::BundledProgram* root = bfb::GetBundledProgram(d);
  CheckPresent(report_, *root, d);
  decoded_ = true;
  content_.version = root->version();
  if (root->method_test_suites()) {
    for (const bfb::BundledMethodTestSuite* s : *root->method_test_suites()) {
      MethodTestSuite ms;
      ms.offset = reinterpret_cast<const uint8_t*>(s) - d;
      if (s->method_name()) ms.method_name = s->method_name()->str();
      if (s->test_cases()) {
        for (const bfb::BundledMethodTestCase* c : *s->test_cases()) {
          TestCase tc;
          if (c->inputs()) {
            for (const bfb::Value* x : *c->inputs()) tc.inputs.push_back(ReadValue(*x, d, file_));
          }
          if (c->expected_outputs()) {
            for (const bfb::Value* x : *c->expected_outputs()) tc.expected_outputs.push_back(ReadValue(*x, d, file_));
          }
          ms.test_cases.push_back(std::move(tc));
        }
      }
      content_.suites.push_back(std::move(ms));
    }
  }
  if (!root->program()) {
    report_.Error("bpte-field-missing", "BundledProgram holds no program", reinterpret_cast<const uint8_t*>(root) - d,
                  "a [ubyte] program", "absent");
    return;
  }
  program_offset_ = root->program()->Data() - d;
  content_.program = file_.Sub(program_offset_, root->program()->size());
  if (program_offset_ % 32 != 0) {
    report_.Warn("bpte-program-misaligned",
                 "the wrapped program does not start at a multiple of 32 (its segment alignment is not kept)",
                 program_offset_, "multiple of 32", "alignment " + std::to_string(AlignmentOf(program_offset_)));
  }
  program_ = PteFile::FromBytes(content_.program, name_ + " (wrapped program)", opts);
  // The wrapped program's findings, at their offsets in this file.
  for (const Finding& f : program_->report().findings()) {
    std::optional<uint64_t> off;
    if (f.offset) off = *f.offset + program_offset_;
    report_.Add(f.severity, f.code, "wrapped program: " + f.message, off, f.expected, f.found);
  }
  CheckSuites();
}

// Every suite names a method of the program; each test case fits it.
void BpteFile::CheckSuites() {
  const efb::Program* prog = program_ ? program_->program() : nullptr;
  std::set<std::string> seen;
  for (const MethodTestSuite& s : content_.suites) {
    if (!IsValidUtf8(s.method_name.data(), s.method_name.size())) {
      report_.Error("bpte-method-name-utf8", "test suite's method name is not valid UTF-8", s.offset, "UTF-8 text",
                    std::to_string(s.method_name.size()) + " bytes that are not");
    }
    if (!seen.insert(s.method_name).second) {
      report_.Warn("bpte-duplicate-method",
                   "two test suites for method \"" + s.method_name + "\" (the runtime uses only the first)", s.offset,
                   "one suite per method", "another suite");
    }
    int plan_index = -1;
    std::string names;
    if (prog && prog->execution_plan()) {
      for (flatbuffers::uoffset_t i = 0; i < prog->execution_plan()->size(); ++i) {
        const efb::ExecutionPlan* p = prog->execution_plan()->Get(i);
        std::string n = p->name() ? p->name()->str() : std::string();
        names += (names.empty() ? "" : ", ") + n;
        if (n == s.method_name && plan_index < 0) plan_index = static_cast<int>(i);
      }
      if (plan_index < 0) {
        report_.Error("bpte-unknown-method", "test suite names a method the program does not have", s.offset,
                      "one of: " + names, "\"" + s.method_name + "\"");
      }
    }
    for (size_t c = 0; c < s.test_cases.size(); ++c) CheckCase(s, c, s.test_cases[c], plan_index);
  }
}

namespace {

std::string ShapeText(const std::vector<int32_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

std::string DtypeName(int t) {
  const char* n = t >= 0 && t <= static_cast<int>(efb::ScalarType::MAX)
                      ? efb::EnumNameScalarType(static_cast<efb::ScalarType>(t))
                      : "";
  return n && *n ? n : "scalar type " + std::to_string(t);
}

const char* EValueKindName(efb::KernelTypes k) {
  switch (k) {
    case efb::KernelTypes::Tensor:
      return "tensor";
    case efb::KernelTypes::Int:
      return "int";
    case efb::KernelTypes::Bool:
      return "bool";
    case efb::KernelTypes::Double:
      return "double";
    default:
      return efb::EnumNameKernelTypes(k);
  }
}

}  // namespace

// One value on its own: a kind the runtime loads, a tensor whose shape, dim
// order and data agree.
void BpteFile::CheckValue(const TestValue& v, const std::string& where, int value_index) {
  (void)value_index;
  if (v.kind == ValueKind::kNone || static_cast<int>(v.kind) > 4) {
    report_.Error("bpte-value-type", where + ": value kind the runtime cannot load", v.offset,
                  "tensor, int, bool or double", "type tag " + std::to_string(static_cast<int>(v.kind)));
    return;
  }
  if (v.kind != ValueKind::kTensor) return;
  const TensorValue& t = v.tensor;
  if (ElementSize(static_cast<ScalarType>(t.scalar_type)) == 0) {
    report_.Error("bpte-tensor-dtype", where + ": tensor element type the runtime does not know", v.offset,
                  "a ScalarType the runtime supports", DtypeName(t.scalar_type));
    return;
  }
  if (t.sizes.size() > kRuntimeMaxRank) {
    report_.Error("bpte-tensor-rank", where + ": tensor has too many dimensions", v.offset,
                  "<= " + std::to_string(kRuntimeMaxRank), std::to_string(t.sizes.size()));
    return;
  }
  std::vector<bool> used(t.sizes.size(), false);
  bool perm = t.dim_order.size() == t.sizes.size();
  for (uint8_t d : t.dim_order) {
    if (!perm || d >= used.size() || used[d]) {
      perm = false;
      break;
    }
    used[d] = true;
  }
  if (!perm) {
    std::vector<int32_t> got(t.dim_order.begin(), t.dim_order.end());
    report_.Error("bpte-tensor-dim-order", where + ": dim_order is not a permutation of the dimensions", v.offset,
                  "a permutation of 0.." + std::to_string(static_cast<int>(t.sizes.size()) - 1), ShapeText(got));
  }
  auto nbytes = TensorNbytes(static_cast<ScalarType>(t.scalar_type), t.sizes.data(), t.sizes.size());
  if (!nbytes) {
    report_.Error("bpte-tensor-sizes", where + ": tensor sizes are negative or overflow", v.offset,
                  "non-negative sizes", ShapeText(t.sizes));
    return;
  }
  const uint64_t data_off = t.data.size ? t.data.data - file_.data : v.offset;
  if (t.data.size < *nbytes) {
    report_.Error("bpte-tensor-data-size", where + ": tensor data is shorter than its dtype and shape need", data_off,
                  std::to_string(*nbytes) + " bytes (" + DtypeName(t.scalar_type) + " " + ShapeText(t.sizes) + ")",
                  std::to_string(t.data.size) + " bytes");
  } else if (t.data.size > *nbytes) {
    report_.Warn("bpte-tensor-data-size", where + ": tensor data is longer than its dtype and shape need", data_off,
                 std::to_string(*nbytes) + " bytes (" + DtypeName(t.scalar_type) + " " + ShapeText(t.sizes) + ")",
                 std::to_string(t.data.size) + " bytes");
  }
  if (t.data.size && data_off % 16 != 0) {
    report_.Warn("bpte-tensor-data-misaligned", where + ": tensor data is not 16-byte aligned (schema force_align)",
                 data_off, "multiple of 16", "alignment " + std::to_string(AlignmentOf(data_off)));
  }
}

// A test case against method `plan_index` of the program (-1: unknown).
void BpteFile::CheckCase(const MethodTestSuite& s, size_t case_index, const TestCase& c, int plan_index) {
  const std::string at = "method \"" + s.method_name + "\" test case " + std::to_string(case_index);
  const efb::Program* prog = program_ ? program_->program() : nullptr;
  const efb::ExecutionPlan* plan = plan_index >= 0 ? prog->execution_plan()->Get(plan_index) : nullptr;
  const auto* values = plan ? plan->values() : nullptr;
  for (int io = 0; io < 2; ++io) {
    const auto& list = io == 0 ? c.inputs : c.expected_outputs;
    const char* what = io == 0 ? "input" : "expected output";
    for (size_t i = 0; i < list.size(); ++i) CheckValue(list[i], at + " " + what + " " + std::to_string(i), int(i));
    if (!plan) continue;
    const auto* idx = io == 0 ? plan->inputs() : plan->outputs();
    const size_t want = idx ? idx->size() : 0;
    const uint64_t case_off = list.empty() ? s.offset : list[0].offset;
    if (io == 1 && list.empty() && want > 0) {
      report_.Warn("bpte-no-expected-outputs", at + ": no expected outputs (the runtime cannot verify this case)",
                   s.offset, std::to_string(want) + " expected outputs", "none");
      continue;
    }
    if (list.size() < want) {
      report_.Error("bpte-value-count", at + ": fewer " + what + "s than the method has (the runtime reads past them)",
                    case_off, std::to_string(want), std::to_string(list.size()));
    } else if (list.size() > want) {
      report_.Warn("bpte-value-count", at + ": more " + what + "s than the method has (the extra ones are ignored)",
                   case_off, std::to_string(want), std::to_string(list.size()));
    }
    for (size_t i = 0; i < list.size() && i < want; ++i) {
      const int32_t vi = idx->Get(i);
      if (!values || vi < 0 || static_cast<size_t>(vi) >= values->size()) continue;  // PteFile reports it
      const efb::EValue* ev = values->Get(vi);
      const TestValue& tv = list[i];
      const std::string where = at + " " + what + " " + std::to_string(i);
      const efb::KernelTypes want_kind = ev->val_type();
      const bool kind_ok = (tv.kind == ValueKind::kTensor && want_kind == efb::KernelTypes::Tensor) ||
                           (tv.kind == ValueKind::kInt && want_kind == efb::KernelTypes::Int) ||
                           (tv.kind == ValueKind::kBool && want_kind == efb::KernelTypes::Bool) ||
                           (tv.kind == ValueKind::kDouble && want_kind == efb::KernelTypes::Double);
      if (!kind_ok) {
        report_.Error("bpte-value-kind", where + ": value kind differs from the method's", tv.offset,
                      EValueKindName(want_kind), KindName(tv.kind));
        continue;
      }
      const efb::Tensor* pt = ev->val_as_Tensor();
      if (!pt) continue;
      const TensorValue& t = tv.tensor;
      if (static_cast<int>(pt->scalar_type()) != t.scalar_type) {
        report_.Error("bpte-tensor-dtype", where + ": dtype differs from the method's", tv.offset,
                      DtypeName(static_cast<int>(pt->scalar_type())), DtypeName(t.scalar_type));
      }
      std::vector<int32_t> ps;
      if (pt->sizes()) ps.assign(pt->sizes()->begin(), pt->sizes()->end());
      bool shape_ok = ps.size() == t.sizes.size();
      const auto dyn = pt->shape_dynamism();
      for (size_t k = 0; shape_ok && k < ps.size(); ++k) {
        if (dyn == efb::TensorShapeDynamism::STATIC) shape_ok = ps[k] == t.sizes[k];
        if (dyn == efb::TensorShapeDynamism::DYNAMIC_BOUND) shape_ok = t.sizes[k] <= ps[k];
      }
      if (!shape_ok) {
        report_.Error("bpte-tensor-shape", where + ": shape does not fit the method's tensor", tv.offset,
                      ShapeText(ps) + (dyn == efb::TensorShapeDynamism::STATIC ? "" : " (upper bound)"),
                      ShapeText(t.sizes));
      }
    }
  }
}

}  // namespace ptepack::bpte
