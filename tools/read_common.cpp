#include "tools/read_common.h"

namespace ptepack::cli {

void AddCommon(CLI::App* c, Common& o) {
  c->add_option("FILE", o.file, "A .pte program (or a .ptd data file)")->required()->check(CLI::ExistingFile);
  c->add_option("--ptd", o.ptds, "External data file(s) the program refers to; checks every external key")
      ->check(CLI::ExistingFile);
  c->add_flag("--json", o.json, "Print machine-readable JSON instead of text");
  // Alignments are powers of two, as ExecuTorch's config requires (0: no extra check).
  const CLI::Validator power_of_two(
      [](std::string& v) -> std::string {
        uint64_t n = std::strtoull(v.c_str(), nullptr, 10);
        return n == 0 || IsPowerOfTwo(n) ? "" : "must be a power of two (found " + v + ")";
      },
      "POWER OF TWO");
  c->add_option("--segment-alignment", o.segment_alignment,
                "Also require every segment to start at a multiple of N (a power of two)")
      ->check(power_of_two);
  c->add_option("--tensor-alignment", o.tensor_alignment,
                "Also require every constant tensor to start at a multiple of N within its segment (a power of two)")
      ->check(power_of_two);
  c->add_flag("--allow-legacy-ptd", o.allow_legacy_ptd,
              "Accept .ptd files in the FlatTensor layout of before June 2025 (older runtimes load them; "
              "current ones do not: `ptepack repack --upgrade-ptd` rewrites them)");
}

}  // namespace ptepack::cli
