// A checked .pte (and its .ptd files) restored to package form: the program
// tree with constants back in constant_buffer, delegate data inline, named
// blobs and external files as lists. What repack, split and extract start from.
#pragma once

#include <string>
#include <vector>

#include "serialize/model/program_parts.h"

namespace ptepack {

class PteFile;
class PtdFile;

// Restores a checked .pte (and its .ptd files) to package form. Throws if
// the file has errors that make that impossible.
PackageParts PackageFromPte(const PteFile& pte, const std::vector<const PtdFile*>& ptds = {});

// The entries of a .ptd as an ExternalFile with the given tag.
ExternalFile ExternalFromPtd(const PtdFile& ptd, const std::string& tag);

}  // namespace ptepack
