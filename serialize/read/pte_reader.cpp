#include "serialize/read/pte_reader.h"

#include <cstring>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "serialize/format/program_verify.h"
#include "serialize/read/leading_bytes.h"
#include "serialize/read/plan_checks.h"
#include "serialize/read/program_checks.h"
#include "serialize/read/ptd_reader.h"

namespace ptepack {

namespace efb = executorch_flatbuffer;

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

std::optional<uint64_t> TensorNbytes(const efb::Tensor& t) {
  const auto* sizes = t.sizes();
  return TensorNbytes(static_cast<ScalarType>(t.scalar_type()), sizes ? sizes->data() : nullptr,
                      sizes ? sizes->size() : 0);
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
  const uint64_t size = file_size_;
  if (size < 8) {
    report_.Error("truncated", "file too short to hold a flatbuffer root offset and file identifier", 0, ">= 8 bytes",
                  std::to_string(size) + " bytes");
    return;
  }
  if (!CheckIdentifier()) return;
  program_size_ = size;
  if (size >= 12 && std::memcmp(file_.data + 8, kExtendedHeaderMagic, 4) == 0 && !ParseExtendedHeader()) return;
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
  if (!VerifyProgram(opts)) return;
  segments_ = CheckProgramTables(Where{report_, file_, file_size_},
                                 ProgramFrame{*program_, header_, segment_base_offset_}, opts);
  // The memory plan, once the tables it reads are known to be sound.
  if (report_.ok() && opts.check_memory_plan && PlanCheckEnabled()) {
    CheckMemoryPlan(Where{report_, file_, file_size_}, *program_);
  }
}

bool PteFile::CheckIdentifier() {
  const std::string id(reinterpret_cast<const char*>(file_.data + 4), 4);
  if (id == kProgramId) return true;
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (id[0] == 'E' && id[1] == 'T' && alnum(id[2]) && alnum(id[3])) {
    report_.Error("unsupported-version", "program schema version not supported by this reader", 4, "\"ET12\"",
                  "\"" + id + "\"");
    return false;
  }
  std::string hint;
  if (id == kFlatTensorId) hint = " (this looks like a .ptd FlatTensor file)";
  if (id.rfind("BP", 0) == 0) hint = " (this looks like a BundledProgram .bpte file)";
  report_.Error("bad-magic", "not an ExecuTorch program: wrong file identifier" + hint, 4, "\"ET12\"",
                "bytes " + Hex(LoadU32(file_.data + 4)));
  return false;
}

// The "eh00" extended header after the root offset and identifier: sets
// header_, program_size_ and segment_base_offset_.
bool PteFile::ParseExtendedHeader() {
  const uint64_t size = file_size_;
  const uint8_t* d = file_.data;
  if (size < 8 + kExtendedHeaderMinLength) {
    report_.Error("truncated", "file ends inside the extended header", size,
                  ">= " + std::to_string(8 + kExtendedHeaderMinLength) + " bytes", std::to_string(size) + " bytes");
    return false;
  }
  ExtendedHeader h;
  h.length = LoadU32(d + 12);
  if (h.length < kExtendedHeaderMinLength) {
    report_.Error("header-length", "extended header length too small", 12,
                  ">= " + std::to_string(kExtendedHeaderMinLength), std::to_string(h.length));
    return false;
  }
  if (8 + static_cast<uint64_t>(h.length) > size) {
    report_.Error("header-length", "extended header length runs past the end of the file", 12,
                  "<= " + std::to_string(size - 8), std::to_string(h.length));
    return false;
  }
  h.program_size = LoadU64(d + 16);
  h.segment_base_offset = LoadU64(d + 24);
  h.has_segment_data_size = h.length >= kExtendedHeaderLength;
  h.segment_data_size = h.has_segment_data_size ? LoadU64(d + 32) : 0;
  header_ = h;
  if (h.program_size < 8 + static_cast<uint64_t>(h.length)) {
    report_.Error("program-size", "program size smaller than the headers it contains", 16,
                  ">= " + std::to_string(8 + h.length), std::to_string(h.program_size));
    return false;
  }
  if (h.program_size > size) {
    report_.Error("program-size-past-eof", "program size runs past the end of the file", 16,
                  "<= " + std::to_string(size), std::to_string(h.program_size));
    return false;
  }
  program_size_ = h.program_size;
  segment_base_offset_ = h.segment_base_offset;
  CheckSegmentBase(h);
  return true;
}

void PteFile::CheckSegmentBase(const ExtendedHeader& h) {
  const uint64_t size = file_size_;
  if (h.segment_base_offset != 0 && h.segment_base_offset < h.program_size) {
    report_.Error("segment-base-overlaps-program", "segment base offset lies inside the program data", 24,
                  ">= " + std::to_string(h.program_size), std::to_string(h.segment_base_offset));
  }
  if (h.segment_base_offset > size) {
    report_.Error("segment-base-past-eof", "segment base offset is past the end of the file", 24,
                  "<= " + std::to_string(size), std::to_string(h.segment_base_offset));
  }
  if (!h.has_segment_data_size || h.segment_data_size == 0) return;
  if (h.segment_base_offset > UINT64_MAX - h.segment_data_size) {
    report_.Error("segment-overflow", "segment base offset + segment data size overflows", 32, "a sum below 2^64",
                  std::to_string(h.segment_base_offset) + " + " + std::to_string(h.segment_data_size));
  } else if (h.segment_base_offset + h.segment_data_size > size) {
    report_.Error("truncated", "file is shorter than the header's segment data says", size,
                  std::to_string(h.segment_base_offset + h.segment_data_size) + " bytes",
                  std::to_string(size) + " bytes");
  }
}

// FlatBuffers' verifier plus the alignment of 8-byte vectors; sets program_.
bool PteFile::VerifyProgram(const ReadOptions& opts) {
  const uint8_t* d = file_.data;
  const ProgramVerdict verdict =
      VerifyProgramBytes(d, static_cast<size_t>(program_size_), opts.max_depth, opts.max_tables, true);
  if (verdict == ProgramVerdict::kTooManyTables) {
    report_.Error("flatbuffer-invalid",
                  "the program has more than " + std::to_string(opts.max_tables) +
                      " tables: FlatBuffers' verifier limit, which ExecuTorch's runtime applies too when it "
                      "verifies a program (Verification::InternalConsistency); otherwise it is well formed",
                  0, "at most " + std::to_string(opts.max_tables) + " tables",
                  "more than " + std::to_string(opts.max_tables) + " tables");
    return false;
  }
  if (verdict == ProgramVerdict::kInvalid) {
    report_.Error("flatbuffer-invalid",
                  "FlatBuffers verifier rejected the program (bad offsets, sizes, depth, "
                  "alignment or a truncated buffer)",
                  0, "a valid executorch_flatbuffer.Program", "verification failure");
    return false;
  }
  const efb::Program* program = efb::GetProgram(d);
  // The verifier checks only the 4-byte alignment of a vector's length, not
  // that 8-byte elements are 8-byte aligned; reading such a vector would be
  // a misaligned load (a fault on some targets).
  if (auto off = FindMisalignedVector(*program, d)) {
    report_.Error("flatbuffer-misaligned", "a vector of 8-byte values in the program is not 8-byte aligned", *off,
                  "multiple of 8", "alignment " + std::to_string(AlignmentOf(*off)));
    return false;
  }
  program_ = program;
  return true;
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
std::vector<int64_t> ToDims(const PtdDims<T>& v) {
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
  const Where w{report_, file_, file_size_};
  // The runtime resolves external tensors in the data map given to
  // load_method (the .ptd files, merged), never in this file's named_data.
  std::unordered_map<std::string_view, KeyHolder> keys;  // views of the .ptd files' keys
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
      auto it = keys.find(nd->key()->string_view());
      if (it != keys.end()) {
        report_.Error("duplicate-key",
                      "named data key \"" + std::string(it->first) + "\" is also in " + it->second.ptd->name() +
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
