// BackendConfig (public: ptepack/config.h) and its JSON form for the library.
#pragma once

#include "nlohmann/json_fwd.hpp"
#include "ptepack/config.h"

namespace ptepack {

// JSON form (keys are the ExecuTorch field names).
nlohmann::json ConfigToJson(const BackendConfig& config);
BackendConfig ConfigFromJson(const nlohmann::json& j);  // validates

}  // namespace ptepack
