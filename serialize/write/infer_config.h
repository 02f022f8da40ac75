// The BackendConfig a file was written with, read back from its layout.
#pragma once

#include <string>
#include <vector>

#include "config/backend_config.h"
#include "serialize/model/package.h"

namespace ptepack {

class PteFile;
class PtdFile;

// The config that reproduces `pte` (and `ptds`) from their package form:
// alignments, header flavour, and the flatbuffer producer whose byte layout
// matches. `exact` is set when a candidate re-encodes the flatbuffer to the
// very same bytes. Also sets the alignment each named blob of `pkg` needs to
// land where it was.
struct InferredConfig {
  BackendConfig config;
  bool exact = false;
  std::string note;
};
InferredConfig InferConfig(const PteFile& pte, Package& pkg, const std::vector<const PtdFile*>& ptds = {});

}  // namespace ptepack
