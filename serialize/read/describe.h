// Human- and machine-readable descriptions of .pte/.ptd files.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace ptepack {

class PteFile;
class PtdFile;
struct FileDescription;
struct PtdDescription;

// Everything `ptepack inspect --json` prints for a program (and its .ptd files),
// rendered from its description (serialize/read/file_description.h) alone.
nlohmann::json DescribePteJson(const FileDescription& d);
nlohmann::json PtdJson(const PtdDescription& d);
// The same, read from the files (DescribeFile, DescribePtdFile) first.
nlohmann::json DescribePte(const PteFile& pte, const std::vector<const PtdFile*>& ptds);
nlohmann::json DescribePtd(const PtdFile& ptd);
nlohmann::json FindingsJson(const std::vector<const class Report*>& reports);

// The readable form of DescribePte / DescribePtd output.
// `verbose`: also each setting the file cannot tell, with what fits and why.
std::string RenderPteText(const nlohmann::json& d, bool verbose = false);
std::string RenderPtdText(const nlohmann::json& d);

// The same as DescribePtd(ptd).dump(2) and RenderPtdText(DescribePtd(ptd)),
// made one segment and entry at a time: memory does not grow with the
// number of keys (a 100,000-key .ptd took 300 MB as one json).
void WritePtdJson(const PtdFile& ptd, std::ostream& out);
void WritePtdText(const PtdFile& ptd, const std::function<void(const std::string&)>& emit);

}  // namespace ptepack
