#include "ptepack/version.h"

namespace ptepack {

const char* Version() { return PTEPACK_VERSION_STRING; }

}  // namespace ptepack
