// `ptepack bundle`: one zstd-compressed file for a program and its .ptd files.
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "serialize/api/read_api.h"
#include "serialize/bundle/bundle.h"
#include "serialize/read/checksum.h"
#include "serialize/read/describe.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "tools/args.h"
#include "tools/commands.h"

namespace ptepack::cli {

namespace {

struct BundleCreateOpts {
  std::string out;
  std::vector<std::string> inputs;
  BundleOptions bo;
  uint64_t level = 3, threads = 0;
  bool quiet = false;
};

struct BundleExtractOpts {
  std::string bundle;
  std::string dir;
  bool force = false;
  bool quiet = false;
};

nlohmann::json MembersJson(const BundleInfo& info) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& m : info.members) {
    a.push_back({{"name", m.name},
                 {"kind", m.kind},
                 {"size", m.size},
                 {"compressed_size", m.compressed_size},
                 {"xxh3", HexDigest(m.xxh3)}});
  }
  return a;
}

void PrintMembers(const BundleInfo& info) {
  for (const auto& m : info.members) {
    double ratio = m.compressed_size ? static_cast<double>(m.size) / static_cast<double>(m.compressed_size) : 0.0;
    std::printf("  %-32s %-3s %14llu bytes -> %14llu (%.2fx)  xxh3 %s\n", m.name.c_str(), m.kind.c_str(),
                static_cast<unsigned long long>(m.size), static_cast<unsigned long long>(m.compressed_size), ratio,
                HexDigest(m.xxh3).c_str());
  }
}

}  // namespace

void RegisterBundle(CLI::App& app) {
  auto* b = app.add_subcommand("bundle",
                               "Pack a program and its .ptd files into one zstd-compressed .ptebundle for "
                               "transfer, and unpack it again. A ptepack-only format: ExecuTorch's runtime does "
                               "NOT read bundles; extract them before loading.");
  b->require_subcommand(1);

  auto co = std::make_shared<BundleCreateOpts>();
  auto* c = b->add_subcommand("create", "Write a .ptebundle (-o) from IN.pte and its .ptd files");
  Args& ca = NewArgs(c);
  // Checked in the body: in the deprecated form the first one is the output.
  ca.Inputs("FILE", &co->inputs, "The .pte first, then its .ptd files", InputKind::kJudged)->required();
  ca.Output("-o,--output", &co->out, "Bundle to write", "OUT.ptebundle");
  ca.Number("--level", &co->level, 1, 22, "zstd compression level 1..22 (default 3; 20..22 need much more memory)");
  ca.Number("--threads", &co->threads, 0, 256, "zstd worker threads (default 0: compress in one thread)");
  ca.Flag("--long", &co->bo.long_distance, "zstd long-distance matching (128 MiB window)");
  ca.Flag("-q,--quiet", &co->quiet, "No progress output and no summary");
  ca.Run([c, co]() {
    co->bo.level = static_cast<int>(co->level);
    co->bo.threads = static_cast<int>(co->threads);
    if (co->out.empty()) {
      // The form of before -o: `bundle create OUT IN.pte [IN.ptd ...]`, still accepted.
      if (co->inputs.size() < 2) throw Error("usage", "bundle create: no output: give it with -o OUT.ptebundle");
      co->out = co->inputs.front();
      co->inputs.erase(co->inputs.begin());
      if (!co->quiet) {
        std::cerr << "ptepack: note: `bundle create OUT IN...` is deprecated; use `bundle create IN... -o OUT`\n";
      }
    }
    for (const auto& in : co->inputs) CheckInput(in, InputKind::kProgram, CommandPath(c));
    co->bo.progress = ProgressPrinter(co->quiet);
    BundleInfo info = CreateBundle(co->out, co->inputs, co->bo);
    if (!co->quiet) {
      std::printf("%s: %llu bytes, %zu file(s)\n", co->out.c_str(), static_cast<unsigned long long>(info.size),
                  info.members.size());
      PrintMembers(info);
    }
    g_exit = kOk;
  });

  auto eo = std::make_shared<BundleExtractOpts>();
  auto* e = b->add_subcommand("extract", "Unpack a bundle; every file's size and XXH3-64 are checked");
  Args& ea = NewArgs(e);
  ea.Input("BUNDLE", &eo->bundle, "Bundle to read", InputKind::kFile, "FILE")->required();
  ea.Output("-o,--output", &eo->dir, "Output directory (created)", "DIR")->required();
  ea.Flag("--force", &eo->force, "Replace existing files");
  ea.Flag("-q,--quiet", &eo->quiet, "No progress output and no list of the files written");
  ea.Run([eo]() {
    auto written = ExtractBundle(eo->bundle, eo->dir, eo->force, ProgressPrinter(eo->quiet));
    if (!eo->quiet) {
      for (const auto& p : written) std::cout << p << "\n";
    }
    g_exit = kOk;
  });

  auto lo = std::make_shared<std::pair<std::string, bool>>();
  auto* l = b->add_subcommand("list", "List a bundle's files");
  Args& la = NewArgs(l);
  la.Input("BUNDLE", &lo->first, "Bundle to read", InputKind::kFile, "FILE")->required();
  la.Flag("--json", &lo->second, "Print JSON");
  la.Run([lo]() {
    BundleInfo info = ReadBundle(lo->first);
    if (lo->second) {
      std::cout << nlohmann::json{{"bundle", lo->first}, {"size", info.size}, {"files", MembersJson(info)}}.dump(
                       2, ' ', false, nlohmann::json::error_handler_t::replace)
                << "\n";
    } else {
      std::printf("%s: %llu bytes, %zu file(s)\n", lo->first.c_str(), static_cast<unsigned long long>(info.size),
                  info.members.size());
      PrintMembers(info);
    }
    g_exit = kOk;
  });
}

}  // namespace ptepack::cli
