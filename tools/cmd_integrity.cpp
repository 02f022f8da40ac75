// `ptepack checksum` and `ptepack bundle` (filled in by the integrity work).
#include "tools/commands.h"

namespace ptepack::cli {
void RegisterChecksum(CLI::App&) {}
void RegisterBundle(CLI::App&) {}
}  // namespace ptepack::cli
