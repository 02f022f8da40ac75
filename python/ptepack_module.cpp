// `import ptepack`: the CLI's commands from Python -- inspect, verify, size,
// diff, checksum, repack, split, extract, pack and plan -- returning the dicts
// the CLI prints with --json, and raising ptepack.Error with the located
// message (file, offset, expected, found). Paths may be str or os.PathLike
// (pathlib.Path). Type stubs: python/ptepack.pyi (installed beside the module).
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <variant>

#include "config/backend_config.h"
#include "config/numbers.h"
#include "ptepack/ptepack.h"
#include "serialize/api/extract.h"
#include "serialize/api/insight_api.h"
#include "serialize/api/package_access.h"
#include "serialize/api/read_api.h"
#include "serialize/api/repack_json.h"
#include "serialize/api/replan.h"
#include "serialize/format/pte_format.h"
#include "serialize/model/spec.h"

namespace py = pybind11;

namespace ptepack::python {
namespace {

using Path = std::filesystem::path;
using Paths = std::vector<std::filesystem::path>;

std::vector<std::string> Strings(const Paths& v) {
  std::vector<std::string> out;
  for (const auto& p : v) out.push_back(p.string());
  return out;
}

// JSON -> Python objects, through the json module (exact ints, floats).
py::object Loads(const nlohmann::json& j) {
  return py::module_::import("json").attr("loads")(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}
py::object Loads(const std::string& text) { return py::module_::import("json").attr("loads")(text); }

std::string Dumps(const py::object& o) { return py::module_::import("json").attr("dumps")(o).cast<std::string>(); }

// The summary of a write, as `ptepack repack/split/pack --json` prints it.
py::object WrittenDict(const WriteResult& w, const BackendConfig& config, bool dry_run, nlohmann::json extra) {
  nlohmann::json files = WrittenFilesJson(w);
  nlohmann::json j;
  if (dry_run) {
    j = {{"dry_run", true}, {"files", files}};
  } else {
    // WritePackage read every output back with the reader's checks and
    // renamed nothing had one failed: what is on disk verified.
    j = {{"files", files},
         {"flatbuffer_size", w.flatbuffer_size},
         {"segments", w.num_segments},
         {"dedup_bytes_saved", w.dedup_bytes_saved},
         {"verified", true},
         {"config", ConfigToJson(config)}};
    j.update(extra);
  }
  return Loads(j);
}

// A dict of config fields as a JSON document (errors name the field).
nlohmann::json DictJson(const py::object& d, const char* what) {
  if (!py::isinstance<py::dict>(d)) throw Error("bad-config", std::string(what) + ": must be a dict of config fields");
  return nlohmann::json::parse(Dumps(d));
}

// config: a dict of ExecutorchBackendConfig fields applied over the config
// inferred from the input (a JSON object, as in a --config file).
std::function<void(BackendConfig&)> ConfigEdit(const py::object& config) {
  if (config.is_none()) return nullptr;
  nlohmann::json overrides = DictJson(config, "config");
  return [overrides](BackendConfig& c) {
    nlohmann::json j = ConfigToJson(c);
    j.update(overrides);
    c = ConfigFromJson(j);
  };
}

WriteOptions MakeWriteOptions(bool force, bool dry_run, bool in_place) {
  WriteOptions wo;
  wo.force = force;
  wo.dry_run = dry_run;
  wo.allow_overwrite_input = in_place;
  return wo;
}

// A number keyword argument goes through the CLI's parser (config/numbers.h) as text: an
// int as its decimal digits, anything else as its repr, so -1, 2**70, 100, 0, True and 64.0
// get the message the CLI's option gets.
std::string NumberText(const py::object& v) {
  const bool integer = py::isinstance<py::int_>(v) && !py::isinstance<py::bool_>(v);
  return (integer ? py::str(v) : py::repr(v)).cast<std::string>();
}

// An alignment keyword argument (None: no extra check), as `--segment-alignment` is parsed.
uint64_t AlignmentArg(const char* name, const py::object& v) {
  if (v.is_none()) return 0;
  return ParseAlignment(name, NumberText(v));
}

VerifyOptions MakeVerifyOptions(const Paths& ptd, const py::object& segment_alignment,
                                const py::object& tensor_alignment, bool allow_legacy_ptd, bool strict) {
  VerifyOptions o;
  o.ptd = Strings(ptd);
  o.segment_alignment = AlignmentArg("segment_alignment", segment_alignment);
  o.tensor_alignment = AlignmentArg("tensor_alignment", tensor_alignment);
  o.allow_legacy_ptd = allow_legacy_ptd;
  o.strict = strict;
  return o;
}

// A named choice, as the CLI's (tools/args.h): bad-choice naming the choices.
std::string ChoiceArg(const char* name, const std::string& v, const std::vector<std::string>& choices) {
  std::string list;
  for (const auto& c : choices) {
    if (c == v) return v;
    list += (list.empty() ? "" : ", ") + c;
  }
  Finding f;
  f.code = "bad-choice";
  f.message = std::string(name) + ": must be one of " + list;
  f.found = "\"" + v + "\"";
  throw Error(std::move(f));
}

SizeSort SortOf(const std::string& s) {
  return ChoiceArg("sort", s, {"bytes", "name"}) == "name" ? SizeSort::kName : SizeSort::kBytes;
}

constexpr const char* kErrorDoc =
    "A ptepack failure: the file, the byte offset and what was expected and found.\n\n"
    "Attributes:\n"
    "    code (str): stable machine-readable id, e.g. \"open-failed\", \"bad-config\", \"missing-ptd\"\n"
    "    file (str | None): the file at fault, when known\n"
    "    offset (int | None): the byte offset in that file, when known\n"
    "    expected (str): what was expected (may be empty)\n"
    "    found (str): what was found (may be empty)\n\n"
    "str(error) is the one-line message the CLI prints.";

// ptepack.describe's dict: the fields of ProgramInfo (ptepack/program_info.h), dtypes by name.
nlohmann::json TensorJson(const TensorInfo& t) {
  static const char* const kLocations[] = {"none", "constant", "external", "planned"};
  nlohmann::json j{{"dtype", ScalarTypeName(static_cast<int>(t.dtype))},
                   {"shape", t.shape},
                   {"dim_order", t.dim_order},
                   {"nbytes", t.nbytes ? nlohmann::json(*t.nbytes) : nlohmann::json(nullptr)},
                   {"location", kLocations[static_cast<int>(t.location)]},
                   {"data_buffer", t.data_buffer},
                   {"key", t.key},
                   {"external_initial_state", t.external_initial_state}};
  j["planned"] = t.planned ? nlohmann::json{{"memory_id", t.planned->memory_id}, {"offset", t.planned->offset}}
                           : nlohmann::json(nullptr);
  return j;
}

nlohmann::json MethodJson(const MethodInfo& m) {
  static const char* const kKinds[] = {"Null",
                                       "Int",
                                       "Bool",
                                       "Double",
                                       "Tensor",
                                       "String",
                                       "IntList",
                                       "DoubleList",
                                       "BoolList",
                                       "TensorList",
                                       "OptionalTensorList",
                                       "Unknown"};
  nlohmann::json values = nlohmann::json::array(), delegates = nlohmann::json::array(), plan = nlohmann::json::array();
  for (const auto& v : m.values) {
    values.push_back({{"index", v.index},
                      {"kind", kKinds[static_cast<int>(v.kind)]},
                      {"tensor", v.tensor ? TensorJson(*v.tensor) : nlohmann::json(nullptr)}});
  }
  for (const auto& d : m.delegates) {
    delegates.push_back({{"backend_id", d.backend_id},
                         {"location", d.in_segment ? "segment" : "inline"},
                         {"index", d.index},
                         {"size", d.size},
                         {"compile_specs", d.compile_specs}});
  }
  for (const auto& b : m.memory_plan)
    plan.push_back({{"memory_id", b.memory_id}, {"size", b.size}, {"tensors", b.tensors}});
  return {{"name", m.name},
          {"values", values},
          {"inputs", m.inputs},
          {"outputs", m.outputs},
          {"operators", m.operators},
          {"delegates", delegates},
          {"num_instructions", m.num_instructions},
          {"memory_plan", plan}};
}

nlohmann::json ProgramInfoJson(const ProgramInfo& info) {
  nlohmann::json methods = nlohmann::json::array(), segments = nlohmann::json::array(), named = nlohmann::json::array(),
                 findings = nlohmann::json::array();
  for (const auto& m : info.methods) methods.push_back(MethodJson(m));
  for (const auto& s : info.segments) {
    segments.push_back({{"offset", s.offset}, {"file_offset", s.file_offset}, {"size", s.size}});
  }
  for (const auto& n : info.named_data) {
    nlohmann::json j{{"key", n.key}, {"segment", n.segment}, {"offset", n.offset}, {"size", n.size}};
    j["dtype"] = n.dtype ? nlohmann::json(ScalarTypeName(static_cast<int>(*n.dtype))) : nlohmann::json(nullptr);
    j["shape"] = n.shape;
    named.push_back(j);
  }
  for (const auto& f : info.findings) findings.push_back(f.ToString());
  return {{"file", info.file},
          {"format", info.format},
          {"valid", info.valid},
          {"findings", findings},
          {"file_identifier", info.file_identifier},
          {"size", info.size},
          {"segment_base_offset", info.segment_base_offset},
          {"segments", segments},
          {"methods", methods},
          {"named_data", named}};
}

}  // namespace
}  // namespace ptepack::python

PYBIND11_MODULE(ptepack, m) {
  using namespace ptepack;
  using namespace ptepack::python;
  m.doc() =
      "Write, read and check ExecuTorch .pte and .ptd files (native, no torch needed).\n\n"
      "Every function returns what the matching `ptepack` command prints with --json, as Python objects, and "
      "raises ptepack.Error (code, file, offset, expected, found) when it cannot do its work. Paths may be str "
      "or os.PathLike.";
  m.attr("__version__") = Version();

  static py::exception<Error> error(m, "Error");
  error.doc() = kErrorDoc;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      const Finding& f = e.finding();
      py::object exc = py::handle(error.ptr())(e.what());
      exc.attr("code") = f.code;
      exc.attr("file") = f.file.empty() ? py::object(py::none()) : py::object(py::str(f.file));
      exc.attr("offset") = f.offset ? py::object(py::int_(*f.offset)) : py::object(py::none());
      exc.attr("expected") = f.expected;
      exc.attr("found") = f.found;
      PyErr_SetObject(error.ptr(), exc.ptr());
    }
  });

  m.def(
      "inspect",
      [](const Path& path, const Paths& ptd, bool allow_legacy_ptd, const py::object& segment_alignment,
         const py::object& tensor_alignment) {
        auto o = MakeVerifyOptions(ptd, segment_alignment, tensor_alignment, allow_legacy_ptd, false);
        return Loads(InspectJson(path.string(), o, -1));
      },
      py::arg("path"), py::kw_only(), py::arg("ptd") = Paths{}, py::arg("allow_legacy_ptd") = false,
      py::arg("segment_alignment") = py::none(), py::arg("tensor_alignment") = py::none(),
      "The layout of a .pte, .ptd or .bpte file: what `ptepack inspect --json` prints (header, methods, "
      "segments, constants, delegates, the inferred config, findings). `ptd`: the .ptd files the program "
      "refers to. A .bpte (BundledProgram) is recognised by its identifier. 'valid' is verify's verdict: a "
      "legacy .ptd is explained, and valid only with allow_legacy_ptd=True.");

  m.def(
      "describe",
      [](const Path& path, const Paths& ptd, bool allow_legacy_ptd) {
        auto o = MakeVerifyOptions(ptd, py::none(), py::none(), allow_legacy_ptd, false);
        return Loads(ProgramInfoJson(Describe(path.string(), o)));
      },
      py::arg("path"), py::kw_only(), py::arg("ptd") = Paths{}, py::arg("allow_legacy_ptd") = false,
      "The typed description of a .pte or .ptd file (ptepack::Describe): methods with every value (tensors: "
      "dtype, shape, nbytes, location 'none'/'constant'/'external'/'planned', planned memory_id and offset, "
      "external key), delegates, the memory plan per buffer, segments, named data (a .ptd's entries), 'valid' "
      "and the findings as text. A .bpte raises ptepack.Error (bpte-not-described); use inspect.");

  m.def(
      "verify",
      [](const Path& path, const Paths& ptd, bool strict, bool allow_legacy_ptd, const py::object& segment_alignment,
         const py::object& tensor_alignment) {
        auto o = MakeVerifyOptions(ptd, segment_alignment, tensor_alignment, allow_legacy_ptd, strict);
        return Loads(VerifyJson(path.string(), o, -1));
      },
      py::arg("path"), py::kw_only(), py::arg("ptd") = Paths{}, py::arg("strict") = false,
      py::arg("allow_legacy_ptd") = false, py::arg("segment_alignment") = py::none(),
      py::arg("tensor_alignment") = py::none(),
      "Check a .pte, .ptd or .bpte file as ExecuTorch's runtime would: {'file', 'valid', 'strict', 'not_checked', "
      "'findings'}, what `ptepack verify --json` prints. An invalid file is a result (valid False, located "
      "findings); an unreadable one raises ptepack.Error. `strict`: warnings fail too. `segment_alignment`, "
      "`tensor_alignment`: also require segments / constant tensors to start at multiples of these (powers of two; "
      "None: no extra check).");

  m.def(
      "size",
      [](const Path& path, const Paths& ptd, const py::object& top, const std::string& sort, bool allow_legacy_ptd) {
        const uint64_t n = ParseNumber("top", NumberText(top), 0, 1000000);  // as `size --top`
        return Loads(SizeJsonOf(path.string(), Strings(ptd), n, SortOf(sort), allow_legacy_ptd));
      },
      py::arg("path"), py::kw_only(), py::arg("ptd") = Paths{}, py::arg("top") = 10, py::arg("sort") = "bytes",
      py::arg("allow_legacy_ptd") = false,
      "Where every byte of a .pte (or .ptd) goes, and the runtime memory per method: what `ptepack size --json` "
      "prints. `top`: how many tensors and delegates to list (0 to 1000000); `sort`: 'bytes' or 'name'. A file "
      "with errors raises ptepack.Error with its first error, located (a legacy-layout .ptd is one unless "
      "allow_legacy_ptd=True, as for verify).");

  m.def(
      "diff",
      [](const Path& a, const Path& b, const Paths& ptd_a, const Paths& ptd_b) {
        return Loads(DiffJsonOf(a.string(), Strings(ptd_a), b.string(), Strings(ptd_b)));
      },
      py::arg("a"), py::arg("b"), py::kw_only(), py::arg("ptd_a") = Paths{}, py::arg("ptd_b") = Paths{},
      "What changed between two programs, by content: {'verdict': 'identical' | 'layout only' | 'different', "
      "'content_changes', 'a', 'b', 'changes'}, what `ptepack diff --json` prints.");

  m.def(
      "checksum",
      [](const std::variant<Path, Paths>& files, const Paths& ptd, const std::optional<Path>& write_manifest,
         const std::optional<Path>& manifest) {
        std::vector<std::string> all;
        if (const Path* one = std::get_if<Path>(&files)) {
          all.push_back(one->string());
        } else {
          all = Strings(std::get<Paths>(files));
        }
        for (const auto& p : ptd) all.push_back(p.string());
        IntegrityOptions io;
        if (write_manifest) io.write_manifest = write_manifest->string();
        if (manifest) io.manifest = manifest->string();
        return Loads(ChecksumJsonOf(all, io));
      },
      py::arg("files"), py::kw_only(), py::arg("ptd") = Paths{}, py::arg("write_manifest") = py::none(),
      py::arg("manifest") = py::none(),
      "XXH3-64 checksums of every region (program, each segment, padding) of one or several .pte/.ptd files: "
      "the manifest form with 'valid' and 'findings', what `ptepack checksum --json` prints. `write_manifest` "
      "writes them to a JSON manifest; `manifest` compares with one (a renamed copy is matched by content; "
      "each difference is a finding naming the region).");

  m.def(
      "repack",
      [](const Path& path, const Path& output, const Paths& ptd, const py::object& config, bool upgrade_ptd, bool force,
         bool dry_run, bool in_place) {
        RepackOptions o;
        o.ptd = Strings(ptd);
        o.edit = ConfigEdit(config);
        o.upgrade_ptd = upgrade_ptd;
        o.write = MakeWriteOptions(force, dry_run, in_place);
        RepackResult r = Repack(path.string(), output.string(), o);
        return WrittenDict(r.written, r.config, dry_run,
                           {{"input_reproducible", r.input_reproducible}, {"identity", IdentityJson(r.identity)}});
      },
      py::arg("path"), py::arg("output"), py::kw_only(), py::arg("ptd") = Paths{}, py::arg("config") = py::none(),
      py::arg("upgrade_ptd") = false, py::arg("force") = false, py::arg("dry_run") = false, py::arg("in_place") = false,
      "Rewrite a program starting from the config that reproduces it; `config` (a dict of "
      "ExecutorchBackendConfig fields) changes it. Returns what `ptepack repack --json` prints: the files "
      "written, the config, and 'identity' (whether the output is the input byte for byte).");

  m.def(
      "split",
      [](const Path& path, const Path& output, const std::string& external_constants, bool mutable_weights,
         const Paths& ptd, const py::object& config, bool force, bool dry_run, bool in_place) {
        SplitOptions o;
        o.tag = external_constants;
        o.mutable_weights = mutable_weights;
        o.ptd = Strings(ptd);
        o.edit = ConfigEdit(config);
        o.write = MakeWriteOptions(force, dry_run, in_place);
        RepackResult r = Split(path.string(), output.string(), o);
        return WrittenDict(r.written, r.config, dry_run, nlohmann::json::object());
      },
      py::arg("path"), py::arg("output"), py::kw_only(), py::arg("external_constants"),
      py::arg("mutable_weights") = false, py::arg("ptd") = Paths{}, py::arg("config") = py::none(),
      py::arg("force") = false, py::arg("dry_run") = false, py::arg("in_place") = false,
      "Move constants into EXTERNAL_CONSTANTS.ptd beside the output. Returns what `ptepack split --json` "
      "prints.");

  m.def(
      "extract",
      [](const Path& path, const Path& output, const Paths& ptd, bool force, bool dry_run) {
        return Loads(Extract(path.string(), Strings(ptd), output.string(), force, dry_run).Json());
      },
      py::arg("path"), py::arg("output"), py::kw_only(), py::arg("ptd") = Paths{}, py::arg("force") = false,
      py::arg("dry_run") = false,
      "Write a program's parts to the directory `output`: program.json, one file per segment and blob, "
      "spec.json and config.json (pack() turns them back into the same bytes), index.json. Returns what "
      "`ptepack extract --json` prints: {'directory', 'files', 'reproduces_input', 'note', 'config', "
      "'dry_run'} ('note': why pack writes an equivalent file, not the same bytes; '' when it does not).");

  m.def(
      "pack",
      [](const std::variant<Path, py::dict>& config, const Path& spec, const Path& output, bool force, bool dry_run) {
        BackendConfig cfg;
        std::vector<std::string> inputs = {spec.string()};
        if (const Path* p = std::get_if<Path>(&config)) {
          cfg = LoadConfigFile(p->string());
          inputs.push_back(p->string());
        } else {
          cfg = ConfigFromJson(DictJson(std::get<py::dict>(config), "config"));
        }
        WriteOptions wo = MakeWriteOptions(force, dry_run, false);
        wo.inputs = inputs;
        WriteResult w = WritePackage(PackageOf(LoadSpec(spec.string())), cfg, output.string(), wo);
        return WrittenDict(w, cfg, dry_run, nlohmann::json::object());
      },
      py::arg("config"), py::arg("spec"), py::arg("output"), py::kw_only(), py::arg("force") = false,
      py::arg("dry_run") = false,
      "Build a program from a pack spec (ExecuTorch's JSON form of a Program plus its data files, e.g. "
      "extract()'s spec.json). `config`: a config JSON file, or a dict of ExecutorchBackendConfig fields. "
      "Returns what `ptepack pack --json` prints.");

  m.def(
      "plan",
      [](const Path& path, const Paths& ptd, const std::string& algorithm, const py::object& alignment,
         std::optional<Path> output) {
        ReplanOptions o;
        o.ptd = Strings(ptd);
        // As `plan --algorithm` and `--alignment`: a named choice, and the one number parser.
        o.plan.chosen = *PlanAlgorithmFromName(
            ChoiceArg("algorithm", algorithm, {"executorch-greedy", "best-fit", "exact", "best"}));
        if (!alignment.is_none()) o.plan.alignment = ParseAlignment("alignment", NumberText(alignment));
        ReplanResult r = Replan(path.string(), output ? output->string() : std::string(), o);
        nlohmann::json j = ReplanJson(r);
        // WritePackage read the output back with the reader's checks (the plan's
        // included) and renamed nothing had one failed: what is on disk verified.
        if (r.written) j["written"]["verified"] = true;
        return Loads(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      },
      py::arg("path"), py::kw_only(), py::arg("ptd") = Paths{}, py::arg("algorithm") = "best",
      py::arg("alignment") = py::none(), py::arg("output") = py::none(),
      "The memory plan per method and planned buffer (size now, lower bound, each planner's size, the peak): "
      "what `ptepack plan --json` prints. `algorithm`: the planner whose plan `output` gets (executorch-greedy, "
      "best-fit, exact, best); `alignment`: of every planned tensor (a power of two; None: inferred per buffer). "
      "With `output`, also writes the program with only its plan changed (a buffer no planner makes smaller "
      "keeps the input's offsets), as `ptepack plan -o OUTPUT` does.");
}
