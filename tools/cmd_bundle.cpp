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
#include "tools/commands.h"

namespace ptepack::cli {

namespace {

struct BundleCreateOpts {
  std::string out;
  std::vector<std::string> inputs;
  BundleOptions bo;
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
  c->add_option("INPUTS", co->inputs, "The .pte first, then its .ptd files")->required();
  c->add_option("-o,--output", co->out, "Bundle to write");
  c->add_option("--level", co->bo.level, "zstd compression level 1..22 (default 3; 20..22 need much more memory)");
  c->add_option("--threads", co->bo.threads, "zstd worker threads (default 0: compress in one thread)");
  c->add_flag("--long", co->bo.long_distance, "zstd long-distance matching (128 MiB window)");
  c->add_flag("-q,--quiet", co->quiet, "No progress output");
  c->callback([co]() {
    if (co->out.empty()) {
      // The form of before -o: `bundle create OUT IN.pte [IN.ptd ...]`, still accepted.
      if (co->inputs.size() < 2) throw Error("usage", "bundle create: no output: give it with -o OUT.ptebundle");
      co->out = co->inputs.front();
      co->inputs.erase(co->inputs.begin());
      if (!co->quiet) {
        std::cerr << "ptepack: note: `bundle create OUT IN...` is deprecated; use `bundle create IN... -o OUT`\n";
      }
    }
    for (const auto& in : co->inputs) {
      const std::string why = CLI::ExistingFile(in);
      if (!why.empty()) throw Error("usage", "INPUTS: " + why);
    }
    co->bo.progress = ProgressPrinter(co->quiet);
    BundleInfo info = CreateBundle(co->out, co->inputs, co->bo);
    std::printf("%s: %llu bytes, %zu file(s)\n", co->out.c_str(), static_cast<unsigned long long>(info.size),
                info.members.size());
    PrintMembers(info);
    g_exit = kOk;
  });

  auto eo = std::make_shared<BundleExtractOpts>();
  auto* e = b->add_subcommand("extract", "Unpack a bundle; every file's size and XXH3-64 are checked");
  e->add_option("BUNDLE", eo->bundle, "Bundle to read")->required()->check(CLI::ExistingFile);
  e->add_option("-o,--output", eo->dir, "Output directory (created)")->required();
  e->add_flag("--force", eo->force, "Replace existing files");
  e->add_flag("-q,--quiet", eo->quiet, "No progress output");
  e->callback([eo]() {
    auto written = ExtractBundle(eo->bundle, eo->dir, eo->force, ProgressPrinter(eo->quiet));
    for (const auto& p : written) std::cout << p << "\n";
    g_exit = kOk;
  });

  auto lo = std::make_shared<std::pair<std::string, bool>>();
  auto* l = b->add_subcommand("list", "List a bundle's files");
  l->add_option("BUNDLE", lo->first, "Bundle to read")->required()->check(CLI::ExistingFile);
  l->add_flag("--json", lo->second, "Print JSON");
  l->callback([lo]() {
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
