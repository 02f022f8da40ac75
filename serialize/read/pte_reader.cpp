#include "serialize/read/pte_reader.h"

#include <cstring>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "serialize/read/ptd_reader.h"

namespace ptepack {

namespace efb = executorch_flatbuffer;

uint64_t AlignmentOf(uint64_t v) { return v == 0 ? (1ull << 63) : (v & (~v + 1)); }

bool IsValidUtf8(const char* s, size_t n) {
  const auto* p = reinterpret_cast<const unsigned char*>(s);
  size_t i = 0;
  while (i < n) {
    unsigned char c = p[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += len;
  }
  return true;
}

size_t RuntimeElementSize(int scalar_type) {
  // ExecuTorch's runtime accepts every ScalarType below Undefined (30),
  // including the complex and bits types program.fbs does not name.
  switch (scalar_type) {
    case 8:  // ComplexHalf
      return 4;
    case 9:  // ComplexFloat
      return 8;
    case 10:  // ComplexDouble
      return 16;
    case 18:  // Bits1x8
    case 19:  // Bits2x4
    case 20:  // Bits4x2
    case 21:  // Bits8
      return 1;
    default:
      return ScalarTypeSize(scalar_type);
  }
}

std::optional<uint64_t> RuntimeNbytes(const int32_t* sizes, size_t rank, int scalar_type) {
  size_t es = RuntimeElementSize(scalar_type);
  if (es == 0) return std::nullopt;
  // The runtime counts elements in a signed 64-bit integer and gives up at the
  // first overflow, even if a later dimension is 0; then multiplies by the
  // element size in 64 unsigned bits.
  int64_t numel = 1;
  for (size_t i = 0; i < rank; ++i) {
    if (sizes[i] < 0) return std::nullopt;
    if (__builtin_mul_overflow(numel, static_cast<int64_t>(sizes[i]), &numel)) return std::nullopt;
  }
  uint64_t n = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel), static_cast<uint64_t>(es), &n)) return std::nullopt;
  return n;
}

std::optional<uint64_t> TensorNbytes(const efb::Tensor& t) {
  if (t.sizes() == nullptr) return RuntimeNbytes(nullptr, 0, static_cast<int>(t.scalar_type()));
  return RuntimeNbytes(t.sizes()->data(), t.sizes()->size(), static_cast<int>(t.scalar_type()));
}

std::unique_ptr<PteFile> PteFile::Open(const std::string& path, const ReadOptions& opts) {
  auto m = MappedFile::Open(path);
  return FromBytes(m->All(), path, opts);
}

std::unique_ptr<PteFile> PteFile::FromBytes(Bytes data, std::string name, const ReadOptions& opts) {
  std::unique_ptr<PteFile> f(new PteFile());
  f->name_ = name;
  f->file_ = std::move(data);
  f->report_ = Report(std::move(name));
  f->Parse(opts);
  return f;
}

Bytes PteFile::SegmentData(size_t i) const {
  if (i >= segments_.size() || !segments_[i].in_file) {
    throw Error("segment-out-of-range", name_ + ": segment " + std::to_string(i) + " is not in the file");
  }
  return file_.Sub(segments_[i].file_offset, segments_[i].size);
}

namespace {

// File offset of the first non-empty vector of 8-byte elements whose data is
// not 8-byte aligned (relative to the buffer start, as the verifier counts).
template <typename T>
bool Misaligned(const flatbuffers::Vector<T>* v, const uint8_t* base, uint64_t* off) {
  // Empty vectors have nothing to load; flatc does not align them.
  if (v == nullptr || v->size() == 0) return false;
  *off = static_cast<uint64_t>(reinterpret_cast<const uint8_t*>(v->Data()) - base);
  return *off % 8 != 0;
}

std::optional<uint64_t> FindMisalignedVector(const efb::Program& p, const uint8_t* base) {
  uint64_t off = 0;
  if (p.constant_segment() && Misaligned(p.constant_segment()->offsets(), base, &off)) return off;
  if (p.mutable_data_segments()) {
    for (const auto* m : *p.mutable_data_segments()) {
      if (Misaligned(m->offsets(), base, &off)) return off;
    }
  }
  if (!p.execution_plan()) return std::nullopt;
  for (const auto* plan : *p.execution_plan()) {
    if (Misaligned(plan->non_const_buffer_sizes(), base, &off)) return off;
    if (!plan->values()) continue;
    for (const auto* ev : *plan->values()) {
      if (const auto* l = ev->val_as_IntList(); l && Misaligned(l->items(), base, &off)) return off;
      if (const auto* l = ev->val_as_DoubleList(); l && Misaligned(l->items(), base, &off)) return off;
    }
  }
  return std::nullopt;
}

}  // namespace

void PteFile::Parse(const ReadOptions& opts) {
  const uint64_t size = file_.size;
  const uint8_t* d = file_.data;
  if (size < 8) {
    report_.Error("truncated", "file too short to hold a flatbuffer root offset and file identifier", 0, ">= 8 bytes",
                  std::to_string(size) + " bytes");
    return;
  }
  std::string id(reinterpret_cast<const char*>(d + 4), 4);
  if (id != kProgramId) {
    auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
    if (id[0] == 'E' && id[1] == 'T' && alnum(id[2]) && alnum(id[3])) {
      report_.Error("unsupported-version", "program schema version not supported by this reader", 4, "\"ET12\"",
                    "\"" + id + "\"");
    } else {
      std::string hint;
      if (id == kFlatTensorId) hint = " (this looks like a .ptd FlatTensor file)";
      if (id.rfind("BP", 0) == 0) hint = " (this looks like a BundledProgram .bpte file)";
      report_.Error("bad-magic", "not an ExecuTorch program: wrong file identifier" + hint, 4, "\"ET12\"",
                    "bytes " + Hex(LoadU32(d + 4)));
    }
    return;
  }
  program_size_ = size;
  if (size >= 12 && std::memcmp(d + 8, kExtendedHeaderMagic, 4) == 0) {
    if (size < 8 + kExtendedHeaderMinLength) {
      report_.Error("truncated", "file ends inside the extended header", size,
                    ">= " + std::to_string(8 + kExtendedHeaderMinLength) + " bytes", std::to_string(size) + " bytes");
      return;
    }
    ExtendedHeader h;
    h.length = LoadU32(d + 12);
    if (h.length < kExtendedHeaderMinLength) {
      report_.Error("header-length", "extended header length too small", 12,
                    ">= " + std::to_string(kExtendedHeaderMinLength), std::to_string(h.length));
      return;
    }
    if (8 + static_cast<uint64_t>(h.length) > size) {
      report_.Error("header-length", "extended header length runs past the end of the file", 12,
                    "<= " + std::to_string(size - 8), std::to_string(h.length));
      return;
    }
    h.program_size = LoadU64(d + 16);
    h.segment_base_offset = LoadU64(d + 24);
    h.has_segment_data_size = h.length >= kExtendedHeaderLength;
    h.segment_data_size = h.has_segment_data_size ? LoadU64(d + 32) : 0;
    header_ = h;
    if (h.program_size < 8 + static_cast<uint64_t>(h.length)) {
      report_.Error("program-size", "program size smaller than the headers it contains", 16,
                    ">= " + std::to_string(8 + h.length), std::to_string(h.program_size));
      return;
    }
    if (h.program_size > size) {
      report_.Error("program-size-past-eof", "program size runs past the end of the file", 16,
                    "<= " + std::to_string(size), std::to_string(h.program_size));
      return;
    }
    program_size_ = h.program_size;
    segment_base_offset_ = h.segment_base_offset;
    if (h.segment_base_offset != 0 && h.segment_base_offset < h.program_size) {
      report_.Error("segment-base-overlaps-program", "segment base offset lies inside the program data", 24,
                    ">= " + std::to_string(h.program_size), std::to_string(h.segment_base_offset));
    }
    if (h.segment_base_offset > size) {
      report_.Error("segment-base-past-eof", "segment base offset is past the end of the file", 24,
                    "<= " + std::to_string(size), std::to_string(h.segment_base_offset));
    }
    if (h.has_segment_data_size && h.segment_data_size > 0) {
      if (h.segment_base_offset > UINT64_MAX - h.segment_data_size) {
        report_.Error("segment-overflow", "segment base offset + segment data size overflows", 32, "a sum below 2^64",
                      std::to_string(h.segment_base_offset) + " + " + std::to_string(h.segment_data_size));
      } else if (h.segment_base_offset + h.segment_data_size > size) {
        report_.Error("truncated", "file is shorter than the header's segment data says", size,
                      std::to_string(h.segment_base_offset + h.segment_data_size) + " bytes",
                      std::to_string(size) + " bytes");
      }
    }
  }
  if (program_size_ > FLATBUFFERS_MAX_BUFFER_SIZE) {
    report_.Error("flatbuffer-too-large", "program flatbuffer exceeds the FlatBuffers 2 GiB limit", 0, "< 2 GiB",
                  std::to_string(program_size_) + " bytes");
    return;
  }
  if (size < kRuntimeHeadBytes) {
    // Program::load first reads 64 bytes (the space for an extended header)
    // and fails on a shorter file.
    report_.Error("truncated", "file is shorter than the 64 bytes ExecuTorch reads before the program", size,
                  ">= " + std::to_string(kRuntimeHeadBytes) + " bytes", std::to_string(size) + " bytes");
  }
  flatbuffers::Verifier::Options vo;
  vo.max_depth = opts.max_depth;
  vo.max_tables = opts.max_tables;
  vo.check_alignment = true;
  flatbuffers::Verifier v(d, static_cast<size_t>(program_size_), vo);
  if (!efb::VerifyProgramBuffer(v)) {
    report_.Error("flatbuffer-invalid",
                  "FlatBuffers verifier rejected the program (bad offsets, sizes, depth, "
                  "alignment or a truncated buffer)",
                  0, "a valid executorch_flatbuffer.Program", "verification failure");
    return;
  }
  const efb::Program* program = efb::GetProgram(d);
  // The verifier checks only the 4-byte alignment of a vector's length, not
  // that 8-byte elements are 8-byte aligned; reading such a vector would be
  // a misaligned load (a fault on some targets).
  if (auto off = FindMisalignedVector(*program, d)) {
    report_.Error("flatbuffer-misaligned", "a vector of 8-byte values in the program is not 8-byte aligned", *off,
                  "multiple of 8", "alignment " + std::to_string(AlignmentOf(*off)));
    return;
  }
  program_ = program;
  CheckProgram(opts);
}

namespace {

template <typename T>
uint64_t OffsetIn(const Bytes& file, const T* p) {
  return static_cast<uint64_t>(reinterpret_cast<const uint8_t*>(p) - file.data);
}

std::string Idx(const std::string& what, uint64_t i) { return what + "[" + std::to_string(i) + "]"; }

// ---- Checks for what ExecuTorch's runtime refuses (or crashes on) while it
// loads a program (Program::load with InternalConsistency, then
// Program::load_method). Each one reports one kind of problem at the file
// offset of the table it is about.

struct Where {
  Report& r;
  const Bytes& file;
  uint64_t at(const void* p) const { return OffsetIn(file, static_cast<const uint8_t*>(p)); }
};

// ExecutionPlan fields the runtime dereferences without a null check, or
// refuses when absent (MethodMeta, Method::init).
void CheckPlanFields(const Where& w, const efb::ExecutionPlan& plan, const std::string& pn) {
  auto need = [&](const void* field, const char* name) {
    if (field == nullptr) {
      w.r.Error("missing-field", pn + " has no " + name + " (ExecuTorch refuses to load the method)", w.at(&plan),
                std::string("a ") + name + " vector", "absent");
    }
  };
  need(plan.values(), "values");
  need(plan.non_const_buffer_sizes(), "non_const_buffer_sizes");
  need(plan.inputs(), "inputs");
  need(plan.outputs(), "outputs");
  need(plan.delegates(), "delegates");
  if (plan.chains() == nullptr || plan.chains()->size() == 0) {
    w.r.Error("no-chains", pn + " has no chains (ExecuTorch refuses to load a method without one)", w.at(&plan),
              "at least 1 chain", plan.chains() ? "0 chains" : "absent");
  }
}

// A value slot must hold a value: type NONE (0) or a type tag without its
// table is "Null value at index" to the runtime (Null is tag 1).
bool CheckValueSlot(const Where& w, const efb::EValue& ev, const std::string& vn) {
  if (ev.val_type() == efb::KernelTypes::NONE) {
    w.r.Error("null-value", vn + " has no value (union type NONE)", w.at(&ev),
              "a KernelTypes tag 1.." + std::to_string(static_cast<int>(efb::KernelTypes::MAX)), "0");
    return false;
  }
  return true;
}

// Tensor fields the runtime's tensor parser requires (tensor_parser_portable,
// program_validation). Returns false when the tensor's size cannot be known.
bool CheckTensorShape(const Where& w, const efb::Tensor& t, const std::string& tn) {
  int st = static_cast<int>(t.scalar_type());
  if (RuntimeElementSize(st) == 0) {
    w.r.Error("bad-enum", tn + " has an unknown scalar type", w.at(&t), "a known ScalarType", std::to_string(st));
    return false;
  }
  if (t.sizes() == nullptr) {
    w.r.Error("missing-field", tn + " has no sizes", w.at(&t), "a sizes vector", "absent");
    return false;
  }
  const size_t rank = t.sizes()->size();
  bool ok = true;
  if (rank > kRuntimeMaxRank) {
    w.r.Error("rank-too-large", tn + " has more dimensions than the runtime supports", w.at(t.sizes()),
              "<= " + std::to_string(kRuntimeMaxRank), std::to_string(rank));
    ok = false;
  }
  if (t.dim_order() == nullptr) {
    w.r.Error("missing-field", tn + " has no dim_order", w.at(&t), "a dim_order vector", "absent");
    ok = false;
  } else if (t.dim_order()->size() != rank) {
    w.r.Error("dim-order-mismatch", tn + " dim_order length differs from its rank", w.at(t.dim_order()),
              std::to_string(rank) + " entries", std::to_string(t.dim_order()->size()));
    ok = false;
  } else if (ok) {
    uint32_t seen = 0;
    for (size_t i = 0; i < rank; ++i) {
      uint8_t d = t.dim_order()->Get(static_cast<flatbuffers::uoffset_t>(i));
      if (d >= rank || (seen & (1u << d)) != 0) {
        w.r.Error("bad-dim-order", tn + " dim_order is not a permutation of its dimensions", w.at(t.dim_order()),
                  "a permutation of 0.." + std::to_string(rank - 1), Idx("dim_order", i) + " = " + std::to_string(d));
        ok = false;
        break;
      }
      seen |= 1u << d;
    }
  }
  if (t.storage_offset() != 0) {
    w.r.Error("unsupported", tn + " has a storage offset (the runtime supports none)", w.at(&t), "0",
              std::to_string(t.storage_offset()));
  }
  if (t.shape_dynamism() == efb::TensorShapeDynamism::DYNAMIC_UNBOUND) {
    w.r.Error("unsupported", tn + " has an unbounded dynamic shape (the runtime supports none)", w.at(&t),
              "STATIC or DYNAMIC_BOUND", "DYNAMIC_UNBOUND");
  }
  if (!TensorNbytes(t)) {
    w.r.Error("bad-shape", tn + " has a negative or overflowing shape", w.at(t.sizes()));
    return false;
  }
  return ok;
}

// Inputs and outputs the runtime can describe (MethodMeta's input_tag /
// output_tag know Null, Int, Double, Bool, String and Tensor only).
void CheckIoTags(const Where& w, const efb::ExecutionPlan& plan, const std::string& pn) {
  if (!plan.values()) return;
  const auto* vals = plan.values();
  auto check = [&](const flatbuffers::Vector<int32_t>* l, const char* what) {
    if (!l) return;
    for (size_t k = 0; k < l->size(); ++k) {
      int32_t i = l->Get(static_cast<flatbuffers::uoffset_t>(k));
      if (i < 0 || static_cast<size_t>(i) >= vals->size()) continue;  // index-out-of-range elsewhere
      auto ty = vals->Get(static_cast<flatbuffers::uoffset_t>(i))->val_type();
      if (ty == efb::KernelTypes::Null || ty == efb::KernelTypes::Int || ty == efb::KernelTypes::Double ||
          ty == efb::KernelTypes::Bool || ty == efb::KernelTypes::String || ty == efb::KernelTypes::Tensor) {
        continue;
      }
      w.r.Error("bad-io-type", pn + ": " + Idx(what, k) + " refers to a value the runtime cannot pass in or out",
                w.at(l), "Null, Int, Double, Bool, String or Tensor", std::string(efb::EnumNameKernelTypes(ty)));
    }
  };
  check(plan.inputs(), "inputs");
  check(plan.outputs(), "outputs");
}

// List values: the list must be there, and its items refer to values the
// runtime can use while it parses values in order (TensorList and
// OptionalTensorList items must already be parsed tensors).
void CheckListValue(const Where& w, const efb::ExecutionPlan& plan, size_t vi, const efb::EValue& ev,
                    const std::string& vn) {
  const auto* vals = plan.values();
  const size_t nvals = vals->size();
  auto missing = [&](const void* items) {
    if (items) return false;
    w.r.Error("missing-list", vn + " has no items", w.at(&ev), "an items vector", "absent");
    return true;
  };
  switch (ev.val_type()) {
    case efb::KernelTypes::IntList: {
      const auto* items = ev.val_as_IntList()->items();
      if (missing(items)) return;
      for (size_t k = 0; k < items->size(); ++k) {
        int64_t i = items->Get(static_cast<flatbuffers::uoffset_t>(k));
        if (i < 0 || static_cast<uint64_t>(i) >= nvals) {
          w.r.Error("index-out-of-range", vn + Idx(".items", k) + " is not a value index", w.at(items),
                    "0.." + std::to_string(nvals - 1), std::to_string(i));
          return;
        }
      }
      return;
    }
    case efb::KernelTypes::DoubleList:
      missing(ev.val_as_DoubleList()->items());
      return;
    case efb::KernelTypes::BoolList:
      missing(ev.val_as_BoolList()->items());
      return;
    case efb::KernelTypes::TensorList:
    case efb::KernelTypes::OptionalTensorList: {
      const bool optional = ev.val_type() == efb::KernelTypes::OptionalTensorList;
      const auto* items = optional ? ev.val_as_OptionalTensorList()->items() : ev.val_as_TensorList()->items();
      if (missing(items)) return;
      for (size_t k = 0; k < items->size(); ++k) {
        int32_t i = items->Get(static_cast<flatbuffers::uoffset_t>(k));
        if (optional && i == -1) continue;
        if (i < 0 || static_cast<size_t>(i) >= nvals) continue;  // index-out-of-range elsewhere
        auto ty = vals->Get(static_cast<flatbuffers::uoffset_t>(i))->val_type();
        bool ok_type = ty == efb::KernelTypes::Tensor || (optional && ty == efb::KernelTypes::Null);
        if (!ok_type) {
          w.r.Error("bad-list-item", vn + Idx(".items", k) + " does not refer to a tensor", w.at(items),
                    optional ? "a Tensor or Null value" : "a Tensor value", std::string(efb::EnumNameKernelTypes(ty)));
          return;
        }
        if (static_cast<size_t>(i) >= vi) {
          w.r.Error("forward-reference", vn + Idx(".items", k) + " refers to a value the runtime has not parsed yet",
                    w.at(items), "< " + std::to_string(vi), std::to_string(i));
          return;
        }
      }
      return;
    }
    case efb::KernelTypes::String:
      if (ev.val_as_String()->string_val() == nullptr) {
        w.r.Error("missing-string", vn + " (String) has no string_val", w.at(&ev), "a string", "absent");
      }
      return;
    default:
      return;
  }
}

// Delegate fields the runtime reads without a null check.
void CheckDelegateFields(const Where& w, const efb::Program& p, const efb::BackendDelegate& dl, const std::string& dn,
                         uint64_t segment_base_offset) {
  if (const auto* cs = dl.compile_specs()) {
    for (size_t c = 0; c < cs->size(); ++c) {
      const auto* spec = cs->Get(static_cast<flatbuffers::uoffset_t>(c));
      if (spec->key() == nullptr || spec->value() == nullptr) {
        w.r.Error("missing-field", dn + Idx(".compile_specs", c) + " has no " + (spec->key() ? "value" : "key"),
                  w.at(spec), "key and value", "absent");
      }
    }
  }
  const auto* pr = dl.processed();
  if (!pr) return;
  if (pr->location() == efb::DataLocation::INLINE) {
    const auto* bdd = p.backend_delegate_data();
    if (bdd && pr->index() < bdd->size() && bdd->Get(pr->index())->data() == nullptr) {
      w.r.Error("missing-field", dn + " refers to backend_delegate_data without data", w.at(bdd->Get(pr->index())),
                "a data vector", "absent");
    }
  } else if (pr->location() == efb::DataLocation::SEGMENT && segment_base_offset == 0) {
    // Program::LoadSegment refuses any segment when there is no segment base.
    w.r.Error("segments-without-header", dn + " data is in a segment but the file has no segment base offset", w.at(pr),
              "an eh00 header with segment_base_offset > 0", "0");
  }
}

// Instruction fields the runtime requires while it builds the chains.
void CheckInstructionFields(const Where& w, const efb::ExecutionPlan& plan, const efb::Instruction& ins,
                            const std::string& in) {
  if (ins.instr_args() == nullptr) return;  // reported with the instruction type
  switch (ins.instr_args_type()) {
    case efb::InstructionArguments::KernelCall: {
      const auto* k = ins.instr_args_as_KernelCall();
      if (!k->args()) w.r.Error("missing-field", in + " (KernelCall) has no args", w.at(k), "an args vector", "absent");
      const auto* ops = plan.operators();
      if (ops && k->op_index() >= 0 && static_cast<size_t>(k->op_index()) < ops->size()) {
        const auto* op = ops->Get(static_cast<flatbuffers::uoffset_t>(k->op_index()));
        if (op->name()) {
          size_t len = op->name()->size() + (op->overload() && op->overload()->size() ? op->overload()->size() + 1 : 0);
          if (len >= kRuntimeOperatorNameLimit) {
            w.r.Error("operator-name-too-long", in + " calls an operator whose name.overload the runtime cannot hold",
                      w.at(op), "< " + std::to_string(kRuntimeOperatorNameLimit) + " characters", std::to_string(len));
          }
        }
      }
      break;
    }
    case efb::InstructionArguments::DelegateCall: {
      const auto* k = ins.instr_args_as_DelegateCall();
      if (!k->args()) {
        w.r.Error("missing-field", in + " (DelegateCall) has no args", w.at(k), "an args vector", "absent");
      }
      break;
    }
    default:
      break;
  }
}

}  // namespace

void PteFile::CheckProgram(const ReadOptions& opts) {
  const efb::Program& p = *program_;
  const uint64_t fsize = file_.size;
  const Where where{report_, file_};
  auto at = [&](const void* ptr) { return OffsetIn(file_, static_cast<const uint8_t*>(ptr)); };
  auto check_str = [&](const flatbuffers::String* s, const std::string& what, bool required) {
    if (s == nullptr) {
      if (required) report_.Error("missing-string", what + " is missing");
      return;
    }
    if (!IsValidUtf8(s->c_str(), s->size())) {
      report_.Error("non-utf8", what + " is not valid UTF-8", at(s), "UTF-8 text", "invalid bytes");
    }
    // Names reach the runtime as C strings (c_str()): an embedded NUL makes it
    // look up another operator, method, backend or key than the file names.
    if (what.find(".string_val") == std::string::npos && std::memchr(s->c_str(), 0, s->size()) != nullptr) {
      report_.Error(
          "nul-in-name", what + " contains a NUL byte (the runtime reads it as a shorter name)", at(s),
          "no NUL before the end",
          "NUL at " + std::to_string(static_cast<const char*>(std::memchr(s->c_str(), 0, s->size())) - s->c_str()));
    }
  };

  // ---- segments
  const auto* segs = p.segments();
  size_t nseg = segs ? segs->size() : 0;
  bool any_data = false;
  for (size_t i = 0; i < nseg; ++i)
    any_data = any_data || segs->Get(static_cast<flatbuffers::uoffset_t>(i))->size() > 0;
  if (any_data && segment_base_offset_ == 0) {
    // ExecuTorch omits the header when all segments are empty; that is fine.
    report_.Error("segments-without-header",
                  "program lists segments but has no extended header giving their base offset", 8, "an eh00 header",
                  header_ ? "segment_base_offset 0" : "no header");
  }
  uint64_t prev_end = 0;
  for (size_t i = 0; i < nseg; ++i) {
    const auto* s = segs->Get(static_cast<flatbuffers::uoffset_t>(i));
    SegmentSpan span;
    span.offset = s->offset();
    span.size = s->size();
    const std::string name = Idx("segments", i);
    bool overflow = span.offset > UINT64_MAX - span.size || segment_base_offset_ > UINT64_MAX - span.offset - span.size;
    if (overflow) {
      report_.Error("segment-overflow", name + " offset + size overflows 64 bits", at(s), "a sum below 2^64",
                    "offset " + std::to_string(span.offset) + " + size " + std::to_string(span.size));
    } else {
      span.file_offset = segment_base_offset_ + span.offset;
      uint64_t end = span.file_offset + span.size;
      if (end > fsize) {
        report_.Error("segment-out-of-range", name + " runs past the end of the file", span.file_offset,
                      "end <= " + std::to_string(fsize), "end " + std::to_string(end));
      } else if (segment_base_offset_ != 0 || span.size == 0) {
        span.in_file = true;
      }
      if (header_ && header_->has_segment_data_size && header_->segment_data_size > 0 &&
          span.offset + span.size > header_->segment_data_size) {
        report_.Error("segment-out-of-range", name + " ends past the header's segment data size", span.file_offset,
                      "end <= " + std::to_string(header_->segment_data_size),
                      "end " + std::to_string(span.offset + span.size));
      }
      if (i > 0 && span.offset < prev_end) {
        report_.Error("segment-overlap", name + " overlaps or precedes the previous segment", span.file_offset,
                      "offset >= " + std::to_string(prev_end), std::to_string(span.offset));
      }
      prev_end = std::max(prev_end, span.offset + span.size);
      if (opts.segment_alignment > 1 && span.file_offset % opts.segment_alignment != 0) {
        report_.Error("segment-misaligned", name + " is not aligned", span.file_offset,
                      "multiple of " + std::to_string(opts.segment_alignment),
                      "alignment " + std::to_string(AlignmentOf(span.file_offset)));
      }
    }
    segments_.push_back(span);
  }
  auto seg_ok = [&](uint64_t idx, const std::string& what, const void* where) {
    if (idx >= nseg) {
      report_.Error("index-out-of-range", what + " refers to a segment that does not exist", at(where),
                    "< " + std::to_string(nseg), std::to_string(idx));
      return false;
    }
    return segments_[idx].in_file;
  };

  // ---- constants
  const auto* cseg = p.constant_segment();
  const auto* cbuf = p.constant_buffer();
  size_t n_const_offsets = cseg && cseg->offsets() ? cseg->offsets()->size() : 0;
  size_t n_const_buffers = cbuf ? cbuf->size() : 0;
  bool cseg_usable = false;
  uint64_t cseg_size = 0, cseg_file_off = 0;
  if (n_const_offsets > 0 && n_const_buffers > 0) {
    report_.Error("constants-in-both", "both constant_buffer and constant_segment hold constants", at(cseg),
                  "only one of them",
                  std::to_string(n_const_buffers) + " buffers and " + std::to_string(n_const_offsets) + " offsets");
  }
  if (n_const_offsets > 0) {
    if (seg_ok(cseg->segment_index(), "constant_segment.segment_index", cseg)) {
      cseg_usable = true;
      cseg_size = segments_[cseg->segment_index()].size;
      cseg_file_off = segments_[cseg->segment_index()].file_offset;
      uint64_t prev = 0;
      for (size_t i = 0; i < n_const_offsets; ++i) {
        uint64_t o = cseg->offsets()->Get(static_cast<flatbuffers::uoffset_t>(i));
        if (o > cseg_size) {
          report_.Error("constant-offset-out-of-range", Idx("constant_segment.offsets", i) + " is past the segment end",
                        cseg_file_off, "<= " + std::to_string(cseg_size), std::to_string(o));
        } else if (o < prev) {
          report_.Error("constant-offset-order", Idx("constant_segment.offsets", i) + " goes backwards",
                        cseg_file_off + o, ">= " + std::to_string(prev), std::to_string(o));
        }
        prev = std::max(prev, o);
      }
    }
  }
  size_t n_const = n_const_offsets > 0 ? n_const_offsets : n_const_buffers;

  // ---- mutable data segments
  const auto* mds = p.mutable_data_segments();
  if (mds) {
    for (size_t i = 0; i < mds->size(); ++i) {
      const auto* m = mds->Get(static_cast<flatbuffers::uoffset_t>(i));
      if (seg_ok(m->segment_index(), Idx("mutable_data_segments", i) + ".segment_index", m) && m->offsets()) {
        uint64_t ssize = segments_[m->segment_index()].size;
        for (size_t k = 0; k < m->offsets()->size(); ++k) {
          uint64_t o = m->offsets()->Get(static_cast<flatbuffers::uoffset_t>(k));
          if (o > ssize) {
            report_.Error("constant-offset-out-of-range",
                          Idx(Idx("mutable_data_segments", i) + ".offsets", k) + " is past the segment end",
                          segments_[m->segment_index()].file_offset, "<= " + std::to_string(ssize), std::to_string(o));
          }
        }
      }
    }
  }

  // ---- delegate data
  size_t n_inline = p.backend_delegate_data() ? p.backend_delegate_data()->size() : 0;

  // ---- named data
  if (const auto* nd = p.named_data()) {
    if (segs == nullptr) {
      // PteDataMap::create refuses named_data without a segments list.
      report_.Error("missing-field", "program has named_data but no segments list (ExecuTorch refuses to load it)",
                    at(&p), "a segments vector", "absent");
    }
    std::unordered_set<std::string> keys;
    for (size_t i = 0; i < nd->size(); ++i) {
      const auto* e = nd->Get(static_cast<flatbuffers::uoffset_t>(i));
      check_str(e->key(), Idx("named_data", i) + ".key", true);
      if (e->key() && !keys.insert(e->key()->str()).second) {
        report_.Error("duplicate-key", "named data key \"" + e->key()->str() + "\" appears more than once", at(e),
                      "unique keys", "duplicate");
      }
      seg_ok(e->segment_index(), Idx("named_data", i) + ".segment_index", e);
    }
  }

  // ---- execution plans
  if (n_const_offsets <= 1 && n_const_buffers > 0) {
    report_.Warn("deprecated-constant-buffer",
                 "constants are in Program.constant_buffer (before ExecuTorch 0.7); runtimes built without "
                 "ET_ENABLE_DEPRECATED_CONSTANT_BUFFER (upstream's CMake default) refuse this file",
                 at(cbuf), "a constant_segment", std::to_string(n_const_buffers) + " constant_buffer entries");
  }
  const auto* plans = p.execution_plan();
  if (plans == nullptr) {
    // validate_program: "Program has null execution_plan".
    report_.Error("missing-field", "program has no execution_plan list (ExecuTorch refuses to load it)", at(&p),
                  "an execution_plan vector", "absent");
    return;
  }
  if (plans->size() == 0) {
    report_.Warn("no-methods", "program has no execution plans (methods)");
    return;
  }
  std::set<std::string> method_names;
  for (size_t pi = 0; pi < plans->size(); ++pi) {
    const auto* plan = plans->Get(static_cast<flatbuffers::uoffset_t>(pi));
    const std::string pn = plan->name() ? plan->name()->str() : Idx("execution_plan", pi);
    check_str(plan->name(), Idx("execution_plan", pi) + ".name", true);
    if (plan->name() && !method_names.insert(pn).second) {
      report_.Error("duplicate-method", "method name \"" + pn + "\" is used twice", at(plan), "unique names",
                    "duplicate");
    }
    CheckPlanFields(where, *plan, pn);
    CheckIoTags(where, *plan, pn);
    size_t nvals = plan->values() ? plan->values()->size() : 0;
    size_t nops = plan->operators() ? plan->operators()->size() : 0;
    size_t ndel = plan->delegates() ? plan->delegates()->size() : 0;
    const auto* ncbs = plan->non_const_buffer_sizes();
    auto val_ok = [&](int64_t v, const std::string& what, const void* where, bool allow_neg1 = false) {
      if ((allow_neg1 && v == -1) || (v >= 0 && static_cast<uint64_t>(v) < nvals)) return;
      report_.Error("index-out-of-range", pn + ": " + what + " is not a value index", at(where),
                    "0.." + std::to_string(nvals == 0 ? 0 : nvals - 1), std::to_string(v));
    };
    auto check_list = [&](const flatbuffers::Vector<int32_t>* l, const std::string& what, const void* where,
                          bool allow_neg1 = false) {
      if (!l) return;
      for (size_t k = 0; k < l->size(); ++k)
        val_ok(l->Get(static_cast<flatbuffers::uoffset_t>(k)), Idx(what, k), where, allow_neg1);
    };
    check_list(plan->inputs(), "inputs", plan);
    check_list(plan->outputs(), "outputs", plan);
    if (ncbs) {
      for (size_t k = 0; k < ncbs->size(); ++k) {
        if (ncbs->Get(static_cast<flatbuffers::uoffset_t>(k)) < 0) {
          report_.Error("negative-size", pn + ": " + Idx("non_const_buffer_sizes", k) + " is negative", at(ncbs),
                        ">= 0", std::to_string(ncbs->Get(static_cast<flatbuffers::uoffset_t>(k))));
        }
      }
    }
    if (plan->operators()) {
      for (size_t k = 0; k < nops; ++k) {
        const auto* op = plan->operators()->Get(static_cast<flatbuffers::uoffset_t>(k));
        check_str(op->name(), pn + ": " + Idx("operators", k) + ".name", true);
        check_str(op->overload(), pn + ": " + Idx("operators", k) + ".overload", false);
      }
    }
    if (plan->delegates()) {
      for (size_t k = 0; k < ndel; ++k) {
        const auto* dl = plan->delegates()->Get(static_cast<flatbuffers::uoffset_t>(k));
        const std::string dn = pn + ": " + Idx("delegates", k);
        check_str(dl->id(), dn + ".id", true);
        const auto* pr = dl->processed();
        if (!pr) {
          report_.Error("missing-field", dn + " has no processed data reference", at(dl));
        } else if (pr->location() == efb::DataLocation::INLINE) {
          if (pr->index() >= n_inline) {
            report_.Error("index-out-of-range", dn + ".processed.index is not a backend_delegate_data index", at(pr),
                          "< " + std::to_string(n_inline), std::to_string(pr->index()));
          }
        } else if (pr->location() == efb::DataLocation::SEGMENT) {
          seg_ok(pr->index(), dn + ".processed.index", pr);
        } else {
          report_.Error("bad-enum", dn + ".processed.location is not INLINE or SEGMENT", at(pr), "0 or 1",
                        std::to_string(static_cast<int>(pr->location())));
        }
        CheckDelegateFields(where, p, *dl, dn, segment_base_offset_);
        if (dl->compile_specs()) {
          for (size_t c = 0; c < dl->compile_specs()->size(); ++c) {
            check_str(dl->compile_specs()->Get(static_cast<flatbuffers::uoffset_t>(c))->key(),
                      dn + Idx(".compile_specs", c) + ".key", false);
          }
        }
      }
    }
    // values
    if (plan->values()) {
      for (size_t vi = 0; vi < nvals; ++vi) {
        const auto* ev = plan->values()->Get(static_cast<flatbuffers::uoffset_t>(vi));
        const std::string vn = Idx("values", vi);
        // The verifier accepts unknown union type tags, and a tag without its value.
        if (ev->val_type() > efb::KernelTypes::MAX) {
          report_.Error("bad-enum", pn + ": " + vn + " has an unknown value type", at(ev), "a known KernelTypes",
                        std::to_string(static_cast<int>(ev->val_type())));
          continue;
        }
        if (!CheckValueSlot(where, *ev, pn + ": " + vn)) continue;
        if (ev->val() == nullptr && ev->val_type() != efb::KernelTypes::Null) {
          report_.Error("missing-field", pn + ": " + vn + " has a type tag but no value", at(ev), "a value", "none");
          continue;
        }
        if (ev->val() == nullptr) continue;
        CheckListValue(where, *plan, vi, *ev, pn + ": " + vn);
        switch (ev->val_type()) {
          case efb::KernelTypes::TensorList:
            check_list(ev->val_as_TensorList()->items(), vn + ".items", ev);
            break;
          case efb::KernelTypes::OptionalTensorList:
            check_list(ev->val_as_OptionalTensorList()->items(), vn + ".items", ev, true);
            break;
          case efb::KernelTypes::String:
            check_str(ev->val_as_String()->string_val(), pn + ": " + vn + ".string_val", false);
            break;
          case efb::KernelTypes::Tensor: {
            const auto* t = ev->val_as_Tensor();
            const std::string tn = pn + ": " + vn + " (tensor)";
            int st = static_cast<int>(t->scalar_type());
            if (!CheckTensorShape(where, *t, tn)) break;
            auto nbytes = TensorNbytes(*t);
            const auto* eti = t->extra_tensor_info();
            bool external = eti && eti->location() == efb::TensorDataLocation::EXTERNAL;
            if (eti) {
              check_str(eti->fully_qualified_name(), tn + ".extra_tensor_info.fully_qualified_name", external);
              if (external && eti->fully_qualified_name() && eti->fully_qualified_name()->size() == 0) {
                report_.Error("missing-string", tn + " is external but its key is empty", at(eti));
              }
            }
            if (const auto* ai = t->allocation_info()) {
              uint64_t mid = ai->memory_id();
              size_t nb = ncbs ? ncbs->size() : 0;
              if (mid == 0 || mid >= nb) {  // the runtime uses memory_id - 1; id 0 is reserved
                report_.Error("index-out-of-range", tn + ".allocation_info.memory_id is not a planned buffer", at(ai),
                              "1.." + std::to_string(nb == 0 ? 0 : nb - 1), std::to_string(mid));
              } else {
                uint64_t off = (static_cast<uint64_t>(ai->memory_offset_high()) << 32) | ai->memory_offset_low();
                int64_t bsz = ncbs->Get(static_cast<flatbuffers::uoffset_t>(mid));
                if (bsz >= 0 && (off > static_cast<uint64_t>(bsz) || *nbytes > static_cast<uint64_t>(bsz) - off)) {
                  report_.Error("planned-tensor-out-of-range", tn + " does not fit in its planned buffer", at(ai),
                                "offset + nbytes <= " + std::to_string(bsz),
                                std::to_string(off) + " + " + std::to_string(*nbytes));
                }
              }
            }
            uint32_t dbi = t->data_buffer_idx();
            if (dbi == 0 || external) break;
            if (t->allocation_info()) {
              // A mutable tensor with an initial state: the runtime loads it
              // from mutable_data_segments[0] at offsets[data_buffer_idx].
              size_t no = mds && mds->size() > 0 && mds->Get(0)->offsets() ? mds->Get(0)->offsets()->size() : 0;
              if (dbi >= no) {
                report_.Error("index-out-of-range",
                              tn + ".data_buffer_idx is out of range for the mutable data segment", at(t),
                              "< " + std::to_string(no), std::to_string(dbi));
              } else if (mds->Get(0)->segment_index() < nseg) {
                // load_mutable_subsegment_into: offset + nbytes within the segment.
                const SegmentSpan& ms = segments_[mds->Get(0)->segment_index()];
                uint64_t o = mds->Get(0)->offsets()->Get(dbi);
                if (o > ms.size || *nbytes > ms.size - o) {
                  report_.Error("tensor-out-of-range", tn + " initial state runs past the end of its mutable segment",
                                ms.file_offset + std::min(o, ms.size), "offset + nbytes <= " + std::to_string(ms.size),
                                std::to_string(o) + " + " + std::to_string(*nbytes));
                }
                if (segment_base_offset_ == 0) {
                  report_.Error("segments-without-header",
                                tn + " initial state is in a segment but the file has no "
                                     "segment base offset",
                                at(t), "an eh00 header with segment_base_offset > 0", "0");
                }
              }
              break;
            }
            if (dbi >= n_const) {
              report_.Error("index-out-of-range", tn + ".data_buffer_idx is not a constant buffer index", at(t),
                            "< " + std::to_string(n_const), std::to_string(dbi));
              break;
            }
            size_t es = RuntimeElementSize(st);
            if (n_const_offsets > 0 && cseg_usable) {
              uint64_t o = cseg->offsets()->Get(dbi);
              if (cseg_size == 0) {
                // The runtime maps an empty segment to no data and then looks
                // for the constant in the (absent) constant_buffer.
                report_.Error("tensor-out-of-range", tn + " refers to constant data but the constant segment is empty",
                              cseg_file_off, "a non-empty constant segment", "0 bytes");
              } else if (o > cseg_size || *nbytes > cseg_size - o) {
                report_.Error("tensor-out-of-range", tn + " data runs past the end of the constant segment",
                              cseg_file_off + std::min(o, cseg_size), "offset + nbytes <= " + std::to_string(cseg_size),
                              std::to_string(o) + " + " + std::to_string(*nbytes));
              }
              uint64_t fo = cseg_file_off + o;
              if (fo % es != 0) {
                // ExecuTorch loads such files (constant_tensor_alignment < element
                // size is allowed), but strict-alignment CPUs fault on them.
                report_.Warn("tensor-misaligned", tn + " data is not aligned for its element type", fo,
                             "multiple of " + std::to_string(es), "alignment " + std::to_string(AlignmentOf(fo)));
              }
              if (opts.tensor_alignment > 1 && o % opts.tensor_alignment != 0) {
                report_.Error("tensor-misaligned", tn + " data is not at the requested tensor alignment", fo,
                              "multiple of " + std::to_string(opts.tensor_alignment),
                              "alignment " + std::to_string(AlignmentOf(o)));
              }
            } else if (n_const_buffers > 0) {
              const auto* st_vec = cbuf->Get(dbi)->storage();
              uint64_t have = st_vec ? st_vec->size() : 0;
              if (*nbytes > have) {
                report_.Error("tensor-out-of-range", tn + " needs more bytes than its constant_buffer entry holds",
                              at(cbuf->Get(dbi)), ">= " + std::to_string(*nbytes), std::to_string(have));
              }
              if (st_vec && have > 0 && at(st_vec->data()) % es != 0) {
                report_.Warn("tensor-misaligned", tn + " inline data is not aligned for its element type",
                             at(st_vec->data()), "multiple of " + std::to_string(es),
                             "alignment " + std::to_string(AlignmentOf(at(st_vec->data()))));
              }
            }
            break;
          }
          default:
            break;
        }
      }
    }
    // chains and instructions
    if (plan->chains()) {
      for (size_t ci = 0; ci < plan->chains()->size(); ++ci) {
        const auto* ch = plan->chains()->Get(static_cast<flatbuffers::uoffset_t>(ci));
        const std::string cn = Idx("chains", ci);
        check_list(ch->inputs(), cn + ".inputs", ch);
        check_list(ch->outputs(), cn + ".outputs", ch);
        if (ch->instructions() == nullptr) {
          report_.Error("missing-field", pn + ": " + cn + " has no instructions list (ExecuTorch refuses it)", at(ch),
                        "an instructions vector", "absent");
        }
        size_t ninstr = ch->instructions() ? ch->instructions()->size() : 0;
        for (size_t ii = 0; ii < ninstr; ++ii) {
          const auto* ins = ch->instructions()->Get(static_cast<flatbuffers::uoffset_t>(ii));
          const std::string in = cn + Idx(".instructions", ii);
          if (ins->instr_args_type() > efb::InstructionArguments::MAX) {
            report_.Error("bad-enum", pn + ": " + in + " has an unknown instruction type", at(ins),
                          "a known InstructionArguments", std::to_string(static_cast<int>(ins->instr_args_type())));
            continue;
          }
          if (ins->instr_args_type() != efb::InstructionArguments::NONE && ins->instr_args() == nullptr) {
            report_.Error("missing-field", pn + ": " + in + " has a type tag but no arguments", at(ins), "arguments",
                          "none");
            continue;
          }
          CheckInstructionFields(where, *plan, *ins, pn + ": " + in);
          switch (ins->instr_args_type()) {
            case efb::InstructionArguments::KernelCall: {
              const auto* k = ins->instr_args_as_KernelCall();
              if (k->op_index() < 0 || static_cast<size_t>(k->op_index()) >= nops) {
                report_.Error("index-out-of-range", pn + ": " + in + " calls an operator that does not exist", at(k),
                              "< " + std::to_string(nops), std::to_string(k->op_index()));
              }
              check_list(k->args(), in + ".args", k);
              break;
            }
            case efb::InstructionArguments::DelegateCall: {
              const auto* k = ins->instr_args_as_DelegateCall();
              if (k->delegate_index() < 0 || static_cast<size_t>(k->delegate_index()) >= ndel) {
                report_.Error("index-out-of-range", pn + ": " + in + " calls a delegate that does not exist", at(k),
                              "< " + std::to_string(ndel), std::to_string(k->delegate_index()));
              }
              check_list(k->args(), in + ".args", k);
              break;
            }
            case efb::InstructionArguments::MoveCall: {
              const auto* k = ins->instr_args_as_MoveCall();
              val_ok(k->move_from(), in + ".move_from", k);
              val_ok(k->move_to(), in + ".move_to", k);
              break;
            }
            case efb::InstructionArguments::JumpFalseCall: {
              const auto* k = ins->instr_args_as_JumpFalseCall();
              val_ok(k->cond_value_index(), in + ".cond_value_index", k);
              if (k->destination_instruction() < 0 || static_cast<size_t>(k->destination_instruction()) >= ninstr) {
                report_.Error("index-out-of-range", pn + ": " + in + " jumps outside its chain", at(k),
                              "< " + std::to_string(ninstr), std::to_string(k->destination_instruction()));
              }
              break;
            }
            case efb::InstructionArguments::FreeCall:
              val_ok(ins->instr_args_as_FreeCall()->value_index(), in + ".value_index", ins);
              break;
            case efb::InstructionArguments::NONE:
              report_.Error("missing-field", pn + ": " + in + " has no arguments", at(ins));
              break;
          }
        }
        if (ch->stacktrace() && ch->stacktrace()->size() != ninstr) {
          report_.Warn("stacktrace-length", pn + ": " + cn + " has a stack trace per instruction expected",
                       at(ch->stacktrace()), std::to_string(ninstr) + " entries",
                       std::to_string(ch->stacktrace()->size()));
        }
      }
    }
  }
}

namespace {

std::string DimsText(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

template <typename T>
std::vector<int64_t> ToDims(const T* v) {
  std::vector<int64_t> out;
  if (v) out.assign(v->begin(), v->end());
  return out;
}

template <typename T>
std::vector<int64_t> ToDims(const std::vector<T>& v) {
  return std::vector<int64_t>(v.begin(), v.end());
}

struct KeyHolder {
  const PtdFile* ptd = nullptr;
  const PtdEntry* entry = nullptr;
};

// The layout the runtime compares (validateTensorLayout): dtype, rank, sizes,
// dim order; and the bytes the .ptd holds for it.
void CompareExternalTensor(const Where& w, const efb::Tensor& t, const std::string& key, const KeyHolder& h) {
  const PtdEntry& e = *h.entry;
  const std::string where = "external tensor \"" + key + "\" and its entry in " + h.ptd->name();
  if (!e.has_layout) {
    w.r.Error("external-layout-missing", where + ": the entry has no tensor_layout (the runtime needs one)",
              w.at(t.extra_tensor_info()), "a tensor_layout", "none");
    return;
  }
  const int st = static_cast<int>(t.scalar_type());
  if (st != e.scalar_type) {
    w.r.Error("external-layout-mismatch", where + " differ in dtype", w.at(&t),
              std::string(ScalarTypeName(e.scalar_type)) + " (.ptd)", std::string(ScalarTypeName(st)) + " (.pte)");
  }
  if (ToDims(t.sizes()) != ToDims(e.sizes)) {
    w.r.Error("external-layout-mismatch", where + " differ in shape", w.at(&t), DimsText(ToDims(e.sizes)) + " (.ptd)",
              DimsText(ToDims(t.sizes())) + " (.pte)");
  }
  if (ToDims(t.dim_order()) != ToDims(e.dim_order)) {
    w.r.Error("external-layout-mismatch", where + " differ in dim order", w.at(&t),
              DimsText(ToDims(e.dim_order)) + " (.ptd)", DimsText(ToDims(t.dim_order())) + " (.pte)");
  }
  auto nbytes = TensorNbytes(t);
  if (nbytes && e.valid && e.size != *nbytes) {
    w.r.Error("external-size-mismatch", where + " differ in byte size", w.at(&t),
              std::to_string(*nbytes) + " bytes (.pte tensor)", std::to_string(e.size) + " bytes (.ptd entry)");
  }
}

}  // namespace

void PteFile::CheckExternalKeys(const std::vector<const PtdFile*>& ptds) {
  if (!program_ || !program_->execution_plan()) return;
  const Where w{report_, file_};
  // The runtime resolves external tensors in the data map given to
  // load_method (the .ptd files, merged), never in this file's named_data.
  std::unordered_map<std::string, KeyHolder> keys;
  for (const PtdFile* ptd : ptds) {
    if (!ptd) continue;
    for (const auto& e : ptd->entries()) {
      auto [it, inserted] = keys.emplace(e.key, KeyHolder{ptd, &e});
      if (!inserted && it->second.ptd != ptd) {
        // MergedDataMap::load refuses a key held by two data maps.
        report_.Error("duplicate-key",
                      "key \"" + e.key + "\" is in two .ptd files: " + it->second.ptd->name() + " (entry at offset " +
                          std::to_string(it->second.entry->table_offset) + ") and " + ptd->name() +
                          " (entry at offset " + std::to_string(e.table_offset) + ")",
                      std::nullopt, "each key in one .ptd file", "2 files");
      }
    }
  }
  if (!ptds.empty() && program_->named_data()) {
    // Method::init merges the .ptd data with this file's named_data.
    size_t total = keys.size();
    for (const auto* nd : *program_->named_data()) {
      if (!nd->key()) continue;
      ++total;
      auto it = keys.find(nd->key()->str());
      if (it != keys.end()) {
        report_.Error("duplicate-key",
                      "named data key \"" + it->first + "\" is also in " + it->second.ptd->name() +
                          " (the runtime refuses to merge them)",
                      w.at(nd), "keys unique across the .pte and its .ptd files", "duplicate");
      }
    }
    if (total == 0) {
      report_.Error("empty-data-maps",
                    "the program has an empty named_data list and the .ptd files hold no keys (the runtime "
                    "refuses to merge empty data maps)",
                    w.at(program_->named_data()), "at least one key", "0 keys");
    }
  }
  for (const auto* plan : *program_->execution_plan()) {
    if (!plan->values()) continue;
    for (const auto* ev : *plan->values()) {
      if (ev->val_type() != efb::KernelTypes::Tensor || ev->val() == nullptr) continue;
      const auto* t = ev->val_as_Tensor();
      const auto* eti = t->extra_tensor_info();
      if (!eti || eti->location() != efb::TensorDataLocation::EXTERNAL || !eti->fully_qualified_name()) continue;
      const std::string key = eti->fully_qualified_name()->str();
      auto it = keys.find(key);
      if (it == keys.end()) {
        report_.Error("dangling-external-key", "external tensor \"" + key + "\" is not in any given .ptd file",
                      w.at(eti), "a key in the .ptd named_data", "missing");
        continue;
      }
      CompareExternalTensor(w, *t, key, it->second);
    }
  }
}

std::vector<std::string> PteFile::ExternalKeys() const {
  std::vector<std::string> out;
  if (!program_ || !program_->execution_plan()) return out;
  std::set<std::string> seen;
  for (const auto* plan : *program_->execution_plan()) {
    if (!plan->values()) continue;
    for (const auto* ev : *plan->values()) {
      if (ev->val_type() != efb::KernelTypes::Tensor || ev->val() == nullptr) continue;
      const auto* eti = ev->val_as_Tensor()->extra_tensor_info();
      if (!eti || eti->location() != efb::TensorDataLocation::EXTERNAL || !eti->fully_qualified_name()) continue;
      if (seen.insert(eti->fully_qualified_name()->str()).second) out.push_back(eti->fully_qualified_name()->str());
    }
  }
  return out;
}

}  // namespace ptepack
