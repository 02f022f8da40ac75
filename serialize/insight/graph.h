// Each method's instruction chain as a dataflow graph (`ptepack graph`), in
// Graphviz DOT.
//
// Nodes: one per instruction (kernel call: operator name; delegate call:
// backend id and processed size; move, jump, free), one per method input and
// output, one per constant tensor an instruction reads. Edges carry tensor
// values (value index, dtype and shape), from the value's producer to each
// instruction that uses it:
//   - a method input's producer is its input node, a constant's its constant
//     node;
//   - any other tensor's producer is the first instruction (in chain order)
//     whose arguments name it, since ExecuTorch's out-variant kernels and
//     delegate calls list their outputs among their arguments and nothing
//     reads a planned tensor before something writes it;
//   - each later instruction naming it is a user (one edge per producer,
//     user and value); TensorList arguments name their items;
//   - each method output gets an edge from its producer to its output node.
// Non-tensor arguments (ints, lists of ints, doubles, ...) are not edges.
// Node ids: "m<method>_c<chain>_i<instruction>", "m<method>_in<k>",
// "m<method>_out<k>", "m<method>_const<value>".
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace ptepack {

class PteFile;

struct GraphOptions {
  std::string method;  // only this method (empty: all); unknown names throw
};

// The graph of one method, as data (the DOT text and GraphJson print it).
struct GraphNode {
  std::string id;
  std::string kind;  // "input", "output", "kernel", "delegate", "instruction" (move, jump, free), "constant"
  std::string label;
};
struct GraphEdge {
  std::string from, to;
  std::string label;  // "v<value> <dtype>[<shape>]", or "v<a> aliases v<b>"
  int32_t value = -1;
  bool alias = false;  // a view that needed no instruction (drawn dashed)
};
struct GraphMethod {
  std::string name;
  std::string cluster;  // "cluster_m<method index>"
  std::vector<GraphNode> nodes;
  std::vector<GraphEdge> edges;
  std::vector<std::pair<bool, size_t>> order;  // (is an edge, index): the order they were found in
};

// Each method's graph (only options.method's when given). Throws as GraphDot.
std::vector<GraphMethod> BuildGraph(const PteFile& pte, const GraphOptions& options = {});
// {"methods": [{"name", "nodes": [{id, kind, label}], "edges": [{from, to, label, value, alias}]}]}
nlohmann::json GraphJson(const PteFile& pte, const GraphOptions& options = {});

// The DOT text. Throws ptepack::Error if the file has errors or the method
// is not in it.
std::string GraphDot(const PteFile& pte, const GraphOptions& options = {});

// Runs Graphviz `dot -T<format>` (svg) on `dot_text` and returns its output.
// Throws Error("graphviz-missing") when `dot` is not on PATH, and
// Error("graphviz-failed") with its message when it fails.
std::string RunGraphviz(const std::string& dot_text, const std::string& format);

// An HTML page showing `svg` (pan with the scroll bars).
std::string SvgToHtml(const std::string& svg, const std::string& title);

}  // namespace ptepack
