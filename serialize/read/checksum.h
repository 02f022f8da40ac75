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
// Files are matched by file name (without directory); a file whose name the
// manifest does not list (a renamed copy) is matched by content: the entry
// whose "program" region has the same size and checksum. Regions are matched
// by name.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serialize/io/hash.h"
#include "serialize/io/report.h"

namespace ptepack {

class PteFile;
class PtdFile;

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

nlohmann::json ManifestJson(const std::vector<FileSums>& files);
// Writes the manifest atomically.
void WriteManifest(const std::string& path, const std::vector<FileSums>& files);
// Reads and checks the shape of a manifest (through the JSON reader); throws
// Error("bad-manifest") naming the field and its offset.
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
