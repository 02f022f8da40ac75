#include "tools/read_common.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace ptepack::cli {

Bytes ReadStdin() {
  std::vector<uint8_t> data;
  uint8_t buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error("io", std::string("<stdin>: cannot read: ") + std::strerror(errno));
    if (n == 0) break;
    data.insert(data.end(), buf, buf + n);
  }
  return Bytes::Own(std::move(data));
}

void AddCommon(Args& a, Common& o, bool quiet) {
  // Each file is opened by the command, so that one that cannot be read is counted as
  // unreadable while the others are still judged.
  o.file_opt = a.Inputs("FILE", &o.files,
                        "A .pte program (or a .ptd data file, or a .bpte); several are judged one by one; `-` reads "
                        "stdin",
                        InputKind::kJudged)
                   ->required();
  o.ptd_opt = a.Inputs("--ptd", &o.ptds,
                       "External data file the FILE before it refers to (repeatable); checks every external key",
                       InputKind::kJudged, "F.ptd");
  a.Flag("--json", &o.json, "Print machine-readable JSON instead of text");
  if (quiet) a.Flag("-q,--quiet", &o.quiet, "Print nothing on success (problems and errors are still printed)");
  // Alignments are powers of two, as ExecuTorch's config requires.
  a.Alignment("--segment-alignment", &o.segment_alignment,
              "Also require every segment to start at a multiple of N (a power of two)");
  a.Alignment("--tensor-alignment", &o.tensor_alignment,
              "Also require every constant tensor to start at a multiple of N within its segment (a power of two)");
  a.Flag("--allow-legacy-ptd", &o.allow_legacy_ptd,
         "Accept .ptd files in the FlatTensor layout of before June 2025 (older runtimes load them; current ones "
         "do not: `ptepack repack --upgrade-ptd` rewrites them)");
}

std::vector<Input> Inputs(const CLI::App* c, const Common& o) {
  std::vector<Input> inputs;
  std::vector<std::string> early;  // --ptd before any FILE
  size_t fi = 0, pi = 0;
  for (const CLI::Option* opt : c->parse_order()) {
    if (opt == o.file_opt && fi < o.files.size()) {
      inputs.push_back({o.files[fi++], {}});
    } else if (opt == o.ptd_opt && pi < o.ptds.size()) {
      (inputs.empty() ? early : inputs.back().ptds).push_back(o.ptds[pi++]);
    }
  }
  for (; fi < o.files.size(); ++fi) inputs.push_back({o.files[fi], {}});
  for (; pi < o.ptds.size(); ++pi) early.push_back(o.ptds[pi]);
  if (!inputs.empty()) inputs.front().ptds.insert(inputs.front().ptds.begin(), early.begin(), early.end());
  if (std::count_if(inputs.begin(), inputs.end(), [](const Input& i) { return i.file == "-"; }) > 1) {
    throw Error("usage", "stdin (`-`) can be given only once");
  }
  return inputs;
}

VerifyOptions OptionsFor(const Input& in, const Common& c, VerifyOptions base) {
  base.ptd = in.ptds;
  base.segment_alignment = c.segment_alignment.value_or(0);
  base.tensor_alignment = c.tensor_alignment.value_or(0);
  // A legacy .ptd is explained either way; its verdict is verify's (INVALID unless allowed).
  base.allow_legacy_ptd = c.allow_legacy_ptd;
  return base;
}

int ForEachInput(const std::vector<Input>& inputs, const std::function<int(const Input&)>& judge,
                 const std::function<void(const Input&, const Error&)>& on_error) {
  int worst = kOk;
  for (const Input& in : inputs) {
    int rc = kFailed;
    try {
      rc = judge(in);
    } catch (const Error& e) {
      if (inputs.size() == 1) throw;  // one file: main reports it, as before
      std::cerr << "ptepack: " << EscapeControl(e.what()) << "\n";
      on_error(in, e);
    }
    worst = std::max(worst, rc);
  }
  return worst;
}

nlohmann::json ErrorJson(const std::string& file, const Error& e) {
  const auto& f = e.finding();
  nlohmann::json err = {{"code", f.code}, {"message", f.message}, {"exit_code", kFailed}};
  if (!f.file.empty()) err["file"] = f.file;
  if (f.offset) err["offset"] = *f.offset;
  return {{"file", file}, {"error", err}};
}

}  // namespace ptepack::cli
