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
#include "serialize/io/json_limits.h"
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

[[noreturn]] void BadManifest(const std::string& path, const std::string& msg) {
  Finding f;
  f.code = "bad-manifest";
  f.file = path;
  f.message = msg;
  throw Error(std::move(f));
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
      Finding e;
      e.code = "manifest-name-clash";
      e.file = path;
      e.message = "two files named \"" + it->first + "\" (" + it->second + " and " + f.path +
                  "); a manifest names files by base name: write one manifest per directory";
      throw Error(std::move(e));
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
  const std::string text = ReadSmallFile(path);
  CheckJsonDepth(text, path, "bad-manifest");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    BadManifest(path, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object() || j.value("format", "") != "ptepack-checksum-manifest") {
    BadManifest(path, "not a ptepack checksum manifest (\"format\" is not \"ptepack-checksum-manifest\")");
  }
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int>() != 1) {
    BadManifest(path, "unsupported manifest version (this ptepack reads version 1)");
  }
  if (j.value("algorithm", "") != "xxh3-64") BadManifest(path, "unsupported algorithm (expected \"xxh3-64\")");
  if (!j.contains("files") || !j["files"].is_array()) BadManifest(path, "\"files\" must be an array");
  for (const auto& f : j["files"]) {
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || !f.contains("size") ||
        !f["size"].is_number_unsigned() || !f.contains("regions") || !f["regions"].is_array()) {
      BadManifest(path, "each file needs \"name\", \"size\" and \"regions\"");
    }
    for (const auto& r : f["regions"]) {
      bool ok = false;
      if (r.is_object() && r.contains("name") && r["name"].is_string() && r.contains("size") &&
          r["size"].is_number_unsigned() && r.contains("xxh3") && r["xxh3"].is_string()) {
        ParseHex(r["xxh3"].get<std::string>(), &ok);
      }
      if (!ok || (r.contains("offset") && !r["offset"].is_number_unsigned())) {
        BadManifest(path, "file \"" + f["name"].get<std::string>() +
                              "\": each region needs \"name\", \"size\" and a 16-digit hex \"xxh3\"");
      }
    }
  }
  return j;
}

std::vector<Report> CheckManifest(const nlohmann::json& manifest, const std::vector<FileSums>& files) {
  std::vector<Report> out;
  for (const auto& f : files) {
    Report rep(f.path);
    const std::string name = BaseName(f.path);
    const nlohmann::json* entry = nullptr;
    for (const auto& e : manifest["files"]) {
      if (e["name"].get<std::string>() == name) entry = &e;
    }
    if (!entry) {
      rep.Error("not-in-manifest", "the manifest has no entry for \"" + name + "\"");
      out.push_back(std::move(rep));
      continue;
    }
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
      bool ok = false;
      uint64_t w_hash = ParseHex(w["xxh3"].get<std::string>(), &ok);
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
  // given was not checked, so the comparison cannot say "all match".
  std::set<std::string> given;
  for (const auto& f : files) given.insert(BaseName(f.path));
  for (const auto& e : manifest["files"]) {
    const std::string name = e["name"].get<std::string>();
    if (given.count(name)) continue;
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
