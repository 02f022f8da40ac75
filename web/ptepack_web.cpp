// The browser viewer's entry points (issue 26): ptepack's read side, compiled to WebAssembly
// by scripts/build-web.sh, called by the page (web/app.js) through embind.
//
// The page reads each file by slices (Blob.slice): its first 64 bytes, then as many leading
// bytes as LeadingBytesNeeded asks for (headers and flatbuffer), or the whole file when it is
// small, and hands them here with the file's total size. Everything the page shows is
// computed by the same code as the CLI's: verify's findings, inspect's description, size, the
// byte map, the graph and the memory plan (`ptepack plan --json` with `map --memory`'s
// picture). Each view is one function in Views(); Analyze returns the JSON of every view, and
// the page draws each one it finds (a view it does not know, as tables; a view it knows that is
// absent, as "not in this build"). The memory plan, like verify, the byte map and the graph,
// needs only the headers and the flatbuffer, so a file read by its leading bytes gets it too.
#include <emscripten/bind.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ptepack/error.h"
#include "ptepack/version.h"
#include "serialize/api/read_api.h"
#include "serialize/bpte/bpte.h"
#include "serialize/format/pte_format.h"
#include "serialize/insight/byte_map.h"
#include "serialize/insight/graph.h"
#include "serialize/insight/plan.h"
#include "serialize/insight/plan_map.h"
#include "serialize/insight/size.h"
#include "serialize/read/describe.h"
#include "serialize/read/leading_bytes.h"

namespace ptepack::web {
namespace {

using nlohmann::json;

// The bytes the page read of one file.
struct Input {
  std::string name;
  Bytes head;  // the whole file, or its leading bytes
  uint64_t size = 0;
  bool whole() const { return head.size == size; }
  bool IsPtd() const { return KindOf(head) == FileKind::kPtd; }  // told by the identifier, as the library does
  bool IsBpte() const { return whole() && KindOf(head) == FileKind::kBpte; }
};

// One document: a .pte with the .ptd files given with it, a .ptd alone, or a .bpte; read as
// `verify` reads it (.ptd files of the legacy layout are errors) and as `inspect` does (they
// are explained).
struct Document {
  const Input* file = nullptr;
  std::vector<const Input*> ptds;
  std::unique_ptr<bpte::BpteFile> bpte;
  LoadedFiles verify, inspect;
};

LoadedFiles Load(const Input& file, const std::vector<const Input*>& ptds, const ReadOptions& ro) {
  LoadedFiles l;
  if (file.IsPtd()) {
    l.lone_ptd = PtdFile::FromLeadingBytes(file.head, file.size, file.name, ro);
    return l;
  }
  l.pte = PteFile::FromLeadingBytes(file.head, file.size, file.name, ro);
  for (const Input* p : ptds) l.ptds.push_back(PtdFile::FromLeadingBytes(p->head, p->size, p->name, ro));
  if (!ptds.empty()) l.pte->CheckExternalKeys(l.ptd_ptrs());
  return l;
}

json ErrorJson(const Error& e) {
  const Finding& f = e.finding();
  json j = {{"code", f.code}, {"message", f.message}};
  if (!f.file.empty()) j["file"] = f.file;
  if (f.offset) j["offset"] = *f.offset;
  return {{"error", j}};
}

// What was not read, for verify's not_checked.
std::vector<std::string> Unread(const Document& d) {
  std::vector<std::string> out;
  std::vector<const Input*> all{d.file};
  all.insert(all.end(), d.ptds.begin(), d.ptds.end());
  for (const Input* i : all) {
    if (i->whole()) continue;
    out.push_back(i->name + ": bytes " + std::to_string(i->head.size) + " to " + std::to_string(i->size) +
                  " (segment data) were not read: nothing that needs them is checked (checksums, the config "
                  "inference)");
  }
  return out;
}

// `ptepack verify --json`.
json VerifyView(Document& d) {
  if (d.bpte) {
    const bpte::BpteFile& f = *d.bpte;
    return {{"file", f.name()},
            {"format", "bpte"},
            {"valid", f.ok()},
            {"strict", false},
            {"not_checked", json::array()},
            {"findings", FindingsJson({&f.report()})}};
  }
  Verdict v = Judge(d.verify, /*strict=*/false);
  for (const auto& u : Unread(d)) v.unchecked.push_back(u);
  return VerdictJson(d.file->name, v, /*strict=*/false, d.verify.reports());
}

// `ptepack inspect --json`.
// Read as verify reads (a legacy .ptd explained, and INVALID): the CLI's one verdict per file.
json InspectView(Document& d) {
  if (d.bpte) return bpte::DescribeBpte(*d.bpte);
  if (d.verify.lone_ptd) return DescribePtd(*d.verify.lone_ptd);
  return InspectDocument(d.verify);
}

bool AllOk(const LoadedFiles& l) {
  for (const Report* r : l.reports()) {
    if (!r->ok()) return false;
  }
  return true;
}

const PteFile* Program(const Document& d) { return d.bpte ? d.bpte->program() : d.inspect.pte.get(); }

// `ptepack size --json --top <all>`: a file with errors (verify's: a legacy .ptd is one, as
// `size` without --allow-legacy-ptd says) is not broken down.
json SizeView(Document& d) {
  const PteFile* pte = Program(d);
  const bool ok = d.bpte ? d.bpte->program_ok() : AllOk(d.verify);
  if (!ok) {
    return {
        {"error", {{"code", "invalid"}, {"message", "the file has errors, so it is not broken down (see verify)"}}}};
  }
  SizeReport r;
  if (d.inspect.lone_ptd) {
    r.pte = AnalyzePtdSize(*d.inspect.lone_ptd);
  } else {
    r = AnalyzeSize(*pte, d.bpte ? std::vector<const PtdFile*>{} : d.inspect.ptd_ptrs());
  }
  return SizeJson(r, SIZE_MAX, SizeSort::kBytes);
}

// `ptepack map -o X.svg` (and `--log`) of the file and of each .ptd.
json MapView(Document& d) {
  const bool ok = d.bpte ? d.bpte->program_ok() : AllOk(d.verify);
  if (!ok)
    return {{"error", {{"code", "invalid"}, {"message", "the file has errors, so it is not mapped (see verify)"}}}};
  std::vector<FileSize> files;
  if (d.inspect.lone_ptd) {
    files.push_back(AnalyzePtdSize(*d.inspect.lone_ptd));
  } else {
    SizeReport r = AnalyzeSize(*Program(d), d.bpte ? std::vector<const PtdFile*>{} : d.inspect.ptd_ptrs());
    files.push_back(r.pte);
    files.insert(files.end(), r.ptds.begin(), r.ptds.end());
  }
  json out = json::array();
  for (const FileSize& f : files) {
    json bands = json::array();
    for (const SizeBand& b : f.bands) {
      bands.push_back({{"kind", b.kind}, {"label", b.label}, {"offset", b.offset}, {"size", b.size}});
    }
    ByteMapOptions log;
    log.log_scale = true;
    out.push_back({{"file", f.file},
                   {"size", f.file_size},
                   {"svg", ByteMapSvg(f)},
                   {"svg_log", ByteMapSvg(f, log)},
                   {"bands", bands}});
  }
  return {{"files", out}};
}

// `ptepack graph`'s graph, as data (the page lays it out).
json GraphView(Document& d) {
  const PteFile* pte = Program(d);
  if (!pte) return {{"error", {{"code", "no-program"}, {"message", "a .ptd file holds data, not a program"}}}};
  return GraphJson(*pte);
}

// `ptepack plan --json` (the default algorithms, alignment inferred per buffer) with `ptepack map
// --memory -o X.svg`'s picture as "svg". As the CLI does: shown for a plan `verify` flags (the
// picture draws those tensors in red), refused for a file with any other error (its tables cannot
// be trusted).
json PlanView(Document& d) {
  if (d.inspect.lone_ptd) {
    return {
        {"error", {{"code", "no-program"}, {"message", "a .ptd file holds data, not a program: it plans no memory"}}}};
  }
  const PteFile* pte = Program(d);
  if (!pte || !pte->program()) {
    return {{"error", {{"code", "invalid"}, {"message", "no verified program to plan (see verify)"}}}};
  }
  // A .bpte: its wrapped program's findings (as SizeView judges it).
  const std::vector<const Report*> reports = d.bpte ? std::vector<const Report*>{&pte->report()} : d.inspect.reports();
  size_t plan_errors = 0;
  for (const Report* r : reports) {
    for (const Finding& f : r->findings()) {
      if (f.severity != Finding::Severity::kError) continue;
      if (f.code.rfind("plan-", 0) != 0) {
        return {
            {"error",
             {{"code", "invalid"}, {"message", "the file has errors, so its memory plan is not shown (see verify)"}}}};
      }
      ++plan_errors;
    }
  }
  json j = PlanJson(AnalyzePlan(*pte));
  j["plan_errors"] = plan_errors;
  j["svg"] = MemoryMapSvg(*pte);
  return j;
}

struct View {
  const char* name;
  json (*run)(Document&);
};

// The views, in the page's order; the page draws each from its JSON.
const std::vector<View>& Views() {
  static const std::vector<View> views = {{"inspect", InspectView}, {"verify", VerifyView}, {"size", SizeView},
                                          {"map", MapView},         {"graph", GraphView},   {"plan", PlanView}};
  return views;
}

}  // namespace

// The files of one drop: each .pte (or .bpte) is a document with every .ptd dropped with it;
// .ptd files dropped alone are documents of their own.
class Session {
 public:
  // Takes the malloc'ed buffer `ptr` of `n` leading bytes of the file `name` of `size` bytes.
  void Add(const std::string& name, uintptr_t ptr, double n, double size) {
    auto* p = reinterpret_cast<uint8_t*>(ptr);
    std::shared_ptr<void> owner(p, [](void* q) { std::free(q); });
    Input in;
    in.name = name;
    in.head = Bytes::View(p, static_cast<size_t>(n), owner);
    in.size = static_cast<uint64_t>(size);
    inputs_.push_back(std::move(in));
  }

  // {"documents": [{"file", "kind", "size", "bytes_read", "ptds", "views": {name: json},
  //  "view_ms": {name: milliseconds}}]}
  std::string Analyze() const {
    json docs = json::array();
    std::vector<const Input*> ptds, mains;
    for (const Input& i : inputs_) (i.IsPtd() ? ptds : mains).push_back(&i);
    if (mains.empty()) {
      for (const Input* p : ptds) docs.push_back(AnalyzeOne(*p, {}));
    } else {
      for (const Input* m : mains) docs.push_back(AnalyzeOne(*m, ptds));
    }
    return json{{"version", PTEPACK_VERSION_STRING}, {"documents", docs}}.dump(-1, ' ', false,
                                                                               json::error_handler_t::replace);
  }

  void Clear() { inputs_.clear(); }

 private:
  static json AnalyzeOne(const Input& file, const std::vector<const Input*>& ptds) {
    Document d;
    d.file = &file;
    json doc = {{"file", file.name}, {"size", file.size}};
    uint64_t read = file.head.size;
    json names = json::array();
    if (!file.IsPtd()) {
      d.ptds = ptds;
      for (const Input* p : ptds) read += p->head.size, names.push_back(p->name);
    }
    doc["ptds"] = names;
    doc["bytes_read"] = read;
    doc["whole"] = Unread(d).empty();
    json views = json::object();
    try {
      if (file.IsBpte()) {
        d.bpte = bpte::BpteFile::FromBytes(file.head, file.name);
        doc["kind"] = "bpte";
      } else {
        ReadOptions verify_ro;
        verify_ro.allow_legacy_ptd = false;  // verify judges legacy .ptd files; inspect explains them
        d.verify = Load(file, d.ptds, verify_ro);
        d.inspect = Load(file, d.ptds, ReadOptions{});
        doc["kind"] = file.IsPtd() ? "ptd" : "pte";
      }
    } catch (const Error& e) {
      doc["error"] = ErrorJson(e)["error"];
      doc["views"] = views;
      return doc;
    } catch (const std::exception& e) {  // out of memory, say: still an answer, not a blank page
      doc["error"] = {{"code", "internal"}, {"message", e.what()}};
      doc["views"] = views;
      return doc;
    }
    json ms = json::object();  // how long each view took, in milliseconds
    for (const View& v : Views()) {
      const auto t0 = std::chrono::steady_clock::now();
      try {
        views[v.name] = v.run(d);
      } catch (const Error& e) {
        views[v.name] = ErrorJson(e);
      } catch (const std::exception& e) {
        views[v.name] = {{"error", {{"code", "internal"}, {"message", e.what()}}}};
      }
      ms[v.name] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
    doc["views"] = views;
    doc["view_ms"] = ms;
    return doc;
  }

  std::vector<Input> inputs_;
};

// How many leading bytes of a file to read (see serialize/read/leading_bytes.h), from its first
// `n` bytes at `ptr` (not taken).
double LeadingBytes(uintptr_t ptr, double n, double size) {
  return static_cast<double>(
      LeadingBytesNeeded(reinterpret_cast<const uint8_t*>(ptr), static_cast<size_t>(n), static_cast<uint64_t>(size)));
}

std::string Version() { return PTEPACK_VERSION_STRING; }

std::string ViewNames() {
  json names = json::array();
  for (const auto& v : Views()) names.push_back(v.name);
  return names.dump();
}

}  // namespace ptepack::web

EMSCRIPTEN_BINDINGS(ptepack) {
  using namespace emscripten;
  class_<ptepack::web::Session>("Session")
      .constructor<>()
      .function("add", &ptepack::web::Session::Add)
      .function("analyze", &ptepack::web::Session::Analyze)
      .function("clear", &ptepack::web::Session::Clear);
  function("leadingBytes", &ptepack::web::LeadingBytes);
  function("viewNames", &ptepack::web::ViewNames);
  function("version", &ptepack::web::Version);
}
