// What inspect and verify share: the common flags. Loading, describing and judging a file are
// the library's (serialize/api/read_api.h).
#pragma once

#include <cstdlib>
#include <iostream>

#include "config/backend_config.h"
#include "serialize/api/read_api.h"
#include "serialize/read/checksum.h"
#include "serialize/read/describe.h"
#include "tools/commands.h"

namespace ptepack::cli {

struct Common {
  std::string file;
  std::vector<std::string> ptds;
  bool json = false;
  bool allow_legacy_ptd = false;
  uint64_t segment_alignment = 0;
  uint64_t tensor_alignment = 0;
};

void AddCommon(CLI::App* c, Common& o);

}  // namespace ptepack::cli
