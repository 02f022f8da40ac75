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
#include "serialize/model/spec.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"

// libxxhash's runtime-dispatched XXH3 (x86 builds have it, see
// xxh_x86dispatch.h); weak, so a library without it still links and the
// portable entry point is used.
extern "C" XXH_errorcode XXH3_64bits_update_dispatch(XXH3_state_t* state, const void* input, size_t len)
    __attribute__((weak));

namespace ptepack {
namespace {

// Large enough to amortize the syscall, small enough to stay in L2 while
// XXH3 reads it back.
constexpr size_t kBlock = 256 << 10;

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

[[noreturn]] void ReadFailed(const std::string& what) {
  throw Error("read-failed", what + ": " + std::strerror(errno));
}

// Feeds [offset, offset + size) of fd to `state`.
void Feed(int fd, uint64_t offset, uint64_t size, Xxh3Stream* state, std::vector<uint8_t>& buf) {
  while (size > 0) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(size, buf.size()));
    ssize_t r = ::pread(fd, buf.data(), want, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      ReadFailed("cannot read input");
    }
    if (r == 0) throw Error("read-failed", "input ended early (was it truncated?)");
    state->Update(buf.data(), static_cast<size_t>(r));
    offset += static_cast<uint64_t>(r);
    size -= static_cast<uint64_t>(r);
  }
}

// Feeds memory to `state`, dropping mapped pages after use.
void FeedMemory(const Bytes& b, Xxh3Stream* state) {
  constexpr size_t kChunk = 8 << 20;
  for (size_t off = 0; off < b.size; off += kChunk) {
    size_t n = std::min(kChunk, b.size - off);
    state->Update(b.data + off, n);
    if (b.mapping) b.mapping->DropPages(b.data + off, n);
  }
}

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

Xxh3Stream::Xxh3Stream() : state_(XXH3_createState()) {
  if (state_ == nullptr) throw std::bad_alloc();
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}

Xxh3Stream::~Xxh3Stream() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void Xxh3Stream::Update(const void* p, size_t n) {
  auto* st = static_cast<XXH3_state_t*>(state_);
  if (XXH3_64bits_update_dispatch != nullptr) {
    XXH3_64bits_update_dispatch(st, p, n);
  } else {
    XXH3_64bits_update(st, p, n);
  }
}

uint64_t Xxh3Stream::Digest() const { return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(state_)); }

std::string HexDigest(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

uint64_t HashFileRange(int fd, uint64_t offset, uint64_t size) {
  Xxh3Stream s;
  std::vector<uint8_t> buf(kBlock);
  Feed(fd, offset, size, &s, buf);
  return s.Digest();
}

uint64_t HashBytes(const Bytes& b) {
  if (b.mapping && b.mapping->Contains(b.data, b.size)) {
    Fd fd{b.mapping->Reopen()};
    if (fd.fd >= 0) return HashFileRange(fd.fd, static_cast<uint64_t>(b.data - b.mapping->data()), b.size);
  }
  Xxh3Stream s;
  FeedMemory(b, &s);
  return s.Digest();
}

BytesHasher::~BytesHasher() {
  if (fd_ >= 0) ::close(fd_);
}

uint64_t BytesHasher::Hash(const Bytes& b) {
  if (!b.mapping || !b.mapping->Contains(b.data, b.size) || b.zeros) return HashBytes(b);
  if (b.mapping != mapping_ || owner_.expired() || fd_ < 0) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = b.mapping->Reopen();
    mapping_ = b.mapping;
    owner_ = b.owner;
    if (fd_ < 0) return HashBytes(b);
  }
  const uint64_t off = static_cast<uint64_t>(b.data - b.mapping->data());
  if (b.size <= kBlock) {
    // One read and the one-shot hash (the same value as the stream's).
    if (buf_.size() < kBlock) buf_.resize(kBlock);
    size_t got = 0;
    while (got < b.size) {
      ssize_t r = ::pread(fd_, buf_.data() + got, b.size - got, static_cast<off_t>(off + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) ReadFailed("cannot read input");
      if (r == 0) throw Error("read-failed", "input ended early (was it truncated?)");
      got += static_cast<size_t>(r);
    }
    return XXH3_64bits(buf_.data(), b.size);
  }
  return HashFileRange(fd_, off, b.size);
}

void HashRegions(const Bytes& file, std::vector<RegionSum>* regions) {
  for (const auto& r : *regions) {
    if (r.offset > file.size || r.size > file.size - r.offset) {
      throw Error("internal-range", r.name + " lies outside the file");
    }
  }
  Fd fd;
  uint64_t base = 0;
  if (file.mapping && file.mapping->Contains(file.data, file.size)) {
    fd.fd = file.mapping->Reopen();
    base = static_cast<uint64_t>(file.data - file.mapping->data());
    if (fd.fd >= 0)
      ::posix_fadvise(fd.fd, static_cast<off_t>(base), static_cast<off_t>(file.size), POSIX_FADV_SEQUENTIAL);
  }
  std::vector<uint8_t> buf(fd.fd >= 0 ? kBlock : 0);
  auto feed = [&](uint64_t off, uint64_t n, Xxh3Stream* st) {
    if (fd.fd >= 0) {
      Feed(fd.fd, base + off, n, st, buf);
    } else {
      FeedMemory(file.Sub(static_cast<size_t>(off), static_cast<size_t>(n)), st);
    }
  };
  // In file order; bytes not covered by any region go to the padding stream.
  std::vector<size_t> order(regions->size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return (*regions)[a].offset < (*regions)[b].offset; });
  Xxh3Stream pad;
  uint64_t covered = 0, pad_size = 0;  // end of the bytes handled so far
  for (size_t i : order) {
    RegionSum& r = (*regions)[i];
    if (r.offset > covered) {
      feed(covered, r.offset - covered, &pad);
      pad_size += r.offset - covered;
    }
    Xxh3Stream s;
    feed(r.offset, r.size, &s);
    r.xxh3 = s.Digest();
    covered = std::max(covered, r.offset + r.size);
  }
  if (file.size > covered) {
    feed(covered, file.size - covered, &pad);
    pad_size += file.size - covered;
  }
  regions->push_back(RegionSum{"padding", 0, pad_size, pad.Digest()});
}

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
