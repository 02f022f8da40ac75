#include "serialize/bundle/bundle.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "ptepack/error.h"
#include "serialize/format/pte_format.h"
#include "serialize/io/json_reader.h"
#include "serialize/model/spec.h"
#include "serialize/read/checksum.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"

namespace ptepack {
namespace {

constexpr size_t kInBlock = 1 << 20;
constexpr int kLongWindowLog = 27;  // 128 MiB: also the most a reader accepts

[[noreturn]] void Fail(const std::string& code, const std::string& file, const std::string& msg) {
  throw Error(code, msg, file);
}

struct Fd {
  int fd = -1;
  explicit Fd(const std::string& path) {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) Fail("open-failed", path, std::string("cannot open file: ") + std::strerror(errno));
  }
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// Reads exactly n bytes at off (or fewer at end of file); returns bytes read.
size_t ReadAt(int fd, uint8_t* p, size_t n, uint64_t off, const std::string& path) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, p + got, n - got, static_cast<off_t>(off + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      Fail("read-failed", path, std::string("cannot read file: ") + std::strerror(errno));
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

uint64_t FileSize(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) Fail("open-failed", path, std::string("cannot stat file: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) Fail("open-failed", path, "not a regular file");
  return static_cast<uint64_t>(st.st_size);
}

std::string BaseName(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool SafeName(const std::string& n) {
  return !n.empty() && n != "." && n != ".." && n.find('/') == std::string::npos && n.find('\0') == std::string::npos;
}

void CheckZstd(size_t rc, const std::string& file, const char* what) {
  if (ZSTD_isError(rc)) Fail("zstd-failed", file, std::string(what) + ": " + ZSTD_getErrorName(rc));
}

struct CCtxDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxDeleter {
  void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};

// Compresses one input file into `out` as a single zstd frame.
void CompressMember(const std::string& path, AtomicFile& out, ZSTD_CCtx* cctx, BundleMember* m, const BundleOptions& o,
                    uint64_t* done, uint64_t total) {
  Fd in(path);
  m->size = FileSize(in.fd, path);
  ::posix_fadvise(in.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  CheckZstd(ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only), out.path(), "reset");
  CheckZstd(ZSTD_CCtx_setPledgedSrcSize(cctx, m->size), out.path(), "set size");
  Xxh3Stream h;
  std::vector<uint8_t> ibuf(kInBlock), obuf(ZSTD_CStreamOutSize());
  m->offset = out.offset();
  uint64_t pos = 0;
  bool last = false;
  while (!last) {
    size_t n = ReadAt(in.fd, ibuf.data(), static_cast<size_t>(std::min<uint64_t>(kInBlock, m->size - pos)), pos, path);
    if (pos + n < m->size && n < std::min<uint64_t>(kInBlock, m->size - pos)) {
      Fail("input-changed", path, "file ended early (was it truncated while bundling?)");
    }
    h.Update(ibuf.data(), n);
    pos += n;
    last = pos >= m->size;
    ZSTD_inBuffer zin{ibuf.data(), n, 0};
    size_t remaining;
    do {
      ZSTD_outBuffer zout{obuf.data(), obuf.size(), 0};
      remaining = ZSTD_compressStream2(cctx, &zout, &zin, last ? ZSTD_e_end : ZSTD_e_continue);
      CheckZstd(remaining, out.path(), "compression failed");
      out.Write(obuf.data(), zout.pos);
    } while (last ? remaining != 0 : zin.pos < zin.size);
    *done += n;
    if (o.progress) o.progress(*done, total);
  }
  m->xxh3 = h.Digest();
  m->compressed_size = out.offset() - m->offset;
}

}  // namespace

namespace {

// The inputs as bundle members (a valid .pte first, then valid .ptd files
// holding every external key); their total size.
uint64_t CheckInputs(const std::vector<std::string>& inputs, BundleInfo& info) {
  std::set<std::string> names;
  uint64_t total = 0;
  std::unique_ptr<PteFile> program;
  std::vector<std::unique_ptr<PtdFile>> data_files;
  for (size_t i = 0; i < inputs.size(); ++i) {
    BundleMember m;
    m.name = BaseName(inputs[i]);
    if (!SafeName(m.name)) Fail("bad-arguments", inputs[i], "not a file name");
    if (!names.insert(m.name).second) Fail("bad-arguments", inputs[i], "two inputs are named \"" + m.name + "\"");
    // Only valid files go in; checking reads headers and flatbuffers, not data.
    if (i == 0) {
      program = PteFile::Open(inputs[i]);
      program->report().ThrowIfError();
      m.kind = "pte";
      total += program->file().size;
    } else {
      data_files.push_back(PtdFile::Open(inputs[i]));
      data_files.back()->report().ThrowIfError();
      m.kind = "ptd";
      total += data_files.back()->file().size;
    }
    info.members.push_back(std::move(m));
  }
  // A bundle is the program with all its data: every external key must be
  // in one of the .ptd files that go in.
  std::vector<const PtdFile*> ptrs;
  for (const auto& p : data_files) ptrs.push_back(p.get());
  program->CheckExternalKeys(ptrs);
  for (Finding f : program->report().findings()) {
    if (f.code != "dangling-external-key") continue;
    f.message += data_files.empty() ? "; the program keeps tensors in a .ptd: add it after the .pte"
                                    : "; add the .ptd that holds it after the .pte";
    throw Error(std::move(f));
  }
  return total;
}

std::unique_ptr<ZSTD_CCtx, CCtxDeleter> MakeCompressor(const BundleOptions& o, const std::string& out_path) {
  std::unique_ptr<ZSTD_CCtx, CCtxDeleter> cctx(ZSTD_createCCtx());
  if (!cctx) throw std::bad_alloc();
  CheckZstd(ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, o.level), out_path, "level");
  CheckZstd(ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 1), out_path, "checksum flag");
  CheckZstd(ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_contentSizeFlag, 1), out_path, "content size flag");
  if (o.threads > 0) {
    // Ignored (error) by a libzstd built without threads: then compress in this thread.
    ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_nbWorkers, o.threads);
  }
  if (o.long_distance) {
    CheckZstd(ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_enableLongDistanceMatching, 1), out_path, "long mode");
    CheckZstd(ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_windowLog, kLongWindowLog), out_path, "window");
  }
  return cctx;
}

// The JSON index of the members, then the trailer that locates it.
void WriteIndex(AtomicFile& out, const BundleInfo& info) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& m : info.members) {
    files.push_back({{"name", m.name},
                     {"kind", m.kind},
                     {"size", m.size},
                     {"xxh3", HexDigest(m.xxh3)},
                     {"offset", m.offset},
                     {"compressed_size", m.compressed_size}});
  }
  std::string index =
      nlohmann::json{{"format", "ptepack-bundle"}, {"version", 1}, {"files", std::move(files)}}.dump() + "\n";
  uint8_t trailer[kBundleTrailerSize];
  StoreU64(trailer, out.offset());
  StoreU64(trailer + 8, index.size());
  std::memcpy(trailer + 16, kBundleTrailerMagic, 8);
  out.Write(index.data(), index.size());
  out.Write(trailer, sizeof trailer);
}

}  // namespace

BundleInfo CreateBundle(const std::string& out_path, const std::vector<std::string>& inputs, const BundleOptions& o) {
  if (inputs.empty()) Fail("bad-arguments", out_path, "a bundle needs a .pte");
  if (o.level < 1 || o.level > ZSTD_maxCLevel()) {
    Fail("bad-arguments", out_path, "zstd level must be 1.." + std::to_string(ZSTD_maxCLevel()));
  }
  BundleInfo info;
  const uint64_t total = CheckInputs(inputs, info);
  auto cctx = MakeCompressor(o, out_path);
  AtomicFile out(out_path, AtomicFile::Options{inputs, false});
  out.Write(kBundleMagic, 8);
  uint64_t done = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    CompressMember(inputs[i], out, cctx.get(), &info.members[i], o, &done, total);
  }
  WriteIndex(out, info);
  info.size = out.offset();
  out.Commit();
  return info;
}

namespace {

BundleInfo ReadIndex(int fd, const std::string& path) {
  BundleInfo info;
  info.size = FileSize(fd, path);
  uint8_t head[8];
  if (info.size < 8 + kBundleTrailerSize || ReadAt(fd, head, 8, 0, path) != 8 ||
      std::memcmp(head, kBundleMagic, 8) != 0) {
    Fail("bad-bundle", path, "not a ptepack bundle (magic \"PTEBNDL1\" missing)");
  }
  uint8_t trailer[kBundleTrailerSize];
  if (ReadAt(fd, trailer, sizeof trailer, info.size - sizeof trailer, path) != sizeof trailer ||
      std::memcmp(trailer + 16, kBundleTrailerMagic, 8) != 0) {
    Fail("bad-bundle", path, "bundle trailer missing (truncated file?)");
  }
  uint64_t index_off = LoadU64(trailer), index_size = LoadU64(trailer + 8);
  const uint64_t index_end = info.size - kBundleTrailerSize;
  if (index_off < 8 || index_off > index_end || index_size != index_end - index_off || index_size > (64u << 20)) {
    Fail("bad-bundle", path, "bundle index offset/size are out of range");
  }
  std::string text(static_cast<size_t>(index_size), '\0');
  if (ReadAt(fd, reinterpret_cast<uint8_t*>(text.data()), text.size(), index_off, path) != text.size()) {
    Fail("bad-bundle", path, "cannot read bundle index");
  }
  // The index is read through the one JSON reader: a field of the wrong type
  // or range is a located error naming it, never a parser exception.
  const JsonDocument doc(std::move(text), path, "bad-bundle", index_off);
  const JsonField j = doc.root();
  j.Object();
  if (!j.Has("format") || !j["format"].is_string() || j["format"].String() != "ptepack-bundle") {
    (j.Has("format") ? j["format"] : j).Fail("not a ptepack bundle index", "\"format\": \"ptepack-bundle\"");
  }
  if (j["version"].U64() != 1) j["version"].Fail("unsupported bundle version (this ptepack reads version 1)");
  const std::vector<JsonField> files = j["files"].Elements();
  if (files.empty()) j["files"].Fail("bundle index lists no files");
  std::set<std::string> names;
  uint64_t prev_end = 8;
  for (const JsonField& f : files) {
    BundleMember m;
    m.name = f["name"].String();
    m.kind = f["kind"].String();
    m.size = f["size"].U64();
    m.offset = f["offset"].U64();
    m.compressed_size = f["compressed_size"].U64();
    const std::string h = f["xxh3"].String();
    if (h.size() != 16 || h.find_first_not_of("0123456789abcdef") != std::string::npos) {
      f["xxh3"].Fail("must be 16 lowercase hex digits", "", f["xxh3"].Shown());
    }
    m.xxh3 = std::stoull(h, nullptr, 16);
    if (!SafeName(m.name) || !names.insert(m.name).second) {
      f["name"].Fail("bundle member name \"" + m.name + "\" is not a unique plain file name");
    }
    if (m.kind != "pte" && m.kind != "ptd") f["kind"].Fail(m.name + ": unknown kind \"" + m.kind + "\"", "pte or ptd");
    if (m.offset < prev_end || m.offset > index_off || m.compressed_size > index_off - m.offset) {
      f.Fail(m.name + ": compressed data lies outside the member area");
    }
    prev_end = m.offset + m.compressed_size;
    info.members.push_back(std::move(m));
  }
  return info;
}

}  // namespace

BundleInfo ReadBundle(const std::string& path) {
  Fd fd(path);
  return ReadIndex(fd.fd, path);
}

namespace {

// Streams one member's zstd frame out of the bundle into `out`, checking its
// size and checksum against the index.
class MemberDecoder {
 public:
  MemberDecoder(int fd, const std::string& bundle, const ProgressFn& progress, uint64_t total)
      : fd_(fd), bundle_(bundle), progress_(progress), total_(total), dctx_(ZSTD_createDCtx()) {
    if (!dctx_) throw std::bad_alloc();
    CheckZstd(ZSTD_DCtx_setParameter(dctx_.get(), ZSTD_d_windowLogMax, kLongWindowLog), bundle, "window limit");
  }

  void Decode(const BundleMember& m, AtomicFile& out) {
    CheckZstd(ZSTD_DCtx_reset(dctx_.get(), ZSTD_reset_session_only), bundle_, "reset");
    Xxh3Stream h;
    uint64_t pos = 0, produced = 0;
    size_t rc = 1;
    auto emit = [&](const ZSTD_outBuffer& zout) {
      produced += zout.pos;
      if (produced > m.size) Fail("bad-bundle", bundle_, m.name + ": decompresses to more than its recorded size");
      h.Update(obuf_.data(), zout.pos);
      out.Write(obuf_.data(), zout.pos);
    };
    while (pos < m.compressed_size) {
      size_t n =
          ReadAt(fd_, ibuf_.data(), static_cast<size_t>(std::min<uint64_t>(ibuf_.size(), m.compressed_size - pos)),
                 m.offset + pos, bundle_);
      if (n == 0) Fail("bad-bundle", bundle_, m.name + ": compressed data truncated");
      pos += n;
      ZSTD_inBuffer zin{ibuf_.data(), n, 0};
      while (zin.pos < zin.size) {
        if (rc == 0) Fail("bad-bundle", bundle_, m.name + ": data after the end of its zstd frame");
        ZSTD_outBuffer zout{obuf_.data(), obuf_.size(), 0};
        rc = Step(m, &zout, &zin);
        emit(zout);
        done_ += zout.pos;
        if (progress_) progress_(done_, total_);
      }
    }
    // Flush what the decoder still holds once the input is consumed.
    while (rc != 0) {
      ZSTD_inBuffer zin{nullptr, 0, 0};
      ZSTD_outBuffer zout{obuf_.data(), obuf_.size(), 0};
      rc = Step(m, &zout, &zin);
      if (zout.pos == 0 && rc != 0) Fail("bad-bundle", bundle_, m.name + ": zstd frame is truncated");
      emit(zout);
    }
    Check(m, produced, h.Digest());
  }

 private:
  size_t Step(const BundleMember& m, ZSTD_outBuffer* zout, ZSTD_inBuffer* zin) {
    const size_t rc = ZSTD_decompressStream(dctx_.get(), zout, zin);
    if (ZSTD_isError(rc)) Fail("bad-bundle", bundle_, m.name + ": " + ZSTD_getErrorName(rc));
    return rc;
  }

  void Check(const BundleMember& m, uint64_t produced, uint64_t got) const {
    if (produced != m.size) {
      Fail("bad-bundle", bundle_,
           m.name + ": decompressed " + std::to_string(produced) + " bytes, index says " + std::to_string(m.size));
    }
    if (got != m.xxh3) {
      Fail("checksum-mismatch", bundle_,
           m.name + ": decompressed data does not match its checksum (index " + HexDigest(m.xxh3) + ", data " +
               HexDigest(got) + ")");
    }
  }

  int fd_;
  const std::string& bundle_;
  const ProgressFn& progress_;
  const uint64_t total_;
  uint64_t done_ = 0;
  std::unique_ptr<ZSTD_DCtx, DCtxDeleter> dctx_;
  std::vector<uint8_t> ibuf_ = std::vector<uint8_t>(ZSTD_DStreamInSize() * 8);
  std::vector<uint8_t> obuf_ = std::vector<uint8_t>(ZSTD_DStreamOutSize() * 8);
};

}  // namespace

std::vector<std::string> ExtractBundle(const std::string& bundle, const std::string& dir, bool overwrite,
                                       const ProgressFn& progress) {
  Fd fd(bundle);
  BundleInfo info = ReadIndex(fd.fd, bundle);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) Fail("create-failed", dir, "cannot create output directory: " + ec.message());
  uint64_t total = 0;
  for (const auto& m : info.members) {
    std::string p = dir + "/" + m.name;
    if (!overwrite && std::filesystem::exists(p)) {
      Fail("exists", p, "output file exists (use --force to replace it)");
    }
    total += m.size;
  }
  MemberDecoder decoder(fd.fd, bundle, progress, total);
  WritingScope writing;
  StagedFiles staged;
  std::vector<std::unique_ptr<AtomicFile>> outs;
  std::vector<std::string> written;
  for (const auto& m : info.members) {
    const std::string p = dir + "/" + m.name;
    CheckOutputPath(p);
    AtomicFile::Options ao{{bundle}, false};
    ao.replaces = p;
    const std::string staged_name = StagedFiles::NameFor(p);
    outs.push_back(std::make_unique<AtomicFile>(staged_name, ao));
    staged.Add(staged_name, p);
    decoder.Decode(m, *outs.back());
    written.push_back(p);
  }
  // Every member is complete and checked: commit them under their staging
  // names, then rename all of them into place, all or nothing.
  for (auto& o : outs) o->Commit();
  staged.RenameAll();
  return written;
}

}  // namespace ptepack
