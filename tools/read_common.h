// What inspect and verify share: loading a file with its .ptd files, the common flags, and the
// additions to a description that need more than the reader.
#pragma once

#include <cstdlib>
#include <iostream>

#include "config/backend_config.h"
#include "serialize/model/package.h"
#include "serialize/read/checksum.h"
#include "serialize/read/describe.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "serialize/read/restore.h"
#include "serialize/write/infer_config.h"
#include "tools/commands.h"

namespace ptepack::cli {

struct Loaded {
  std::unique_ptr<PteFile> pte;
  std::unique_ptr<PtdFile> lone_ptd;  // when FILE itself is a .ptd
  std::vector<std::unique_ptr<PtdFile>> ptds;
  std::vector<const PtdFile*> ptd_ptrs() const {
    std::vector<const PtdFile*> v;
    for (const auto& p : ptds) v.push_back(p.get());
    return v;
  }
};

Loaded Load(const std::string& file, const std::vector<std::string>& ptd_paths, const ReadOptions& ro);

struct Common {
  std::string file;
  std::vector<std::string> ptds;
  bool json = false;
  bool allow_legacy_ptd = false;
  uint64_t segment_alignment = 0;
  uint64_t tensor_alignment = 0;
};

void AddCommon(CLI::App* c, Common& o);

nlohmann::json LayoutJson(int scalar_type, std::vector<int64_t> sizes, std::vector<int64_t> dim_order,
                          std::optional<uint64_t> bytes);

// Adds to each external tensor of `d` its dtype, shape, dim order and bytes,
// and those of its .ptd entry (when a given .ptd holds the key), so that a
// script can compare them.
void AddExternalLayouts(nlohmann::json& d, const PteFile& pte, const std::vector<const PtdFile*>& ptds);

// A .pte with external tensors verified without any .ptd: nothing about them
// was checked; say so (a warning, an error with --strict).
void NoteUncheckedExternal(PteFile& pte);

// The config the file was written with, as `repack` infers it, and whether
// each segment starts where that segment alignment puts it. Where it cannot
// be inferred (invalid file, external data not given) the reason is said.
void AddInferredConfig(nlohmann::json& d, const PteFile& pte, const std::vector<const PtdFile*>& ptds);

bool IsPtdFile(const std::string& path);

}  // namespace ptepack::cli
