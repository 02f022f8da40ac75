// `ptepack graph`: every instruction is one node, and the dataflow edges are
// exactly those the program's argument lists give (computed here from the
// generated accessors, independently of the graph code). Graphviz accepts
// the DOT.
#include "serialize/insight/graph.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "serialize/read/pte_reader.h"
#include "tests/test_util.h"

namespace ptepack {
namespace {

namespace et = executorch_flatbuffer;
using testing::FixturePath;
using testing::RunCli;
using Edge = std::tuple<std::string, std::string, int32_t>;  // from, to, value

struct Parsed {
  std::map<std::string, int> nodes;  // id -> declarations
  std::multiset<Edge> edges;         // solid (dataflow) edges
  std::multiset<Edge> dashed;        // alias edges
  std::map<std::string, std::string> labels;
};

Parsed ParseDot(const std::string& dot) {
  Parsed p;
  static const std::regex kEdge(R"re(^\s+(\w+) -> (\w+) \[(style=dashed, )?label="v(\d+) .*\];$)re");
  static const std::regex kNode(R"re(^\s+(\w+) \[.*label="(.*)"\];$)re");
  std::istringstream in(dot);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, kEdge)) {
      Edge e{m[1], m[2], std::stoi(m[4])};
      (m[3].matched ? p.dashed : p.edges).insert(e);
    } else if (std::regex_match(line, m, kNode)) {
      ++p.nodes[m[1]];
      p.labels[m[1]] = m[2];
    }
  }
  return p;
}

bool IsConstant(const et::Tensor& t) {
  bool external = t.extra_tensor_info() && t.extra_tensor_info()->location() == et::TensorDataLocation::EXTERNAL;
  return external || (!t.allocation_info() && t.data_buffer_idx() > 0);
}

// The values an instruction names, from its argument list.
std::vector<int32_t> Named(const et::Instruction& ins) {
  switch (ins.instr_args_type()) {
    case et::InstructionArguments::KernelCall: {
      const auto* a = ins.instr_args_as_KernelCall()->args();
      return a ? std::vector<int32_t>(a->begin(), a->end()) : std::vector<int32_t>{};
    }
    case et::InstructionArguments::DelegateCall: {
      const auto* a = ins.instr_args_as_DelegateCall()->args();
      return a ? std::vector<int32_t>(a->begin(), a->end()) : std::vector<int32_t>{};
    }
    case et::InstructionArguments::MoveCall:
      return {ins.instr_args_as_MoveCall()->move_from(), ins.instr_args_as_MoveCall()->move_to()};
    case et::InstructionArguments::JumpFalseCall:
      return {ins.instr_args_as_JumpFalseCall()->cond_value_index()};
    case et::InstructionArguments::FreeCall:
      return {ins.instr_args_as_FreeCall()->value_index()};
    default:
      return {};
  }
}

struct Expected {
  std::set<std::string> instruction_nodes;
  std::set<std::string> constant_nodes;
  std::multiset<Edge> edges;
  size_t instructions = 0;
};

// Producer of a tensor: its input node, its constant node, or the first
// instruction naming it; one edge per (producer, later user, value).
Expected ExpectedGraph(const et::Program& p) {
  Expected x;
  for (uint32_t mi = 0; mi < p.execution_plan()->size(); ++mi) {
    const et::ExecutionPlan& plan = *p.execution_plan()->Get(mi);
    const std::string m = "m" + std::to_string(mi);
    auto tensor = [&](int32_t v) { return plan.values()->Get(v)->val_as_Tensor(); };
    std::map<int32_t, std::string> producer;
    for (uint32_t k = 0; plan.inputs() && k < plan.inputs()->size(); ++k) {
      int32_t v = plan.inputs()->Get(k);
      if (tensor(v) && !producer.count(v)) producer[v] = m + "_in" + std::to_string(k);
    }
    auto use = [&](int32_t v, const std::string& user) {
      if (!producer.count(v) && IsConstant(*tensor(v))) {
        producer[v] = m + "_const" + std::to_string(v);
        x.constant_nodes.insert(producer[v]);
      }
      if (!producer.count(v)) {
        producer[v] = user;
      } else if (producer[v] != user) {
        x.edges.insert({producer[v], user, v});
      }
    };
    for (uint32_t c = 0; c < plan.chains()->size(); ++c) {
      const auto* instructions = plan.chains()->Get(c)->instructions();
      for (uint32_t i = 0; instructions && i < instructions->size(); ++i, ++x.instructions) {
        const std::string id = m + "_c" + std::to_string(c) + "_i" + std::to_string(i);
        x.instruction_nodes.insert(id);
        std::set<int32_t> seen;
        for (int32_t a : Named(*instructions->Get(i))) {
          const et::EValue* ev = plan.values()->Get(a);
          std::vector<int32_t> tensors;
          if (ev->val_as_TensorList()) {
            tensors.assign(ev->val_as_TensorList()->items()->begin(), ev->val_as_TensorList()->items()->end());
          } else if (ev->val_as_OptionalTensorList()) {
            const auto* items = ev->val_as_OptionalTensorList()->items();
            tensors.assign(items->begin(), items->end());
          } else {
            tensors = {a};
          }
          for (int32_t v : tensors) {
            if (v >= 0 && tensor(v) && seen.insert(v).second) use(v, id);
          }
        }
      }
    }
    for (uint32_t k = 0; plan.outputs() && k < plan.outputs()->size(); ++k) {
      int32_t v = plan.outputs()->Get(k);
      if (tensor(v)) use(v, m + "_out" + std::to_string(k));
    }
  }
  return x;
}

void CheckGraph(const std::string& fixture, size_t min_instructions) {
  auto pte = PteFile::Open(FixturePath(fixture));
  ASSERT_TRUE(pte->ok());
  const std::string dot = GraphDot(*pte);
  Parsed got = ParseDot(dot);
  Expected want = ExpectedGraph(*pte->program());
  EXPECT_GE(want.instructions, min_instructions);
  // Every instruction is declared exactly once; nothing else is an instruction node.
  size_t instruction_nodes = 0;
  for (const auto& [id, n] : got.nodes) {
    static const std::regex kInstruction(R"re(m\d+_c\d+_i\d+)re");
    if (!std::regex_match(id, kInstruction)) continue;
    ++instruction_nodes;
    EXPECT_EQ(n, 1) << id;
    EXPECT_TRUE(want.instruction_nodes.count(id)) << id;
  }
  EXPECT_EQ(instruction_nodes, want.instructions);
  for (const auto& id : want.instruction_nodes) EXPECT_EQ(got.nodes[id], 1) << id;
  for (const auto& id : want.constant_nodes) EXPECT_EQ(got.nodes[id], 1) << id;
  // Every edge joins a value's producer to one of its users, and each such pair is there.
  EXPECT_EQ(got.edges.size(), want.edges.size());
  EXPECT_EQ(got.edges, want.edges);
}

TEST(Graph, KeywordSpottingEdgesMatchTheProgram) {
  CheckGraph("keyword_spotting.pte", 16);
  auto pte = PteFile::Open(FixturePath("keyword_spotting.pte"));
  Parsed got = ParseDot(GraphDot(*pte));
  // Instruction 14 (quantized_linear) reads v271, which no instruction
  // writes: it is the 64 bytes at planned offset 8256 that instruction 13
  // (avg_pool2d) wrote as v257 (a reshape ExecuTorch emits as an alias).
  EXPECT_EQ(got.dashed, (std::multiset<Edge>{Edge{"m0_c0_i13", "m0_c0_i14", 271}}));
  EXPECT_EQ(got.labels["m0_c0_i14"], "cortex_m::quantized_linear.out");
}

TEST(Graph, StoriesDelegateCallsShowBackendAndPayloadSize) {
  CheckGraph("stories260k_qnn.pte", 2);
  auto pte = PteFile::Open(FixturePath("stories260k_qnn.pte"));
  const et::Program& p = *pte->program();
  Parsed got = ParseDot(GraphDot(*pte));
  size_t delegate_calls = 0;
  for (uint32_t mi = 0; mi < p.execution_plan()->size(); ++mi) {
    const auto& plan = *p.execution_plan()->Get(mi);
    const auto* ins = plan.chains() && plan.chains()->size() ? plan.chains()->Get(0)->instructions() : nullptr;
    for (uint32_t i = 0; ins && i < ins->size(); ++i) {
      const auto* call = ins->Get(i)->instr_args_as_DelegateCall();
      if (!call) continue;
      ++delegate_calls;
      const auto* d = plan.delegates()->Get(call->delegate_index());
      ASSERT_EQ(d->processed()->location(), et::DataLocation::SEGMENT);
      const uint64_t size = p.segments()->Get(d->processed()->index())->size();
      const std::string label = got.labels["m" + std::to_string(mi) + "_c0_i" + std::to_string(i)];
      EXPECT_NE(label.find(d->id()->str()), std::string::npos) << label;
      EXPECT_NE(label.find(std::to_string(size) + " bytes"), std::string::npos) << label;
    }
  }
  EXPECT_EQ(delegate_calls, 2u);  // kv_forward and prefill_forward
}

TEST(Graph, GraphvizAcceptsTheDot) {
  if (std::system("command -v dot >/dev/null 2>&1") != 0) GTEST_SKIP() << "Graphviz `dot` not installed";
  const std::string dir = testing::TempDir("graph_dot");
  for (const char* name : {"keyword_spotting.pte", "stories260k_qnn.pte"}) {
    SCOPED_TRACE(name);
    auto r = RunCli({"graph", FixturePath(name), "-o", dir + "/g.dot"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string cmd = "dot -Tsvg " + testing::ShellQuote(dir + "/g.dot") + " -o " + testing::ShellQuote(dir + "/g.svg");
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    auto svg = testing::ReadFile(dir + "/g.svg");
    EXPECT_NE(std::string(svg.begin(), svg.end()).find("<svg"), std::string::npos);
    // Through the CLI: SVG and HTML.
    r = RunCli({"graph", FixturePath(name), "-o", dir + "/g2.svg"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    svg = testing::ReadFile(dir + "/g2.svg");
    EXPECT_NE(std::string(svg.begin(), svg.end()).find("</svg>"), std::string::npos);
    r = RunCli({"graph", FixturePath(name), "-o", dir + "/g.html"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto html = testing::ReadFile(dir + "/g.html");
    std::string h(html.begin(), html.end());
    EXPECT_EQ(h.rfind("<!DOCTYPE html>", 0), 0u);
    EXPECT_NE(h.find("<svg"), std::string::npos);
  }
}

TEST(Graph, MethodFilterAndBadArguments) {
  auto r = RunCli({"graph", FixturePath("stories260k_qnn.pte"), "--method", "kv_forward"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("method kv_forward"), std::string::npos);
  EXPECT_EQ(r.out.find("prefill_forward"), std::string::npos);
  r = RunCli({"graph", FixturePath("stories260k_qnn.pte"), "--method", "nope"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no method \"nope\""), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("kv_forward"), std::string::npos) << r.err;
  r = RunCli({"graph", FixturePath("keyword_spotting.pte"), "-o", testing::TempDir("graph_bad") + "/g.png"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(".dot, .gv, .svg or .html"), std::string::npos) << r.err;
}

// Without Graphviz on PATH, SVG output fails with a message saying what to install.
TEST(Graph, MissingGraphvizIsExplained) {
  const std::string dir = testing::TempDir("graph_nodot");
  std::string cmd = "PATH=" + testing::ShellQuote(dir) + " " + testing::ShellQuote(PTEPACK_CLI) + " graph " +
                    testing::ShellQuote(FixturePath("keyword_spotting.pte")) + " -o " +
                    testing::ShellQuote(dir + "/g.svg") + " 2>" + testing::ShellQuote(dir + "/err");
  int st = std::system(cmd.c_str());
  EXPECT_EQ(WEXITSTATUS(st), 2);
  auto err = testing::ReadFile(dir + "/err");
  EXPECT_NE(std::string(err.begin(), err.end()).find("apt-get install graphviz"), std::string::npos);
}

}  // namespace
}  // namespace ptepack
