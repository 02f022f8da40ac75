#include "conformance/oracle_runner.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "test_util.h"

namespace ptepack::testing {
namespace {

using json = nlohmann::ordered_json;

const char* HarnessPath(OracleBuild build) {
#ifdef PTEPACK_RUNTIME_ORACLE
  return build == OracleBuild::kOss ? PTEPACK_RUNTIME_ORACLE_OSS : PTEPACK_RUNTIME_ORACLE;
#else
  (void)build;
  return nullptr;
#endif
}

std::string Tail(const std::string& s, size_t n) { return s.size() <= n ? s : "..." + s.substr(s.size() - n); }

}  // namespace

std::string ScratchDir(const std::string& name) { return TempDir(name + "_" + std::to_string(::getpid())); }

bool RuntimeOracleAvailable() { return HarnessPath(OracleBuild::kOss) != nullptr; }

std::string OracleResult::Describe() const {
  std::ostringstream o;
  o << "runtime oracle exit " << exit_code;
  if (out.is_object()) {
    if (out.contains("program")) o << "; program " << out["program"]["status"].dump();
    if (out.contains("ptd")) {
      for (const auto& p : out["ptd"]) o << "; ptd " << p.value("file", "") << " " << p["status"].dump();
    }
    if (out.contains("merged")) o << "; merged .ptd maps " << out["merged"]["status"].dump();
    if (out.contains("methods")) {
      for (const auto& m : out["methods"]) {
        o << "; method " << m.value("name", "?") << " load " << m.value("load_status", json()).dump();
        if (m.contains("run")) o << " run " << m["run"]["status"].dump();
        if (m.contains("clobber")) {
          o << " clobber " << m["clobber"].value("status", json()).dump();
          if (m["clobber"].contains("error")) o << " (" << m["clobber"]["error"].get<std::string>() << ")";
          if (m["clobber"].contains("limit")) o << " (" << m["clobber"]["limit"].get<std::string>() << ")";
        }
      }
    }
  }
  o << "\nruntime log: " << Tail(err, 1500);
  return o.str();
}

OracleResult RunRuntimeOracleWith(OracleBuild build, const std::string& pte, const std::vector<std::string>& ptds,
                                  const std::vector<std::string>& flags) {
  OracleResult r;
  const char* harness = HarnessPath(build);
  if (harness == nullptr) {
    ADD_FAILURE() << "runtime oracle not built";
    return r;
  }
  static std::atomic<int> counter{0};
  const std::string err_dir = ScratchDir("oracle_stderr_" + std::to_string(counter++));
  const std::string err_path = err_dir + "/stderr";
  std::string cmd = ShellQuote(harness) + " " + ShellQuote(pte);
  for (const auto& p : ptds) cmd += " --ptd " + ShellQuote(p);
  for (const auto& f : flags) cmd += " " + ShellQuote(f);
  cmd += " 2>" + ShellQuote(err_path);
  std::string text;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) {
    ADD_FAILURE() << "cannot start " << cmd;
    return r;
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  std::ifstream e(err_path, std::ios::binary);
  r.err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
  e.close();
  std::filesystem::remove_all(err_dir);
  r.out = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (r.out.is_discarded()) r.out = json();
  if ((r.exit_code != 0 && r.exit_code != 1) || !r.out.is_object()) {
    ADD_FAILURE() << "runtime oracle crashed or printed no JSON on " << cmd << "\n"
                  << r.Describe() << "\nstdout: " << Tail(text, 500);
  }
  return r;
}

OracleResult RunRuntimeOracle(OracleBuild build, const std::string& pte, const std::vector<std::string>& ptds,
                              bool run) {
  return RunRuntimeOracleWith(build, pte, ptds, run ? std::vector<std::string>{"--run"} : std::vector<std::string>{});
}

OracleResult RunClobberOracle(OracleBuild build, const std::string& pte, const std::vector<std::string>& ptds,
                              const std::vector<uint32_t>& share_buffers) {
  std::vector<std::string> flags = {"--clobber"};
  for (uint32_t id : share_buffers) {
    flags.push_back("--share-buffer");
    flags.push_back(std::to_string(id));
  }
  return RunRuntimeOracleWith(build, pte, ptds, flags);
}

json ClobberView(const json& o) {
  json methods = json::array();
  if (!o.is_object() || !o.contains("methods")) return methods;
  for (const auto& m : o["methods"]) {
    json mv = {{"name", m.value("name", "")}, {"load_status", m.value("load_status", json())}};
    if (m.contains("clobber")) {
      for (const char* k : {"status", "error", "limit", "inputs", "trace", "outputs"}) {
        if (m["clobber"].contains(k)) mv[k] = m["clobber"][k];
      }
    }
    methods.push_back(mv);
  }
  return methods;
}

std::string FirstClobberDifference(const json& a, const json& b) {
  if (a == b) return "";
  if (!a.is_array() || !b.is_array() || a.size() != b.size()) return "the methods differ";
  for (size_t i = 0; i < a.size(); i++) {
    const json& x = a[i];
    const json& y = b[i];
    if (x == y) continue;
    const std::string name = x.value("name", "?");
    for (const char* k : {"load_status", "status", "error", "limit", "inputs"}) {
      if (x.value(k, json()) != y.value(k, json())) {
        return "method " + name + ": " + k + " " + x.value(k, json()).dump() + " vs " + y.value(k, json()).dump();
      }
    }
    const json tx = x.value("trace", json::array()), ty = y.value("trace", json::array());
    for (size_t c = 0; c < std::min(tx.size(), ty.size()); c++) {
      if (tx[c] != ty[c]) {
        return "method " + name + ": call " + std::to_string(c) + " " + tx[c].dump() + " vs " + ty[c].dump();
      }
    }
    if (tx.size() != ty.size()) {
      return "method " + name + ": " + std::to_string(tx.size()) + " calls vs " + std::to_string(ty.size());
    }
    return "method " + name + ": outputs " + x.value("outputs", json()).dump() + " vs " +
           y.value("outputs", json()).dump();
  }
  return "the runs differ";
}

json ExternalKeys(const json& o) {
  json keys = json::array();
  if (!o.is_object() || !o.contains("methods")) return keys;
  for (const auto& m : o["methods"]) {
    for (const char* list : {"constants", "planned_initial_state"}) {
      if (!m.contains(list)) continue;
      for (const auto& c : m[list]) {
        if (c.contains("key")) keys.push_back(c["key"]);
      }
    }
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

json RuntimeView(const json& o) {
  json v = json::object();
  if (!o.is_object()) return v;
  v["program"] = o.contains("program") ? o["program"]["status"] : json();
  json named = json::array();
  if (o.contains("program") && o["program"].contains("named_data") && o["program"]["named_data"].contains("keys")) {
    for (const auto& k : o["program"]["named_data"]["keys"]) named.push_back(k);
  }
  // Keys of the .ptd files together: splitting them differently is allowed.
  json ptd_keys = json::array();
  json ptd_status = json::array();
  if (o.contains("ptd")) {
    for (const auto& p : o["ptd"]) {
      ptd_status.push_back(p["status"]);
      if (p.contains("keys")) {
        for (const auto& k : p["keys"]) ptd_keys.push_back(k);
      }
    }
  }
  auto sorted = [](json a) {
    std::sort(a.begin(), a.end());
    return a;
  };
  v["named_data_keys"] = sorted(named);
  v["ptd_keys"] = sorted(ptd_keys);
  json methods = json::array();
  if (o.contains("methods")) {
    for (const auto& m : o["methods"]) {
      json mv = json::object();
      for (const char* k : {"name", "meta_status", "meta", "load_status", "delegate_inits", "run"}) {
        if (m.contains(k)) mv[k] = m[k];
      }
      // Initial mutable state: its bytes in planned memory, not whether it came by key.
      if (m.contains("planned_initial_state")) {
        json states = json::array();
        for (const auto& s : m["planned_initial_state"]) {
          json sv = json::object();
          for (const char* k : {"value_index", "nbytes", "xxh64"}) {
            if (s.contains(k)) sv[k] = s[k];
          }
          states.push_back(sv);
        }
        mv["planned_initial_state"] = states;
      }
      // Constants: where the bytes came from (program or .ptd) may change; what the runtime
      // resolved may not.
      json constants = json::array();
      if (m.contains("constants")) {
        for (const auto& c : m["constants"]) {
          json cv = json::object();
          for (const char* k : {"value_index", "status", "dtype", "nbytes", "xxh64"}) {
            if (c.contains(k)) cv[k] = c[k];
          }
          constants.push_back(cv);
        }
      }
      mv["constants"] = constants;
      methods.push_back(mv);
    }
  }
  v["methods"] = methods;
  return v;
}

}  // namespace ptepack::testing
