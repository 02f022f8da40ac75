#include "conformance/plan_programs.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "conformance/programs.h"
#include "ptepack/program_builder.h"
#include "serialize/api/package_access.h"
#include "serialize/model/program_parts.h"
#include "serialize/write/pte_writer.h"
#include "test_util.h"

namespace ptepack::testing {
namespace {

constexpr uint64_t kAlign = 16;  // upstream's ALIGNMENT (exir/memory_planning.py)

uint64_t ElementSize(ScalarType t) {
  switch (t) {
    case ScalarType::kBool:
    case ScalarType::kByte:
    case ScalarType::kChar:
      return 1;
    case ScalarType::kLong:
    case ScalarType::kDouble:
      return 8;
    default:
      return 4;
  }
}

uint64_t AlignUp(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

const PlannedDecl& Find(const std::vector<PlannedDecl>& decls, const std::string& name) {
  for (const auto& d : decls) {
    if (d.name == name) return d;
  }
  throw std::logic_error("no planned tensor " + name);
}

// ProgramBuilder's value indices are uint32_t; instructions take int32_t.
int I(uint32_t v) { return static_cast<int>(v); }

// ---- The programs. In each, the hand-derived reason a plan is safe or not is next to it.

// A chain of out-variant operators with a skip connection (exir/memory_planning.py: a tensor is
// alive from the node that writes it to the last node that reads it, inclusive).
RuleProgram Chain() {
  RuleProgram p;
  p.name = "chain";
  p.rule = "out-variant chain: live from the writing call to the last reading call (memory_planning.py)";
  p.tensors = {{"x", ScalarType::kFloat, {4}},  {"t1", ScalarType::kFloat, {4}}, {"t2", ScalarType::kFloat, {4}},
               {"t3", ScalarType::kFloat, {4}}, {"t4", ScalarType::kFloat, {4}}, {"y", ScalarType::kFloat, {4}}};
  p.build = [](const PlanLayout& l) {
    ProgramBuilder b;
    auto& m = b.AddMethod("forward");
    const int x = I(m.Tensor(l.Spec("x"))), t1 = I(m.Tensor(l.Spec("t1"))), t2 = I(m.Tensor(l.Spec("t2")));
    const int t3 = I(m.Tensor(l.Spec("t3"))), t4 = I(m.Tensor(l.Spec("t4"))), y = I(m.Tensor(l.Spec("y")));
    const int one = I(m.Int(1));
    m.KernelCall(m.Operator("aten::neg", "out"), {x, t1, t1});          // 0: t1 = -x
    m.KernelCall(m.Operator("aten::exp", "out"), {t1, t2, t2});         // 1: t2 = exp(t1)
    m.KernelCall(m.Operator("aten::sin", "out"), {t2, t3, t3});         // 2: t3 = sin(t2)
    m.KernelCall(m.Operator("aten::cos", "out"), {t3, t4, t4});         // 3: t4 = cos(t3)
    m.KernelCall(m.Operator("aten::add", "out"), {t4, t1, one, y, y});  // 4: y = t4 + t1
    m.Inputs({x});
    m.Outputs({y});
    m.PlannedBufferSizes(l.buffer_sizes());
    return b.Build();
  };
  // x lives [0,0], t1 [0,4], t2 [1,2], t3 [2,3], t4 [3,4]: t3 may take x's bytes, t4 t2's.
  p.cases = {{"safe: t3 in x's bytes, t4 in t2's", {{"t3", {1, 0}}, {"t4", {1, 32}}}, ""},
             {"unsafe: t3 in t1's bytes (t1 is read again at 4)", {{"t3", {1, 16}}}, "plan-overlap"}};
  return p;
}

// An operator with several outputs: `_emit_operator` appends a TensorList of the out
// arguments; each item is written by the call.
RuleProgram SeveralOutputs() {
  RuleProgram p;
  p.name = "several_outputs";
  p.rule = "a call's TensorList return: every item is written by it (_emitter.py _emit_operator)";
  p.tensors = {{"x", ScalarType::kFloat, {2, 4}}, {"a", ScalarType::kFloat, {2}}, {"b", ScalarType::kLong, {2}},
               {"c", ScalarType::kFloat, {2}},    {"e", ScalarType::kFloat, {2}}, {"d", ScalarType::kFloat, {2}}};
  p.build = [](const PlanLayout& l) {
    ProgramBuilder b;
    auto& m = b.AddMethod("forward");
    const int x = I(m.Tensor(l.Spec("x"))), a = I(m.Tensor(l.Spec("a"))), bi = I(m.Tensor(l.Spec("b")));
    const int c = I(m.Tensor(l.Spec("c"))), e = I(m.Tensor(l.Spec("e"))), d = I(m.Tensor(l.Spec("d")));
    const int dim = I(m.Int(1)), keepdim = I(m.Bool(false)), one = I(m.Int(1));
    const int outs = I(m.TensorList({a, bi}));
    // 0: (a, b) = max(x, dim=1): max.dim_max(self, dim, keepdim, *, max, max_values) + [a, b]
    m.KernelCall(m.Operator("aten::max", "dim_max"), {x, dim, keepdim, a, bi, outs});
    m.KernelCall(m.Operator("aten::neg", "out"), {a, c, c});           // 1: c = -a
    m.KernelCall(m.Operator("aten::exp", "out"), {c, e, e});           // 2: e = exp(c)
    m.KernelCall(m.Operator("aten::add", "out"), {e, bi, one, d, d});  // 3: d = e + b
    m.Inputs({x});
    m.Outputs({d});
    m.PlannedBufferSizes(l.buffer_sizes());
    return b.Build();
  };
  // a lives [0,1], b [0,3] (the list's second item), c [1,2], e [2,3]: e may take a's bytes;
  // c may not take b's.
  p.cases = {{"safe: e in a's bytes", {{"e", {1, 32}}}, ""},
             {"unsafe: c in b's bytes (b, the list's second output, is read at 3)", {{"c", {1, 48}}}, "plan-overlap"}};
  return p;
}

// A loop as the emitter writes torch.map (`_emit_map`): sym_size, select_copy at the loop's
// head, the body, et_copy_index into the stacked output, add/eq on the counter and a backward
// JumpFalseCall. The counter and the condition are prim ops the oracle runs for real.
RuleProgram Loop() {
  RuleProgram p;
  p.name = "loop";
  p.rule = "a backward JumpFalseCall: values used inside the loop live for the whole loop";
  p.tensors = {
      {"x", ScalarType::kFloat, {3, 4}},  {"w", ScalarType::kFloat, {4}},
      {"slice", ScalarType::kFloat, {4}}, {"u", ScalarType::kFloat, {4}},
      {"body", ScalarType::kFloat, {4}},  {"acc", ScalarType::kFloat, {3, 4}, 1, "", ShapeDynamism::kDynamicBound},
      {"y", ScalarType::kFloat, {3, 4}}};
  p.build = [](const PlanLayout& l) {
    ProgramBuilder b;
    auto& m = b.AddMethod("forward");
    const int x = I(m.Tensor(l.Spec("x"))), w = I(m.Tensor(l.Spec("w"))), slice = I(m.Tensor(l.Spec("slice")));
    const int u = I(m.Tensor(l.Spec("u"))), body = I(m.Tensor(l.Spec("body"))), acc = I(m.Tensor(l.Spec("acc")));
    const int y = I(m.Tensor(l.Spec("y")));
    const int zero = I(m.Int(0)), iter = I(m.Int(0)), sym = I(m.Int(0)), one = I(m.Int(1)), done = I(m.Bool(false));
    const int dims = I(m.IntList({m.Int(0)})), keepdim = I(m.Bool(false)), none = I(m.Null());
    m.KernelCall(m.Operator("aten::sum", "IntList_out"), {x, dims, keepdim, none, w, w});     // 0: w = x.sum(0)
    m.KernelCall(m.Operator("aten::sym_size", "int"), {x, zero, sym});                        // 1: sym = 3
    m.KernelCall(m.Operator("aten::select_copy", "int_out"), {x, zero, iter, slice, slice});  // 2: loop head
    m.KernelCall(m.Operator("aten::mul", "out"), {slice, w, u, u});                           // 3: u = slice * w
    m.KernelCall(m.Operator("aten::neg", "out"), {u, body, body});                            // 4: body = -u
    m.KernelCall(m.Operator("executorch_prim::et_copy_index", "tensor"), {acc, body, iter});  // 5: acc[iter] = body
    m.KernelCall(m.Operator("executorch_prim::add", "Scalar"), {iter, one, iter});            // 6: iter += 1
    m.KernelCall(m.Operator("executorch_prim::eq", "Scalar"), {iter, sym, done});             // 7: done = iter == 3
    m.JumpFalse(done, 2);                                                                     // 8: loop
    m.KernelCall(m.Operator("executorch_prim::sub", "Scalar"), {iter, sym, iter});            // 9: iter = 0
    m.KernelCall(m.Operator("aten::neg", "out"), {acc, y, y});                                // 10: y = -acc
    m.Inputs({x});
    m.Outputs({y});
    m.PlannedBufferSizes(l.buffer_sizes());
    return b.Build();
  };
  // Without the loop, w would live [0,3] and body [4,5]; the jump from 8 back to 2 keeps w
  // (read at 3 in every iteration) alive until 8, so body may not take its bytes: the second
  // iteration would read body's bytes as w. After the loop w is dead: y may take its bytes.
  p.cases = {
      {"safe: y (after the loop) in w's bytes", {{"y", {1, 48}}}, ""},
      {"unsafe: body in w's bytes (w is read again in the next iteration)", {{"body", {1, 48}}}, "plan-overlap"}};
  return p;
}

// torch.cond as the emitter writes it (`_emit_cond`): JumpFalseCall on the predicate, the true
// branch, a MoveCall of its output into the cond's output value, a JumpFalseCall on a constant
// False over the false branch, the false branch and its MoveCall. After a MoveCall the target
// EValue is the source's tensor (runtime/executor/method.cpp), so the source's bytes live as
// long as the target is read. Two conds in a row: upstream bug 21490.
RuleProgram Move() {
  RuleProgram p;
  p.name = "move";
  p.rule = "MoveCall: the target is the source's tensor from then on (method.cpp; upstream bug 21490)";
  p.tensors = {{"x", ScalarType::kFloat, {4}},  {"t1", ScalarType::kFloat, {4}}, {"f1", ScalarType::kFloat, {4}},
               {"o1", ScalarType::kFloat, {4}}, {"t2", ScalarType::kFloat, {4}}, {"f2", ScalarType::kFloat, {4}},
               {"o2", ScalarType::kFloat, {4}}, {"r", ScalarType::kFloat, {4}}};
  p.build = [](const PlanLayout& l) {
    ProgramBuilder b;
    auto& m = b.AddMethod("forward");
    const int x = I(m.Tensor(l.Spec("x"))), t1 = I(m.Tensor(l.Spec("t1"))), f1 = I(m.Tensor(l.Spec("f1")));
    const int o1 = I(m.Tensor(l.Spec("o1"))), t2 = I(m.Tensor(l.Spec("t2"))), f2 = I(m.Tensor(l.Spec("f2")));
    const int o2 = I(m.Tensor(l.Spec("o2"))), r = I(m.Tensor(l.Spec("r")));
    const int pred = I(m.Bool(true)), skip = I(m.Bool(false)), one = I(m.Int(1));
    m.JumpFalse(pred, 4);                                               // 0: if pred
    m.KernelCall(m.Operator("aten::sin", "out"), {x, t1, t1});          // 1:   t1 = sin(x)
    m.Move(t1, o1);                                                     // 2:   o1 := t1
    m.JumpFalse(skip, 6);                                               // 3: else
    m.KernelCall(m.Operator("aten::cos", "out"), {x, f1, f1});          // 4:   f1 = cos(x)
    m.Move(f1, o1);                                                     // 5:   o1 := f1
    m.JumpFalse(pred, 10);                                              // 6: if pred
    m.KernelCall(m.Operator("aten::tan", "out"), {x, t2, t2});          // 7:   t2 = tan(x)
    m.Move(t2, o2);                                                     // 8:   o2 := t2
    m.JumpFalse(skip, 12);                                              // 9: else
    m.KernelCall(m.Operator("aten::exp", "out"), {x, f2, f2});          // 10:  f2 = exp(x)
    m.Move(f2, o2);                                                     // 11:  o2 := f2
    m.KernelCall(m.Operator("aten::add", "out"), {o1, o2, one, r, r});  // 12: r = o1 + o2
    m.Inputs({x});
    m.Outputs({r});
    m.PlannedBufferSizes(l.buffer_sizes());
    return b.Build();
  };
  // t1 is o1 from 2 on, read at 12: t2 (written at 7) may not take t1's bytes (bug 21490: the
  // first cond's output is overwritten by the second's). x is last read at 10: r may take it.
  p.cases = {{"safe: r in x's bytes", {{"r", {1, 0}}}, ""},
             {"unsafe: t2 in t1's bytes (o1, moved from t1, is read at 12)", {{"t2", {1, 16}}}, "plan-overlap"}};
  return p;
}

// executorch_prim::et_view: its out takes self's data pointer (kernels/prim_ops/et_view.cpp);
// the out is not planned (the emitter emits et_view for views it cannot elide, `_emit_view`).
RuleProgram EtView() {
  RuleProgram p;
  p.name = "et_view";
  p.rule = "et_view: the out reads its self's bytes for as long as it is used (et_view.cpp)";
  p.tensors = {{"x", ScalarType::kFloat, {2, 3}},
               {"b", ScalarType::kFloat, {2, 3}},
               {"c", ScalarType::kFloat, {6}},
               {"y", ScalarType::kFloat, {6}}};
  p.build = [](const PlanLayout& l) {
    ProgramBuilder b;
    auto& m = b.AddMethod("forward");
    const int x = I(m.Tensor(l.Spec("x"))), bb = I(m.Tensor(l.Spec("b")));
    const int v = I(m.Tensor({ScalarType::kFloat, {6}}));  // not planned: et_view gives it b's bytes
    const int c = I(m.Tensor(l.Spec("c"))), y = I(m.Tensor(l.Spec("y")));
    const int sizes = I(m.IntList({m.Int(6)})), one = I(m.Int(1));
    m.KernelCall(m.Operator("aten::neg", "out"), {x, bb, bb});                        // 0: b = -x
    m.KernelCall(m.Operator("executorch_prim::et_view", "default"), {bb, sizes, v});  // 1: v = b.view(6)
    m.KernelCall(m.Operator("aten::exp", "out"), {x, c, c});                          // 2: c = exp(x)
    m.KernelCall(m.Operator("aten::add", "out"), {v, c, one, y, y});                  // 3: y = v + c
    m.Inputs({x});
    m.Outputs({y});
    m.PlannedBufferSizes(l.buffer_sizes());
    return b.Build();
  };
  // b is named last at 1, but v (b's bytes) is read at 3: c (written at 2) may not take b's
  // bytes. x is last read at 2: y may take its bytes.
  p.cases = {{"safe: y in x's bytes", {{"y", {1, 0}}}, ""},
             {"unsafe: c in b's bytes (read through the view at 3)", {{"c", {1, 32}}}, "plan-overlap"}};
  return p;
}

// A static view: the emitter elides a static, planned view (`_emit_view`): a separate value
// whose allocation_info is its base's, and no instruction.
RuleProgram StaticView() {
  RuleProgram p;
  p.name = "static_view";
  p.rule = "static view: a value with its base's allocation_info and no instruction (_emitter.py _emit_view)";
  p.tensors = {{"x", ScalarType::kFloat, {2, 3}},
               {"b", ScalarType::kFloat, {2, 3}},
               {"v", ScalarType::kFloat, {6}, 1, "b"},
               {"c", ScalarType::kFloat, {6}},
               {"y", ScalarType::kFloat, {6}}};
  p.build = [](const PlanLayout& l) {
    ProgramBuilder b;
    auto& m = b.AddMethod("forward");
    const int x = I(m.Tensor(l.Spec("x"))), bb = I(m.Tensor(l.Spec("b"))), v = I(m.Tensor(l.Spec("v")));
    const int c = I(m.Tensor(l.Spec("c"))), y = I(m.Tensor(l.Spec("y")));
    const int one = I(m.Int(1));
    m.KernelCall(m.Operator("aten::neg", "out"), {x, bb, bb});        // 0: b = -x
    m.KernelCall(m.Operator("aten::exp", "out"), {x, c, c});          // 1: c = exp(x)
    m.KernelCall(m.Operator("aten::add", "out"), {v, c, one, y, y});  // 2: y = v + c (v: b viewed as [6])
    m.Inputs({x});
    m.Outputs({y});
    m.PlannedBufferSizes(l.buffer_sizes());
    return b.Build();
  };
  // v is b's bytes, read at 2: c (written at 1) may not take them. v moved off b reads bytes
  // nothing wrote. y may take x's bytes (x last read at 1).
  p.cases = {
      {"safe: y in x's bytes", {{"y", {1, 0}}}, ""},
      {"unsafe: c in b's bytes (read through the static view at 2)", {{"c", {1, 32}}}, "plan-overlap"},
      {"unsafe: the view moved off its base (reads bytes nothing wrote)", {{"v", {1, 128}}}, "plan-read-before-write"}};
  return p;
}

// FreeCall: the runtime drops the tensor's data pointer (method.cpp, FreeCall); the emitter
// emits it for memory.free (`_emit_free`). Nothing may read it afterwards; its bytes are free.
RuleProgram Free() {
  RuleProgram p;
  p.name = "free";
  p.rule = "FreeCall: the freed tensor is dead from then on (method.cpp FreeCall, _emitter.py _emit_free)";
  p.tensors = {{"x", ScalarType::kFloat, {4}},
               {"t", ScalarType::kFloat, {4}},
               {"u", ScalarType::kFloat, {4}},
               {"v", ScalarType::kFloat, {4}},
               {"w", ScalarType::kFloat, {4}}};
  p.build = [](const PlanLayout& l) {
    ProgramBuilder b;
    auto& m = b.AddMethod("forward");
    const int x = I(m.Tensor(l.Spec("x"))), t = I(m.Tensor(l.Spec("t"))), u = I(m.Tensor(l.Spec("u")));
    const int v = I(m.Tensor(l.Spec("v"))), w = I(m.Tensor(l.Spec("w")));
    const int one = I(m.Int(1));
    m.KernelCall(m.Operator("aten::neg", "out"), {x, t, t});          // 0: t = -x
    m.KernelCall(m.Operator("aten::exp", "out"), {x, u, u});          // 1: u = exp(x)
    m.KernelCall(m.Operator("aten::add", "out"), {t, u, one, v, v});  // 2: v = t + u
    m.Free(t);                                                        // 3: free t
    m.KernelCall(m.Operator("aten::sin", "out"), {v, w, w});          // 4: w = sin(v)
    m.Inputs({x});
    m.Outputs({w});
    m.PlannedBufferSizes(l.buffer_sizes());
    return b.Build();
  };
  // t lives [0,3] (freed at 3), u [1,2]: w (written at 4) may take t's bytes; u may not.
  p.cases = {{"safe: w in t's bytes (freed at 3)", {{"w", {1, 16}}}, ""},
             {"unsafe: u in t's bytes (t is read at 2)", {{"u", {1, 16}}}, "plan-overlap"}};
  return p;
}

// A delegate with planned outputs: `_emit_delegate` writes the inputs, then the flattened
// returns; its payload tells the oracle's stub how many (ClobberDelegatePayload).
RuleProgram DelegateOutputs() {
  RuleProgram p;
  p.name = "delegate";
  p.rule = "DelegateCall: inputs then flattened returns, the returns written by the call (_emit_delegate)";
  p.tensors = {{"x", ScalarType::kFloat, {4}},  {"a", ScalarType::kFloat, {4}}, {"o1", ScalarType::kFloat, {4}},
               {"o2", ScalarType::kFloat, {4}}, {"r", ScalarType::kFloat, {4}}, {"s", ScalarType::kFloat, {4}}};
  p.build = [](const PlanLayout& l) {
    ProgramBuilder b;
    auto& m = b.AddMethod("forward");
    const int x = I(m.Tensor(l.Spec("x"))), a = I(m.Tensor(l.Spec("a"))), o1 = I(m.Tensor(l.Spec("o1")));
    const int o2 = I(m.Tensor(l.Spec("o2"))), r = I(m.Tensor(l.Spec("r"))), s = I(m.Tensor(l.Spec("s")));
    const int one = I(m.Int(1));
    const uint32_t d = m.Delegate("ClobberBackend", Bytes::Own(ClobberDelegatePayload(2)));
    m.KernelCall(m.Operator("aten::neg", "out"), {x, a, a});           // 0: a = -x
    m.DelegateCall(d, {x, o1, o2});                                    // 1: (o1, o2) = lowered(x)
    m.KernelCall(m.Operator("aten::add", "out"), {a, o1, one, r, r});  // 2: r = a + o1
    m.KernelCall(m.Operator("aten::mul", "out"), {r, o2, s, s});       // 3: s = r * o2
    m.Inputs({x});
    m.Outputs({s});
    m.PlannedBufferSizes(l.buffer_sizes());
    return b.Build();
  };
  // x lives [0,1], a [0,2], o1 [1,2], o2 [1,3], r [2,3]: r may take x's bytes, s (written at
  // 3) a's; o2 (written by the delegate at 1) may not take a's.
  p.cases = {{"safe: r in x's bytes, s in a's", {{"r", {1, 0}}, {"s", {1, 16}}}, ""},
             {"unsafe: the delegate's second output in a's bytes (a is read at 2)", {{"o2", {1, 16}}}, "plan-overlap"}};
  return p;
}

// Two planned buffers (memory_id 1 and 2): bytes are shared only within one buffer.
RuleProgram TwoBuffers() {
  RuleProgram p;
  p.name = "two_buffers";
  p.rule = "several planned buffers: a place is (memory_id, offset) (HierarchicalAllocator)";
  p.tensors = {{"x", ScalarType::kFloat, {4}},
               {"a", ScalarType::kFloat, {4}},
               {"b", ScalarType::kFloat, {4}, 2},
               {"c", ScalarType::kFloat, {4}, 2},
               {"y", ScalarType::kFloat, {4}}};
  p.build = [](const PlanLayout& l) {
    ProgramBuilder b;
    auto& m = b.AddMethod("forward");
    const int x = I(m.Tensor(l.Spec("x"))), a = I(m.Tensor(l.Spec("a"))), bb = I(m.Tensor(l.Spec("b")));
    const int c = I(m.Tensor(l.Spec("c"))), y = I(m.Tensor(l.Spec("y")));
    const int one = I(m.Int(1));
    m.KernelCall(m.Operator("aten::neg", "out"), {x, a, a});           // 0: a = -x     (buffer 1)
    m.KernelCall(m.Operator("aten::exp", "out"), {x, bb, bb});         // 1: b = exp(x) (buffer 2)
    m.KernelCall(m.Operator("aten::add", "out"), {a, bb, one, c, c});  // 2: c = a + b  (buffer 2)
    m.KernelCall(m.Operator("aten::sin", "out"), {c, y, y});           // 3: y = sin(c)
    m.Inputs({x});
    m.Outputs({y});
    m.PlannedBufferSizes(l.buffer_sizes());
    return b.Build();
  };
  // Unshared: buffer 1 x@0 a@16 y@32, buffer 2 b@0 c@16. a and b are both alive at 1 and 2:
  // the same offset in different buffers is fine, the same buffer is not. y may take x's bytes.
  p.cases = {
      {"safe: b at a's offset in buffer 2, c at 0, y in x's bytes", {{"b", {2, 16}}, {"c", {2, 0}}, {"y", {1, 0}}}, ""},
      {"unsafe: b moved to buffer 1, into a's bytes", {{"b", {1, 16}}}, "plan-overlap"}};
  return p;
}

// Mutable buffers with initial state shared between two methods, as MemoryPlanningPass with
// share_mutable_buffers=True plans them (exir/passes/memory_planning_pass.py run_multimethod:
// every method's mutable buffers in memory_id 2, one offset per fully qualified name, the
// arena as large as all of them, activations in memory_id 1). The caller gives both methods
// the same buffer 2 (--share-buffer 2); `step` updates s1 (the write-back copy_ upstream
// inserts for a mutated buffer), then `read` reads s1 and s2.
RuleProgram SharedState() {
  RuleProgram p;
  p.name = "shared_state";
  p.rule =
      "mutable buffers shared by methods: alive from the start to the end of every method sharing them "
      "(memory_planning_pass.py run_multimethod)";
  p.tensors = {{"step.x", ScalarType::kFloat, {4}}, {"step.t", ScalarType::kFloat, {4}},
               {"step.r", ScalarType::kFloat, {4}}, {"read.y", ScalarType::kFloat, {4}},
               {"read.w", ScalarType::kFloat, {4}}, {"read.z", ScalarType::kFloat, {4}},
               {"s1", ScalarType::kFloat, {4}, 2},  {"s2", ScalarType::kFloat, {4}, 2}};
  p.share_buffers = {2};
  p.build = [](const PlanLayout& l) {
    ProgramBuilder b;
    const std::vector<uint8_t> s1 = Floats({0.5f, 1.5f, 2.5f, 3.5f}), s2 = Floats({-1.0f, -2.0f, -3.0f, -4.0f});
    {
      auto& m = b.AddMethod("step");
      const int x = I(m.Tensor(l.Spec("step.x"))), t = I(m.Tensor(l.Spec("step.t"))), r = I(m.Tensor(l.Spec("step.r")));
      const int s = I(m.MutableBuffer(l.Spec("s1"), "state.s1", Bytes::Own(s1)));
      const int one = I(m.Int(1)), non_blocking = I(m.Bool(false));
      m.KernelCall(m.Operator("aten::add", "out"), {s, x, one, t, t});   // 0: t = s1 + x
      m.KernelCall(m.Operator("aten::copy_"), {s, t, non_blocking, s});  // 1: s1.copy_(t)
      m.KernelCall(m.Operator("aten::neg", "out"), {t, r, r});           // 2: r = -t
      m.Inputs({x});
      m.Outputs({r});
      m.PlannedBufferSizes(l.buffer_sizes());
    }
    {
      auto& m = b.AddMethod("read");
      const int y = I(m.Tensor(l.Spec("read.y"))), w = I(m.Tensor(l.Spec("read.w"))), z = I(m.Tensor(l.Spec("read.z")));
      const int a = I(m.MutableBuffer(l.Spec("s1"), "state.s1", Bytes::Own(s1)));
      const int c = I(m.MutableBuffer(l.Spec("s2"), "state.s2", Bytes::Own(s2)));
      const int one = I(m.Int(1));
      m.KernelCall(m.Operator("aten::mul", "out"), {a, y, w, w});       // 0: w = s1 * y
      m.KernelCall(m.Operator("aten::add", "out"), {w, c, one, z, z});  // 1: z = w + s2
      m.Inputs({y});
      m.Outputs({z});
      m.PlannedBufferSizes(l.buffer_sizes());
    }
    return b.Build();
  };
  // Buffer 1 is each method's own: r may take x's bytes (x last read at 0), z y's. Buffer 2 is
  // shared: s2 is alive in `step` too although `step` never names it, so step's t may not take
  // its bytes (read would read t as s2); nor may read's w (s2 is read at 1).
  p.cases = {{"safe: r in x's bytes, z in y's (buffer 1)", {{"step.r", {1, 0}}, {"read.z", {1, 48}}}, ""},
             {"unsafe: read's w in s2's bytes (s2 is read at 1)", {{"read.w", {2, 16}}}, "plan-overlap"},
             {"unsafe: step's t in s2's bytes (s2 lives in every method sharing buffer 2)",
              {{"step.t", {2, 16}}},
              "plan-overlap"}};
  return p;
}

}  // namespace

uint64_t PlannedDecl::nbytes() const {
  uint64_t n = ElementSize(type);
  for (int32_t s : sizes) n *= static_cast<uint64_t>(s);
  return n;
}

TensorSpec PlanLayout::Spec(const std::string& name) const {
  const PlannedDecl& d = Find(*decls_, name);
  TensorSpec s(d.type, d.sizes, loc_.at(name));
  s.shape_dynamism = d.dynamism;
  return s;
}

PlanLocations RuleProgram::Unshared() const {
  PlanLocations loc;
  std::map<uint32_t, uint64_t> next;
  for (const auto& d : tensors) {
    if (!d.alias_of.empty()) continue;
    uint64_t& at = next[d.memory_id];
    loc[d.name] = PlannedLocation{d.memory_id, at};
    at = AlignUp(at + d.nbytes());
  }
  for (const auto& d : tensors) {
    if (!d.alias_of.empty()) loc[d.name] = loc.at(d.alias_of);
  }
  return loc;
}

PlanLocations RuleProgram::With(const PlanLocations& moves) const {
  PlanLocations loc = Unshared();
  for (const auto& [name, place] : moves) {
    Find(tensors, name);  // a typo throws
    loc[name] = place;
  }
  return loc;
}

Package RuleProgram::Build(const PlanLocations& loc) const {
  std::vector<int64_t> sizes = {0};
  for (const auto& d : tensors) {
    const PlannedLocation& at = loc.at(d.name);
    if (sizes.size() <= at.memory_id) sizes.resize(at.memory_id + 1, 0);
    sizes[at.memory_id] = std::max<int64_t>(sizes[at.memory_id], static_cast<int64_t>(AlignUp(at.offset + d.nbytes())));
  }
  // Every buffer the unshared plan has stays (an unsafe plan may empty one).
  for (const auto& d : tensors) {
    if (sizes.size() <= d.memory_id) sizes.resize(d.memory_id + 1, 0);
    if (sizes[d.memory_id] == 0) sizes[d.memory_id] = static_cast<int64_t>(kAlign);
  }
  return build(PlanLayout(&tensors, loc, sizes));
}

void WriteUnchecked(const Package& pkg, const std::string& path) {
  WriteFile(path, RenderPte(LayoutPte(PartsOf(pkg), BackendConfig{})));
}

std::vector<RuleProgram> PlanRulePrograms() {
  return {Chain(), SeveralOutputs(),  Loop(),       Move(),       EtView(), StaticView(),
          Free(),  DelegateOutputs(), TwoBuffers(), SharedState()};
}

}  // namespace ptepack::testing
