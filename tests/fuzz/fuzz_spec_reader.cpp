// libFuzzer target: the JSON readers of `pack` -- a spec (PackageFromSpecJson)
// and a BackendConfig -- on arbitrary text. Every input must end in a
// ptepack::Error (or be accepted), never a crash, a stack overflow or
// another exception. Data files named by a spec are looked up in a directory
// that does not exist. Run with scripts/fuzz.sh fuzz_spec_reader.
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "config/backend_config.h"
#include "ptepack/error.h"
#include "serialize/io/json_limits.h"
#include "serialize/model/spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    ptepack::PackageFromSpecJson(text, "/nonexistent-fuzz-dir");
  } catch (const ptepack::Error&) {
  } catch (const nlohmann::json::exception&) {
    // LoadSpec turns these into a located "malformed spec" error.
  }
  try {
    ptepack::CheckJsonDepth(text, "config", "bad-config");
    auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded()) ptepack::ConfigFromJson(j);
  } catch (const ptepack::Error&) {
  } catch (const nlohmann::json::exception&) {
  }
  return 0;
}
