#include "serialize/insight/graph.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

#include "ptepack/error.h"
#include "serialize/read/pte_reader.h"

extern char** environ;

namespace ptepack {
namespace {

namespace et = executorch_flatbuffer;

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      out += ' ';
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string Shape(const et::Tensor& t) {
  std::string s = ScalarTypeName(static_cast<int>(t.scalar_type()));
  s += "[";
  if (t.sizes()) {
    for (flatbuffers::uoffset_t i = 0; i < t.sizes()->size(); ++i)
      s += (i ? "," : "") + std::to_string(t.sizes()->Get(i));
  }
  return s + "]";
}

// The tensor value indices an instruction names (TensorList items
// included), each once, in argument order.
std::vector<int32_t> TensorArgs(const et::ExecutionPlan& plan, const et::Instruction& ins) {
  std::vector<int32_t> raw;
  if (const auto* k = ins.instr_args_as_KernelCall()) {
    if (k->args()) raw.assign(k->args()->begin(), k->args()->end());
  } else if (const auto* d = ins.instr_args_as_DelegateCall()) {
    if (d->args()) raw.assign(d->args()->begin(), d->args()->end());
  } else if (const auto* m = ins.instr_args_as_MoveCall()) {
    raw = {m->move_from(), m->move_to()};
  } else if (const auto* j = ins.instr_args_as_JumpFalseCall()) {
    raw = {j->cond_value_index()};
  } else if (const auto* f = ins.instr_args_as_FreeCall()) {
    raw = {f->value_index()};
  }
  std::vector<int32_t> out;
  std::set<int32_t> seen;
  const auto n = plan.values() ? static_cast<int32_t>(plan.values()->size()) : 0;
  auto add = [&](int32_t v) {
    if (v >= 0 && v < n && plan.values()->Get(v)->val_as_Tensor() && seen.insert(v).second) out.push_back(v);
  };
  for (int32_t v : raw) {
    if (v < 0 || v >= n) continue;
    const auto* ev = plan.values()->Get(v);
    const flatbuffers::Vector<int32_t>* items = nullptr;
    if (const auto* tl = ev->val_as_TensorList()) items = tl->items();
    if (const auto* otl = ev->val_as_OptionalTensorList()) items = otl->items();
    if (items) {
      for (int32_t item : *items) add(item);
    } else {
      add(v);
    }
  }
  return out;
}

// Graphviz attributes of each kind of node (GraphNode::kind).
std::string DotStyle(const std::string& kind) {
  if (kind == "input") return "shape=invhouse, style=filled, fillcolor=palegreen, ";
  if (kind == "output") return "shape=house, style=filled, fillcolor=plum, ";
  if (kind == "constant") return "shape=note, style=filled, fillcolor=lightyellow, fontsize=10, ";
  return std::string("shape=box, style=\"rounded,filled\", fillcolor=") +
         (kind == "delegate" ? "lightsalmon" : "lightblue") + ", ";
}

bool IsConstant(const et::Tensor& t) {
  const auto* eti = t.extra_tensor_info();
  bool external = eti && eti->location() == et::TensorDataLocation::EXTERNAL;
  return external || (t.allocation_info() == nullptr && t.data_buffer_idx() != 0);
}

class MethodGraph {
 public:
  MethodGraph(const et::Program& p, const et::ExecutionPlan& plan, size_t index, GraphMethod& g)
      : p_(p), plan_(plan), m_("m" + std::to_string(index)), g_(g) {}

  void Run() {
    g_.name = plan_.name() ? plan_.name()->str() : "";
    g_.cluster = "cluster_" + m_;
    Inputs();
    if (plan_.chains()) {
      for (flatbuffers::uoffset_t c = 0; c < plan_.chains()->size(); ++c) Chain(c, *plan_.chains()->Get(c));
    }
    Outputs();
  }

 private:
  const et::Tensor* TensorAt(int32_t v) const {
    if (!plan_.values() || v < 0 || static_cast<uint32_t>(v) >= plan_.values()->size()) return nullptr;
    return plan_.values()->Get(static_cast<flatbuffers::uoffset_t>(v))->val_as_Tensor();
  }

  void Inputs() {
    if (!plan_.inputs()) return;
    for (flatbuffers::uoffset_t k = 0; k < plan_.inputs()->size(); ++k) {
      int32_t v = plan_.inputs()->Get(k);
      std::string id = m_ + "_in" + std::to_string(k);
      const auto* t = TensorAt(v);
      Node(id, "input", "input " + std::to_string(k) + "\n" + (t ? Shape(*t) : "value " + std::to_string(v)));
      if (t && !producer_.count(v)) Produced(v, id);
    }
  }

  std::string InstructionLabel(const et::Instruction& ins) const {
    if (const auto* k = ins.instr_args_as_KernelCall()) {
      const auto* ops = plan_.operators();
      if (ops && k->op_index() >= 0 && static_cast<uint32_t>(k->op_index()) < ops->size()) {
        const auto* op = ops->Get(static_cast<flatbuffers::uoffset_t>(k->op_index()));
        return OperatorName(*op, "?");
      }
      return "operator " + std::to_string(k->op_index()) + " (out of range)";
    }
    if (const auto* d = ins.instr_args_as_DelegateCall()) return DelegateLabel(d->delegate_index());
    if (ins.instr_args_as_MoveCall()) return "move";
    if (const auto* j = ins.instr_args_as_JumpFalseCall()) {
      return "jump if false to " + std::to_string(j->destination_instruction());
    }
    if (ins.instr_args_as_FreeCall()) return "free";
    return "unknown instruction";
  }

  std::string DelegateLabel(int32_t index) const {
    const auto* ds = plan_.delegates();
    if (!ds || index < 0 || static_cast<uint32_t>(index) >= ds->size()) return "delegate (out of range)";
    const auto* d = ds->Get(static_cast<flatbuffers::uoffset_t>(index));
    std::string s = "delegate " + std::to_string(index) + ": " + (d->id() ? d->id()->str() : "?");
    if (const auto* ref = d->processed()) {
      uint64_t size = 0;
      if (ref->location() == et::DataLocation::INLINE) {
        const auto* bdd = p_.backend_delegate_data();
        if (bdd && ref->index() < bdd->size() && bdd->Get(ref->index())->data()) {
          size = bdd->Get(ref->index())->data()->size();
        }
        s += "\nprocessed: inline, " + std::to_string(size) + " bytes";
      } else {
        const auto* segs = p_.segments();
        if (segs && ref->index() < segs->size()) size = segs->Get(ref->index())->size();
        s += "\nprocessed: segment " + std::to_string(ref->index()) + ", " + std::to_string(size) + " bytes";
      }
    }
    return s;
  }

  void Chain(flatbuffers::uoffset_t c, const et::Chain& chain) {
    if (!chain.instructions()) return;
    for (flatbuffers::uoffset_t i = 0; i < chain.instructions()->size(); ++i) {
      const et::Instruction& ins = *chain.instructions()->Get(i);
      std::string id = m_ + "_c" + std::to_string(c) + "_i" + std::to_string(i);
      const char* kind = ins.instr_args_as_KernelCall()     ? "kernel"
                         : ins.instr_args_as_DelegateCall() ? "delegate"
                                                            : "instruction";
      Node(id, kind, InstructionLabel(ins));
      // A kernel call's last argument is its return value (the out tensor).
      returned_ = -1;
      if (const auto* k = ins.instr_args_as_KernelCall()) {
        if (k->args() && k->args()->size() > 0) returned_ = k->args()->Get(k->args()->size() - 1);
      }
      kernel_ = ins.instr_args_as_KernelCall() != nullptr;
      for (int32_t v : TensorArgs(plan_, ins)) Use(v, id);
    }
  }

  // Planned memory of a tensor: (memory id, offset, bytes).
  std::optional<std::tuple<uint32_t, uint64_t, uint64_t>> Storage(const et::Tensor& t) const {
    const auto* a = t.allocation_info();
    if (!a) return std::nullopt;
    uint64_t off = (uint64_t{a->memory_offset_high()} << 32) | a->memory_offset_low();
    return std::make_tuple(a->memory_id(), off, TensorNbytes(t).value_or(0));
  }

  // A tensor a kernel reads before anything wrote it, in the very memory of
  // a tensor written earlier: a view that needed no instruction (ExecuTorch
  // emits view/reshape as aliases). Drawn dashed, not counted as dataflow.
  void AliasEdge(int32_t v, const et::Tensor& t, const std::string& user) {
    auto st = Storage(t);
    if (!st || std::get<2>(*st) == 0 || !kernel_ || v == returned_) return;  // empty scratch tensors share offsets
    auto it = last_at_.find(*st);
    if (it == last_at_.end() || it->second == v) return;
    auto p = producer_.find(it->second);
    if (p == producer_.end() || p->second == user) return;
    g_.edges.push_back({p->second, user, "v" + std::to_string(v) + " aliases v" + std::to_string(it->second), v, true});
    g_.order.push_back({true, g_.edges.size() - 1});
  }

  void Produced(int32_t v, const std::string& by) {
    producer_[v] = by;
    const et::Tensor* t = TensorAt(v);
    if (auto st = t ? Storage(*t) : std::nullopt) last_at_[*st] = v;
  }

  // Edge from v's producer to `user`, or makes `user` v's producer.
  void Use(int32_t v, const std::string& user) {
    const et::Tensor* t = TensorAt(v);
    auto it = producer_.find(v);
    if (it == producer_.end() && t && IsConstant(*t)) {
      std::string cid = m_ + "_const" + std::to_string(v);
      Node(cid, "constant", "constant v" + std::to_string(v) + "\n" + Shape(*t));
      it = producer_.emplace(v, cid).first;
    }
    if (it == producer_.end()) {
      if (t) AliasEdge(v, *t, user);
      Produced(v, user);
      return;
    }
    if (it->second == user) return;
    Edge(it->second, user, v);
  }

  void Edge(const std::string& from, const std::string& to, int32_t v) {
    const et::Tensor* t = TensorAt(v);
    g_.edges.push_back({from, to, "v" + std::to_string(v) + " " + (t ? Shape(*t) : std::string("?")), v, false});
    g_.order.push_back({true, g_.edges.size() - 1});
  }

  void Node(const std::string& id, const char* kind, const std::string& label) {
    g_.nodes.push_back({id, kind, label});
    g_.order.push_back({false, g_.nodes.size() - 1});
  }

  void Outputs() {
    if (!plan_.outputs()) return;
    for (flatbuffers::uoffset_t k = 0; k < plan_.outputs()->size(); ++k) {
      int32_t v = plan_.outputs()->Get(k);
      std::string id = m_ + "_out" + std::to_string(k);
      const auto* t = TensorAt(v);
      Node(id, "output", "output " + std::to_string(k) + "\n" + (t ? Shape(*t) : "value " + std::to_string(v)));
      if (!t) continue;
      Use(v, id);
    }
  }

  const et::Program& p_;
  const et::ExecutionPlan& plan_;
  std::string m_;
  GraphMethod& g_;
  std::map<int32_t, std::string> producer_;
  std::map<std::tuple<uint32_t, uint64_t, uint64_t>, int32_t> last_at_;  // the value last written there
  int32_t returned_ = -1;
  bool kernel_ = false;
};

std::string TempPath(const char* suffix) {
  const char* dir = std::getenv("TMPDIR");
  std::string t = std::string(dir && *dir ? dir : "/tmp") + "/ptepack_graph_XXXXXX" + suffix;
  int fd = ::mkstemps(t.data(), static_cast<int>(std::strlen(suffix)));
  if (fd < 0) throw Error("write-failed", "cannot create a temporary file in " + t + ": " + std::strerror(errno));
  ::close(fd);
  return t;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct TempFiles {
  std::vector<std::string> paths;
  ~TempFiles() {
    for (const auto& p : paths) ::unlink(p.c_str());
  }
};

}  // namespace

std::vector<GraphMethod> BuildGraph(const PteFile& pte, const GraphOptions& options) {
  pte.report().ThrowIfError();
  const et::Program* p = pte.program();
  if (!p) throw Error("flatbuffer-invalid", pte.name() + ": no program to read");
  std::vector<GraphMethod> out;
  bool found = options.method.empty();
  std::string names;
  if (p->execution_plan()) {
    for (flatbuffers::uoffset_t i = 0; i < p->execution_plan()->size(); ++i) {
      const auto& plan = *p->execution_plan()->Get(i);
      std::string name = plan.name() ? plan.name()->str() : "";
      names += (names.empty() ? "" : ", ") + name;
      if (!options.method.empty() && name != options.method) continue;
      found = true;
      out.emplace_back();
      MethodGraph(*p, plan, i, out.back()).Run();
    }
  }
  if (!found) {
    throw Error("no-such-method", "no method \"" + options.method + "\" (methods: " + names + ")", pte.name());
  }
  return out;
}

std::string GraphDot(const PteFile& pte, const GraphOptions& options) {
  const std::vector<GraphMethod> methods = BuildGraph(pte, options);
  std::ostringstream o;
  o << "digraph " << Quote(pte.name()) << " {\n  rankdir=TB;\n  node [fontname=\"Helvetica\"];\n"
    << "  edge [fontname=\"Helvetica\", fontsize=9];\n";
  for (const GraphMethod& g : methods) {
    o << "  subgraph " << g.cluster << " {\n    label=" << Quote("method " + g.name) << ";\n";
    for (const auto& [is_edge, i] : g.order) {
      if (is_edge) {
        const GraphEdge& e = g.edges[i];
        o << "    " << e.from << " -> " << e.to << " [" << (e.alias ? "style=dashed, " : "")
          << "label=" << Quote(e.label) << "];\n";
        continue;
      }
      const GraphNode& n = g.nodes[i];
      o << "    " << n.id << " [" << DotStyle(n.kind) << "label=" << Quote(n.label) << "];\n";
    }
    o << "  }\n";
  }
  o << "}\n";
  return o.str();
}

nlohmann::json GraphJson(const PteFile& pte, const GraphOptions& options) {
  nlohmann::json methods = nlohmann::json::array();
  for (const GraphMethod& g : BuildGraph(pte, options)) {
    nlohmann::json nodes = nlohmann::json::array(), edges = nlohmann::json::array();
    for (const GraphNode& n : g.nodes) nodes.push_back({{"id", n.id}, {"kind", n.kind}, {"label", n.label}});
    for (const GraphEdge& e : g.edges) {
      edges.push_back({{"from", e.from}, {"to", e.to}, {"label", e.label}, {"value", e.value}, {"alias", e.alias}});
    }
    methods.push_back({{"name", g.name}, {"nodes", nodes}, {"edges", edges}});
  }
  return {{"methods", methods}};
}

std::string RunGraphviz(const std::string& dot_text, const std::string& format) {
  TempFiles tmp;
  tmp.paths = {TempPath(".dot"), TempPath(".out"), TempPath(".err")};
  {
    std::ofstream f(tmp.paths[0], std::ios::binary);
    f << dot_text;
    if (!f) throw Error("write-failed", "cannot write " + tmp.paths[0]);
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, tmp.paths[1].c_str(), O_WRONLY | O_TRUNC, 0);
  posix_spawn_file_actions_addopen(&fa, 2, tmp.paths[2].c_str(), O_WRONLY | O_TRUNC, 0);
  std::string fmt = "-T" + format;
  std::vector<char*> argv = {const_cast<char*>("dot"), fmt.data(), tmp.paths[0].data(), nullptr};
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, "dot", &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    throw Error("graphviz-missing",
                "cannot run Graphviz `dot` (" + std::string(std::strerror(rc)) +
                    "): install Graphviz (Debian: apt-get install graphviz) for SVG/HTML, or write -o FILE.dot");
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string err = Slurp(tmp.paths[2]);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
      throw Error("graphviz-missing",
                  "Graphviz `dot` not found: install Graphviz (Debian: apt-get install graphviz) "
                  "for SVG/HTML, or write -o FILE.dot");
    }
    throw Error("graphviz-failed", "Graphviz `dot -T" + format + "` failed: " + err.substr(0, 500));
  }
  return Slurp(tmp.paths[1]);
}

std::string SvgToHtml(const std::string& svg, const std::string& title) {
  std::string t;
  for (char c : title) {
    if (c == '<') {
      t += "&lt;";
    } else if (c == '&') {
      t += "&amp;";
    } else {
      t += c;
    }
  }
  // Drop the XML prolog and doctype: inline SVG in HTML starts at <svg.
  size_t start = svg.find("<svg");
  return "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + t +
         "</title>\n<style>body{margin:0;font-family:sans-serif}h1{font-size:14px;margin:8px}"
         "div{overflow:auto}</style></head>\n<body><h1>" +
         t + "</h1><div>\n" + (start == std::string::npos ? svg : svg.substr(start)) + "</div></body></html>\n";
}

}  // namespace ptepack
