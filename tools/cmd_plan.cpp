// `ptepack plan`: the memory plan (per method and buffer: size now, lower
// bound, what each planner gives, the peak) and, with -o, the program
// re-planned. The work is the library's (serialize/api/replan.h).
#include <iostream>

#include "serialize/api/replan.h"
#include "tools/write_common.h"

namespace ptepack::cli {

void RegisterPlan(CLI::App& app) {
  struct Options {
    std::string file;
    std::vector<std::string> ptds;
    std::string algorithm = "best";
    std::optional<uint64_t> alignment;
    OutputFlags out;
  };
  auto o = std::make_shared<Options>();
  auto* c = app.add_subcommand(
      "plan",
      "The memory plan: per method and planned buffer, the size now, the lower bound no plan can beat (the most "
      "bytes alive at one instruction), the size each planner gives (executorch-greedy, best-fit, exact, best) and "
      "which tensors set the peak. With -o, writes the program with only the plan changed (planned tensors' "
      "offsets, planned buffer sizes): a buffer no planner makes smaller keeps the input's offsets.");
  Args& a = NewArgs(c);
  a.Input("FILE", &o->file, "A .pte program", InputKind::kProgram)->required();
  a.Inputs("--ptd", &o->ptds, "The program's .ptd files (repeatable; rewritten next to the output)",
           InputKind::kProgram, "F.ptd");
  a.Choice("--algorithm", &o->algorithm, {"executorch-greedy", "best-fit", "exact", "best"},
           "The planner whose plan -o writes (default best: the smallest)");
  a.Alignment("--alignment", &o->alignment,
              "Alignment of every planned tensor (power of two; default: inferred from each buffer's offsets, at "
              "least 16)");
  a.Output("-o,--output", &o->out.out,
           "Output .pte with only the plan changed (.ptd files are rewritten next to it); without -o, only the "
           "report",
           "OUT.pte");
  a.Flag("--force", &o->out.force, "Replace an existing .ptd beside the output that this command did not read");
  a.Flag("--dry-run", &o->out.dry_run, "Check everything and list the files that would be written; write nothing");
  a.Flag("--json", &o->out.json, "Print the report (and what was written) as JSON");
  a.Flag("-q,--quiet", &o->out.quiet, "Print nothing on success (the report and the summary of what was written)");
  c->footer(
      "Refuses (exit 2, nothing written) an input `verify` rejects and a method whose tensor lifetimes cannot be "
      "derived. The output is read back and verified before it is renamed into place; `ptepack diff` of input and "
      "output says \"memory plan only\".");
  a.Run([o]() {
    if (o->out.out == "-") throw Error("usage", "plan prints its report on stdout: give -o OUT.pte, not -o -");
    if (o->out.out.empty() && (o->out.dry_run || o->out.force)) {
      throw Error("usage", "--dry-run and --force need an output (-o OUT.pte)");
    }
    ReplanOptions ro;
    ro.ptd = o->ptds;
    ro.plan.chosen = *PlanAlgorithmFromName(o->algorithm);
    ro.plan.alignment = o->alignment;
    ro.write = MakeWriteOptions(o->out);
    ReplanResult r = Replan(o->file, o->out.out, ro);
    nlohmann::json written;
    bool ok = true;
    if (r.written && o->out.dry_run) {
      PrintDryRun(r.files, o->out.json);
      return;
    }
    if (r.written) ok = CheckOutputs(r.files, o->out.quiet || o->out.json, &written);
    if (o->out.json) {
      nlohmann::json j = ReplanJson(r);
      if (r.written) j["written"]["verified"] = ok;
      std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else if (!o->out.quiet) {
      std::cout << EscapeControl(RenderPlanText(r.report), /*keep_newlines=*/true);
    }
    g_exit = ok ? kOk : kFailed;
  });
}

}  // namespace ptepack::cli
