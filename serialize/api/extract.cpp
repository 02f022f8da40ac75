// `extract` as library functions (serialize/api/extract.h).
#include "serialize/api/extract.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "config/backend_config.h"
#include "flat_tensor_views_generated.h"
#include "ptepack/error.h"
#include "serialize/format/program_json.h"
#include "serialize/io/file_io.h"
#include "serialize/io/hash.h"
#include "serialize/model/program_parts.h"
#include "serialize/read/restore.h"

namespace ptepack {
namespace {

namespace fs = std::filesystem;

// The files of an extraction and the index entries that name them.
struct Files {
  std::vector<ExtractedFile>& out;
  nlohmann::json Add(const std::string& name, const Bytes& b) {
    out.push_back({name, b});
    return nlohmann::json{{"file", name}, {"size", b.size}};
  }
  void AddText(const std::string& name, const std::string& text) {
    out.push_back({name, Bytes::Copy(text.data(), text.size())});
  }
};

// Constant buffer 0 is the reserved empty placeholder and every other entry
// holds only its storage: then the constants can go to the spec's
// "constants" list (which adds the placeholder back).
bool ConstantsAsList(const fb::Value& cb) {
  if (!cb.present() || cb.elems().empty()) return false;
  for (size_t i = 0; i < cb.elems().size(); ++i) {
    const fb::Table& t = *cb.elems()[i].table();
    for (size_t f = 0; f < t.fields.size(); ++f) {
      if (f != prog::Buffer<>::Id::storage && t.fields[f].present()) return false;
    }
    const fb::Value& storage = prog::Buffer{t}.storage();
    if (!storage.present() || (i == 0 && storage.scalars().size != 0)) return false;
  }
  return true;
}

// The program of `pkg` as JSON (program.fbs field names) without the data the
// spec gives as files: constants (when `strip_constants`) and delegate payloads.
std::string SpecProgramJson(const PackageParts& pkg, bool strip_constants) {
  auto copy = fb::ShallowClone(*pkg.program);  // only root fields change
  prog::Program p{*copy};
  if (strip_constants) p.constant_buffer() = fb::Value{};
  p.backend_delegate_data() = fb::Value{};
  return ProgramToJson(*copy);
}

nlohmann::json LayoutJson(const fb::Table& tl) {
  const ptd::TensorLayout<const fb::Table> l{tl};
  const Bytes& dim_order = l.get_dim_order();
  return nlohmann::json{{"scalar_type", static_cast<int>(l.get_scalar_type())},
                        {"sizes", l.get_sizes()},
                        {"dim_order", std::vector<uint8_t>(dim_order.data, dim_order.data + dim_order.size)}};
}

nlohmann::json ExternalSpec(const ExternalFile& ef, Files& files, nlohmann::json& index) {
  nlohmann::json entries = nlohmann::json::array();
  for (size_t i = 0; i < ef.entries.size(); ++i) {
    const NamedBlob& b = ef.entries[i];
    auto j = files.Add(ef.tag + "_" + std::to_string(i) + ".bin", b.data);
    j["key"] = b.key;
    j["tag"] = ef.tag;
    index.push_back(j);
    nlohmann::json e{{"key", b.key}, {"alignment", b.alignment}, {"file", j["file"]}};
    if (b.tensor_layout) e["tensor_layout"] = LayoutJson(*b.tensor_layout);
    if (b.legacy_tensor) e["legacy_tensor"] = true;
    entries.push_back(std::move(e));
  }
  if (!ef.legacy) return entries;
  return nlohmann::json{
      {"legacy", {{"tensor_alignment", ef.legacy_tensor_alignment}, {"named_data_field", ef.legacy_named_data_field}}},
      {"entries", std::move(entries)}};
}

// The spec's data lists, each blob written once as a file.
nlohmann::json SpecData(const PackageParts& pkg, bool constants_as_list, Files& files, nlohmann::json& index) {
  nlohmann::json data = nlohmann::json::object();
  const prog::Program<const fb::Table> p{*pkg.program};
  nlohmann::json consts = nlohmann::json::array(), spec_consts = nlohmann::json::array();
  const auto& cb = p.constant_buffer().elems();
  for (size_t i = 1; i < cb.size(); ++i) {
    consts.push_back(files.Add("constant_" + std::to_string(i) + ".bin", prog::Buffer{*cb[i].table()}.get_storage()));
    spec_consts.push_back({{"file", consts.back()["file"]}});
  }
  index["constants"] = consts;
  if (constants_as_list) data["constants"] = spec_consts;
  nlohmann::json dels = nlohmann::json::array(), spec_dels = nlohmann::json::array();
  const auto& bdd = p.backend_delegate_data();
  for (size_t i = 0; i < bdd.elems().size(); ++i) {
    const auto& d = prog::BackendDelegateInlineData{*bdd.elems()[i].table()}.get_data();
    dels.push_back(files.Add("delegate_" + std::to_string(i) + ".bin", d));
    spec_dels.push_back({{"file", dels.back()["file"]}});
  }
  index["delegates"] = dels;
  if (bdd.present()) data["delegate_data"] = spec_dels;
  if (pkg.mutable_data) {
    nlohmann::json muts = nlohmann::json::array(), spec_muts = nlohmann::json::array();
    for (size_t i = 0; i < pkg.mutable_data->size(); ++i) {
      muts.push_back(files.Add("mutable_" + std::to_string(i) + ".bin", (*pkg.mutable_data)[i]));
      spec_muts.push_back({{"file", muts.back()["file"]}});
    }
    index["mutable_data"] = muts;
    data["mutable_data"] = spec_muts;
  }
  nlohmann::json named = nlohmann::json::array(), spec_named = nlohmann::json::array();
  for (size_t i = 0; i < pkg.named_data.size(); ++i) {
    const NamedBlob& b = pkg.named_data[i];
    auto j = files.Add("named_" + std::to_string(i) + ".bin", b.data);
    j["key"] = b.key;
    spec_named.push_back({{"key", b.key}, {"alignment", b.alignment}, {"file", j["file"]}});
    named.push_back(std::move(j));
  }
  index["named_data"] = named;
  if (!pkg.named_data.empty()) data["named_data"] = spec_named;
  nlohmann::json ext = nlohmann::json::array(), spec_ext = nlohmann::json::object();
  for (const auto& ef : pkg.external) spec_ext[ef.tag] = ExternalSpec(ef, files, ext);
  index["external"] = ext;
  if (!pkg.external.empty()) data["external"] = spec_ext;
  return data;
}

// {"program": PROGRAM, ...data}: the program's text as FlatBuffers printed
// it (pack hands it to FlatBuffers' parser as written).
std::string SpecText(const std::string& program_json, const nlohmann::json& data) {
  std::string text = "{\n\"program\": " + program_json;
  if (!data.empty()) {
    std::string rest = data.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
    text += ",\n" + rest.substr(2);  // drop the opening "{\n"
  } else {
    text += "}";
  }
  return text + "\n";
}

[[noreturn]] void TargetError(const char* code, const std::string& message, const std::string& path) {
  throw Error(code, message, path);
}

}  // namespace

Extraction ExtractProgram(const ValidInput& in) {
  if (!in.pte->program()) throw Error("flatbuffer-invalid", in.pte->name() + ": no valid program");
  Extraction x;
  Files files{x.files};
  nlohmann::json index;
  index["program_json"] = "program.json";
  {
    const Bytes fbytes = in.pte->flatbuffer();
    DoublesJsonLoses lost;
    files.AddText("program.json", ProgramToJson(*fb::Decode(prog::S(), fbytes.data, fbytes.size, fbytes.owner), &lost));
    if (lost.count > 0) {
      x.json_loses = lost.first + " is a NaN with bits 0x" + HexDigest(lost.first_bits) +
                     (lost.count > 1 ? " (and " + std::to_string(lost.count - 1) + " more NaNs)" : std::string()) +
                     ": JSON has one NaN, pack writes it as 0x" + HexDigest(JsonNanBits());
    }
  }
  nlohmann::json segs = nlohmann::json::array();
  for (size_t i = 0; i < in.pte->segments().size(); ++i) {
    segs.push_back(files.Add("segment_" + std::to_string(i) + ".bin", in.pte->SegmentData(i)));
  }
  index["segments"] = segs;
  PackageParts pkg = PackageFromPte(*in.pte, in.ptrs);
  x.inferred = InferConfig(*in.pte, pkg, in.ptrs);
  x.inferred.ApplyBlobAlignments(pkg);  // the named blobs' and .ptd entries' alignments go into the spec
  const bool constants_as_list = ConstantsAsList(prog::Program<const fb::Table>{*pkg.program}.constant_buffer());
  nlohmann::json data = SpecData(pkg, constants_as_list, files, index);
  files.AddText("spec.json", SpecText(SpecProgramJson(pkg, constants_as_list), data));
  files.AddText("config.json", ConfigToJson(x.inferred.config).dump(2) + "\n");
  index["spec"] = "spec.json";
  index["config"] = "config.json";
  index["reproduces_input"] = x.reproduces_input();
  index["note"] = x.note();
  files.AddText("index.json", index.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  return x;
}

std::string Extraction::note() const {
  std::string n = inferred.exact ? "" : inferred.note;
  if (!json_loses.empty()) n += (n.empty() ? "" : "; ") + json_loses;
  return n;
}

nlohmann::json ExtractionJson(const Extraction& x, const ExtractTarget& target, bool dry_run) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : x.files) files.push_back({{"name", f.name}, {"size", f.data.size}});
  nlohmann::json j = {{"directory", target.dir},
                      {"files", std::move(files)},
                      {"reproduces_input", x.reproduces_input()},
                      {"note", x.note()},
                      {"config", ConfigToJson(x.inferred.config)},
                      {"dry_run", dry_run}};
  if (dry_run) j["replaces"] = target.non_empty;
  return j;
}

ExtractTarget CheckExtractTarget(const std::string& dir_arg, bool force) {
  const fs::path dir = fs::path(dir_arg).lexically_normal();
  const fs::path target = dir.filename().empty() ? dir.parent_path() : dir;
  ExtractTarget t;
  t.dir = target.string();
  std::error_code ec;
  auto st = fs::symlink_status(target, ec);
  t.exists = !ec && fs::exists(st);
  if (t.exists && fs::is_symlink(st)) {
    TargetError("output-symlink",
                "output directory is a symbolic link; ptepack does not write through links: give the link's target",
                t.dir);
  }
  if (t.exists && !fs::is_directory(st)) {
    TargetError("output-not-directory", "output exists and is not a directory", t.dir);
  }
  t.non_empty = t.exists && !fs::is_empty(target, ec);
  if (t.non_empty && !force) {
    TargetError("output-exists",
                "output directory is not empty (its files could mix with this program's); pass --force to "
                "replace it, or choose an empty or new directory",
                t.dir);
  }
  if (t.non_empty && !fs::exists(target / "index.json")) {
    TargetError("output-exists",
                "output directory is not empty and holds no index.json (it is not an earlier extract); "
                "refusing to replace it even with --force",
                t.dir);
  }
  return t;
}

namespace {

// A temporary directory that is removed unless released.
struct TempDirGuard {
  fs::path p;
  ~TempDirGuard() {
    std::error_code e;
    if (!p.empty()) fs::remove_all(p, e);
  }
};

void FillDirectory(const Extraction& x, const fs::path& tmp, const ProgressFn& progress) {
  // No fsync per file: the filled directory is synced once before it is
  // renamed into place (10,000 files: one sync, not 10,000).
  AtomicFile::Options unsynced;
  unsynced.sync = false;
  unsynced.direct = true;  // the directory is new and ours: no temp name and rename per file
  uint64_t total = 0, done = 0;
  for (const auto& f : x.files) total += f.data.size;
  for (const auto& f : x.files) {
    ThrowIfInterrupted();
    AtomicFile out((tmp / f.name).string(), unsynced);
    out.Write(f.data);
    out.Commit();
    done += f.data.size;
    if (progress) progress(done, total);
  }
  ThrowIfInterrupted();
  SyncTree(tmp.string());
}

}  // namespace

void WriteExtraction(const Extraction& x, const ExtractTarget& t, const ProgressFn& progress) {
  WritingScope writing;
  const fs::path target(t.dir);
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  fs::create_directories(parent);
  const std::string pid = std::to_string(::getpid());
  const fs::path tmp = parent / (target.filename().string() + ".tmp-" + pid);
  TempDirGuard cleanup;
  std::error_code ec;
  fs::remove_all(tmp, ec);
  if (::mkdir(tmp.c_str(), 0755) != 0) {
    TargetError("create-failed", std::string("cannot create temporary directory: ") + std::strerror(errno),
                tmp.string());
  }
  cleanup.p = tmp;
  FillDirectory(x, tmp, progress);
  fs::path old;
  if (t.exists) {
    old = parent / (target.filename().string() + ".old-" + pid);
    if (::rename(target.c_str(), old.c_str()) != 0) {
      TargetError("write-failed", std::string("cannot move the old directory aside: ") + std::strerror(errno), t.dir);
    }
  }
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const int e = errno;
    if (!old.empty()) ::rename(old.c_str(), target.c_str());
    TargetError("write-failed", std::string("cannot rename the temporary directory into place: ") + std::strerror(e),
                t.dir);
  }
  cleanup.p = old;  // the replaced directory goes
}

ExtractRun Extract(const std::string& in, const std::vector<std::string>& ptds, const std::string& dir, bool force,
                   bool dry_run, const ProgressFn& progress) {
  ExtractRun r;
  r.input = LoadValidInput(in, ptds);
  r.extraction = ExtractProgram(r.input);
  r.target = CheckExtractTarget(dir, force);
  r.dry_run = dry_run;
  if (!dry_run) WriteExtraction(r.extraction, r.target, progress);
  return r;
}

}  // namespace ptepack
