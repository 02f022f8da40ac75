// `import ptepack`: inspect, verify, repack and split from Python, returning
// the dicts the CLI prints with --json, and raising ptepack.Error with the
// located message (file, offset, expected, found).
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <nlohmann/json.hpp>

#include "config/backend_config.h"
#include "config/numbers.h"
#include "ptepack/ptepack.h"
#include "serialize/api/read_api.h"
#include "serialize/api/repack_json.h"

namespace py = pybind11;

namespace ptepack::python {
namespace {

// JSON text -> Python objects, through the json module (exact ints, floats).
py::object Loads(const std::string& text) { return py::module_::import("json").attr("loads")(text); }

std::string Dumps(const py::object& o) { return py::module_::import("json").attr("dumps")(o).cast<std::string>(); }

// The files written, as `ptepack repack/split --json` prints them.
py::object WrittenDict(const RepackResult& r, bool dry_run, nlohmann::json extra) {
  nlohmann::json files = nlohmann::json::array();
  files.push_back({{"path", r.written.pte.path}, {"size", r.written.pte.size}});
  for (const auto& p : r.written.ptds) files.push_back({{"path", p.path}, {"size", p.size}});
  nlohmann::json j;
  if (dry_run) {
    j = {{"dry_run", true}, {"files", files}};
  } else {
    // WritePackage read every output back with the reader's checks and
    // renamed nothing had one failed: what is on disk verified.
    j = {{"files", files},
         {"flatbuffer_size", r.written.flatbuffer_size},
         {"segments", r.written.num_segments},
         {"dedup_bytes_saved", r.written.dedup_bytes_saved},
         {"verified", true},
         {"config", ConfigToJson(r.config)}};
    j.update(extra);
  }
  return Loads(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

// config: a dict of ExecutorchBackendConfig fields applied over the config
// inferred from the input (a JSON object, as in a --config file).
std::function<void(BackendConfig&)> ConfigEdit(const py::object& config) {
  if (config.is_none()) return nullptr;
  if (!py::isinstance<py::dict>(config)) throw Error("bad-config", "config: must be a dict of config fields");
  nlohmann::json overrides = nlohmann::json::parse(Dumps(config));
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

// An alignment keyword argument (None: no extra check) goes through the CLI's parser
// (config/numbers.h) as text: an int as its decimal digits, anything else as its repr, so
// -1, 2**70, 100, 0, True and 64.0 get the message `--segment-alignment` gets.
uint64_t AlignmentArg(const char* name, const py::object& v) {
  if (v.is_none()) return 0;
  const bool integer = py::isinstance<py::int_>(v) && !py::isinstance<py::bool_>(v);
  return ParseAlignment(name, (integer ? py::str(v) : py::repr(v)).cast<std::string>());
}

VerifyOptions MakeVerifyOptions(std::vector<std::string> ptd, const py::object& segment_alignment,
                                const py::object& tensor_alignment, bool allow_legacy_ptd, bool strict) {
  VerifyOptions o;
  o.ptd = std::move(ptd);
  o.segment_alignment = AlignmentArg("segment_alignment", segment_alignment);
  o.tensor_alignment = AlignmentArg("tensor_alignment", tensor_alignment);
  o.allow_legacy_ptd = allow_legacy_ptd;
  o.strict = strict;
  return o;
}

}  // namespace
}  // namespace ptepack::python

PYBIND11_MODULE(ptepack, m) {
  using namespace ptepack;
  using namespace ptepack::python;
  m.doc() = "Write, read and check ExecuTorch .pte and .ptd files (native, no torch needed).";
  m.attr("__version__") = Version();

  static py::exception<Error> error(m, "Error");
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
      [](const std::string& path, std::vector<std::string> ptd, bool allow_legacy_ptd,
         const py::object& segment_alignment, const py::object& tensor_alignment) {
        auto o = MakeVerifyOptions(std::move(ptd), segment_alignment, tensor_alignment, allow_legacy_ptd, false);
        return Loads(InspectJson(path, o, -1));
      },
      py::arg("path"), py::kw_only(), py::arg("ptd") = std::vector<std::string>{}, py::arg("allow_legacy_ptd") = false,
      py::arg("segment_alignment") = py::none(), py::arg("tensor_alignment") = py::none(),
      "The layout of a .pte (or .ptd) as a dict: what `ptepack inspect --json` prints ('valid' is verify's "
      "verdict: a legacy .ptd is explained, and valid only with allow_legacy_ptd=True).");

  m.def(
      "verify",
      [](const std::string& path, std::vector<std::string> ptd, bool strict, bool allow_legacy_ptd,
         const py::object& segment_alignment, const py::object& tensor_alignment) {
        auto o = MakeVerifyOptions(std::move(ptd), segment_alignment, tensor_alignment, allow_legacy_ptd, strict);
        return Loads(VerifyJson(path, o, -1));
      },
      py::arg("path"), py::kw_only(), py::arg("ptd") = std::vector<std::string>{}, py::arg("strict") = false,
      py::arg("allow_legacy_ptd") = false, py::arg("segment_alignment") = py::none(),
      py::arg("tensor_alignment") = py::none(),
      "Check a file as ExecuTorch's runtime would: {'valid', 'findings', ...}, what `ptepack verify --json` "
      "prints. An invalid file is a result; an unreadable one raises ptepack.Error.");

  m.def(
      "repack",
      [](const std::string& path, const std::string& output, std::vector<std::string> ptd, const py::object& config,
         bool upgrade_ptd, bool force, bool dry_run, bool in_place) {
        RepackOptions o;
        o.ptd = std::move(ptd);
        o.edit = ConfigEdit(config);
        o.upgrade_ptd = upgrade_ptd;
        o.write = MakeWriteOptions(force, dry_run, in_place);
        RepackResult r = Repack(path, output, o);
        return WrittenDict(r, dry_run,
                           {{"input_reproducible", r.input_reproducible}, {"identity", IdentityJson(r.identity)}});
      },
      py::arg("path"), py::arg("output"), py::kw_only(), py::arg("ptd") = std::vector<std::string>{},
      py::arg("config") = py::none(), py::arg("upgrade_ptd") = false, py::arg("force") = false,
      py::arg("dry_run") = false, py::arg("in_place") = false,
      "Rewrite a program starting from the config that reproduces it; `config` (a dict of "
      "ExecutorchBackendConfig fields) changes it. Returns what `ptepack repack --json` prints.");

  m.def(
      "split",
      [](const std::string& path, const std::string& output, const std::string& external_constants,
         bool mutable_weights, std::vector<std::string> ptd, const py::object& config, bool force, bool dry_run,
         bool in_place) {
        SplitOptions o;
        o.tag = external_constants;
        o.mutable_weights = mutable_weights;
        o.ptd = std::move(ptd);
        o.edit = ConfigEdit(config);
        o.write = MakeWriteOptions(force, dry_run, in_place);
        return WrittenDict(Split(path, output, o), dry_run, nlohmann::json::object());
      },
      py::arg("path"), py::arg("output"), py::kw_only(), py::arg("external_constants"),
      py::arg("mutable_weights") = false, py::arg("ptd") = std::vector<std::string>{}, py::arg("config") = py::none(),
      py::arg("force") = false, py::arg("dry_run") = false, py::arg("in_place") = false,
      "Move constants into EXTERNAL_CONSTANTS.ptd beside the output. Returns what `ptepack split --json` prints.");
}
