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

}  // namespace ptepack
