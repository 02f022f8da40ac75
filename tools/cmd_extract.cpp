// `ptepack extract`: a program's parts as files (spec.json, config.json, blobs).
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "tools/write_common.h"

namespace ptepack::cli {

void RegisterExtract(CLI::App& app) {
  struct O {
    std::string in, dir;
    std::vector<std::string> ptds;
    bool force = false, dry_run = false;
  };
  auto o = std::make_shared<O>();
  auto* c = app.add_subcommand(
      "extract",
      "Write a program's parts to a directory: program.json (the flatbuffer as JSON), one file per segment, "
      "constant, delegate payload and named blob, and index.json describing them. The directory is filled "
      "under a temporary name and renamed into place when complete; an existing non-empty directory is "
      "replaced only with --force.");
  c->add_option("IN", o->in, "Input .pte")->required()->check(CLI::ExistingFile);
  c->add_option("--ptd", o->ptds, "The input's .ptd files")->check(CLI::ExistingFile);
  c->add_option("-o,--output", o->dir, "Output directory (created)")->required();
  c->add_flag("--force", o->force, "Replace an existing non-empty output directory");
  c->add_flag("--dry-run", o->dry_run, "List the files that would be written; write nothing");
  c->callback([o]() {
    namespace fs = std::filesystem;
    ValidInput in = LoadValidInput(o->in, o->ptds);
    // Everything to write, in order: (file name, bytes).
    std::vector<std::pair<std::string, Bytes>> files;
    nlohmann::json index;
    index["program_json"] = "program.json";
    {
      if (!in.pte->program()) throw Error("flatbuffer-invalid", in.pte->name() + ": no valid program");
      std::string j = ProgramFlatbufferToJson(in.pte->file().data);
      files.emplace_back("program.json", Bytes::Copy(j.data(), j.size()));
    }
    auto add_blob = [&](const std::string& name, const Bytes& b) {
      files.emplace_back(name, b);
      return nlohmann::json{{"file", name}, {"size", b.size}};
    };
    nlohmann::json segs = nlohmann::json::array();
    for (size_t i = 0; i < in.pte->segments().size(); ++i) {
      segs.push_back(add_blob("segment_" + std::to_string(i) + ".bin", in.pte->SegmentData(i)));
    }
    index["segments"] = segs;
    Package pkg = PackageFromPte(*in.pte, in.ptrs);
    nlohmann::json consts = nlohmann::json::array();
    const auto& cb = prog::F(*pkg.program, "constant_buffer").elems;
    for (size_t i = 1; i < cb.size(); ++i) {
      consts.push_back(add_blob("constant_" + std::to_string(i) + ".bin", prog::F(*cb[i].table, "storage").scalars));
    }
    index["constants"] = consts;
    nlohmann::json dels = nlohmann::json::array();
    const auto& bdd = prog::F(*pkg.program, "backend_delegate_data").elems;
    for (size_t i = 0; i < bdd.size(); ++i) {
      dels.push_back(add_blob("delegate_" + std::to_string(i) + ".bin", prog::F(*bdd[i].table, "data").scalars));
    }
    index["delegates"] = dels;
    nlohmann::json named = nlohmann::json::array();
    for (size_t i = 0; i < pkg.named_data.size(); ++i) {
      auto j = add_blob("named_" + std::to_string(i) + ".bin", pkg.named_data[i].data);
      j["key"] = pkg.named_data[i].key;
      named.push_back(j);
    }
    index["named_data"] = named;
    nlohmann::json ext = nlohmann::json::array();
    for (const auto& ef : pkg.external) {
      for (size_t i = 0; i < ef.entries.size(); ++i) {
        auto j = add_blob(ef.tag + "_" + std::to_string(i) + ".bin", ef.entries[i].data);
        j["key"] = ef.entries[i].key;
        j["tag"] = ef.tag;
        ext.push_back(j);
      }
    }
    index["external"] = ext;
    {
      std::string s = index.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
      files.emplace_back("index.json", Bytes::Copy(s.data(), s.size()));
    }

    // The target: absent, an empty directory, or (with --force) any directory.
    const fs::path dir = fs::path(o->dir).lexically_normal();
    const fs::path target = dir.filename().empty() ? dir.parent_path() : dir;
    std::error_code ec;
    auto st = fs::symlink_status(target, ec);
    bool exists = !ec && fs::exists(st);
    if (exists && fs::is_symlink(st)) {
      Finding f{Finding::Severity::kError,
                "output-symlink",
                "output directory is a symbolic link; ptepack does not "
                "write through links: give the link's target",
                target.string(),
                {},
                {},
                {}};
      throw Error(std::move(f));
    }
    if (exists && !fs::is_directory(st)) {
      throw Error(Finding{Finding::Severity::kError,
                          "output-not-directory",
                          "output exists and is not a directory",
                          target.string(),
                          {},
                          {},
                          {}});
    }
    const bool non_empty = exists && !fs::is_empty(target, ec);
    if (non_empty && !o->force) {
      throw Error(Finding{Finding::Severity::kError,
                          "output-exists",
                          "output directory is not empty (its files could mix with this program's); pass --force to "
                          "replace it, or choose an empty or new directory",
                          target.string(),
                          {},
                          {},
                          {}});
    }
    if (non_empty && !fs::exists(target / "index.json")) {
      throw Error(Finding{Finding::Severity::kError,
                          "output-exists",
                          "output directory is not empty and holds no index.json (it is not an earlier extract); "
                          "refusing to replace it even with --force",
                          target.string(),
                          {},
                          {},
                          {}});
    }
    if (o->dry_run) {
      std::cout << "would write " << (non_empty ? "(replacing the directory) " : "") << target.string() << "/:\n";
      for (const auto& [name, b] : files) std::cout << "  " << name << " (" << b.size << " bytes)\n";
      return;
    }
    WritingScope writing;
    // Fill a sibling temporary directory, then rename it into place.
    const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
    fs::create_directories(parent);
    const fs::path tmp = parent / (target.filename().string() + ".tmp-" + std::to_string(::getpid()));
    struct Cleanup {
      fs::path p;
      ~Cleanup() {
        std::error_code e;
        if (!p.empty()) fs::remove_all(p, e);
      }
    } cleanup;
    fs::remove_all(tmp, ec);
    if (::mkdir(tmp.c_str(), 0755) != 0) {
      throw Error(Finding{Finding::Severity::kError,
                          "create-failed",
                          std::string("cannot create temporary directory: ") + std::strerror(errno),
                          tmp.string(),
                          {},
                          {},
                          {}});
    }
    cleanup.p = tmp;
    // No fsync per file: the filled directory is synced once before it is
    // renamed into place (10,000 files: one sync, not 10,000).
    AtomicFile::Options unsynced;
    unsynced.sync = false;
    unsynced.direct = true;  // the directory is new and ours: no temp name and rename per file
    for (const auto& [name, b] : files) {
      ThrowIfInterrupted();
      AtomicFile f((tmp / name).string(), unsynced);
      f.Write(b);
      f.Commit();
    }
    ThrowIfInterrupted();
    SyncTree(tmp.string());
    fs::path old;
    if (exists) {
      old = parent / (target.filename().string() + ".old-" + std::to_string(::getpid()));
      if (::rename(target.c_str(), old.c_str()) != 0) {
        throw Error(Finding{Finding::Severity::kError,
                            "write-failed",
                            std::string("cannot move the old directory aside: ") + std::strerror(errno),
                            target.string(),
                            {},
                            {},
                            {}});
      }
    }
    if (::rename(tmp.c_str(), target.c_str()) != 0) {
      int e = errno;
      if (!old.empty()) ::rename(old.c_str(), target.c_str());
      throw Error(Finding{Finding::Severity::kError,
                          "write-failed",
                          std::string("cannot rename the temporary directory into place: ") + std::strerror(e),
                          target.string(),
                          {},
                          {},
                          {}});
    }
    cleanup.p = old;  // the replaced directory goes
    std::cout << "extracted to " << o->dir << "\n";
  });
}

}  // namespace ptepack::cli
