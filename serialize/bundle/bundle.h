// .ptebundle: a zstd-compressed container to move a program and its .ptd
// files as one file (`ptepack bundle create` / `extract` / `list`).
//
// THIS IS A PTEPACK-ONLY TRANSFER FORMAT. ExecuTorch's runtime does not read
// it: extract the bundle and load the .pte/.ptd files it gives back. Nothing
// in ptepack writes a bundle unless asked to.
//
// Layout, version 1 (integers little-endian):
//   [0, 8)       magic "PTEBNDL1"
//   members      one zstd frame per file, back to back, in index order;
//                each frame records its content size and zstd's content
//                checksum
//   index        UTF-8 JSON:
//                  {"format": "ptepack-bundle", "version": 1,
//                   "files": [{"name": "model.pte", "kind": "pte",
//                              "size": N, "xxh3": "16 hex digits",
//                              "offset": O, "compressed_size": C}, ...]}
//                `offset`/`compressed_size` locate the frame in the bundle;
//                `size`/`xxh3` (XXH3-64) describe the file it decompresses to
//   trailer      u64 index_offset, u64 index_size, magic "PTEBEND1" (the
//                last 24 bytes of the file)
// Names are plain file names (no directories). The first member is the
// .pte; the others are its .ptd files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "serialize/io/file_io.h"

namespace ptepack {

inline constexpr char kBundleMagic[] = "PTEBNDL1";
inline constexpr char kBundleTrailerMagic[] = "PTEBEND1";
inline constexpr size_t kBundleTrailerSize = 24;

struct BundleOptions {
  int level = 3;               // zstd level, 1..19
  int threads = 0;             // zstd worker threads (0: compress in the calling thread)
  bool long_distance = false;  // zstd long-distance matching, 128 MiB window
  ProgressFn progress;         // bytes of input read
};

struct BundleMember {
  std::string name;
  std::string kind;  // "pte" or "ptd"
  uint64_t size = 0;
  uint64_t xxh3 = 0;
  uint64_t offset = 0;
  uint64_t compressed_size = 0;
};

struct BundleInfo {
  uint64_t size = 0;  // of the bundle file
  std::vector<BundleMember> members;
};

// Writes `out` (atomically) from a .pte and its .ptd files; each input must
// be a valid .pte (first) or .ptd. Throws ptepack::Error.
BundleInfo CreateBundle(const std::string& out, const std::vector<std::string>& inputs,
                        const BundleOptions& options = {});

// Reads and checks a bundle's index (not the member data).
BundleInfo ReadBundle(const std::string& path);

// Decompresses every member into `dir` (created if needed). Sizes and
// checksums are checked before any file is renamed into place, so a damaged
// bundle leaves no output. Existing files are replaced only with
// `overwrite`. Returns the paths written.
std::vector<std::string> ExtractBundle(const std::string& bundle, const std::string& dir, bool overwrite = false,
                                       const ProgressFn& progress = nullptr);

}  // namespace ptepack
