// XXH3-64 checksums of the regions of .pte/.ptd files, and JSON manifests of
// them (`ptepack verify --checksum`, `--write-manifest`, `--manifest`).
//
// A file is cut into regions that together cover every byte once:
//   "program"      .pte: [0, program_size): root offset, file id, eh00 header
//                  and flatbuffer (the whole file when it has no segments);
//                  .ptd: [0, flatbuffer_offset + flatbuffer_size)
//   "segments[i]"  each data segment, at its file offset
//   "padding"      every other byte (alignment padding between regions), in
//                  file order, as one stream
// Data is read with pread in blocks, not through a mapping, so checksumming
// a multi-GiB file needs a few hundred KiB of memory.
//
// Manifest (JSON sidecar):
//   {"format": "ptepack-checksum-manifest", "version": 1,
//    "algorithm": "xxh3-64",
//    "files": [{"name": "model.pte", "kind": "pte", "size": N,
//               "regions": [{"name": "program", "offset": 0, "size": N,
//                            "xxh3": "16 hex digits"}, ...]}]}
// Files are matched by file name (without directory), regions by name.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ptepack/report.h"
#include "serialize/io/file_io.h"

namespace ptepack {

class PteFile;
class PtdFile;

// Streaming XXH3-64. Uses libxxhash's runtime-dispatched (AVX2/AVX-512)
// entry points when the library has them: about 4x the baseline SSE2 build
// that the plain XXH3 functions of distribution packages run.
class Xxh3Stream {
 public:
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;
  void Update(const void* p, size_t n);
  uint64_t Digest() const;

 private:
  void* state_;
};

struct RegionSum {
  std::string name;
  uint64_t offset = 0;  // file offset (for "padding": 0)
  uint64_t size = 0;
  uint64_t xxh3 = 0;
};

struct FileSums {
  std::string path;  // as opened
  std::string kind;  // "pte" or "ptd"
  uint64_t size = 0;
  std::vector<RegionSum> regions;  // program, segments in index order, padding
};

// Checksums of a checked file. Throws ptepack::Error if the file has errors
// (its regions cannot be trusted) or cannot be read.
FileSums ChecksumPte(const PteFile& pte);
FileSums ChecksumPtd(const PtdFile& ptd);

// Hashes `regions` (name, offset, size filled in) of `file` and appends the
// "padding" region for the bytes outside all of them. Regions must lie in
// the file; they are hashed in file order.
void HashRegions(const Bytes& file, std::vector<RegionSum>* regions);

// XXH3-64 of [offset, offset + size) of an open file, read in blocks.
uint64_t HashFileRange(int fd, uint64_t offset, uint64_t size);
// XXH3-64 of a byte view: read from the file when it is a MappedFile view,
// else hashed in memory.
uint64_t HashBytes(const Bytes& b);

// HashBytes for callers that hash many pieces of the same mapped files
// (dedup of 300,000 constants): keeps the last source file open and one read
// buffer, instead of an open, fstat, close and a zeroed 256 KiB buffer per
// piece. Same values as HashBytes. Not thread-safe.
class BytesHasher {
 public:
  BytesHasher() = default;
  ~BytesHasher();
  BytesHasher(const BytesHasher&) = delete;
  BytesHasher& operator=(const BytesHasher&) = delete;
  uint64_t Hash(const Bytes& b);

 private:
  const MappedFile* mapping_ = nullptr;
  std::weak_ptr<const void> owner_;  // while alive, mapping_ is that file
  int fd_ = -1;
  std::vector<uint8_t> buf_;
};

std::string HexDigest(uint64_t h);  // 16 lower-case hex digits

nlohmann::json ManifestJson(const std::vector<FileSums>& files);
// Writes the manifest atomically.
void WriteManifest(const std::string& path, const std::vector<FileSums>& files);
// Reads and checks the shape of a manifest; throws Error("bad-manifest").
nlohmann::json LoadManifest(const std::string& path);
// Compares files against a manifest. Every difference is an error naming the
// region ("checksum-mismatch", "region-mismatch", "size-mismatch",
// "not-in-manifest"), one Report per file.
std::vector<Report> CheckManifest(const nlohmann::json& manifest, const std::vector<FileSums>& files);

// Readable table of a file's checksums.
std::string RenderChecksumsText(const FileSums& f);

// What `ptepack verify --checksum` and `ptepack checksum` do once the files
// were checked: checksum them, then write a manifest and/or compare with one.
struct IntegrityOptions {
  std::string write_manifest;  // path, or empty
  std::string manifest;        // path to check against, or empty
};
struct IntegrityResult {
  std::vector<FileSums> files;
  std::vector<Report> reports;  // manifest differences, one per file (empty without a manifest)
  bool ok() const;
};
IntegrityResult RunIntegrity(const std::vector<const PteFile*>& ptes, const std::vector<const PtdFile*>& ptds,
                             const IntegrityOptions& options);

}  // namespace ptepack
