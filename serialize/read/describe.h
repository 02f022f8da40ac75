// Human- and machine-readable descriptions of .pte/.ptd files.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ptepack {

class PteFile;
class PtdFile;

// Everything `ptepack inspect --json` prints for a program (and its .ptd files).
nlohmann::json DescribePte(const PteFile& pte, const std::vector<const PtdFile*>& ptds);
nlohmann::json DescribePtd(const PtdFile& ptd);
nlohmann::json FindingsJson(const std::vector<const class Report*>& reports);

// The readable form of DescribePte / DescribePtd output.
std::string RenderPteText(const nlohmann::json& d);
std::string RenderPtdText(const nlohmann::json& d);

}  // namespace ptepack
