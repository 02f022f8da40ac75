#include "serialize/read/checksum.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "ptepack/error.h"
#include "serialize/io/json_reader.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"

namespace ptepack {
namespace {

uint64_t ParseHex(const std::string& s, bool* ok) {
  *ok = s.size() == 16 && s.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
  return *ok ? std::stoull(s, nullptr, 16) : 0;
}

std::string BaseName(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

FileSums ChecksumPte(const PteFile& pte) {
  pte.report().ThrowIfError();
  FileSums f;
  f.path = pte.name();
  f.kind = "pte";
  f.size = pte.file().size;
  f.regions.push_back(RegionSum{"program", 0, pte.program_size(), 0});
  for (size_t i = 0; i < pte.segments().size(); ++i) {
    const SegmentSpan& s = pte.segments()[i];
    f.regions.push_back(RegionSum{"segments[" + std::to_string(i) + "]", s.file_offset, s.size, 0});
  }
  HashRegions(pte.file(), &f.regions);
  return f;
}

FileSums ChecksumPtd(const PtdFile& ptd) {
  ptd.report().ThrowIfError();
  FileSums f;
  f.path = ptd.name();
  f.kind = "ptd";
  f.size = ptd.file().size;
  f.regions.push_back(RegionSum{"program", 0, ptd.header().flatbuffer_offset + ptd.header().flatbuffer_size, 0});
  for (size_t i = 0; i < ptd.segments().size(); ++i) {
    const SegmentSpan& s = ptd.segments()[i];
    f.regions.push_back(RegionSum{"segments[" + std::to_string(i) + "]", s.file_offset, s.size, 0});
  }
  HashRegions(ptd.file(), &f.regions);
  return f;
}

nlohmann::json ManifestJson(const std::vector<FileSums>& files) {
  nlohmann::json fs = nlohmann::json::array();
  for (const auto& f : files) {
    nlohmann::json rs = nlohmann::json::array();
    for (const auto& r : f.regions) {
      nlohmann::json j{{"name", r.name}};
      if (r.name != "padding") j["offset"] = r.offset;
      j["size"] = r.size;
      j["xxh3"] = HexDigest(r.xxh3);
      rs.push_back(std::move(j));
    }
    fs.push_back({{"name", BaseName(f.path)}, {"kind", f.kind}, {"size", f.size}, {"regions", std::move(rs)}});
  }
  return {{"format", "ptepack-checksum-manifest"}, {"version", 1}, {"algorithm", "xxh3-64"}, {"files", std::move(fs)}};
}

void WriteManifest(const std::string& path, const std::vector<FileSums>& files) {
  // Entries are keyed by base name: two files of one name would be ambiguous.
  std::map<std::string, std::string> names;
  for (const auto& f : files) {
    auto [it, fresh] = names.emplace(BaseName(f.path), f.path);
    if (!fresh) {
      throw Error("manifest-name-clash",
                  "two files named \"" + it->first + "\" (" + it->second + " and " + f.path +
                      "); a manifest names files by base name: write one manifest per directory",
                  path);
    }
  }
  std::string text = ManifestJson(files).dump(2) + "\n";
  std::vector<std::string> inputs;
  for (const auto& f : files) inputs.push_back(f.path);
  AtomicFile out(path, AtomicFile::Options{inputs, false});
  out.Write(text.data(), text.size());
  out.Commit();
}

nlohmann::json LoadManifest(const std::string& path) {
  const JsonDocument doc = JsonDocument::Load(path, "bad-manifest");
  const JsonField j = doc.root();
  j.Object();
  if (!j.Has("format") || !j["format"].is_string() || j["format"].String() != "ptepack-checksum-manifest") {
    (j.Has("format") ? j["format"] : j)
        .Fail("not a ptepack checksum manifest", "\"format\": \"ptepack-checksum-manifest\"",
              j.Has("format") ? j["format"].Shown() : "no \"format\"");
  }
  if (j["version"].U64() != 1) j["version"].Fail("unsupported manifest version (this ptepack reads version 1)");
  if (j["algorithm"].String() != "xxh3-64") j["algorithm"].Fail("unsupported algorithm", "\"xxh3-64\"");
  for (const JsonField& f : j["files"].Elements()) {
    f["name"].String();
    f["size"].U64();
    if (auto k = f.Find("kind")) k->String();
    for (const JsonField& r : f["regions"].Elements()) {
      r["name"].String();
      r["size"].U64();
      if (auto o = r.Find("offset")) o->U64();
      bool ok = false;
      ParseHex(r["xxh3"].String(), &ok);
      if (!ok) r["xxh3"].Fail("must be 16 hex digits", "", r["xxh3"].Shown());
    }
  }
  return j.json();
}

namespace {

const nlohmann::json* Region(const nlohmann::json& entry, const std::string& name) {
  for (const auto& r : entry["regions"]) {
    if (r["name"].get<std::string>() == name) return &r;
  }
  return nullptr;
}

uint64_t RegionHash(const nlohmann::json& region) {
  bool ok = false;
  return ParseHex(region["xxh3"].get<std::string>(), &ok);
}

// The manifest entry for `f`: the one of its name; else, for a renamed copy,
// the first not taken yet whose "program" region (header and flatbuffer:
// what the file is) has the same size and checksum -- its other regions
// are then compared as usual.
const nlohmann::json* EntryFor(const nlohmann::json& manifest, const FileSums& f,
                               const std::set<const nlohmann::json*>& taken) {
  const std::string name = BaseName(f.path);
  const nlohmann::json* by_name = nullptr;
  for (const auto& e : manifest["files"]) {
    if (e["name"].get<std::string>() == name) by_name = &e;
  }
  if (by_name) return by_name;
  const RegionSum* program = nullptr;
  for (const auto& r : f.regions) {
    if (r.name == "program") program = &r;
  }
  if (!program) return nullptr;
  for (const auto& e : manifest["files"]) {
    const nlohmann::json* r = Region(e, "program");
    if (taken.count(&e) || !r || (*r)["size"].get<uint64_t>() != program->size) continue;
    if (RegionHash(*r) == program->xxh3 && e.value("kind", f.kind) == f.kind) return &e;
  }
  return nullptr;
}

}  // namespace

std::vector<Report> CheckManifest(const nlohmann::json& manifest, const std::vector<FileSums>& files) {
  std::vector<Report> out;
  std::set<const nlohmann::json*> taken;
  // Files named in the manifest take their entries first, so that a renamed
  // copy checked beside its original cannot take the original's.
  for (const auto& f : files) {
    for (const auto& e : manifest["files"]) {
      if (e["name"].get<std::string>() == BaseName(f.path)) taken.insert(&e);
    }
  }
  for (const auto& f : files) {
    Report rep(f.path);
    const std::string name = BaseName(f.path);
    const nlohmann::json* entry = EntryFor(manifest, f, taken);
    if (!entry) {
      rep.Error("not-in-manifest", "the manifest has no entry named \"" + name +
                                       "\" nor one with the same program region (a renamed copy is found by "
                                       "its content; this file's header or flatbuffer differs from every entry)");
      out.push_back(std::move(rep));
      continue;
    }
    taken.insert(entry);
    uint64_t want_size = (*entry)["size"].get<uint64_t>();
    if (want_size != f.size) {
      rep.Error("size-mismatch", "file size differs from the manifest", std::nullopt, std::to_string(want_size),
                std::to_string(f.size));
    }
    std::map<std::string, const nlohmann::json*> want;
    for (const auto& r : (*entry)["regions"]) want[r["name"].get<std::string>()] = &r;
    for (const auto& r : f.regions) {
      auto it = want.find(r.name);
      std::optional<uint64_t> where;
      if (r.name != "padding") where = r.offset;
      if (it == want.end()) {
        rep.Error("region-mismatch", r.name + " is not in the manifest", where);
        continue;
      }
      const nlohmann::json& w = *it->second;
      want.erase(it);
      uint64_t w_off = w.value("offset", uint64_t{0});
      uint64_t w_size = w["size"].get<uint64_t>();
      if ((r.name != "padding" && w_off != r.offset) || w_size != r.size) {
        rep.Error("region-mismatch", r.name + " has moved or changed size since the manifest was written", where,
                  "offset " + std::to_string(w_off) + ", " + std::to_string(w_size) + " bytes",
                  "offset " + std::to_string(r.offset) + ", " + std::to_string(r.size) + " bytes");
      }
      uint64_t w_hash = RegionHash(w);
      if (w_hash != r.xxh3) {
        rep.Error("checksum-mismatch",
                  r.name + " (" + std::to_string(r.size) + " bytes) does not match the manifest checksum", where,
                  "xxh3 " + HexDigest(w_hash), "xxh3 " + HexDigest(r.xxh3));
      }
    }
    for (const auto& [n, w] : want) {
      rep.Error("region-mismatch", n + " is in the manifest but not in the file");
    }
    out.push_back(std::move(rep));
  }
  // Every entry is checked or named: a file listed in the manifest but not
  // given (under its name or as a renamed copy) was not checked, so the
  // comparison cannot say "all match".
  for (const auto& e : manifest["files"]) {
    if (taken.count(&e)) continue;
    const std::string name = e["name"].get<std::string>();
    Report rep(name);
    rep.Error("not-checked", "the manifest lists \"" + name +
                                 "\" but it was not given, so it was not checked: give it too (as "
                                 "FILE, or with --ptd)");
    out.push_back(std::move(rep));
  }
  return out;
}

std::string RenderChecksumsText(const FileSums& f) {
  std::ostringstream o;
  o << f.path << ": xxh3-64 checksums (" << f.size << " bytes)\n";
  for (const auto& r : f.regions) {
    char line[160];
    if (r.name == "padding") {
      std::snprintf(line, sizeof line, "  %-16s %-20s %14llu bytes  %s\n", r.name.c_str(), "",
                    static_cast<unsigned long long>(r.size), HexDigest(r.xxh3).c_str());
    } else {
      std::snprintf(line, sizeof line, "  %-16s offset %-13llu %14llu bytes  %s\n", r.name.c_str(),
                    static_cast<unsigned long long>(r.offset), static_cast<unsigned long long>(r.size),
                    HexDigest(r.xxh3).c_str());
    }
    o << line;
  }
  return o.str();
}

bool IntegrityResult::ok() const {
  for (const auto& r : reports) {
    if (!r.ok()) return false;
  }
  return true;
}

IntegrityResult RunIntegrity(const std::vector<const PteFile*>& ptes, const std::vector<const PtdFile*>& ptds,
                             const IntegrityOptions& o) {
  // Read the manifest first: a bad one fails before any hashing.
  nlohmann::json manifest;
  if (!o.manifest.empty()) manifest = LoadManifest(o.manifest);
  IntegrityResult r;
  for (const PteFile* p : ptes) r.files.push_back(ChecksumPte(*p));
  for (const PtdFile* p : ptds) r.files.push_back(ChecksumPtd(*p));
  if (!o.manifest.empty()) r.reports = CheckManifest(manifest, r.files);
  if (!o.write_manifest.empty()) WriteManifest(o.write_manifest, r.files);
  return r;
}

}  // namespace ptepack
