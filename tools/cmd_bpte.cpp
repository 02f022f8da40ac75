// `ptepack bpte ...` (BundledProgram files), and inspect/verify of a .bpte.
// Argument parsing and printing only; the work is serialize/bpte's.
#include <iostream>
#include <optional>

#include "serialize/api/read_api.h"
#include "serialize/bpte/bpte.h"
#include "serialize/read/describe.h"
#include "serialize/read/pte_reader.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace ptepack::cli {
namespace {

void PrintFindings(const Report& r) {
  for (const auto& f : r.findings()) std::cerr << EscapeControl(f.ToString()) << "\n";
}

// An input that is not a readable BundledProgram stops the command with its first error
// (exit 2), as an invalid input does for every command but verify/inspect/checksum.
std::unique_ptr<bpte::BpteFile> OpenReadable(const std::string& in) {
  auto f = bpte::BpteFile::Open(in);
  if (!f->decoded() || f->content().program.size == 0) {
    f->report().ThrowIfError();
    throw Error("bpte-invalid", "the BundledProgram holds no program", in);
  }
  return f;
}

void RegisterExtractProgram(CLI::App* bpte) {
  struct Opts {
    std::string in, out;
    bool force = false, quiet = false;
  };
  auto o = std::make_shared<Opts>();
  auto* c = bpte->add_subcommand("extract-program", "Write the wrapped .pte program, byte for byte");
  Args& a = NewArgs(c);
  a.Input("X.bpte", &o->in, "BundledProgram file", InputKind::kFile)->required();
  a.Output("-o,--output", &o->out, "Output .pte", "P.pte")->required();
  a.Flag("--force", &o->force, "Write the program even if it does not verify");
  a.Flag("-q,--quiet", &o->quiet, "No summary");
  a.Run([o]() {
    auto f = OpenReadable(o->in);
    if (!f->program_ok() && !o->force) {
      for (Finding e : f->report().findings()) {
        if (e.severity != Finding::Severity::kError) continue;
        e.message += " (the wrapped program is invalid; --force writes it anyway)";
        throw Error(std::move(e));
      }
      throw Error("bpte-invalid", "the wrapped program is invalid; --force writes it anyway", o->in);
    }
    bpte::WriteOutputFile(o->out, f->content().program, {o->in});
    if (!o->quiet) {
      std::cout << "wrote " << o->out << " (" << f->content().program.size << " bytes, from offset "
                << f->program_offset() << ")\n";
    }
    g_exit = kOk;
  });
}

void RegisterExtractTests(CLI::App* bpte) {
  struct Opts {
    std::string in, dir, old_dir;
    bool force = false, quiet = false;
  };
  auto o = std::make_shared<Opts>();
  auto* c = bpte->add_subcommand("extract-tests",
                                 "Write the test cases as DIR/tests.json plus one raw file per tensor (what `bpte "
                                 "build` reads)");
  c->footer(bpte::kTestsJsonHelp);
  Args& a = NewArgs(c);
  a.Input("X.bpte", &o->in, "BundledProgram file", InputKind::kFile)->required();
  a.Output("-o,--output", &o->dir, "Output directory (filled under a temporary name, then renamed into place)", "DIR");
  // The form of before -o: `bpte extract-tests X.bpte DIR`, still accepted.
  a.Output("DIR", &o->old_dir, "(deprecated: give it with -o)", "DIR");
  a.Flag("--force", &o->force, "Replace an existing non-empty directory that holds a tests.json");
  a.Flag("-q,--quiet", &o->quiet, "No summary");
  a.Run([o]() {
    if (!o->old_dir.empty()) {
      if (!o->dir.empty()) throw Error("usage", "bpte extract-tests: give the output directory once, with -o DIR");
      o->dir = o->old_dir;
      if (!o->quiet)
        std::cerr << "ptepack: note: `bpte extract-tests X.bpte DIR` is deprecated; use `bpte extract-tests X.bpte -o "
                     "DIR`\n";
    }
    if (o->dir.empty()) throw Error("usage", "bpte extract-tests: no output directory: give it with -o DIR");
    auto f = OpenReadable(o->in);
    bpte::WriteTestsDirectory(o->dir, f->content(), o->force, o->in);
    size_t cases = 0;
    for (const auto& s : f->content().suites) cases += s.test_cases.size();
    if (!o->quiet) std::cout << "extracted " << cases << " test case(s) to " << o->dir << "/\n";
    g_exit = kOk;
  });
}

void RegisterBuild(CLI::App* bpte) {
  struct Opts {
    std::string pte, tests, out, order = "flatc";
    bool dry_run = false, quiet = false;
  };
  auto o = std::make_shared<Opts>();
  auto* c = bpte->add_subcommand("build",
                                 "Build a BundledProgram from a .pte and test cases (tests.json + raw tensor files). "
                                 "The output is read back and checked before it replaces anything");
  c->footer(bpte::kTestsJsonHelp);
  Args& a = NewArgs(c);
  a.Input("P.pte", &o->pte, "Program to wrap (copied byte for byte)", InputKind::kProgram)->required();
  a.Input("TESTS.json", &o->tests, "tests.json", InputKind::kFile)->required();
  a.Output("-o,--output", &o->out, "Output .bpte", "X.bpte")->required();
  a.Choice("--flatbuffer-order", &o->order, {"flatc", "python"},
           "flatc (ExecuTorch's flatc JSON path, which wrote the real files; default) or python (its "
           "Python object-API order: loads in ExecuTorch's runtime, bytes not yet compared with its Python "
           "builder)");
  a.Flag("--dry-run", &o->dry_run, "Say what would be written; write nothing");
  a.Flag("-q,--quiet", &o->quiet, "No summary");
  a.Run([o]() {
    FlatbufferOrder order;
    if (!ParseFlatbufferOrder(o->order, &order)) {
      throw Error("usage", "--flatbuffer-order: expected flatc or python, found \"" + EscapeControl(o->order) + "\"");
    }
    // The program is checked on its own first, so that its errors name it, not the output.
    PteFile::Open(o->pte)->report().ThrowIfError();
    bpte::BundledProgramData d = bpte::LoadTests(o->tests);
    d.program = MappedFile::Open(o->pte)->All();
    std::vector<uint8_t> bytes = bpte::EncodeBpte(d, order);
    auto check = bpte::BpteFile::FromBytes(Bytes::View(bytes.data(), bytes.size()), o->out);
    if (!check->ok()) {
      PrintFindings(check->report());
      throw Error("output-invalid", "the BundledProgram would not be valid (see above); nothing written", o->out);
    }
    if (o->dry_run) {
      std::cout << "would write " << o->out << " (" << bytes.size() << " bytes)\n";
      return void(g_exit = kOk);
    }
    bpte::WriteOutputFile(o->out, Bytes::View(bytes.data(), bytes.size()), {o->pte, o->tests});
    if (!o->quiet) std::cout << "wrote " << o->out << " (" << bytes.size() << " bytes)\n";
    g_exit = kOk;
  });
}

}  // namespace

void RegisterBpte(CLI::App& app) {
  auto* c = app.add_subcommand("bpte",
                               "BundledProgram (.bpte) files: a program with test inputs and expected outputs. "
                               "`inspect` and `verify` read them too.");
  c->require_subcommand(1);
  c->footer(bpte::kTestsJsonHelp);
  RegisterExtractProgram(c);
  RegisterExtractTests(c);
  RegisterBuild(c);
}

}  // namespace ptepack::cli
