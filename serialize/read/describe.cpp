#include "serialize/read/describe.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "serialize/io/report.h"
#include "serialize/read/file_description.h"

namespace ptepack {

using nlohmann::json;

namespace {

json FindingJson(const Finding& f) {
  json j{{"severity", f.severity == Finding::Severity::kError ? "error" : "warning"},
         {"code", f.code},
         {"message", f.message},
         {"file", f.file}};
  if (f.offset) j["offset"] = *f.offset;
  if (!f.expected.empty()) j["expected"] = f.expected;
  if (!f.found.empty()) j["found"] = f.found;
  return j;
}

json FindingsArray(const std::vector<Finding>& findings) {
  json a = json::array();
  for (const auto& f : findings) a.push_back(FindingJson(f));
  return a;
}

// An input's or output's summary (a tag this version does not know is named
// by the raw tag, as flatc names it).
json ValueSummary(const MethodDescription& m, int32_t idx) {
  json j{{"index", idx}};
  if (idx < 0 || static_cast<size_t>(idx) >= m.info.values.size()) return j;
  const ValueInfo& v = m.info.values[static_cast<size_t>(idx)];
  j["kind"] = v.kind == ValueKind::kUnknown ? m.unknown_kind_names.at(v.index) : ValueKindName(v.kind);
  if (!v.tensor) return j;  // not a tensor, or a tag without a value (reported by the reader)
  j["dtype"] = ScalarTypeName(static_cast<int>(v.tensor->dtype));
  j["sizes"] = v.tensor->shape;
  j["dynamism"] = ShapeDynamismName(v.tensor->shape_dynamism);
  return j;
}

// Compile specs of a delegate: each key with its value's size, and the value
// itself when it is small (as text when printable, else as hex).
json CompileSpecsJson(const DelegateDescription& d) {
  constexpr size_t kSmallValue = 64;
  json list = json::array();
  for (const auto& cs : d.compile_specs) {
    const size_t n = cs.value.size();
    json e{{"key", cs.key}, {"size", n}};
    if (n > 0 && n <= kSmallValue) {
      const uint8_t* b = cs.value.data();
      if (std::all_of(b, b + n, [](uint8_t c) { return c >= 0x20 && c < 0x7f; })) {
        e["text"] = std::string(reinterpret_cast<const char*>(b), n);
      } else {
        static const char* kHex = "0123456789abcdef";
        std::string hex;
        for (size_t i = 0; i < n; ++i) hex += kHex[b[i] >> 4], hex += kHex[b[i] & 15];
        e["hex"] = hex;
      }
    }
    list.push_back(e);
  }
  return list;
}

json ScalarJson(const ScalarValueInfo& s) {
  switch (s.kind) {
    case ValueKind::kInt:
      return json(s.int_val);
    case ValueKind::kBool:
      return json(s.bool_val);
    case ValueKind::kDouble:
      return json(s.double_val);
    case ValueKind::kString:
      return json(s.string_val);
    case ValueKind::kIntList:
      return json(s.ints);
    case ValueKind::kDoubleList:
      return json(s.doubles);
    case ValueKind::kBoolList:
      return json(s.bools);
    default:
      return json(nullptr);
  }
}

json StackTraceJson(const StackTraceSampleInfo& st) {
  json fj = json::array();
  for (const auto& f : st.frames) {
    fj.push_back({{"filename", f.filename}, {"lineno", f.lineno}, {"name", f.name}, {"context", f.context}});
  }
  return {{"chain", st.chain}, {"instruction", st.instruction}, {"frames", fj}};
}

// Tensors with stored data (constants, external tensors, mutable state with
// an initial value): value index, name, dtype, shape, bytes, where the data is.
json StoredTensorsJson(const MethodInfo& m, bool constant_segment) {
  json list = json::array();
  for (const ValueInfo& v : m.values) {
    if (!v.tensor) continue;
    const TensorInfo& t = *v.tensor;
    const bool external = t.location == TensorLocation::kExternal || t.external_initial_state;
    if (!external && t.data_buffer == 0) continue;
    list.push_back({{"value", v.index},
                    {"name", t.key},
                    {"dtype", ScalarTypeName(static_cast<int>(t.dtype))},
                    {"sizes", t.shape},
                    {"bytes", t.nbytes ? json(*t.nbytes) : json(nullptr)},
                    {"location", external           ? "external"
                                 : t.planned        ? "mutable data"
                                 : constant_segment ? "constant segment"
                                                    : "constant_buffer"},
                    {"buffer", t.data_buffer}});
  }
  return list;
}

std::string Human(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::ostringstream o;
  if (u == 0)
    o << n << " B";
  else
    o.precision(1), o << std::fixed << v << " " << units[u];
  return o.str();
}

}  // namespace

json FindingsJson(const std::vector<const Report*>& reports) {
  json a = json::array();
  for (const Report* r : reports) {
    for (const auto& f : r->findings()) a.push_back(FindingJson(f));
  }
  return a;
}

namespace {

// DescribePte's steps, in document order. Segment roles are filled in by the
// steps that find a segment's user (constants, mutable data, named data,
// delegates) and read by Segments().
class PteDescriber {
 public:
  explicit PteDescriber(const FileDescription& fd) : fd_(fd), nseg_(fd.segments.size()) {}

  json Describe() {
    Header();
    if (!fd_.has_program) return d_;
    d_["version"] = fd_.version;
    DataRoles();
    for (const auto& ptd : fd_.ptds) {
      for (const auto& e : ptd.entries) ptd_keys_.insert(e.key);
    }
    json methods = json::array();
    for (const auto& m : fd_.methods) methods.push_back(Method(m));
    d_["methods"] = methods;
    Segments();
    Constants();
    d_["delegate_dedup_bytes_saved"] = DelegateDedupSaved();
    NamedData();
    d_["external_tensors"] = external_;
    json pj = json::array();
    for (const auto& ptd : fd_.ptds) pj.push_back(PtdJson(ptd));
    d_["ptd_files"] = pj;
    return d_;
  }

 private:
  void Header() {
    d_["file"] = fd_.file;
    d_["format"] = "pte";
    d_["size"] = fd_.size;
    d_["valid"] = fd_.valid;
    d_["findings"] = FindingsArray(fd_.findings);
    json hdr;
    if (fd_.file_identifier) hdr["file_identifier"] = *fd_.file_identifier;
    if (fd_.extended_header) {
      const auto& h = *fd_.extended_header;
      hdr["extended_header"] = {{"magic", "eh00"},
                                {"length", h.length},
                                {"program_size", h.program_size},
                                {"segment_base_offset", h.segment_base_offset}};
      if (h.has_segment_data_size) hdr["extended_header"]["segment_data_size"] = h.segment_data_size;
    } else {
      hdr["extended_header"] = nullptr;
    }
    hdr["program_size"] = fd_.program_size;
    hdr["header_size"] = fd_.header_size;
    hdr["flatbuffer_size"] = fd_.flatbuffer_size;
    hdr["segment_base_offset"] = fd_.segment_base_offset;
    d_["header"] = hdr;
  }

  // Roles of the segments holding constants, mutable data and named data.
  void DataRoles() {
    if (!fd_.constant_offsets.empty()) role_[fd_.constant_segment] = "constants";
    for (uint32_t s : fd_.mutable_data_segments) role_[s] = "mutable data";
    for (const auto& nd : fd_.named_data) {
      if (!nd.has_key) continue;
      // One segment can hold the data of several keys: name them all.
      auto& r = role_[nd.segment];
      const bool more = r.rfind("named data ", 0) == 0;
      r = (more ? r + ", \"" : "named data \"") + nd.key + "\"";
    }
  }

  json Method(const MethodDescription& md) {
    const MethodInfo& info = md.info;
    json m;
    m["name"] = info.name;
    json ins = json::array(), outs = json::array();
    for (int32_t i : info.inputs) ins.push_back(ValueSummary(md, i));
    for (int32_t i : info.outputs) outs.push_back(ValueSummary(md, i));
    m["inputs"] = ins;
    m["outputs"] = outs;
    m["num_values"] = info.values.size();
    m["num_chains"] = md.num_chains;
    m["num_instructions"] = info.num_instructions;
    m["stacktraces"] = md.stacktraces;
    m["operators"] = info.operators;
    json dels = json::array();
    for (const auto& dl : md.delegates) dels.push_back(Delegate(dl));
    m["delegates"] = dels;
    m["non_const_buffer_sizes"] = md.non_const_buffer_sizes;
    CountTensors(info);
    m["mutable_buffer_names"] = md.mutable_buffer_names;
    m["stored_tensors"] = StoredTensorsJson(info, !fd_.constant_offsets.empty());
    if (md.returns) {
      json r = json::array();
      for (const auto& v : *md.returns) r.push_back(ScalarJson(v));
      m["returns"] = r;
    }
    if (md.stacktrace_sample) m["stacktrace_sample"] = StackTraceJson(*md.stacktrace_sample);
    return m;
  }

  json Delegate(const DelegateDescription& dl) {
    json dj;
    dj["backend_id"] = dl.info.backend_id;
    if (dl.has_processed) {
      dj["location"] = dl.info.in_segment ? "segment" : "inline";
      dj["index"] = dl.info.index;
      if (dl.file_offset) dj["file_offset"] = *dl.file_offset;
      if (dl.size) dj["size"] = *dl.size;
      if (dl.info.in_segment && dl.info.index < nseg_) {
        auto& r = role_[dl.info.index];
        if (r.empty()) r = "delegate " + dl.info.backend_id;
      }
    }
    dj["compile_specs"] = dl.info.compile_specs;
    dj["compile_spec_values"] = CompileSpecsJson(dl);
    return dj;
  }

  // Walks the method's tensors (typed, as the runtime places them): external
  // ones go to external_tensors, constants are counted per buffer.
  void CountTensors(const MethodInfo& info) {
    for (const ValueInfo& v : info.values) {
      if (!v.tensor) continue;
      const TensorInfo& t = *v.tensor;
      if (t.location == TensorLocation::kExternal || t.external_initial_state) {
        json e{{"key", t.key}, {"method", info.name}, {"value", v.index}, {"mutable", t.planned.has_value()}};
        if (!fd_.ptds.empty()) e["found"] = ptd_keys_.count(t.key) > 0;
        external_.push_back(e);
        continue;
      }
      if (t.location == TensorLocation::kConstant) {
        auto& br = buffer_refs_[t.data_buffer];
        br.first = std::max<uint64_t>(br.first, t.nbytes.value_or(0));
        br.second++;
      }
    }
  }

  void Segments() {
    json segs = json::array();
    for (size_t i = 0; i < nseg_; ++i) {
      const auto& s = fd_.segments[i];
      segs.push_back({{"index", i},
                      {"offset", s.offset},
                      {"file_offset", s.file_offset},
                      {"size", s.size},
                      {"role", role_.count(i) ? role_[i] : "unreferenced"}});
      // The largest power of two dividing the offset (none for offset 0); the
      // alignment the file was written with is the inferred config's.
      if (s.file_offset != 0) segs.back()["alignment"] = AlignmentOf(s.file_offset);
    }
    d_["segments"] = segs;
  }

  void Constants() {
    json c;
    const size_t noff = fd_.constant_offsets.size();
    const size_t ncb = fd_.constant_buffers;
    c["storage"] = noff > 0 ? "segment" : (ncb > 0 ? "inline (legacy constant_buffer)" : "none");
    c["count"] = noff > 0 ? noff : ncb;
    json bufs = json::array();
    uint64_t total = 0, saved = 0;
    int shared = 0;
    for (const auto& [idx, ref] : buffer_refs_) {
      json b{{"index", idx}, {"nbytes", ref.first}, {"tensors", ref.second}};
      if (noff > 0 && idx < noff) {
        uint64_t o = fd_.constant_offsets[idx];
        b["offset"] = o;
        if (fd_.constant_segment < nseg_) {
          uint64_t fo = fd_.segments[fd_.constant_segment].file_offset + o;
          b["file_offset"] = fo;
          b["alignment"] = AlignmentOf(fo);
        }
      }
      total += ref.first;
      if (ref.second > 1) {
        saved += ref.first * static_cast<uint64_t>(ref.second - 1);
        ++shared;
      }
      bufs.push_back(b);
    }
    if (noff > 0 && fd_.constant_segment < nseg_) c["segment_index"] = fd_.constant_segment;
    c["bytes"] = total;
    c["buffers"] = bufs;
    c["shared_buffers"] = shared;
    // Tensors sharing one stored copy: what storing them separately would have cost.
    c["dedup_bytes_saved"] = saved;
    d_["constants"] = c;
  }

  // Delegate blobs shared between delegates: what storing them separately
  // would have cost.
  uint64_t DelegateDedupSaved() const {
    std::map<uint32_t, int> seg_users;
    for (const auto& m : fd_.methods) {
      for (const auto& dl : m.delegates) {
        if (dl.has_processed && dl.info.in_segment) seg_users[dl.info.index]++;
      }
    }
    uint64_t saved = 0;
    for (const auto& [si, n] : seg_users) {
      if (n > 1 && si < nseg_) saved += fd_.segments[si].size * static_cast<uint64_t>(n - 1);
    }
    return saved;
  }

  void NamedData() {
    json nd = json::array();
    for (const auto& e : fd_.named_data) {
      json j{{"key", e.key}, {"segment", e.segment}};
      if (e.size) j["size"] = *e.size;
      nd.push_back(j);
    }
    d_["named_data"] = nd;
  }

  const FileDescription& fd_;
  const size_t nseg_;
  json d_;
  std::map<size_t, std::string> role_;
  std::map<uint32_t, std::pair<uint64_t, int>> buffer_refs_;  // idx -> (nbytes, refs)
  json external_ = json::array();
  std::set<std::string> ptd_keys_;
};

}  // namespace

json DescribePte(const PteFile& pte, const std::vector<const PtdFile*>& ptds) {
  return DescribePteJson(DescribeFile(pte, ptds));
}

json DescribePteJson(const FileDescription& d) { return PteDescriber(d).Describe(); }

namespace {

// A .ptd's description without "segments" and "entries" (the parts that grow with the file).
json PtdHeadJson(const PtdDescription& ptd) {
  json d;
  d["file"] = ptd.file;
  d["format"] = "ptd";
  d["size"] = ptd.size;
  d["valid"] = ptd.valid;
  d["findings"] = FindingsArray(ptd.findings);
  const auto& h = ptd.header;
  d["header"] = {{"flatbuffer_offset", h.flatbuffer_offset},
                 {"flatbuffer_size", h.flatbuffer_size},
                 {"segment_base_offset", h.segment_base_offset},
                 {"segment_data_size", h.segment_data_size}};
  d["layout"] = ptd.legacy ? "legacy (before 2025-06)" : "current";
  return d;
}

json PtdSegmentJson(const PtdDescription& ptd, size_t i) {
  const auto& s = ptd.segments[i];
  return {{"index", i},
          {"offset", s.offset},
          {"file_offset", s.file_offset},
          {"size", s.size},
          {"alignment", AlignmentOf(s.file_offset)}};
}

json PtdEntryJson(const PtdEntryDescription& e) {
  json j{{"key", e.key}, {"segment", e.segment}, {"offset", e.offset}, {"size", e.size}};
  if (e.has_layout) {
    j["dtype"] = ScalarTypeName(e.scalar_type);
    j["sizes"] = e.sizes;
  }
  return j;
}

std::string Dump2(const json& j) { return j.dump(2, ' ', false, json::error_handler_t::replace); }

// `"name": [ ... ]` at depth 1 of a dump(2), one element made at a time.
void WriteArray(std::ostream& out, const char* name, size_t n, const std::function<json(size_t)>& element) {
  out << "  \"" << name << "\": [";
  for (size_t i = 0; i < n; ++i) {
    std::string e = Dump2(element(i));
    std::string indented;
    indented.reserve(e.size() + 64);
    for (char c : e) {
      indented += c;
      if (c == '\n') indented += "    ";
    }
    out << (i ? ",\n    " : "\n    ") << indented;
  }
  out << (n ? "\n  ]" : "]");
}

}  // namespace

json PtdJson(const PtdDescription& ptd) {
  json d = PtdHeadJson(ptd);
  json segs = json::array();
  for (size_t i = 0; i < ptd.segments.size(); ++i) segs.push_back(PtdSegmentJson(ptd, i));
  d["segments"] = segs;
  json entries = json::array();
  for (const auto& e : ptd.entries) entries.push_back(PtdEntryJson(e));
  d["entries"] = entries;
  return d;
}

json DescribePtd(const PtdFile& ptd) { return PtdJson(DescribePtdFile(ptd)); }

void WritePtdJson(const PtdFile& ptd, std::ostream& out) {
  // Keys print in sorted order: entries, file ... layout, segments, size, valid.
  const PtdDescription head = DescribePtdHead(ptd);
  json hj = PtdHeadJson(head);
  hj["entries"] = 0;
  hj["segments"] = 0;
  const std::string text = Dump2(hj);
  const std::string first = "{\n  \"entries\": 0,\n", mid = "\n  \"segments\": 0,\n";
  const size_t seg = text.find(mid);
  if (text.compare(0, first.size(), first) != 0 || seg == std::string::npos) {
    throw std::logic_error("WritePtdJson: unexpected key order");
  }
  out << "{\n";
  WriteArray(out, "entries", PtdEntryCount(ptd), [&](size_t i) { return PtdEntryJson(DescribePtdEntry(ptd, i)); });
  out << ",\n" << text.substr(first.size(), seg + 1 - first.size());
  WriteArray(out, "segments", head.segments.size(), [&](size_t i) { return PtdSegmentJson(head, i); });
  out << ",\n" << text.substr(seg + mid.size()) << "\n";
}

namespace {

void RenderFindings(std::ostringstream& o, const json& d) {
  for (const auto& f : d["findings"]) {
    o << "  " << f["severity"].get<std::string>() << " [" << f["code"].get<std::string>() << "]";
    if (f.contains("offset")) o << " at offset " << f["offset"].get<uint64_t>();
    o << ": " << f["message"].get<std::string>();
    if (f.contains("expected") || f.contains("found")) {
      o << " (expected " << f.value("expected", "-") << ", found " << f.value("found", "-") << ")";
    }
    o << "\n";
  }
}

std::string Shape(const json& v) {
  std::string s = v.value("kind", "?");
  if (v.contains("dtype")) {
    s = v["dtype"].get<std::string>() + "[";
    bool first = true;
    for (const auto& x : v["sizes"]) {
      s += (first ? "" : ",") + std::to_string(x.get<int64_t>());
      first = false;
    }
    s += "]";
  }
  return s;
}

void RenderDelegateText(std::ostringstream& o, const json& dl) {
  o << "  delegate " << dl["backend_id"].get<std::string>() << ": " << dl.value("location", std::string("?")) << " #"
    << dl.value("index", 0u);
  if (dl.contains("size")) o << ", " << dl["size"].get<uint64_t>() << " bytes";
  if (dl.contains("file_offset")) o << " at file offset " << dl["file_offset"].get<uint64_t>();
  o << "\n";
  if (!dl.contains("compile_spec_values") || dl["compile_spec_values"].empty()) return;
  o << "    compile specs:";
  for (const auto& cs : dl["compile_spec_values"]) {
    o << " " << cs["key"].get<std::string>();
    if (cs.contains("text")) {
      o << "=\"" << cs["text"].get<std::string>() << "\"";
    } else if (cs.contains("hex")) {
      o << "=0x" << cs["hex"].get<std::string>();
    } else {
      o << " (" << Human(cs["size"].get<uint64_t>()) << ")";
    }
  }
  o << "\n";
}

void RenderStoredTensorsText(std::ostringstream& o, const json& m, bool list) {
  const json& ts = m.value("stored_tensors", json::array());
  if (ts.empty()) return;
  if (!list) {
    o << "  stored tensors: " << ts.size() << " (list them with --tensor PATTERN)\n";
    return;
  }
  for (const auto& t : ts) {
    o << "  tensor #" << t["value"].get<uint64_t>() << " "
      << (t["name"].get<std::string>().empty() ? "(unnamed)" : t["name"].get<std::string>()) << ": " << Shape(t) << ", "
      << (t["bytes"].is_null() ? std::string("?") : Human(t["bytes"].get<uint64_t>())) << ", "
      << t["location"].get<std::string>();
    if (t["location"] != "external") o << " buffer " << t["buffer"].get<uint64_t>();
    o << "\n";
  }
}

void RenderMethodText(std::ostringstream& o, const json& m, bool list_tensors) {
  if (m.contains("returns")) {  // a metadata method: one line
    std::string r;
    for (const auto& v : m["returns"]) r += (r.empty() ? "" : ", ") + v.dump();
    o << "method \"" << m["name"].get<std::string>() << "\" (constant): returns " << r << "\n";
    return;
  }
  auto n = [](uint64_t k, const char* one) { return std::to_string(k) + " " + one + (k == 1 ? "" : "s"); };
  o << "method \"" << m["name"].get<std::string>() << "\": " << n(m["num_values"].get<uint64_t>(), "value") << ", "
    << n(m["num_instructions"].get<uint64_t>(), "instruction") << " in " << n(m["num_chains"].get<uint64_t>(), "chain")
    << ", stack traces " << (m["stacktraces"].get<bool>() ? "present" : "absent") << "\n";
  o << "  inputs:";
  for (const auto& v : m["inputs"]) o << " #" << v["index"].get<int64_t>() << ":" << Shape(v);
  o << "\n  outputs:";
  for (const auto& v : m["outputs"]) o << " #" << v["index"].get<int64_t>() << ":" << Shape(v);
  o << "\n  operators (" << m["operators"].size() << "):";
  for (const auto& op : m["operators"]) o << " " << op.get<std::string>();
  o << "\n";
  for (const auto& dl : m["delegates"]) RenderDelegateText(o, dl);
  // Entry 0 of non_const_buffer_sizes is reserved; the runtime's planned buffer i is entry i + 1.
  o << "  planned buffers:";
  const auto& ncbs = m["non_const_buffer_sizes"];
  if (ncbs.size() <= 1) o << " none";
  for (size_t i = 1; i < ncbs.size(); ++i) {
    int64_t v = ncbs[i].get<int64_t>();
    o << (i > 1 ? "," : "") << " #" << i - 1 << " " << (v < 0 ? std::to_string(v) : Human(static_cast<uint64_t>(v)));
  }
  o << "\n";
  // Added by the API layer (serialize/insight/plan.h) for a file without errors outside its plan.
  if (m.contains("memory_plan") && m["memory_plan"]["planned_tensors"].get<uint64_t>() > 0) {
    const auto& mp = m["memory_plan"];
    o << "  memory plan: planned " << Human(mp["planned"].get<uint64_t>());
    if (mp["lower_bound"].is_null()) {
      o << ", lower bound not derived: " << mp["not_checked"].get<std::string>() << "\n";
    } else {
      char pct[64];
      std::snprintf(pct, sizeof pct, " (%.1f %% above)", mp["above_lower_bound_percent"].get<double>());
      o << ", lower bound " << Human(mp["lower_bound"].get<uint64_t>()) << pct << "\n";
    }
  }
  if (!m["mutable_buffer_names"].empty()) {
    o << "  mutable buffer names:";
    for (const auto& n : m["mutable_buffer_names"]) o << " " << n.get<std::string>();
    o << "\n";
  }
  RenderStoredTensorsText(o, m, list_tensors);
  if (m.contains("stacktrace_sample")) {
    const auto& st = m["stacktrace_sample"];
    o << "  stack trace of instruction " << st["instruction"].get<uint64_t>() << ":\n";
    for (const auto& f : st["frames"]) {
      o << "    " << f["filename"].get<std::string>() << ":" << f["lineno"].get<int64_t>() << " in "
        << f["name"].get<std::string>() << ": " << f["context"].get<std::string>() << "\n";
    }
  }
}

}  // namespace

namespace {

void RenderPteHeaderText(std::ostringstream& o, const json& d) {
  o << d["file"].get<std::string>() << ": ExecuTorch program, " << Human(d["size"].get<uint64_t>()) << " ("
    << d["size"].get<uint64_t>() << " bytes), " << (d["valid"].get<bool>() ? "valid" : "INVALID") << "\n";
  if (!d["findings"].empty()) {
    o << "findings:\n";
    RenderFindings(o, d);
  }
  const auto& h = d["header"];
  o << "header: file identifier " << h.value("file_identifier", std::string("?"));
  // Program size = header + flatbuffer (README, "Sizes").
  const std::string sizes = "program size " + std::to_string(h["program_size"].get<uint64_t>()) + " (header " +
                            std::to_string(h.value("header_size", uint64_t{0})) + " + flatbuffer " +
                            std::to_string(h.value("flatbuffer_size", uint64_t{0})) + ")";
  if (h["extended_header"].is_null()) {
    // Without eh00 there is no segment data: any segment the program lists is empty.
    o << ", no extended header, so no segment data; " << sizes << "\n";
  } else {
    const auto& e = h["extended_header"];
    o << ", eh00 length " << e["length"].get<uint64_t>() << ", " << sizes << ", segment base offset "
      << e["segment_base_offset"].get<uint64_t>();
    if (e.contains("segment_data_size")) o << ", segment data size " << e["segment_data_size"].get<uint64_t>();
    o << "\n";
  }
}

void RenderConfigText(std::ostringstream& o, const json& cfg, bool verbose) {
  if (cfg.contains("segment_alignment")) {
    // A setting the file cannot tell is shown as what fits ("2048..16384", "flatc or
    // flatc-legacy"), not as the one value chosen to rewrite it.
    auto shown = [&cfg](const char* field, const std::string& value) {
      for (const auto& a : cfg.value("ambiguous", nlohmann::json::array())) {
        if (a["field"] == field && a["fits"].is_object() && a["fits"].contains("text"))
          return a["fits"]["text"].get<std::string>();
      }
      return value;
    };
    auto opt = [](const nlohmann::json& v) { return v.is_null() ? std::string("default") : v.dump(); };
    const bool extracted = cfg["extract_delegate_segments"].get<bool>();
    o << "written with: segment alignment " << shown("segment_alignment", cfg["segment_alignment"].dump())
      << ", constant tensor alignment " << shown("constant_tensor_alignment", opt(cfg["constant_tensor_alignment"]))
      << ", delegate alignment " << shown("delegate_alignment", opt(cfg["delegate_alignment"]))
      << ", delegate segments "
      << (shown("extract_delegate_segments", "") == "true or false" ? "extracted or inline"
          : extracted                                               ? "extracted"
                                                                    : "inline")
      << ", flatbuffer order " << shown("flatbuffer_order", cfg["flatbuffer_order"].get<std::string>())
      << (cfg["reproduces_file_exactly"].get<bool>() ? "" : " (closest match; not reproduced byte for byte)") << "\n";
    // Said once; each one (what fits, the value chosen to rewrite it, why) with --verbose.
    const json ambiguous = cfg.value("ambiguous", nlohmann::json::array());
    if (!ambiguous.empty()) {
      o << "  " << ambiguous.size() << (ambiguous.size() == 1 ? " setting" : " settings")
        << " cannot be told from this file (any value shown writes the same bytes)"
        << (verbose ? ":" : "; --verbose lists them") << "\n";
    }
    for (const auto& a : verbose ? ambiguous : json::array()) {
      o << "    " << a["field"].get<std::string>() << ": " << a["fits"].value("text", std::string("?")) << " ("
        << a["chosen"].get<std::string>() << " chosen); " << a["why"].get<std::string>() << "\n";
    }
  } else {
    o << "written with: not inferred (" << cfg["reason"].get<std::string>() << ")\n";
  }
}

void RenderSegmentsText(std::ostringstream& o, const json& d) {
  o << "segments (" << d["segments"].size() << "):\n";
  const bool no_data = d["header"]["extended_header"].is_null();
  for (const auto& s : d["segments"]) {
    if (no_data && s["size"].get<uint64_t>() == 0) {  // nothing in the file to place
      o << "  [" << s["index"].get<uint64_t>() << "] empty: " << s["role"].get<std::string>() << "\n";
      continue;
    }
    o << "  [" << s["index"].get<uint64_t>() << "] file offset " << s["file_offset"].get<uint64_t>() << ", size "
      << s["size"].get<uint64_t>();
    if (s.contains("aligned")) {
      o << (s["aligned"].get<bool>() ? ", aligned" : ", NOT aligned") << " to the segment alignment "
        << s["segment_alignment"].get<uint64_t>();
    }
    o << ": " << s["role"].get<std::string>() << "\n";
  }
}

void RenderConstantsText(std::ostringstream& o, const json& d) {
  const auto& c = d["constants"];
  o << "constants: " << c["storage"].get<std::string>() << ", " << c["count"].get<uint64_t>() << " buffer(s), "
    << Human(c["bytes"].get<uint64_t>()) << " used by tensors";
  if (c["shared_buffers"].get<int>() > 0) {
    o << "; " << c["shared_buffers"].get<int>() << " shared, dedup saved "
      << Human(c["dedup_bytes_saved"].get<uint64_t>());
  }
  o << "\n";
  for (const auto& b : c["buffers"]) {
    o << "  buffer " << b["index"].get<uint64_t>() << ": " << b["nbytes"].get<uint64_t>() << " bytes";
    if (b.contains("file_offset")) {
      o << " at file offset " << b["file_offset"].get<uint64_t>() << " (a multiple of "
        << b["alignment"].get<uint64_t>() << ")";
    }
    if (b["tensors"].get<int>() > 1) o << ", shared by " << b["tensors"].get<int>() << " tensors";
    o << "\n";
  }
  if (d["delegate_dedup_bytes_saved"].get<uint64_t>() > 0) {
    o << "delegate blobs shared between delegates saved " << Human(d["delegate_dedup_bytes_saved"].get<uint64_t>())
      << "\n";
  }
}

void RenderKeysText(std::ostringstream& o, const json& d) {
  if (!d["named_data"].empty()) {
    o << "named data (" << d["named_data"].size() << "):\n";
    for (const auto& n : d["named_data"]) {
      o << "  \"" << n["key"].get<std::string>() << "\" -> segment " << n["segment"].get<uint64_t>();
      if (n.contains("size")) o << ", " << n["size"].get<uint64_t>() << " bytes";
      o << "\n";
    }
  }
  if (!d["external_tensors"].empty()) {
    o << "external tensors (" << d["external_tensors"].size() << "):\n";
    for (const auto& e : d["external_tensors"]) {
      o << "  \"" << e["key"].get<std::string>() << "\" (" << e["method"].get<std::string>() << " value "
        << e["value"].get<uint64_t>() << (e["mutable"].get<bool>() ? ", mutable" : "") << ")";
      if (e.contains("found")) o << (e["found"].get<bool>() ? " found in .ptd" : " MISSING from the .ptd files");
      o << "\n";
    }
  }
}

}  // namespace

std::string RenderPteText(const json& d, bool verbose) {
  std::ostringstream o;
  RenderPteHeaderText(o, d);
  if (!d.contains("methods")) return o.str();
  o << "program version " << d["version"].get<uint64_t>() << ", " << d["methods"].size() << " method(s)\n";
  if (d.contains("config")) RenderConfigText(o, d["config"], verbose);
  for (const auto& m : d["methods"]) RenderMethodText(o, m, d.value("list_tensors", false));
  RenderSegmentsText(o, d);
  RenderConstantsText(o, d);
  RenderKeysText(o, d);
  for (const auto& p : d["ptd_files"]) o << RenderPtdText(p);
  return o.str();
}

namespace {

void RenderPtdHeadText(std::ostringstream& o, const json& d) {
  o << d["file"].get<std::string>() << ": FlatTensor data, " << Human(d["size"].get<uint64_t>()) << " ("
    << d["size"].get<uint64_t>() << " bytes), " << d["layout"].get<std::string>() << " layout, "
    << (d["valid"].get<bool>() ? "valid" : "INVALID") << "\n";
  if (!d["findings"].empty()) {
    o << "findings:\n";
    RenderFindings(o, d);
  }
  const auto& h = d["header"];
  o << "header: FH01, flatbuffer " << h["flatbuffer_size"].get<uint64_t>() << " bytes, segment base offset "
    << h["segment_base_offset"].get<uint64_t>() << ", segment data size " << h["segment_data_size"].get<uint64_t>()
    << "\n";
}

std::string SegmentLine(const json& s) {
  std::ostringstream o;
  o << "  [" << s["index"].get<uint64_t>() << "] file offset " << s["file_offset"].get<uint64_t>() << ", size "
    << s["size"].get<uint64_t>() << ", offset a multiple of " << s["alignment"].get<uint64_t>() << "\n";
  return o.str();
}

std::string EntryLine(const json& e) {
  std::ostringstream o;
  o << "  \"" << e["key"].get<std::string>() << "\": segment " << e["segment"].get<uint64_t>() << " + "
    << e["offset"].get<uint64_t>() << ", " << e["size"].get<uint64_t>() << " bytes";
  if (e.contains("dtype")) {
    o << ", " << Shape(json{{"dtype", e["dtype"]}, {"sizes", e["sizes"]}});
  }
  o << "\n";
  return o.str();
}

}  // namespace

std::string RenderPtdText(const json& d) {
  std::ostringstream o;
  RenderPtdHeadText(o, d);
  o << "segments (" << d["segments"].size() << "):\n";
  for (const auto& s : d["segments"]) o << SegmentLine(s);
  o << "entries (" << d["entries"].size() << "):\n";
  for (const auto& e : d["entries"]) o << EntryLine(e);
  return o.str();
}

void WritePtdText(const PtdFile& ptd, const std::function<void(const std::string&)>& emit) {
  const PtdDescription head = DescribePtdHead(ptd);
  std::ostringstream o;
  RenderPtdHeadText(o, PtdHeadJson(head));
  o << "segments (" << head.segments.size() << "):\n";
  emit(o.str());
  for (size_t i = 0; i < head.segments.size(); ++i) emit(SegmentLine(PtdSegmentJson(head, i)));
  const size_t n = PtdEntryCount(ptd);
  emit("entries (" + std::to_string(n) + "):\n");
  for (size_t i = 0; i < n; ++i) emit(EntryLine(PtdEntryJson(DescribePtdEntry(ptd, i))));
}

}  // namespace ptepack
