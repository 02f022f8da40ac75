// The lifetime model (serialize/read/plan_lifetimes.h), rule by rule, on
// programs written with ProgramBuilder. Each expected interval is derived by
// hand from the upstream rule quoted beside it (exir/memory_planning.py,
// exir/emit/_emitter.py, runtime/executor/method.cpp, kernels/prim_ops/),
// never from an earlier run of the model.
#include "serialize/read/plan_lifetimes.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "config/backend_config.h"
#include "ptepack/program_builder.h"
#include "ptepack/reader.h"
#include "serialize/api/package_access.h"
#include "serialize/model/spec.h"
#include "serialize/read/plan_checks.h"
#include "serialize/read/pte_reader.h"
#include "serialize/write/pte_writer.h"
#include "tests/test_util.h"

namespace ptepack {
namespace {

using Runs = std::vector<std::pair<uint32_t, uint32_t>>;

// A float tensor of n elements (4n bytes) planned in buffer `mid` at `off`.
TensorSpec F32(int32_t n, uint64_t off, uint32_t mid = 1) {
  return TensorSpec{ScalarType::kFloat, {n}, PlannedLocation{mid, off}};
}

int32_t I(uint32_t v) { return static_cast<int32_t>(v); }

// Builds, writes and reads a program; derives its lifetimes.
struct Built {
  std::vector<uint8_t> bytes;
  std::unique_ptr<PteFile> file;
  ProgramLifetimes lt;
  const MethodLifetimes& m(size_t i = 0) const { return lt.methods.at(i); }
  const PlannedTensor& t(uint32_t value, size_t method = 0) const {
    const PlannedTensor* p = m(method).Tensor(value);
    if (!p) throw std::runtime_error("value " + std::to_string(value) + " is not planned");
    return *p;
  }
  std::vector<uint32_t> writers(uint32_t value, size_t method = 0) const {
    return m(method).Writers(t(value, method)).ToVector();
  }
  std::vector<uint32_t> readers(uint32_t value, size_t method = 0) const {
    return m(method).Readers(t(value, method)).ToVector();
  }
  const PlanStorage& storage(uint32_t value, size_t method = 0) const {
    return m(method).storages.at(t(value, method).storage);
  }
  Runs live(uint32_t value, size_t method = 0) const {
    Runs r;
    for (const LiveRun& x : storage(value, method).live) r.emplace_back(x.first, x.last);
    return r;
  }
  std::vector<std::string> codes() const {
    std::vector<std::string> c;
    for (const auto& f : file->report().findings()) c.push_back(f.code);
    return c;
  }
  bool has(const std::string& code) const { return file->report().Has(code); }
  std::string findings() const {
    std::string s;
    for (const auto& f : file->report().findings()) s += "\n  " + f.ToString();
    return s;
  }
};

Built Build(const PackageParts& pkg, const BackendConfig& cfg = {}) {
  Built out;
  out.bytes = RenderPte(LayoutPte(pkg, cfg));
  out.file = PteFile::FromBytes(Bytes::Copy(out.bytes.data(), out.bytes.size()), "plan.pte");
  if (!out.file->program()) throw std::runtime_error("the test program does not verify");
  out.lt = DeriveLifetimes(*out.file->program());
  return out;
}
Built Build(const ProgramBuilder& b, const BackendConfig& cfg = {}) { return Build(PartsOf(b.Build()), cfg); }

// A program given in ExecuTorch's JSON form (what `flatc --json` prints):
// for what ProgramBuilder does not write (several chains).
Built BuildJson(const std::string& program) {
  return Build(PackageFromSpecJson("{\"program\": " + program + "}", "."));
}

// ---- Straight-line code.

// Hand derivation (exir/memory_planning.py update_tensor_lifetime: a tensor
// lives from the first to the last node that refers to it, both inclusive;
// a placeholder starts at 0; the output node is the last node, so outputs
// live to the end):
//   0: t1 = mul(w, w)     t1 [0, 3] (last read at 3)
//   1: t2 = add(t1, w)    t2 [1, 3] (an output: to the end, 3)
//   2: t3 = add(t2, x)    x  [0, 2] (an input: from 0 to its only use, 2)
//   3: t4 = mul(t3, t1)   t3 [2, 3]; t4 [3, 3]
TEST(PlanLifetimes, StraightLineIntervals) {
  ProgramBuilder b;
  auto& m = b.AddMethod("forward");
  uint32_t x = m.Tensor(F32(4, 0));
  uint32_t w = m.ConstantTensor({ScalarType::kFloat, {4}}, Bytes::Own(std::vector<uint8_t>(16, 1)));
  uint32_t t1 = m.Tensor(F32(4, 16));
  uint32_t t2 = m.Tensor(F32(4, 32));
  uint32_t t3 = m.Tensor(F32(4, 48));
  uint32_t t4 = m.Tensor(F32(4, 64));
  uint32_t mul = m.Operator("aten::mul", "out");
  uint32_t add = m.Operator("aten::add", "out");
  // Out variants pass the out tensor as their last schema argument and then
  // once more as the return (exir/emit/_emitter.py _emit_operator).
  m.KernelCall(mul, {I(w), I(w), I(t1), I(t1)});
  m.KernelCall(add, {I(t1), I(w), I(t2), I(t2)});
  m.KernelCall(add, {I(t2), I(x), I(t3), I(t3)});
  m.KernelCall(mul, {I(t3), I(t1), I(t4), I(t4)});
  m.Inputs({I(x)});
  m.Outputs({I(t4), I(t2)});
  m.PlannedBufferSizes({0, 80});
  Built p = Build(b);
  ASSERT_TRUE(p.m().derived()) << p.m().not_checked;
  EXPECT_EQ(p.live(x), (Runs{{0, 2}}));
  EXPECT_EQ(p.live(t1), (Runs{{0, 3}}));
  EXPECT_EQ(p.live(t2), (Runs{{1, 3}}));
  EXPECT_EQ(p.live(t3), (Runs{{2, 3}}));
  EXPECT_EQ(p.live(t4), (Runs{{3, 3}}));
  // The out argument before the return is the return again, not a read.
  EXPECT_EQ(p.writers(t1), (std::vector<uint32_t>{0}));
  EXPECT_EQ(p.readers(t1), (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(p.t(x).origin, PlanOrigin::kInput);
  EXPECT_EQ(p.t(t2).origin, PlanOrigin::kWritten);
  EXPECT_TRUE(p.t(t2).output);
  EXPECT_TRUE(p.file->ok()) << p.findings();
}

// In place: a returned tensor that is also an earlier argument is read and
// written (aten::add_.Tensor(self, other, alpha) -> self, emitted
// [self, other, alpha, self]); its earlier contents stay live. Several outs:
// the out tensors, then a TensorList of them as the return.
//   0: a = add(x, x)                 a written at 0
//   1: a.add_(x)                     a read and written at 1
//   2: b, c = split_copy(a)          [a, sizes, dim, b, c, TensorList(b, c)]
// a [0, 2]; b, c [2, 2] (outputs, written at the last instruction).
TEST(PlanLifetimes, InPlaceAndSeveralOuts) {
  ProgramBuilder b;
  auto& m = b.AddMethod("forward");
  uint32_t x = m.Tensor(F32(4, 0));
  uint32_t a = m.Tensor(F32(4, 16));
  uint32_t o1 = m.Tensor(F32(2, 32));
  uint32_t o2 = m.Tensor(F32(2, 48));
  uint32_t sizes = m.IntList({I(m.Int(2)), I(m.Int(2))});
  uint32_t dim = m.Int(0);
  uint32_t list = m.TensorList({I(o1), I(o2)});
  uint32_t alpha = m.Int(1);
  m.KernelCall(m.Operator("aten::add", "out"), {I(x), I(x), I(alpha), I(a), I(a)});
  m.KernelCall(m.Operator("aten::add_", "Tensor"), {I(a), I(x), I(alpha), I(a)});
  m.KernelCall(m.Operator("aten::split_with_sizes_copy", "out"), {I(a), I(sizes), I(dim), I(o1), I(o2), I(list)});
  m.Inputs({I(x)});
  m.Outputs({I(o1), I(o2)});
  m.PlannedBufferSizes({0, 64});
  Built p = Build(b);
  ASSERT_TRUE(p.m().derived()) << p.m().not_checked;
  EXPECT_EQ(p.writers(a), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(p.readers(a), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(p.live(a), (Runs{{0, 2}}));
  EXPECT_EQ(p.writers(o1), (std::vector<uint32_t>{2}));
  EXPECT_TRUE(p.readers(o1).empty());
  EXPECT_EQ(p.live(o1), (Runs{{2, 2}}));
  EXPECT_EQ(p.live(o2), (Runs{{2, 2}}));
  EXPECT_EQ(p.live(x), (Runs{{0, 1}}));
  EXPECT_TRUE(p.file->ok()) << p.findings();
}

// State lives from the first to the last instruction (update_tensor_lifetime:
// a mutable buffer's placeholder starts at 0 and "mutable buffers are never
// freed": end = max_node_idx). In the file: initial data, a name, the self of
// aten::copy_ (insert_write_back_for_buffers_pass), or read before written.
//   0: y = add(x, k)        k: initial data, read at 0      -> [0, 3]
//   1: z = add(y, n)        n: named, read at 1             -> [0, 3]
//   2: c.copy_(z)           c: copy_'s self (write-back)    -> [0, 3]
//   3: r = add(r0, z) ...   r0: read at 3 then written at 3 (in place) -> [0, 3]
TEST(PlanLifetimes, StateLivesFromFirstToLast) {
  ProgramBuilder b;
  auto& m = b.AddMethod("forward");
  uint32_t x = m.Tensor(F32(4, 0));
  uint32_t k = m.MutableBuffer(F32(4, 16), "k", Bytes::Own(std::vector<uint8_t>(16, 3)));
  uint32_t n = m.MutableBuffer(F32(4, 32), "n");
  uint32_t c = m.Tensor(F32(4, 48));
  uint32_t r0 = m.Tensor(F32(4, 64));
  uint32_t y = m.Tensor(F32(4, 80));
  uint32_t z = m.Tensor(F32(4, 96));
  uint32_t nb = m.Bool(false);
  uint32_t add = m.Operator("aten::add", "out");
  m.KernelCall(add, {I(x), I(k), I(y), I(y)});
  m.KernelCall(add, {I(y), I(n), I(z), I(z)});
  m.KernelCall(m.Operator("aten::copy_"), {I(c), I(z), I(nb), I(c)});
  m.KernelCall(m.Operator("aten::add_", "Tensor"), {I(r0), I(z), I(r0)});
  m.Inputs({I(x)});
  m.Outputs({I(z)});
  m.PlannedBufferSizes({0, 112});
  BackendConfig cfg;
  cfg.emit_mutable_buffer_names = true;  // n keeps its name in the file
  Built p = Build(b, cfg);
  ASSERT_TRUE(p.m().derived()) << p.m().not_checked;
  for (uint32_t v : {k, n, c, r0}) {
    EXPECT_EQ(p.t(v).origin, PlanOrigin::kState) << "values[" << v << "]";
    EXPECT_EQ(p.live(v), (Runs{{0, 3}})) << "values[" << v << "]";
    EXPECT_TRUE(p.storage(v).persistent);
  }
  EXPECT_EQ(p.live(y), (Runs{{0, 1}}));
  EXPECT_EQ(p.live(z), (Runs{{1, 3}}));
  EXPECT_TRUE(p.file->ok()) << p.findings();
}

// ---- Views.

// A static view is a separate value with its base's mem_id and mem_offset and
// no instruction (exir/emit/_emitter.py _emit_view; replace_view_copy_with_view_pass
// _ViewSpec keeps the base's dtype and nbytes). Its uses are its base's
// (exir/memory_planning.py get_node_tensor_specs returns the base's spec
// for memory.view):
//   0: B = add(x, x)      B written at 0
//   1: C = mul(x, x)      C [1, 2]
//   2: D = add(V, C)      V = B viewed as [2, 2]: B's bytes live [0, 2]
void ViewProgram(ProgramBuilder& b, uint64_t c_offset, uint64_t v_offset) {
  auto& m = b.AddMethod("forward");
  uint32_t x = m.Tensor(F32(4, 0));
  uint32_t base = m.Tensor(F32(4, 16));
  uint32_t view = m.Tensor({ScalarType::kFloat, {2, 2}, PlannedLocation{1, v_offset}});
  uint32_t c = m.Tensor(F32(4, c_offset));
  uint32_t d = m.Tensor(F32(4, 48));
  m.KernelCall(m.Operator("aten::add", "out"), {I(x), I(x), I(base), I(base)});
  m.KernelCall(m.Operator("aten::mul", "out"), {I(x), I(x), I(c), I(c)});
  m.KernelCall(m.Operator("aten::add", "out"), {I(view), I(c), I(d), I(d)});
  m.Inputs({I(x)});
  m.Outputs({I(d)});
  m.PlannedBufferSizes({0, 80});
}

TEST(PlanLifetimes, StaticViewSharesItsBasesStorage) {
  ProgramBuilder b;
  ViewProgram(b, 32, 16);
  Built p = Build(b);
  ASSERT_TRUE(p.m().derived()) << p.m().not_checked;
  EXPECT_EQ(p.t(2).origin, PlanOrigin::kView);
  EXPECT_EQ(p.t(2).storage, p.t(1).storage);
  EXPECT_EQ(p.storage(1).values, (SmallVec<uint32_t>{1, 2}));
  EXPECT_EQ(p.live(1), (Runs{{0, 2}}));
  EXPECT_EQ(p.live(3), (Runs{{1, 2}}));
  EXPECT_TRUE(p.file->ok()) << p.findings();
}

TEST(PlanChecks, TensorOverAViewedBaseIsAnOverlap) {
  ProgramBuilder b;
  ViewProgram(b, 16, 16);  // C written at 1 over B, which its view still reads at 2
  Built p = Build(b);
  ASSERT_TRUE(p.has("plan-overlap")) << p.findings();
  const Finding& f = p.file->report().findings().front();
  EXPECT_NE(
      f.message.find("values[1] (FLOAT[4]) with its view values[2] and values[3] (FLOAT[4]) share bytes [16, 32)"),
      std::string::npos)
      << f.message;
  EXPECT_EQ(f.found, "both live at instructions 1..2");
  // Located at the allocation_info of C (the one that comes alive later).
  const auto* ai = p.file->program()->execution_plan()->Get(0)->values()->Get(3)->val_as_Tensor()->allocation_info();
  EXPECT_EQ(*f.offset, static_cast<uint64_t>(reinterpret_cast<const uint8_t*>(ai) - p.file->file().data));
}

TEST(PlanChecks, ViewMovedOffItsBaseIsReadBeforeWrite) {
  ProgramBuilder b;
  ViewProgram(b, 32, 64);  // V at bytes [64, 80): nothing wrote them
  Built p = Build(b);
  ASSERT_EQ(p.codes(), (std::vector<std::string>{"plan-read-before-write"})) << p.findings();
  EXPECT_NE(p.file->report().findings()[0].message.find("a view moved off its base"), std::string::npos);
  EXPECT_EQ(p.t(2).origin, PlanOrigin::kUnwritten);
}

// et_view: the out tensor's data pointer becomes self's (kernels/prim_ops/et_view.cpp):
//   0: B = add(x, x)
//   1: O = et_view(B, [2, 2])     O now uses B's bytes
//   2: C = mul(x, x)
//   3: D = add(O, C)              B's bytes live through O up to 3
void EtViewProgram(ProgramBuilder& b, uint64_t c_offset) {
  auto& m = b.AddMethod("forward");
  uint32_t x = m.Tensor(F32(4, 0));
  uint32_t base = m.Tensor(F32(4, 16));
  uint32_t out = m.Tensor({ScalarType::kFloat, {2, 2}, PlannedLocation{1, 16}});  // _ViewSpec: the base's offset
  uint32_t c = m.Tensor(F32(4, c_offset));
  uint32_t d = m.Tensor(F32(4, 32));
  uint32_t size = m.IntList({I(m.Int(2)), I(m.Int(2))});
  m.KernelCall(m.Operator("aten::add", "out"), {I(x), I(x), I(base), I(base)});
  m.KernelCall(m.Operator("executorch_prim::et_view", "default"), {I(base), I(size), I(out)});
  m.KernelCall(m.Operator("aten::mul", "out"), {I(x), I(x), I(c), I(c)});
  m.KernelCall(m.Operator("aten::add", "out"), {I(out), I(c), I(d), I(d)});
  m.Inputs({I(x)});
  m.Outputs({I(d)});
  m.PlannedBufferSizes({0, 64});
}

TEST(PlanLifetimes, EtViewOutUsesSelfsBytes) {
  ProgramBuilder b;
  EtViewProgram(b, 48);
  Built p = Build(b);
  ASSERT_TRUE(p.m().derived()) << p.m().not_checked;
  EXPECT_EQ(p.t(2).origin, PlanOrigin::kMoveTarget);
  EXPECT_TRUE(p.storage(2).live.empty());  // its own bytes: never used
  EXPECT_EQ(p.live(1), (Runs{{0, 3}}));
  EXPECT_EQ(p.m().PointedBy(p.storage(1)), (std::vector<uint32_t>{2}));
  ASSERT_EQ(p.m().aliases.size(), 1u);
  EXPECT_TRUE(p.m().aliases[0].et_view);
  EXPECT_TRUE(p.file->ok()) << p.findings();
  ProgramBuilder unsafe;
  EtViewProgram(unsafe, 16);  // C written at 2 over B, which O still reads at 3
  Built q = Build(unsafe);
  EXPECT_EQ(q.codes(), (std::vector<std::string>{"plan-overlap"})) << q.findings();
}

// ---- Control flow.

// torch.cond as exir/emit/_emitter.py _emit_cond lays it out: a jump over
// the true branch, the true branch ending in a MoveCall into the value both
// branches share and a jump (on a constant false) over the false branch,
// then the false branch with its MoveCall. After a MoveCall the target uses
// the source's bytes (runtime/executor/method.cpp: the target EValue becomes
// the source's tensor). Both branches' outputs sit at the same bytes, as
// upstream plans each branch from the start of one region.
//   0: JumpFalse(pred, 4)
//   1: A = add(x, x)          A: [1, 2] itself, then through O: 2..3 and 6..7
//   2: Move(A -> O)
//   3: JumpFalse(false, 6)
//   4: B = mul(x, x)          B: [4, 5] itself, then through O: 5..7
//   5: Move(B -> O)
//   6: C = mul(x, x)          C [6, 7]
//   7: R = add(O, C)
// A and B are both live at 6..7 only through O, which on every path points
// at one of them: no conflict. C over A's bytes is upstream bug 21490 (the
// output of one cond overwritten while a later instruction still reads it).
void CondProgram(ProgramBuilder& b, uint64_t c_offset) {
  auto& m = b.AddMethod("forward");
  uint32_t x = m.Tensor(F32(4, 0));
  uint32_t pred = m.Bool(true);
  uint32_t a = m.Tensor(F32(4, 16));
  uint32_t bb = m.Tensor(F32(4, 16));
  uint32_t o = m.Tensor(F32(4, 32));
  uint32_t no = m.Bool(false);
  uint32_t c = m.Tensor(F32(4, c_offset));
  uint32_t r = m.Tensor(F32(4, 48));
  m.JumpFalse(I(pred), 4);
  m.KernelCall(m.Operator("aten::add", "out"), {I(x), I(x), I(a), I(a)});
  m.Move(I(a), I(o));
  m.JumpFalse(I(no), 6);
  m.KernelCall(m.Operator("aten::mul", "out"), {I(x), I(x), I(bb), I(bb)});
  m.Move(I(bb), I(o));
  m.KernelCall(m.Operator("aten::mul", "out"), {I(x), I(x), I(c), I(c)});
  m.KernelCall(m.Operator("aten::add", "out"), {I(o), I(c), I(r), I(r)});
  m.Inputs({I(x), I(pred)});
  m.Outputs({I(r)});
  m.PlannedBufferSizes({0, 80});
}

TEST(PlanLifetimes, CondBranchesMoveIntoOneValue) {
  ProgramBuilder b;
  CondProgram(b, 64);
  Built p = Build(b);
  ASSERT_TRUE(p.m().derived()) << p.m().not_checked;
  const uint32_t a = 2, bb = 3, o = 4;
  EXPECT_EQ(p.t(o).origin, PlanOrigin::kMoveTarget);
  Runs direct_a, direct_b;
  for (const LiveRun& r : p.m().Direct(p.storage(a))) direct_a.emplace_back(r.first, r.last);
  for (const LiveRun& r : p.m().Direct(p.storage(bb))) direct_b.emplace_back(r.first, r.last);
  EXPECT_EQ(direct_a, (Runs{{1, 2}}));
  EXPECT_EQ(direct_b, (Runs{{4, 5}}));
  EXPECT_EQ(p.live(a), (Runs{{1, 3}, {6, 7}}));  // not over the false branch
  EXPECT_EQ(p.live(bb), (Runs{{4, 7}}));
  EXPECT_EQ(p.live(0), (Runs{{0, 6}}));  // x, read in both branches and at 6
  EXPECT_TRUE(p.file->ok()) << p.findings();
}

TEST(PlanChecks, CondOutputOverwrittenWhileStillRead) {
  ProgramBuilder b;
  CondProgram(b, 16);  // C over the branch outputs' bytes while O still points there
  Built p = Build(b);
  ASSERT_TRUE(p.has("plan-overlap")) << p.findings();
  EXPECT_EQ(p.file->report().findings().front().found, "both live at instructions 6..7");
}

// A loop as exir/emit/_emitter.py _emit_map emits it: select_copy of
// iteration i, the body, et_copy_index into the accumulator, i += 1,
// done = (i == n), JumpFalse(done) back to the select_copy.
//   0: n = sym_size(x, 0)
//   1: s = select_copy(x, 0, i)      s [1, 2]: each iteration writes it before reading it
//   2: a = add(s, y)                 a [2, 3]
//   3: c = mul(a, a)                 c [3, 4]
//   4: et_copy_index(acc, c, i)      acc: part written each iteration, read after the loop:
//   5: i = add(i, 1)                      live from the loop's start to the end [1, 8]
//   6: done = eq(i, n)
//   7: JumpFalse(done, 1)
//   8: i = sub(i, n)
// x and y, read inside the loop, live for the whole loop: x [0, 7], y [0, 7].
// s and c may share bytes (c is written after s's last read, and s is
// written again only after c was consumed); acc may share with neither.
void LoopProgram(ProgramBuilder& b, uint64_t c_offset) {
  auto& m = b.AddMethod("forward");
  uint32_t x = m.Tensor(F32(4, 0));
  uint32_t y = m.Tensor(F32(4, 16));
  uint32_t s = m.Tensor(F32(4, 32));
  uint32_t a = m.Tensor(F32(4, 48));
  uint32_t c = m.Tensor(F32(4, c_offset));
  uint32_t acc = m.Tensor(F32(4, 64));
  uint32_t i = m.Int(0), n = m.Int(0), zero = m.Int(0), one = m.Int(1);
  uint32_t done = m.Bool(false);
  m.KernelCall(m.Operator("aten::sym_size", "int"), {I(x), I(zero), I(n)});
  m.KernelCall(m.Operator("aten::select_copy", "int_out"), {I(x), I(zero), I(i), I(s), I(s)});
  m.KernelCall(m.Operator("aten::add", "out"), {I(s), I(y), I(a), I(a)});
  m.KernelCall(m.Operator("aten::mul", "out"), {I(a), I(a), I(c), I(c)});
  m.KernelCall(m.Operator("executorch_prim::et_copy_index", "tensor"), {I(acc), I(c), I(i)});
  m.KernelCall(m.Operator("executorch_prim::add", "Scalar"), {I(i), I(one), I(i)});
  m.KernelCall(m.Operator("executorch_prim::eq", "Scalar"), {I(i), I(n), I(done)});
  m.JumpFalse(I(done), 1);
  m.KernelCall(m.Operator("executorch_prim::sub", "Scalar"), {I(i), I(n), I(i)});
  m.Inputs({I(x), I(y)});
  m.Outputs({I(acc)});
  m.PlannedBufferSizes({0, 80});
}

TEST(PlanLifetimes, LoopBodyAndCarriedValues) {
  ProgramBuilder b;
  LoopProgram(b, 32);  // c over s: fine
  Built p = Build(b);
  ASSERT_TRUE(p.m().derived()) << p.m().not_checked;
  EXPECT_EQ(p.live(0), (Runs{{0, 7}}));  // x
  EXPECT_EQ(p.live(1), (Runs{{0, 7}}));  // y
  EXPECT_EQ(p.live(2), (Runs{{1, 2}}));  // s
  EXPECT_EQ(p.live(3), (Runs{{2, 3}}));  // a
  EXPECT_EQ(p.live(4), (Runs{{3, 4}}));  // c
  EXPECT_EQ(p.live(5), (Runs{{1, 8}}));  // acc
  EXPECT_TRUE(p.file->ok()) << p.findings();
  ProgramBuilder unsafe;
  LoopProgram(unsafe, 64);  // c over acc, which earlier iterations filled
  Built q = Build(unsafe);
  EXPECT_EQ(q.codes(), (std::vector<std::string>{"plan-overlap"})) << q.findings();
}

// A delegate's arguments are its inputs, then its flattened returns
// (exir/emit/_emitter.py _emit_delegate), with nothing in the file saying
// where one ends: an argument nothing has written is taken as an output.
// Every argument is live at the call.
//   0: delegate(x, o1, o2)     x read; o1, o2 written
//   1: r = add(o1, o2)
void DelegateProgram(ProgramBuilder& b, uint64_t o1_offset) {
  auto& m = b.AddMethod("forward");
  uint32_t x = m.Tensor(F32(4, 0));
  uint32_t o1 = m.Tensor(F32(4, o1_offset));
  uint32_t o2 = m.Tensor(F32(4, 32));
  uint32_t r = m.Tensor(F32(4, 48));
  uint32_t d = m.Delegate("XnnpackBackend", Bytes::Own(std::vector<uint8_t>(8, 7)));
  m.DelegateCall(d, {I(x), I(o1), I(o2)});
  m.KernelCall(m.Operator("aten::add", "out"), {I(o1), I(o2), I(r), I(r)});
  m.Inputs({I(x)});
  m.Outputs({I(r)});
  m.PlannedBufferSizes({0, 64});
}

TEST(PlanLifetimes, DelegateArgumentsNothingWroteAreOutputs) {
  ProgramBuilder b;
  DelegateProgram(b, 16);
  Built p = Build(b);
  ASSERT_TRUE(p.m().derived()) << p.m().not_checked;
  EXPECT_EQ(p.m().delegate_outputs, (std::vector<std::pair<uint32_t, uint32_t>>{{0, 1}, {0, 2}}));
  EXPECT_EQ(p.readers(0), (std::vector<uint32_t>{0}));
  EXPECT_EQ(p.writers(1), (std::vector<uint32_t>{0}));
  EXPECT_EQ(p.live(0), (Runs{{0, 0}}));
  EXPECT_EQ(p.live(1), (Runs{{0, 1}}));
  EXPECT_TRUE(p.file->ok()) << p.findings();
  ProgramBuilder unsafe;
  DelegateProgram(unsafe, 0);  // an output over the input of the same call
  EXPECT_EQ(Build(unsafe).codes(), (std::vector<std::string>{"plan-overlap"}));
}

// Chains run one after the other (runtime/executor/method.cpp Method::step
// moves to chain c + 1 at the end of chain c): indices count on.
const char* kTwoChains = R"({"execution_plan": [{
  "name": "forward",
  "values": [
    {"val_type": "Tensor", "val": {"scalar_type": "FLOAT", "sizes": [4], "dim_order": [0],
                                   "allocation_info": {"memory_id": 1, "memory_offset_low": 0}}},
    {"val_type": "Tensor", "val": {"scalar_type": "FLOAT", "sizes": [4], "dim_order": [0],
                                   "allocation_info": {"memory_id": 1, "memory_offset_low": 16}}},
    {"val_type": "Tensor", "val": {"scalar_type": "FLOAT", "sizes": [4], "dim_order": [0],
                                   "allocation_info": {"memory_id": 1, "memory_offset_low": R_OFFSET}}}],
  "inputs": [0], "outputs": [2],
  "chains": [
    {"inputs": [0], "outputs": [1], "instructions": [
      {"instr_args_type": "KernelCall", "instr_args": {"op_index": 0, "args": [0, 0, 1, 1]}}]},
    {"inputs": [1], "outputs": [2], "instructions": [
      {"instr_args_type": "KernelCall", "instr_args": {"op_index": 1, "args": [1, 1, 2, 2]}}]}],
  "operators": [{"name": "aten::add", "overload": "out"}, {"name": "aten::mul", "overload": "out"}],
  "delegates": [], "non_const_buffer_sizes": [0, 48]}]})";

std::string Replace(std::string s, const std::string& what, const std::string& with) {
  return s.replace(s.find(what), what.size(), with);
}

TEST(PlanLifetimes, ChainsRunOneAfterTheOther) {
  Built p = BuildJson(Replace(kTwoChains, "R_OFFSET", "32"));
  ASSERT_TRUE(p.m().derived()) << p.m().not_checked;
  EXPECT_EQ(p.m().chain_starts, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(p.m().instruction_count, 2u);
  EXPECT_EQ(p.live(1), (Runs{{0, 1}}));
  EXPECT_EQ(p.live(2), (Runs{{1, 1}}));
  EXPECT_EQ(InstructionLabel(*p.file->program(), p.m(), 1), "aten::mul.out");
  EXPECT_TRUE(p.file->ok()) << p.findings();
  // The result over its own input: both live at instruction 1 (upstream
  // lifetimes are inclusive, so an input and an output of one node never
  // share bytes).
  Built q = BuildJson(Replace(kTwoChains, "R_OFFSET", "16"));
  EXPECT_EQ(q.codes(), (std::vector<std::string>{"plan-overlap"})) << q.findings();
}

// ---- What the model refuses to derive.

// A backward jump whose loop nothing can end: the runtime runs until its
// instruction limit (runtime/executor/method.cpp kMaxInstructions).
TEST(PlanChecks, LoopWithNoExit) {
  ProgramBuilder b;
  auto& m = b.AddMethod("forward");
  uint32_t x = m.Tensor(F32(4, 0));
  uint32_t y = m.Tensor(F32(4, 16));
  uint32_t no = m.Bool(false);
  m.KernelCall(m.Operator("aten::add", "out"), {I(x), I(x), I(y), I(y)});
  m.JumpFalse(I(no), 0);
  m.Inputs({I(x)});
  m.Outputs({I(y)});
  m.PlannedBufferSizes({0, 32});
  Built p = Build(b);
  ASSERT_EQ(p.codes(), (std::vector<std::string>{"plan-loop-no-exit"})) << p.findings();
  EXPECT_TRUE(p.m().blocked);
  const auto* jf = p.file->program()->execution_plan()->Get(0)->chains()->Get(0)->instructions()->Get(1);
  EXPECT_EQ(*p.file->report().findings()[0].offset,
            static_cast<uint64_t>(reinterpret_cast<const uint8_t*>(jf->instr_args()) - p.file->file().data));
}

// Upstream moves a branch's output into the shared value (exir/emit/_emitter.py
// output()); moves in a cycle leave which bytes each value uses to the order
// the moves last ran in.
TEST(PlanChecks, MoveCallCycle) {
  ProgramBuilder b;
  auto& m = b.AddMethod("forward");
  uint32_t x = m.Tensor(F32(4, 0));
  uint32_t a = m.Tensor(F32(4, 16));
  uint32_t c = m.Tensor(F32(4, 32));
  uint32_t r = m.Tensor(F32(4, 48));
  m.KernelCall(m.Operator("aten::add", "out"), {I(x), I(x), I(a), I(a)});
  m.Move(I(a), I(c));
  m.Move(I(c), I(a));
  m.KernelCall(m.Operator("aten::add", "out"), {I(a), I(c), I(r), I(r)});
  m.Inputs({I(x)});
  m.Outputs({I(r)});
  m.PlannedBufferSizes({0, 64});
  Built p = Build(b);
  ASSERT_EQ(p.codes(), (std::vector<std::string>{"plan-move-cycle"})) << p.findings();
  EXPECT_NE(p.file->report().findings()[0].message.find("instruction 2 (MoveCall) moves values[2] into values[1]"),
            std::string::npos);
}

// A value used before the MoveCall that re-points it holds its own bytes in
// the first call and the source's in every later one: not derived, said
// once, and `verify` lists it under "not checked".
TEST(PlanChecks, UseBeforeMoveIsNotChecked) {
  ProgramBuilder b;
  auto& m = b.AddMethod("forward");
  uint32_t x = m.Tensor(F32(4, 0));
  uint32_t a = m.Tensor(F32(4, 16));
  uint32_t o = m.Tensor(F32(4, 32));
  uint32_t r = m.Tensor(F32(4, 48));
  m.KernelCall(m.Operator("aten::add", "out"), {I(x), I(x), I(o), I(o)});
  m.KernelCall(m.Operator("aten::add", "out"), {I(o), I(x), I(a), I(a)});
  m.Move(I(a), I(o));
  m.KernelCall(m.Operator("aten::add", "out"), {I(o), I(x), I(r), I(r)});
  m.Inputs({I(x)});
  m.Outputs({I(r)});
  m.PlannedBufferSizes({0, 64});
  Built p = Build(b);
  EXPECT_EQ(p.codes(), (std::vector<std::string>{"plan-not-checked"})) << p.findings();
  EXPECT_TRUE(p.file->ok());
  EXPECT_FALSE(p.m().derived());
  const std::string path = testing::TempDir("plan_not_checked") + "/m.pte";
  testing::WriteFile(path, p.bytes);
  VerifyResult v = Verify(path);
  EXPECT_TRUE(v.valid);
  ASSERT_EQ(v.not_checked.size(), 1u);
  EXPECT_NE(v.not_checked[0].find("method \"forward\": memory plan not checked: values[2] is used before the MoveCall"),
            std::string::npos)
      << v.not_checked[0];
  const std::string json = VerifyJson(path);
  EXPECT_NE(json.find("\"not_checked\": [\n    \"method \\\"forward\\\": memory plan not checked"), std::string::npos)
      << json;
}

// ---- Several methods: state they keep in one buffer (share_mutable_buffers,
// exir/passes/memory_planning_pass.py run_multimethod: every spec of one name
// gets mem_id 2 and the same offset, and buffer 2 holds nothing else).
void StateMethod(ProgramBuilder& b, const std::string& name, uint64_t state_offset, bool extra_state = false,
                 std::optional<uint64_t> temp_in_buffer2 = std::nullopt) {
  auto& m = b.AddMethod(name);
  uint32_t x = m.Tensor(F32(4, 0));
  uint32_t st = m.MutableBuffer(F32(4, state_offset, 2), "state");
  uint32_t y = temp_in_buffer2 ? m.Tensor(F32(4, *temp_in_buffer2, 2)) : m.Tensor(F32(4, 16));
  uint32_t nb = m.Bool(false);
  m.KernelCall(m.Operator("aten::add", "out"), {I(x), I(st), I(y), I(y)});
  if (extra_state) {
    uint32_t other = m.MutableBuffer(F32(4, 16, 2), "other");
    m.KernelCall(m.Operator("aten::copy_"), {I(other), I(y), I(nb), I(other)});
  }
  m.KernelCall(m.Operator("aten::copy_"), {I(st), I(y), I(nb), I(st)});
  m.Inputs({I(x)});
  m.Outputs({I(y)});
  m.PlannedBufferSizes({0, 32, 32});
}

BackendConfig Named() {
  BackendConfig cfg;
  cfg.emit_mutable_buffer_names = true;
  return cfg;
}

TEST(PlanLifetimes, StateSharedByMethodsKeepsItsOffset) {
  ProgramBuilder b;
  StateMethod(b, "forward", 0);
  StateMethod(b, "reset", 0, /*extra_state=*/true);
  Built p = Build(b, Named());
  ASSERT_EQ(p.lt.shared.size(), 1u);
  EXPECT_EQ(p.lt.shared[0].name, "state");
  EXPECT_EQ(p.lt.shared[0].memory_id, 2u);
  EXPECT_EQ(p.lt.shared[0].uses.size(), 2u);
  EXPECT_TRUE(p.storage(1, 0).shared_across_methods);
  const auto views = PlanViews(*p.file->program(), p.lt);
  ASSERT_EQ(views.size(), 2u);
  ASSERT_EQ(views[0].buffers.size(), 2u);
  const PlanBufferView& b2 = views[0].buffers[1];
  EXPECT_EQ(b2.memory_id, 2u);
  ASSERT_EQ(b2.blocks.size(), 1u);
  ASSERT_TRUE(b2.blocks[0].fixed_offset.has_value());
  EXPECT_EQ(*b2.blocks[0].fixed_offset, 0u);
  EXPECT_TRUE(p.file->ok()) << p.findings();
}

TEST(PlanChecks, SharedStateAtOtherBytes) {
  ProgramBuilder b;
  StateMethod(b, "forward", 0);
  StateMethod(b, "reset", 16);
  Built p = Build(b, Named());
  ASSERT_EQ(p.codes(), (std::vector<std::string>{"plan-shared-state-mismatch"})) << p.findings();
  EXPECT_NE(p.file->report().findings()[0].message.find("method \"reset\": state \"state\" is at bytes [16, 32)"),
            std::string::npos);
}

TEST(PlanChecks, TemporaryOverAnotherMethodsState) {
  ProgramBuilder b;
  StateMethod(b, "forward", 0);
  StateMethod(b, "reset", 0, /*extra_state=*/true);                // "other" at bytes [16, 32) of buffer 2
  StateMethod(b, "step", 0, /*extra_state=*/false, uint64_t{16});  // a temporary there
  Built p = Build(b, Named());
  ASSERT_EQ(p.codes(), (std::vector<std::string>{"plan-overlap"})) << p.findings();
  EXPECT_NE(p.file->report().findings()[0].message.find("which hold state values[4] \"other\""), std::string::npos)
      << p.findings();
}

// The shared_state rule program (tests/conformance/plan_programs.cpp) as
// share_mutable_buffers plans it (run_multimethod: every mutable buffer in
// memory_id 2, one offset per name; _check_default_mem_ids: the rest in 1):
//   step: 0: t = s1 + x   1: s1.copy_(t)   2: r = -t       values x0 s1 1 t2 r3
//   read: 0: w = s1 * y   1: z = w + s2                    values y0 s1 1 s2 2 w3 z4
// s1 at bytes [0, 16) of buffer 2 in both, s2 (only `read` names it) at
// [16, 32). Names are not emitted (upstream's default): the initial data
// tells s1 from s2, and equal initial data is stored once
// (cached_spec_mutable_hash_values), so both methods' s1 index one entry.
struct SharedPlan {
  PlannedLocation step_s1{2, 0};
  PlannedLocation step_t{1, 16};
  PlannedLocation read_s1{2, 0};
  PlannedLocation read_s2{2, 16};
};
PackageParts SharedStateProgram(const SharedPlan& at) {
  ProgramBuilder b;
  const std::vector<uint8_t> s1(16, 1), s2(16, 2);
  {
    auto& m = b.AddMethod("step");
    uint32_t x = m.Tensor(F32(4, 0));
    uint32_t s = m.MutableBuffer({ScalarType::kFloat, {4}, at.step_s1}, "state.s1", Bytes::Own(s1));
    uint32_t t = m.Tensor({ScalarType::kFloat, {4}, at.step_t});
    uint32_t r = m.Tensor(F32(4, 32));
    uint32_t one = m.Int(1), nb = m.Bool(false);
    m.KernelCall(m.Operator("aten::add", "out"), {I(s), I(x), I(one), I(t), I(t)});
    m.KernelCall(m.Operator("aten::copy_"), {I(s), I(t), I(nb), I(s)});
    m.KernelCall(m.Operator("aten::neg", "out"), {I(t), I(r), I(r)});
    m.Inputs({I(x)});
    m.Outputs({I(r)});
    m.PlannedBufferSizes({0, 64, 32});
  }
  {
    auto& m = b.AddMethod("read");
    uint32_t y = m.Tensor(F32(4, 0));
    uint32_t a = m.MutableBuffer({ScalarType::kFloat, {4}, at.read_s1}, "state.s1", Bytes::Own(s1));
    uint32_t c = m.MutableBuffer({ScalarType::kFloat, {4}, at.read_s2}, "state.s2", Bytes::Own(s2));
    uint32_t w = m.Tensor(F32(4, 16));
    uint32_t z = m.Tensor(F32(4, 32));
    uint32_t one = m.Int(1);
    m.KernelCall(m.Operator("aten::mul", "out"), {I(a), I(y), I(w), I(w)});
    m.KernelCall(m.Operator("aten::add", "out"), {I(w), I(c), I(one), I(z), I(z)});
    m.Inputs({I(y)});
    m.Outputs({I(z)});
    m.PlannedBufferSizes({0, 64, 32});
  }
  return PartsOf(b.Build());
}

uint64_t AllocationAt(const Built& p, size_t method, uint32_t value) {
  const auto* ai = p.file->program()
                       ->execution_plan()
                       ->Get(static_cast<flatbuffers::uoffset_t>(method))
                       ->values()
                       ->Get(value)
                       ->val_as_Tensor()
                       ->allocation_info();
  return static_cast<uint64_t>(reinterpret_cast<const uint8_t*>(ai) - p.file->file().data);
}

TEST(PlanLifetimes, StateOnlyOneMethodNamesIsSharedToo) {
  Built p = Build(SharedStateProgram({}));
  EXPECT_TRUE(p.file->ok()) << p.findings();
  // s1 in both methods; s2, which only `read` keeps, still may not move.
  ASSERT_EQ(p.lt.shared.size(), 1u);
  EXPECT_EQ(p.lt.shared[0].memory_id, 2u);
  EXPECT_EQ(p.lt.shared[0].name, "");
  EXPECT_EQ(p.lt.shared[0].uses.size(), 2u);
  EXPECT_TRUE(p.storage(1, 0).shared_across_methods);
  EXPECT_TRUE(p.storage(1, 1).shared_across_methods);
  EXPECT_TRUE(p.storage(2, 1).shared_across_methods);
  EXPECT_FALSE(p.storage(3, 1).shared_across_methods);
}

// step's t at [16, 32) of buffer 2: step holds s1 and a temporary there, so
// step no longer keeps "nothing but state" in it; read still does (and keeps
// the rest in buffer 1), so the buffer is shared. t is written at step's
// instruction 0 over read's s2, which read reads at its instruction 1 on the
// next call: one plan-overlap, at t's allocation_info.
TEST(PlanChecks, TemporaryOverStateOnlyTheOtherMethodKeeps) {
  SharedPlan at;
  at.step_t = {2, 16};
  Built p = Build(SharedStateProgram(at));
  ASSERT_EQ(p.codes(), (std::vector<std::string>{"plan-overlap"})) << p.findings();
  const Finding& f = p.file->report().findings()[0];
  EXPECT_NE(f.message.find("method \"step\": values[2] (FLOAT[4]) uses bytes [16, 32) of planned buffer 2, which "
                           "hold state values[2] (FLOAT[4]) of method \"read\" (bytes [16, 32)) between calls"),
            std::string::npos)
      << f.message;
  ASSERT_TRUE(f.offset.has_value());
  EXPECT_EQ(*f.offset, AllocationAt(p, 0, 2));

  // step's s1 at [16, 32) instead: two states (different initial data, so
  // not the same one) on the same bytes, said once, at the first method's.
  SharedPlan onto;
  onto.step_s1 = {2, 16};
  Built q = Build(SharedStateProgram(onto));
  ASSERT_EQ(q.codes(), (std::vector<std::string>{"plan-overlap"})) << q.findings();
  EXPECT_NE(q.file->report().findings()[0].message.find(
                "method \"step\": values[1] (FLOAT[4]) uses bytes [16, 32) of planned buffer 2, which hold state "
                "values[2] (FLOAT[4]) of method \"read\""),
            std::string::npos)
      << q.findings();
}

// read's s1 in its own buffer 1 at [48, 64) (free there): read reads the
// initial s1 on every call, never what step wrote at [0, 16) of the shared
// buffer 2. Buffer 2 is still shared (step keeps s1 apart there, read keeps
// s2), and read's s1 has step's s1's initial data and size and read keeps
// nothing like it in buffer 2: one plan-shared-state-mismatch at read's s1.
TEST(PlanChecks, StateMovedOutOfTheSharedBuffer) {
  SharedPlan at;
  at.read_s1 = {1, 48};
  Built p = Build(SharedStateProgram(at));
  ASSERT_EQ(p.codes(), (std::vector<std::string>{"plan-shared-state-mismatch"})) << p.findings();
  const Finding& f = p.file->report().findings()[0];
  EXPECT_NE(f.message.find("method \"read\": state values[1] (FLOAT[4]) is at bytes [48, 64) of planned buffer 1, "
                           "but method \"step\" keeps state with the same initial data and size, values[1] "
                           "(FLOAT[4]), at bytes [0, 16) of planned buffer 2"),
            std::string::npos)
      << f.message;
  EXPECT_EQ(f.expected, "bytes [0, 16) of planned buffer 2");
  EXPECT_EQ(f.found, "bytes [48, 64) of planned buffer 1");
  ASSERT_TRUE(f.offset.has_value());
  EXPECT_EQ(*f.offset, AllocationAt(p, 1, 1));

  // The other way round: step's s1 at [48, 64) of its buffer 1 (step then
  // keeps nothing in buffer 2; read keeps s1 and s2 apart there, and step's
  // s1 is a copy of read's): step updates its own copy, read never sees it.
  SharedPlan back;
  back.step_s1 = {1, 48};
  Built q = Build(SharedStateProgram(back));
  ASSERT_EQ(q.codes(), (std::vector<std::string>{"plan-shared-state-mismatch"})) << q.findings();
  EXPECT_NE(q.file->report().findings()[0].message.find(
                "method \"step\": state values[1] (FLOAT[4]) is at bytes [48, 64) of planned buffer 1, but method "
                "\"read\" keeps state with the same initial data and size"),
            std::string::npos)
      << q.findings();

  // With names: the same state by name, wherever it is.
  Built n = Build(SharedStateProgram(at), Named());
  ASSERT_EQ(n.codes(), (std::vector<std::string>{"plan-shared-state-mismatch"})) << n.findings();
  EXPECT_NE(n.file->report().findings()[0].message.find(
                "method \"read\": state \"state.s1\" is at bytes [48, 64) of planned buffer 1, but at bytes [0, 16) of "
                "planned buffer 2 in method \"step\""),
            std::string::npos)
      << n.findings();
}

// A finding's text is built only when it is reported, from the method's
// lifetimes derived again (the reader) or from the lifetimes given
// (CheckMemoryPlan with a ProgramLifetimes): both give the reader's findings,
// whose texts the two tests above hold to the hand-derived ones.
TEST(PlanChecks, SharedStateTextsAreTheSameFromEitherLifetimes) {
  SharedPlan moved, back, onto;
  moved.read_s1 = {1, 48};
  back.step_s1 = {1, 48};
  onto.step_s1 = {2, 16};
  for (const SharedPlan& at : {moved, back, onto}) {
    for (const BackendConfig& cfg : {BackendConfig{}, Named()}) {
      Built p = Build(SharedStateProgram(at), cfg);
      ASSERT_FALSE(p.file->report().findings().empty());
      const auto* program = executorch_flatbuffer::GetProgram(p.bytes.data());
      const ProgramLifetimes lt = DeriveLifetimes(*program);
      Report given("plan.pte"), derived("plan.pte");
      const Bytes view = Bytes::View(p.bytes.data(), p.bytes.size());
      CheckMemoryPlan(Where{given, view, view.size}, *program, lt);
      CheckMemoryPlan(Where{derived, view, view.size}, *program);
      for (const Report* r : {&given, &derived}) {
        ASSERT_EQ(r->findings().size(), p.file->report().findings().size());
        for (size_t i = 0; i < r->findings().size(); ++i) {
          EXPECT_EQ(r->findings()[i].code, p.file->report().findings()[i].code);
          EXPECT_EQ(r->findings()[i].message, p.file->report().findings()[i].message);
          EXPECT_EQ(r->findings()[i].offset, p.file->report().findings()[i].offset);
        }
      }
    }
  }
}

// What must stay clean: s2 (only read has it) moved to read's buffer 1 (no
// other method sees it, nothing changes); and both methods planned the
// default way (everything in buffer 1, each method its own buffers), where
// read's w sits on the bytes step keeps s1 at and s1 is at other bytes in
// each method, named or not.
TEST(PlanChecks, StateNoOtherMethodSharesIsItsOwn) {
  SharedPlan at;
  at.read_s2 = {1, 48};
  Built p = Build(SharedStateProgram(at));
  EXPECT_TRUE(p.file->ok()) << p.findings();

  for (const BackendConfig& cfg : {BackendConfig{}, Named()}) {
    ProgramBuilder b;
    const std::vector<uint8_t> s1(16, 1), s2(16, 2);
    {
      auto& m = b.AddMethod("step");
      uint32_t x = m.Tensor(F32(4, 0));
      uint32_t s = m.MutableBuffer(F32(4, 16), "state.s1", Bytes::Own(s1));
      uint32_t t = m.Tensor(F32(4, 32));
      uint32_t nb = m.Bool(false), one = m.Int(1);
      m.KernelCall(m.Operator("aten::add", "out"), {I(s), I(x), I(one), I(t), I(t)});
      m.KernelCall(m.Operator("aten::copy_"), {I(s), I(t), I(nb), I(s)});
      m.Inputs({I(x)});
      m.Outputs({I(t)});
      m.PlannedBufferSizes({0, 64});
    }
    {
      auto& m = b.AddMethod("read");
      uint32_t y = m.Tensor(F32(4, 0));
      uint32_t a = m.MutableBuffer(F32(4, 32), "state.s1", Bytes::Own(s1));
      uint32_t c = m.MutableBuffer(F32(4, 48), "state.s2", Bytes::Own(s2));
      uint32_t w = m.Tensor(F32(4, 16));  // step's s1's bytes
      uint32_t z = m.Tensor(F32(4, 0));   // y's (y is last read at 0)
      uint32_t one = m.Int(1);
      m.KernelCall(m.Operator("aten::mul", "out"), {I(a), I(y), I(w), I(w)});
      m.KernelCall(m.Operator("aten::add", "out"), {I(w), I(c), I(one), I(z), I(z)});
      m.Inputs({I(y)});
      m.Outputs({I(z)});
      m.PlannedBufferSizes({0, 64});
    }
    Built d = Build(b, cfg);
    EXPECT_TRUE(d.file->ok()) << d.findings();
    EXPECT_TRUE(d.lt.shared.empty());
  }
}

// ---- What plan, size, inspect and map --memory read.
TEST(PlanLifetimes, PlanViewsOfAMethod) {
  ProgramBuilder b;
  auto& m = b.AddMethod("forward");
  uint32_t x = m.Tensor(F32(4, 0));
  uint32_t t1 = m.Tensor(F32(4, 16));
  uint32_t t2 = m.Tensor(F32(8, 32));
  uint32_t idle = m.Tensor(F32(4, 64));
  m.KernelCall(m.Operator("aten::add", "out"), {I(x), I(x), I(t1), I(t1)});
  m.KernelCall(m.Operator("aten::cat", "out"), {I(t1), I(x), I(t2), I(t2)});
  m.Inputs({I(x)});
  m.Outputs({I(t2)});
  m.PlannedBufferSizes({0, 96});
  (void)idle;
  Built p = Build(b);
  const auto views = PlanViews(*p.file->program(), p.lt);
  ASSERT_EQ(views.size(), 1u);
  ASSERT_EQ(views[0].buffers.size(), 1u);
  const PlanBufferView& v = views[0].buffers[0];
  EXPECT_EQ(v.size, 96);
  EXPECT_EQ(v.used_end, 80u);
  EXPECT_EQ(v.alignment, 16u);  // offsets 0, 16, 32, 64
  ASSERT_EQ(v.blocks.size(), 3u);
  EXPECT_EQ(v.offsets, (std::vector<uint64_t>{0, 16, 32}));
  // x [0, 1], t1 [0, 1], t2 [1, 1]: at instruction 1 all three are live,
  // 16 + 16 + 32 bytes = 64, the lower bound.
  EXPECT_EQ(v.blocks[0].first, 0u);
  EXPECT_EQ(v.blocks[0].last, 1u);
  EXPECT_EQ(v.blocks[2].size, 32u);
  EXPECT_EQ(v.lower_bound, 64u);
  EXPECT_EQ(v.idle_values, (std::vector<uint32_t>{3}));
  EXPECT_EQ(p.t(3).origin, PlanOrigin::kUnused);
}

// ---- Real files: no plan finding, every method derived. What the model
// says about keyword_spotting.pte was read off the file by hand (flatc
// --json): instruction 13 (cortex_m::quantized_avg_pool2d.out) writes
// values[257] (CHAR[1, 64, 1, 1], 64 bytes at 8256) and takes values[256]
// (BYTE[256] at 8000, written by nothing: its scratch buffer); instruction
// 14 reads values[271] (CHAR[1, 64] at 8256, written by nothing: the static
// view of values[257]); the size-0 scratch tensors values[90], values[113],
// ... hold no bytes.
TEST(PlanFixtures, NoPlanFindings) {
  size_t files = 0, methods = 0, planned = 0;
  for (const std::string& name : testing::PteFixtures()) {
    auto f = PteFile::Open(testing::FixturePath(name));
    ASSERT_NE(f->program(), nullptr) << name;
    for (const auto& x : f->report().findings()) {
      EXPECT_NE(x.code.rfind("plan-", 0), 0u) << name << ": " << x.ToString();
    }
    ProgramLifetimes lt = DeriveLifetimes(*f->program());
    for (const MethodLifetimes& m : lt.methods) {
      EXPECT_TRUE(m.derived()) << name << " " << m.name << ": " << m.not_checked;
      EXPECT_TRUE(m.problems.empty()) << name << " " << m.name;
      methods += 1;
      planned += m.tensors.size();
    }
    ++files;
  }
  std::printf("[plan] %zu fixtures, %zu methods, %zu planned tensors: 0 plan findings\n", files, methods, planned);
}

TEST(PlanFixtures, KeywordSpottingViewAndScratch) {
  auto f = PteFile::Open(testing::FixturePath("keyword_spotting.pte"));
  ASSERT_NE(f->program(), nullptr);
  ProgramLifetimes lt = DeriveLifetimes(*f->program());
  const MethodLifetimes& m = lt.methods.at(0);
  ASSERT_TRUE(m.derived()) << m.not_checked;
  ASSERT_NE(m.Tensor(271), nullptr);
  EXPECT_EQ(m.Tensor(271)->origin, PlanOrigin::kView);
  EXPECT_EQ(m.Tensor(271)->storage, m.Tensor(257)->storage);
  const PlanStorage& s = m.storages[m.Tensor(257)->storage];
  ASSERT_EQ(s.live.size(), 1u);
  EXPECT_EQ(s.live[0].first, 13u);
  EXPECT_EQ(s.live[0].last, 14u);
  EXPECT_EQ(m.Tensor(256)->origin, PlanOrigin::kUnwritten);
  EXPECT_EQ(m.Readers(*m.Tensor(256)).ToVector(), (std::vector<uint32_t>{13}));
  EXPECT_EQ(m.Tensor(90)->origin, PlanOrigin::kEmpty);
  EXPECT_EQ(m.Tensor(83)->origin, PlanOrigin::kInput);
}

// The plan seeds of tests/fuzz/seeds (plan_*.pte): the programs above,
// written once with
//   PTEPACK_PLAN_SEEDS=tests/fuzz/seeds build-rel/tests/ptepack_tests
//     --gtest_also_run_disabled_tests --gtest_filter='PlanLifetimes.DISABLED_WriteFuzzSeeds'
TEST(PlanLifetimes, DISABLED_WriteFuzzSeeds) {
  const char* dir = std::getenv("PTEPACK_PLAN_SEEDS");
  ASSERT_NE(dir, nullptr) << "set PTEPACK_PLAN_SEEDS to the seeds directory";
  auto write = [&](const std::string& name, const ProgramBuilder& b, const BackendConfig& cfg = {}) {
    testing::WriteFile(std::string(dir) + "/" + name, RenderPte(LayoutPte(PartsOf(b.Build()), cfg)));
  };
  {
    ProgramBuilder b;
    CondProgram(b, 64);
    write("plan_cond_move.pte", b);
  }
  {
    ProgramBuilder b;
    LoopProgram(b, 32);
    write("plan_loop.pte", b);
  }
  {
    ProgramBuilder b;
    ViewProgram(b, 32, 16);
    write("plan_static_view.pte", b);
  }
  {
    ProgramBuilder b;
    EtViewProgram(b, 48);
    write("plan_et_view.pte", b);
  }
  {
    ProgramBuilder b;
    DelegateProgram(b, 16);
    write("plan_delegate_outputs.pte", b);
  }
  {
    ProgramBuilder b;
    StateMethod(b, "forward", 0);
    StateMethod(b, "reset", 0, /*extra_state=*/true);
    write("plan_shared_state.pte", b, Named());
  }
  // Unnamed state share_mutable_buffers-style (one method keeps its state
  // apart in buffer 2), as planned and with read's s1 moved to buffer 1.
  testing::WriteFile(std::string(dir) + "/plan_shared_unnamed.pte",
                     RenderPte(LayoutPte(SharedStateProgram({}), BackendConfig{})));
  SharedPlan moved;
  moved.read_s1 = {1, 48};
  testing::WriteFile(std::string(dir) + "/plan_shared_moved_out.pte",
                     RenderPte(LayoutPte(SharedStateProgram(moved), BackendConfig{})));
}

// The straight-line fast path and the general dataflow give the same
// lifetimes: on every fixture, and on 300 random straight-line programs
// (kernels reading earlier tensors and writing new ones or in place,
// delegates, static views, state, random offsets, so that some plans are
// unsafe).
std::string Dump(const ProgramLifetimes& lt) {
  std::string s;
  for (const MethodLifetimes& m : lt.methods) {
    s += m.name + " nc=" + m.not_checked + "\n";
    for (const PlannedTensor& t : m.tensors) {
      s += " v" + std::to_string(t.value) + " " + PlanOriginName(t.origin) + " s" + std::to_string(t.storage) + " w";
      for (uint32_t i : m.Writers(t)) s += std::to_string(i) + ",";
      s += " r";
      for (uint32_t i : m.Readers(t)) s += std::to_string(i) + ",";
      s += "\n";
    }
    for (const PlanStorage& st : m.storages) {
      s += " storage";
      for (uint32_t v : st.values) s += " v" + std::to_string(v);
      for (const LiveRun& r : st.live) s += " [" + std::to_string(r.first) + "," + std::to_string(r.last) + "]";
      s += "\n";
    }
    for (const PlanProblem& pr : m.problems) s += " " + pr.code + ": " + pr.message + "\n";
    for (const auto& [i, v] : m.delegate_outputs) s += " out " + std::to_string(i) + ":" + std::to_string(v) + "\n";
  }
  return s;
}

std::pair<std::string, std::string> BothPaths(const executorch_flatbuffer::Program& p) {
  const std::string fast = Dump(DeriveLifetimes(p));
  g_plan_lifetimes_general_only = true;
  const std::string general = Dump(DeriveLifetimes(p));
  g_plan_lifetimes_general_only = false;
  return {fast, general};
}

TEST(PlanLifetimes, FastPathAgreesWithTheGeneralDataflow) {
  for (const std::string& name : testing::PteFixtures()) {
    auto f = PteFile::Open(testing::FixturePath(name));
    ASSERT_NE(f->program(), nullptr);
    auto [fast, general] = BothPaths(*f->program());
    EXPECT_EQ(fast, general) << name;
  }
  uint64_t state = 12345;
  auto rnd = [&](uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  };
  size_t findings = 0;
  for (int prog = 0; prog < 300; ++prog) {
    ProgramBuilder b;
    auto& m = b.AddMethod("forward");
    std::vector<int32_t> tensors;
    auto tensor = [&](int n) {
      uint64_t off = 16 * rnd(12);
      if (rnd(6) == 0) return I(m.MutableBuffer(F32(n, off), "s" + std::to_string(tensors.size())));
      return I(m.Tensor(F32(n, off)));
    };
    const int32_t x = tensor(4);
    tensors.push_back(x);
    const uint32_t add = m.Operator("aten::add", "out");
    const uint32_t addi = m.Operator("aten::add_", "Tensor");
    const uint32_t del = m.Delegate("Backend", Bytes::Own(std::vector<uint8_t>(4, 1)));
    const int steps = 1 + static_cast<int>(rnd(10));
    for (int k = 0; k < steps; ++k) {
      const int32_t a = tensors[rnd(tensors.size())];
      const int32_t c = tensors[rnd(tensors.size())];
      switch (rnd(5)) {
        case 0:  // in place
          m.KernelCall(addi, {a, c, a});
          break;
        case 1: {  // a delegate with a new output
          const int32_t o = tensor(4);
          m.DelegateCall(del, {a, o});
          tensors.push_back(o);
          break;
        }
        case 2: {  // a static view of an earlier tensor, read later
          const int32_t v = I(m.Tensor({ScalarType::kFloat, {2, 2}, PlannedLocation{1, 16 * rnd(12)}}));
          const int32_t o = tensor(4);
          m.KernelCall(add, {v, c, o, o});
          tensors.push_back(o);
          break;
        }
        default: {
          const int32_t o = tensor(4);
          m.KernelCall(add, {a, c, o, o});
          tensors.push_back(o);
          break;
        }
      }
    }
    m.Inputs({x});
    m.Outputs({tensors.back()});
    m.PlannedBufferSizes({0, 256});
    BackendConfig cfg;
    cfg.emit_mutable_buffer_names = rnd(2) == 0;
    std::vector<uint8_t> bytes = RenderPte(LayoutPte(PartsOf(b.Build()), cfg));
    auto f = PteFile::FromBytes(Bytes::Copy(bytes.data(), bytes.size()), "random.pte");
    ASSERT_NE(f->program(), nullptr);
    for (const auto& x2 : f->report().findings()) findings += x2.code.rfind("plan-", 0) == 0;
    auto [fast, general] = BothPaths(*f->program());
    ASSERT_EQ(fast, general) << "program " << prog;
  }
  std::printf("[plan] 300 random straight-line programs: fast path = general dataflow; %zu plan findings\n", findings);
  EXPECT_GT(findings, 0u);  // some random plans are unsafe: both paths judge them alike
}

}  // namespace
}  // namespace ptepack
