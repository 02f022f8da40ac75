#include "serialize/write/output_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <utility>

#include "ptepack/error.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"

namespace ptepack {

namespace {

std::string PathKey(const std::string& p) {
  std::error_code ec;
  auto w = std::filesystem::weakly_canonical(std::filesystem::absolute(p), ec);
  return ec ? std::filesystem::absolute(p).lexically_normal().string() : w.string();
}

[[noreturn]] void Refuse(const std::string& code, const std::string& path, const std::string& message) {
  Finding f;
  f.code = code;
  f.file = path;
  f.message = message;
  throw Error(std::move(f));
}

bool IsInput(const std::string& path, const WriteOptions& o) {
  for (const auto& in : o.inputs) {
    if (SameFile(in, path)) return true;
  }
  return false;
}

// A .ptd that would replace an input of its name is named after the output:
// "dir/out.ptd", or "dir/out-TAG.ptd" when there are several.
std::string PtdNamedAfter(const std::string& pte_path, const std::string& tag, size_t count) {
  std::filesystem::path p(pte_path);
  std::string stem = p.stem().string();
  if (p.extension() != ".pte") stem = p.filename().string();
  const std::filesystem::path dir = p.parent_path();
  const std::string name = count > 1 ? stem + "-" + tag + ".ptd" : stem + ".ptd";
  return dir.empty() ? name : (dir / name).string();
}

// A file to write: its target and what it is (for messages).
struct Target {
  std::string path;
  std::string what;
  uint64_t size = 0;
  const std::function<void(AtomicFile&)>* stream = nullptr;
};

// Refuses collisions and foreign files before anything is written: two
// outputs with one name, an output path that may not be written, an existing
// .ptd that was not an input (unless forced). The .pte is the last target.
void RefuseBadTargets(const std::vector<Target>& targets, const WriteOptions& o) {
  std::map<std::string, std::string> seen;  // canonical path -> what it is
  for (size_t i = 0; i < targets.size(); ++i) {
    const bool is_pte = i + 1 == targets.size();
    const Target& t = targets[i];
    auto [it, fresh] = seen.emplace(PathKey(t.path), t.what);
    if (!fresh) {
      Refuse("output-collision", t.path,
             "output name collision: this path would be both " + it->second + " and " + t.what +
                 "; choose another output name or tag");
    }
    CheckOutputPath(t.path);
    if (!is_pte && ::access(t.path.c_str(), F_OK) == 0 && !o.force && !IsInput(t.path, o)) {
      Refuse("output-exists", t.path,
             "a .ptd of this name already exists and was not an input (it may belong to another program); "
             "pass --force to replace it, or write to another directory");
    }
  }
}

// Checks that every target could be opened for writing (a dry run only
// refuses overwriting an input).
void ProbeTargets(const std::vector<Target>& targets, const WriteOptions& o) {
  AtomicFile::Options ao{o.inputs, o.allow_overwrite_input, {}};
  for (const auto& t : targets) {
    if (!o.dry_run) {
      AtomicFile probe(t.path, ao);
      continue;
    }
    if (!o.allow_overwrite_input) RefuseOverwriteInput(t.path, o.inputs);
  }
}

// Reads the staged files back once with the reader's checks, each finding
// located at its target: an error refuses the write (nothing is renamed),
// the rest are the result's findings.
std::vector<Finding> ReadBack(const std::vector<std::pair<std::string, std::string>>& staged_ptds,
                              const std::string& staged_pte, const std::string& pte_path) {
  std::vector<Finding> all, errors;
  auto collect = [&](const Report& rep, const std::string& target) {
    for (Finding f : rep.findings()) {
      f.file = target;
      (f.severity == Finding::Severity::kError ? errors : all).push_back(std::move(f));
    }
  };
  std::vector<std::unique_ptr<PtdFile>> ptds;
  std::vector<const PtdFile*> ptrs;
  for (const auto& [name, target] : staged_ptds) {
    ptds.push_back(PtdFile::Open(name));
    ptrs.push_back(ptds.back().get());
    collect(ptds.back()->report(), target);
  }
  auto pte = PteFile::Open(staged_pte);
  pte->CheckExternalKeys(ptrs);
  collect(pte->report(), pte_path);
  if (errors.empty()) return all;
  Finding f = errors.front();
  f.code = "output-invalid";
  f.message = "refusing to write an invalid program (" + std::to_string(errors.size()) +
              " problem(s); nothing was written): " + errors.front().message + " [" + errors.front().code + "]";
  throw Error(std::move(f));
}

// Every file is written and committed (flushed, synced) under a staging
// name first; only when all of them are complete and read back valid are
// they renamed into place. AtomicFile writes its buffer out in Commit, so
// committing the real targets one after the other could replace the .ptd
// files and then fail on the .pte (full disk), pairing new data with an
// old program. The staging names never are inputs.
void StageCheckAndRename(const std::vector<Target>& targets, const std::vector<std::string>& kept,
                         const std::function<void()>& release, WriteResult& r) {
  StagedFiles staged;
  std::vector<uint64_t> sizes;
  for (const auto& t : targets) {
    std::string name = StagedFiles::NameFor(t.path);
    AtomicFile::Options so;
    so.replaces = t.path;  // keep the replaced file's mode and owner
    AtomicFile f(name, so);
    (*t.stream)(f);
    sizes.push_back(f.offset());
    f.Commit();
    staged.Add(name, t.path);
  }
  if (release) release();
  const auto& files = staged.files();
  std::vector<std::pair<std::string, std::string>> staged_ptds(files.begin(), files.end() - 1);
  for (const auto& k : kept) staged_ptds.emplace_back(k, k);
  r.findings = ReadBack(staged_ptds, files.back().first, targets.back().path);
  // All or nothing: a failed rename restores the files renamed before it,
  // so new data is never paired with an old program.
  staged.RenameAll();
  for (size_t i = 0; i + 1 < targets.size(); ++i) r.ptds.push_back({targets[i].path, sizes[i]});
  r.pte = {targets.back().path, sizes.back()};
}

}  // namespace

std::string PtdPathFor(const std::string& pte_path, const std::string& tag) {
  std::string dir;
  auto slash = pte_path.find_last_of('/');
  if (slash != std::string::npos) dir = pte_path.substr(0, slash + 1);
  return dir + tag + ".ptd";
}

void WriteOutputs(const PendingOutputs& out, const WriteOptions& o, WriteResult& r) {
  // .ptd inputs beside the output: kept when unchanged, else not overwritten.
  std::vector<std::string> kept;
  std::vector<Target> targets;
  for (const auto& ptd : out.ptds) {
    std::string target = PtdPathFor(out.pte_path, ptd.tag);
    if (!o.allow_overwrite_input && IsInput(target, o)) {
      if (ptd.same_bytes(MappedFile::Open(target)->All())) {
        kept.push_back(target);
        continue;
      }
      target = PtdNamedAfter(out.pte_path, ptd.tag, out.ptds.size());
    }
    targets.push_back({target, "the data file of tag \"" + ptd.tag + "\"", ptd.size, &ptd.stream});
  }
  targets.push_back({out.pte_path, "the program", out.pte_size, &out.stream_pte});
  RefuseBadTargets(targets, o);
  ProbeTargets(targets, o);
  if (o.dry_run) {
    for (size_t i = 0; i + 1 < targets.size(); ++i) r.ptds.push_back({targets[i].path, targets[i].size, false});
    r.pte = {out.pte_path, out.pte_size};
  } else {
    StageCheckAndRename(targets, kept, out.release, r);
  }
  for (const auto& k : kept) {
    struct stat st {};
    r.ptds.push_back({k, ::stat(k.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0, true});
  }
}

uint64_t WriteOneFile(const std::string& path, const std::function<void(AtomicFile&)>& stream,
                      const std::vector<std::string>& inputs, bool allow_overwrite_input) {
  AtomicFile f(path, AtomicFile::Options{inputs, allow_overwrite_input});
  stream(f);
  const uint64_t n = f.offset();
  f.Commit();
  return n;
}

uint64_t WriteOneFile(const std::string& path, const Bytes& data, const std::vector<std::string>& inputs) {
  return WriteOneFile(
      path, [&data](AtomicFile& f) { f.Write(data); }, inputs);
}

}  // namespace ptepack
