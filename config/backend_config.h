// BackendConfig (public: ptepack/config.h) and its JSON form for the library.
#pragma once

#include <string>

#include "nlohmann/json_fwd.hpp"
#include "ptepack/config.h"

namespace ptepack {

class JsonField;

// JSON form (keys are the ExecuTorch field names).
nlohmann::json ConfigToJson(const BackendConfig& config);
// Reads and validates a config object; every error names the field
// ("bad-config", with the offset when read from text).
BackendConfig ConfigFromJsonField(const JsonField& j);
BackendConfig ConfigFromJson(const nlohmann::json& j);
// A config file: JSON read through the one JSON reader (serialize/io/json_reader.h).
BackendConfig LoadConfigFile(const std::string& path);

}  // namespace ptepack
