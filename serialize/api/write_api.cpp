// ptepack::WritePackage (ptepack/writer.h): the library's write entry point,
// over the writer in serialize/write/.
#include "ptepack/writer.h"
#include "serialize/api/package_access.h"
#include "serialize/write/pte_writer.h"

namespace ptepack {

WriteResult WritePackage(const Package& pkg, const BackendConfig& config, const std::string& pte_path,
                         const WriteOptions& options) {
  return WritePackageFiles(PartsOf(pkg), config, pte_path, options);
}

WriteResult WritePackage(Package&& pkg, const BackendConfig& config, const std::string& pte_path,
                         const WriteOptions& options) {
  PackageParts parts = PartsOf(pkg);  // shares the tables
  pkg = Package();                    // and now, unless a copy of `pkg` lives on, alone
  return WritePackageFiles(std::move(parts), config, pte_path, options);
}

}  // namespace ptepack
