// ptepack: inspect, verify, pack, repack, split and extract ExecuTorch
// .pte/.ptd files without Python.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "serialize/error.h"
#include "serialize/file_io.h"
#include "tools/commands.h"

namespace ptepack::cli {

int g_exit = kOk;

std::function<void(uint64_t, uint64_t)> ProgressPrinter(bool quiet) {
  if (quiet || !::isatty(STDERR_FILENO)) return nullptr;
  return [last = -1](uint64_t done, uint64_t total) mutable {
    int pct = total ? static_cast<int>(done * 100 / total) : 100;
    if (pct == last) return;
    last = pct;
    std::fprintf(stderr, "\rwriting segments: %3d%% (%llu / %llu MiB)", pct,
                 static_cast<unsigned long long>(done >> 20), static_cast<unsigned long long>(total >> 20));
    if (done >= total) std::fprintf(stderr, "\n");
  };
}

}  // namespace ptepack::cli

int main(int argc, char** argv) {
  using namespace ptepack::cli;
  CLI::App app{
      "ptepack: write, read, check and repack ExecuTorch program files (.pte) and their "
      "external data files (.ptd) natively, without Python.\n"
      "Exit status: 0 success, 1 input is invalid, 2 usage/I/O/config error."};
  ptepack::InstallInterruptHandlers();
  app.require_subcommand(1);
  app.set_version_flag("--version", "ptepack 0.1.0");
  RegisterInspect(app);
  RegisterVerify(app);
  RegisterPack(app);
  RegisterRepack(app);
  RegisterSplit(app);
  RegisterExtract(app);
  RegisterChecksum(app);
  RegisterBundle(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : kFailed;
  } catch (const ptepack::Error& e) {
    std::cerr << "ptepack: " << e.what() << "\n";
    ptepack::ReraiseInterrupt();
    return kFailed;
  } catch (const std::exception& e) {
    std::cerr << "ptepack: " << e.what() << "\n";
    return kFailed;
  }
  // A signal that arrived after the outputs were complete and in place.
  ptepack::ReraiseInterrupt();
  return g_exit;
}
