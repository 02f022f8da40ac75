// Hostile inputs: each way a .pte, .ptd or config can lie, built from a real
// fixture (byte patches for headers and offsets; decode, edit, re-encode for
// valid flatbuffers with bad values), and the exact finding ptepack reports.
// docs/hostile-inputs.md tabulates these cases: keep the two in sync.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "config/backend_config.h"
#include "layout/alignment.h"
#include "ptepack/program_builder.h"
#include "serialize/api/package_access.h"
#include "serialize/format/fbtree.h"
#include "serialize/format/pte_format.h"
#include "serialize/model/program_parts.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "serialize/read/restore.h"
#include "serialize/write/infer_config.h"
#include "serialize/write/pte_writer.h"
#include "tests/fuzz/pipeline.h"
#include "tests/test_util.h"

namespace ptepack {
namespace {

namespace efb = executorch_flatbuffer;
using Buf = std::vector<uint8_t>;
using prog::F;

// ---------------------------------------------------------------- helpers

Buf Fixture(const std::string& name) { return testing::ReadFile(testing::FixturePath(name)); }

std::unique_ptr<PteFile> ReadPte(const Buf& b, const ReadOptions& o = {}) {
  return PteFile::FromBytes(Bytes::Copy(b.data(), b.size()), "hostile.pte", o);
}

std::unique_ptr<PtdFile> ReadPtd(const Buf& b, const ReadOptions& o = {}) {
  return PtdFile::FromBytes(Bytes::Copy(b.data(), b.size()), "hostile.ptd", o);
}

std::string AllFindings(const Report& r) {
  std::string s;
  for (const auto& f : r.findings()) s += "\n  " + f.ToString();
  return s.empty() ? " (none)" : s;
}

// With PTEPACK_HOSTILE_DUMP set, each matched finding is printed as a row
// of the table in docs/hostile-inputs.md, to help keep the two in sync.
void Dump(const Finding& f) {
  if (std::getenv("PTEPACK_HOSTILE_DUMP") == nullptr) return;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::fprintf(stderr, "DUMP| %s.%s | `%s` | %s | %s | %s |\n", info->test_suite_name(), info->name(), f.code.c_str(),
               f.severity == Finding::Severity::kError ? "error" : "warning",
               f.offset ? std::to_string(*f.offset).c_str() : "-", f.message.c_str());
}

// The first error in `r` has `code` and, if given, `offset`.
::testing::AssertionResult FirstError(const Report& r, const std::string& code,
                                      std::optional<uint64_t> offset = std::nullopt) {
  for (const auto& f : r.findings()) {
    if (f.severity != Finding::Severity::kError) continue;
    if (f.code != code) {
      return ::testing::AssertionFailure()
             << "first error is [" << f.code << "], expected [" << code << "]; findings:" << AllFindings(r);
    }
    if (offset && f.offset != offset) {
      return ::testing::AssertionFailure()
             << "[" << code << "] at offset " << (f.offset ? std::to_string(*f.offset) : "none") << ", expected "
             << *offset << "; findings:" << AllFindings(r);
    }
    Dump(f);
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no error, expected [" << code << "]; findings:" << AllFindings(r);
}

// The first error's message ("" when there is none).
std::string FirstErrorMessage(const Report& r) {
  for (const auto& f : r.findings()) {
    if (f.severity == Finding::Severity::kError) return f.message;
  }
  return "";
}

// A warning with `code` at `offset`, and no error at all.
::testing::AssertionResult OnlyWarning(const Report& r, const std::string& code, uint64_t offset) {
  if (!r.ok()) return ::testing::AssertionFailure() << "errors reported:" << AllFindings(r);
  for (const auto& f : r.findings()) {
    if (f.code == code && f.offset == offset) {
      Dump(f);
      return ::testing::AssertionSuccess();
    }
  }
  return ::testing::AssertionFailure() << "no warning [" << code << "] at " << offset << ":" << AllFindings(r);
}

// The error with `code` (first error or not).
const Finding* ErrorWithCode(const Report& r, const std::string& code) {
  for (const auto& f : r.findings()) {
    if (f.severity == Finding::Severity::kError && f.code == code) {
      Dump(f);
      return &f;
    }
  }
  return nullptr;
}

template <typename T>
uint64_t Off(const PteFile& f, const T* p) {
  return static_cast<uint64_t>(reinterpret_cast<const uint8_t*>(p) - f.file().data);
}

void PutU32(Buf& b, size_t at, uint32_t v) { StoreU32(b.data() + at, v); }
void PutU64(Buf& b, size_t at, uint64_t v) { StoreU64(b.data() + at, v); }

// Decodes the program of a .pte, lets `edit` change the tree, encodes it
// again (flatc layout) and puts it back in front of the original segment
// data with an updated eh00 header: a valid flatbuffer carrying whatever bad
// values the edit put in. Segments stay at 128-aligned file offsets.
Buf EditPte(const Buf& file, const std::function<void(fb::Table&)>& edit) {
  auto pte = ReadPte(file);
  if (!pte->program()) throw std::runtime_error("EditPte: input does not verify");
  Bytes fbb = pte->flatbuffer();
  auto tree = fb::Decode(prog::S(), fbb.data, fbb.size, fbb.owner);
  edit(*tree);
  fb::Encoded enc = fb::Encode(prog::S(), *tree, fb::EncodeOptions{});
  if (!pte->header()) return enc.data;
  ExtendedHeader h = *pte->header();
  uint64_t padded =
      AlignUp(h.has_segment_data_size ? kExtendedHeaderLength : kExtendedHeaderMinLength, enc.max_force_align);
  h.program_size = padded + enc.data.size();
  uint64_t old_base = pte->segment_base_offset();
  h.segment_base_offset = old_base == 0 ? 0 : AlignUp(h.program_size, 128);
  Buf hb = EncodeExtendedHeader(h);
  hb.resize(padded, 0);
  Buf out = InsertHeader(enc.data, hb);
  if (old_base != 0) {
    out.resize(h.segment_base_offset, 0);
    out.insert(out.end(), file.begin() + static_cast<std::ptrdiff_t>(old_base), file.end());
  }
  return out;
}

// The same for .ptd files (current or legacy layout).
Buf EditPtd(const Buf& file, const std::function<void(const fb::Schema&, fb::Table&)>& edit) {
  auto ptd = ReadPtd(file);
  if (!ptd->flat_tensor() && !ptd->legacy()) throw std::runtime_error("EditPtd: input does not verify");
  const fb::Schema& s = ptd->legacy() ? fb::FlatTensorLegacySchema() : fb::FlatTensorSchema();
  const FlatTensorHeader& old = ptd->header();
  auto tree = fb::Decode(s, ptd->file().data, old.flatbuffer_offset + old.flatbuffer_size, ptd->file().owner);
  edit(s, *tree);
  fb::Encoded enc = fb::Encode(s, *tree, fb::EncodeOptions{});
  FlatTensorHeader h = old;
  h.flatbuffer_size = enc.data.size();
  h.segment_base_offset = AlignUp(h.flatbuffer_offset + h.flatbuffer_size, 128);
  Buf hb = EncodeFlatTensorHeader(h);
  hb.resize(h.flatbuffer_offset, 0);
  Buf out = InsertHeader(enc.data, hb);
  out.resize(h.segment_base_offset, 0);
  out.insert(out.end(), file.begin() + static_cast<std::ptrdiff_t>(old.segment_base_offset), file.end());
  return out;
}

fb::Table& Elem(fb::Value& v, size_t i) { return *v.elems().at(i).table(); }
fb::Table& Plan(fb::Table& p, size_t i = 0) { return Elem(F(p, "execution_plan"), i); }

fb::Value IntVector(const std::vector<int32_t>& v) {
  Buf raw(v.size() * 4);
  if (!v.empty()) std::memcpy(raw.data(), v.data(), raw.size());
  return fb::ScalarVector(reflection::Int, Bytes::Own(std::move(raw)));
}

fb::Value U64Vector(const std::vector<uint64_t>& v) {
  Buf raw(v.size() * 8);
  if (!v.empty()) std::memcpy(raw.data(), v.data(), raw.size());
  return fb::ScalarVector(reflection::ULong, Bytes::Own(std::move(raw)));
}

std::vector<uint64_t> ReadU64s(const fb::Value& v) {
  std::vector<uint64_t> out(v.scalars().size / 8);
  for (size_t i = 0; i < out.size(); ++i) out[i] = LoadU64(v.scalars().data + 8 * i);
  return out;
}

fb::Value Int(int64_t v) { return fb::ScalarValue(reflection::Int, static_cast<uint32_t>(static_cast<int32_t>(v))); }
fb::Value UInt(uint64_t v) { return fb::UIntValue(reflection::UInt, v); }

size_t NumValues(fb::Table& plan) { return F(plan, "values").elems().size(); }

// First instruction of the given type, in program order.
fb::Table* FindInstr(fb::Table& program, efb::InstructionArguments type) {
  for (auto& plan : F(program, "execution_plan").elems()) {
    for (auto& ch : F(*plan.table(), "chains").elems()) {
      for (auto& ins : F(*ch.table(), "instructions").elems()) {
        if (fb::AsUInt(F(*ins.table(), "instr_args_type")) == static_cast<uint64_t>(type)) {
          return F(*ins.table(), "instr_args").table().get();
        }
      }
    }
  }
  return nullptr;
}

struct TypedInstr {
  const efb::ExecutionPlan* plan = nullptr;
  const efb::Instruction* ins = nullptr;
};
TypedInstr FindTypedInstr(const efb::Program& p, efb::InstructionArguments type) {
  for (const auto* plan : *p.execution_plan()) {
    if (!plan->chains()) continue;
    for (const auto* ch : *plan->chains()) {
      if (!ch->instructions()) continue;
      for (const auto* ins : *ch->instructions()) {
        if (ins->instr_args_type() == type) return {plan, ins};
      }
    }
  }
  return {};
}

// Replaces the first instruction of the first plan with a new one.
fb::Table& ReplaceFirstInstr(fb::Table& program, efb::InstructionArguments type, const char* table) {
  fb::Table& chain = Elem(F(Plan(program), "chains"), 0);
  fb::Table& ins = Elem(F(chain, "instructions"), 0);
  F(ins, "instr_args_type") = fb::UIntValue(reflection::UType, static_cast<uint8_t>(type));
  auto args = prog::New(table);
  F(ins, "instr_args") = fb::TableValue(args);
  return *args;
}

const efb::Instruction* FirstTypedInstr(const PteFile& f) {
  return f.program()->execution_plan()->Get(0)->chains()->Get(0)->instructions()->Get(0);
}

// The first Tensor value whose table satisfies `pred`, with its plan.
fb::Table* FindTensor(fb::Table& program, const std::function<bool(fb::Table&)>& pred) {
  fb::Table* found = nullptr;
  prog::ForEachTensor(program, [&](fb::Table&, uint32_t, fb::Table& t) {
    if (!found && pred(t)) found = &t;
  });
  return found;
}

const efb::Tensor* FindTypedTensor(const PteFile& f, const std::function<bool(const efb::Tensor&)>& pred) {
  for (const auto* plan : *f.program()->execution_plan()) {
    if (!plan->values()) continue;
    for (const auto* v : *plan->values()) {
      const auto* t = v->val_as_Tensor();
      if (t && pred(*t)) return t;
    }
  }
  return nullptr;
}

// Runs the CLI; returns its exit status and what it wrote to stderr.
struct CliResult {
  int status = -1;
  std::string err;
};
CliResult RunCli(const std::string& args, const std::string& tmp) {
  std::string err_path = tmp + "/stderr.txt";
  std::string cmd = std::string(PTEPACK_CLI) + " " + args + " >/dev/null 2>" + err_path;
  int rc = std::system(cmd.c_str());
  CliResult r;
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  std::ifstream in(err_path);
  r.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return r;
}

// ---------------------------------------------------------- .pte headers

TEST(HostilePteHeader, EmptyFile) { EXPECT_TRUE(FirstError(ReadPte({})->report(), "truncated", 0)); }

TEST(HostilePteHeader, ShorterThanRootOffsetAndId) {
  Buf b = Fixture("add.pte");
  b.resize(7);
  EXPECT_TRUE(FirstError(ReadPte(b)->report(), "truncated", 0));
}

TEST(HostilePteHeader, EndsInsideExtendedHeader) {
  Buf b = Fixture("arduino_add.pte");
  b.resize(20);  // "eh00" present, 24..32 bytes needed
  EXPECT_TRUE(FirstError(ReadPte(b)->report(), "truncated", 20));
}

TEST(HostilePteHeader, WrongMagic) {
  Buf b = Fixture("add.pte");
  std::memcpy(b.data() + 4, "XXXX", 4);
  EXPECT_TRUE(FirstError(ReadPte(b)->report(), "bad-magic", 4));
}

TEST(HostilePteHeader, PtdGivenAsPte) {
  auto f = ReadPte(Fixture("linear.ptd"));
  ASSERT_TRUE(FirstError(f->report(), "bad-magic", 4));
  EXPECT_NE(f->report().findings()[0].message.find(".ptd FlatTensor"), std::string::npos);
}

TEST(HostilePteHeader, OtherSchemaVersion) {
  Buf b = Fixture("add.pte");
  std::memcpy(b.data() + 4, "ET11", 4);
  EXPECT_TRUE(FirstError(ReadPte(b)->report(), "unsupported-version", 4));
}

TEST(HostilePteHeader, ExtendedHeaderLengthTooSmall) {
  Buf b = Fixture("arduino_add.pte");
  PutU32(b, 12, 16);
  EXPECT_TRUE(FirstError(ReadPte(b)->report(), "header-length", 12));
}

TEST(HostilePteHeader, ExtendedHeaderLengthPastEof) {
  Buf b = Fixture("arduino_add.pte");
  PutU32(b, 12, 0xFFFFFFF0u);
  EXPECT_TRUE(FirstError(ReadPte(b)->report(), "header-length", 12));
}

TEST(HostilePteHeader, ProgramSizePastEof) {
  Buf b = Fixture("arduino_add.pte");
  PutU64(b, 16, b.size() + 1);
  EXPECT_TRUE(FirstError(ReadPte(b)->report(), "program-size-past-eof", 16));
}

TEST(HostilePteHeader, ProgramSizeSmallerThanHeaders) {
  Buf b = Fixture("arduino_add.pte");
  PutU64(b, 16, 20);
  EXPECT_TRUE(FirstError(ReadPte(b)->report(), "program-size", 16));
}

TEST(HostilePteHeader, SegmentBaseInsideProgram) {
  Buf b = Fixture("arduino_add.pte");
  PutU64(b, 24, 512);  // program_size is 1040
  EXPECT_TRUE(FirstError(ReadPte(b)->report(), "segment-base-overlaps-program", 24));
}

TEST(HostilePteHeader, SegmentBasePastEof) {
  Buf b = Fixture("arduino_add.pte");
  PutU64(b, 24, 4096);
  EXPECT_TRUE(FirstError(ReadPte(b)->report(), "segment-base-past-eof", 24));
}

TEST(HostilePteHeader, SegmentDataSizeWraps) {
  Buf b = Fixture("arduino_add.pte");
  PutU64(b, 32, UINT64_MAX - 100);
  EXPECT_TRUE(FirstError(ReadPte(b)->report(), "segment-overflow", 32));
}

TEST(HostilePteHeader, SegmentDataCutShort) {
  Buf b = Fixture("arduino_add.pte");
  b.resize(b.size() - 2);
  EXPECT_TRUE(FirstError(ReadPte(b)->report(), "truncated", b.size()));
}

// ------------------------------------------------------------- segments

TEST(HostilePteSegments, OffsetPlusSizeWraps) {
  for (auto os : {std::pair<uint64_t, uint64_t>{UINT64_MAX - 1, 4}, {0, UINT64_MAX}}) {
    const uint64_t offset = os.first, size = os.second;
    Buf b = EditPte(Fixture("arduino_add.pte"), [&](fb::Table& p) {
      fb::Table& s = Elem(F(p, "segments"), 0);
      F(s, "offset") = fb::UIntValue(reflection::ULong, offset);
      F(s, "size") = fb::UIntValue(reflection::ULong, size);
    });
    auto f = ReadPte(b);
    EXPECT_TRUE(FirstError(f->report(), "segment-overflow", Off(*f, f->program()->segments()->Get(0))));
  }
}

TEST(HostilePteSegments, BasePlusOffsetWraps) {
  Buf b = EditPte(Fixture("arduino_add.pte"), [](fb::Table& p) {
    F(Elem(F(p, "segments"), 0), "offset") = fb::UIntValue(reflection::ULong, UINT64_MAX - 1000);
  });
  auto f = ReadPte(b);
  EXPECT_TRUE(FirstError(f->report(), "segment-overflow", Off(*f, f->program()->segments()->Get(0))));
}

TEST(HostilePteSegments, Overlapping) {
  Buf b = EditPte(Fixture("arduino_add.pte"), [](fb::Table& p) {
    auto ds = prog::New("DataSegment");
    F(*ds, "offset") = fb::UIntValue(reflection::ULong, 2);
    F(*ds, "size") = fb::UIntValue(reflection::ULong, 2);
    F(p, "segments").mutable_elems().push_back(fb::TableValue(ds));
  });
  auto f = ReadPte(b);
  EXPECT_TRUE(FirstError(f->report(), "segment-overlap", f->segment_base_offset() + 2));
}

TEST(HostilePteSegments, PastEof) {
  Buf b = EditPte(Fixture("arduino_add.pte"),
                  [](fb::Table& p) { F(Elem(F(p, "segments"), 0), "size") = fb::UIntValue(reflection::ULong, 4000); });
  auto f = ReadPte(b);
  ASSERT_TRUE(FirstError(f->report(), "segment-out-of-range", f->segment_base_offset()));
  EXPECT_NE(f->report().findings()[0].message.find("past the end of the file"), std::string::npos);
}

TEST(HostilePteSegments, DataButNoExtendedHeader) {
  Buf b = EditPte(Fixture("add.pte"),
                  [](fb::Table& p) { F(Elem(F(p, "segments"), 0), "size") = fb::UIntValue(reflection::ULong, 16); });
  EXPECT_TRUE(FirstError(ReadPte(b)->report(), "segments-without-header", 8));
}

TEST(HostilePteSegments, NotAtRequestedSegmentAlignment) {
  ReadOptions o;
  o.segment_alignment = 256;  // arduino_add.pte's segment is at 1152 = 9 * 128
  EXPECT_TRUE(FirstError(ReadPte(Fixture("arduino_add.pte"), o)->report(), "segment-misaligned", 1152));
}

TEST(HostilePteSegments, ConstantNotAlignedForItsElementType) {
  // conv2d_quantized.pte: constant 2 (int32 bias, 256 bytes) at 9408 of a
  // 9664-byte constant segment. Move it back 2 bytes.
  Buf b = EditPte(Fixture("conv2d_quantized.pte"), [](fb::Table& p) {
    auto& offs = F(*F(p, "constant_segment").table(), "offsets");
    std::vector<uint64_t> o = ReadU64s(offs);
    ASSERT_EQ(o.size(), 3u);
    ASSERT_EQ(o[2], 9408u);
    o[2] -= 2;
    offs = U64Vector(o);
  });
  auto f = ReadPte(b);
  const efb::Tensor* t = FindTypedTensor(*f, [](const efb::Tensor& t) { return t.data_buffer_idx() == 2; });
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(ScalarTypeSize(static_cast<int>(t->scalar_type())), 4u);
  // ExecuTorch loads such files (constant_tensor_alignment may be below the
  // element size), so this is a warning; strict-alignment CPUs fault on it.
  EXPECT_TRUE(OnlyWarning(f->report(), "tensor-misaligned", f->segment_base_offset() + 9406));
  // Asking for the alignment the data needs makes it an error.
  ReadOptions o;
  o.tensor_alignment = 4;
  EXPECT_TRUE(FirstError(ReadPte(b, o)->report(), "tensor-misaligned", f->segment_base_offset() + 9406));
}

TEST(HostilePteSegments, ConstantNotAtRequestedTensorAlignment) {
  ReadOptions o;
  o.tensor_alignment = 512;  // keyword_spotting.pte pads constants to 128 (second one at 256)
  auto f = ReadPte(Fixture("keyword_spotting.pte"), o);
  ASSERT_TRUE(FirstError(f->report(), "tensor-misaligned"));
  const Finding& e = f->report().findings()[0];
  ASSERT_TRUE(e.offset.has_value());
  EXPECT_NE((*e.offset - f->segment_base_offset()) % 512, 0u);
  EXPECT_NE(e.message.find("requested tensor alignment"), std::string::npos);
}

// ------------------------------------------------------- index fields

TEST(HostilePteIndex, PlanInputs) {
  Buf b = EditPte(Fixture("arduino_add.pte"), [](fb::Table& p) {
    F(Plan(p), "inputs") = IntVector({0, static_cast<int32_t>(NumValues(Plan(p)))});
  });
  auto f = ReadPte(b);
  EXPECT_TRUE(FirstError(f->report(), "index-out-of-range", Off(*f, f->program()->execution_plan()->Get(0))));
  // arduino_add.pte's method is "forward" with 4 values (0: a constant tensor,
  // data_buffer_idx 1; 1, 2: planned tensors; 3: an Int) and one chain of one
  // KernelCall (`ptepack extract`): the messages below name them so.
  EXPECT_EQ(FirstErrorMessage(f->report()), "forward: inputs[1] is not a value index");
}

TEST(HostilePteIndex, PlanOutputs) {
  Buf b = EditPte(Fixture("arduino_add.pte"), [](fb::Table& p) { F(Plan(p), "outputs") = IntVector({-2}); });
  auto f = ReadPte(b);
  EXPECT_TRUE(FirstError(f->report(), "index-out-of-range", Off(*f, f->program()->execution_plan()->Get(0))));
  EXPECT_EQ(FirstErrorMessage(f->report()), "forward: outputs[0] is not a value index");
}

TEST(HostilePteIndex, KernelOpIndex) {
  Buf b = EditPte(Fixture("arduino_add.pte"), [](fb::Table& p) {
    fb::Table* k = FindInstr(p, efb::InstructionArguments::KernelCall);
    ASSERT_NE(k, nullptr);
    F(*k, "op_index") = Int(static_cast<int64_t>(F(Plan(p), "operators").elems().size()));
  });
  auto f = ReadPte(b);
  auto ti = FindTypedInstr(*f->program(), efb::InstructionArguments::KernelCall);
  EXPECT_TRUE(FirstError(f->report(), "index-out-of-range", Off(*f, ti.ins->instr_args_as_KernelCall())));
  EXPECT_EQ(FirstErrorMessage(f->report()), "forward: chains[0].instructions[0] calls an operator that does not exist");
}

TEST(HostilePteIndex, KernelArgs) {
  Buf b = EditPte(Fixture("arduino_add.pte"), [](fb::Table& p) {
    fb::Table* k = FindInstr(p, efb::InstructionArguments::KernelCall);
    ASSERT_NE(k, nullptr);
    F(*k, "args") = IntVector({0, 1, 9999});
  });
  auto f = ReadPte(b);
  auto ti = FindTypedInstr(*f->program(), efb::InstructionArguments::KernelCall);
  EXPECT_TRUE(FirstError(f->report(), "index-out-of-range", Off(*f, ti.ins->instr_args_as_KernelCall())));
  EXPECT_EQ(FirstErrorMessage(f->report()), "forward: chains[0].instructions[0].args[2] is not a value index");
}

TEST(HostilePteIndex, DelegateIndex) {
  Buf b = EditPte(Fixture("stories260k_qnn.pte"), [](fb::Table& p) {
    fb::Table* d = FindInstr(p, efb::InstructionArguments::DelegateCall);
    ASSERT_NE(d, nullptr);
    F(*d, "delegate_index") = Int(7);
  });
  auto f = ReadPte(b);
  auto ti = FindTypedInstr(*f->program(), efb::InstructionArguments::DelegateCall);
  ASSERT_NE(ti.ins, nullptr);
  EXPECT_TRUE(FirstError(f->report(), "index-out-of-range", Off(*f, ti.ins->instr_args_as_DelegateCall())));
}

TEST(HostilePteIndex, MoveCall) {
  Buf b = EditPte(Fixture("arduino_add.pte"), [](fb::Table& p) {
    fb::Table& m = ReplaceFirstInstr(p, efb::InstructionArguments::MoveCall, "MoveCall");
    F(m, "move_from") = Int(static_cast<int64_t>(NumValues(Plan(p))));
    F(m, "move_to") = Int(0);
  });
  auto f = ReadPte(b);
  EXPECT_TRUE(FirstError(f->report(), "index-out-of-range", Off(*f, FirstTypedInstr(*f)->instr_args_as_MoveCall())));
  EXPECT_EQ(FirstErrorMessage(f->report()), "forward: chains[0].instructions[0].move_from is not a value index");
}

TEST(HostilePteIndex, FreeCall) {
  Buf b = EditPte(Fixture("arduino_add.pte"), [](fb::Table& p) {
    fb::Table& c = ReplaceFirstInstr(p, efb::InstructionArguments::FreeCall, "FreeCall");
    F(c, "value_index") = Int(-1);
  });
  auto f = ReadPte(b);
  EXPECT_TRUE(FirstError(f->report(), "index-out-of-range", Off(*f, FirstTypedInstr(*f))));
  EXPECT_EQ(FirstErrorMessage(f->report()), "forward: chains[0].instructions[0].value_index is not a value index");
}

TEST(HostilePteIndex, JumpFalseCondition) {
  Buf b = EditPte(Fixture("arduino_add.pte"), [](fb::Table& p) {
    fb::Table& j = ReplaceFirstInstr(p, efb::InstructionArguments::JumpFalseCall, "JumpFalseCall");
    F(j, "cond_value_index") = Int(static_cast<int64_t>(NumValues(Plan(p))) + 3);
    F(j, "destination_instruction") = Int(0);
  });
  auto f = ReadPte(b);
  EXPECT_TRUE(
      FirstError(f->report(), "index-out-of-range", Off(*f, FirstTypedInstr(*f)->instr_args_as_JumpFalseCall())));
  EXPECT_EQ(FirstErrorMessage(f->report()), "forward: chains[0].instructions[0].cond_value_index is not a value index");
}

TEST(HostilePteIndex, JumpFalseDestination) {
  Buf b = EditPte(Fixture("arduino_add.pte"), [](fb::Table& p) {
    fb::Table& j = ReplaceFirstInstr(p, efb::InstructionArguments::JumpFalseCall, "JumpFalseCall");
    F(j, "cond_value_index") = Int(0);
    F(j, "destination_instruction") = Int(5);  // the chain has 1 instruction
  });
  auto f = ReadPte(b);
  ASSERT_TRUE(
      FirstError(f->report(), "index-out-of-range", Off(*f, FirstTypedInstr(*f)->instr_args_as_JumpFalseCall())));
  EXPECT_NE(f->report().findings()[0].message.find("jumps outside its chain"), std::string::npos);
}

TEST(HostilePteIndex, TensorListItems) {
  // maxpool2d.pte has one TensorList value.
  Buf b = EditPte(Fixture("maxpool2d.pte"), [](fb::Table& p) {
    bool done = false;
    for (auto& v : F(Plan(p), "values").elems()) {
      if (fb::AsUInt(F(*v.table(), "val_type")) == static_cast<uint64_t>(efb::KernelTypes::TensorList)) {
        F(*F(*v.table(), "val").table(), "items") = IntVector({0, 9999});
        done = true;
      }
    }
    ASSERT_TRUE(done);
  });
  auto f = ReadPte(b);
  const efb::EValue* ev = nullptr;
  for (const auto* v : *f->program()->execution_plan()->Get(0)->values()) {
    if (v->val_type() == efb::KernelTypes::TensorList) ev = v;
  }
  ASSERT_NE(ev, nullptr);
  EXPECT_TRUE(FirstError(f->report(), "index-out-of-range", Off(*f, ev)));
}

TEST(HostilePteIndex, OptionalTensorListItems) {
  // -1 means "None" in an OptionalTensorList; -2 is out of range.
  Buf b = EditPte(Fixture("arduino_add.pte"), [](fb::Table& p) {
    auto l = prog::New("OptionalTensorList");
    F(*l, "items") = IntVector({-1, -2});
    auto ev = prog::New("EValue");
    F(*ev, "val_type") = fb::UIntValue(reflection::UType, static_cast<uint8_t>(efb::KernelTypes::OptionalTensorList));
    F(*ev, "val") = fb::TableValue(l);
    F(Plan(p), "values").mutable_elems().push_back(fb::TableValue(ev));
  });
  auto f = ReadPte(b);
  const auto* values = f->program()->execution_plan()->Get(0)->values();
  EXPECT_TRUE(FirstError(f->report(), "index-out-of-range", Off(*f, values->Get(values->size() - 1))));
  EXPECT_EQ(FirstErrorMessage(f->report()), "forward: values[4].items[1] is not a value index");
}

TEST(HostilePteIndex, DataBufferIdx) {
  Buf b = EditPte(Fixture("arduino_add.pte"), [](fb::Table& p) {
    fb::Table* t = FindTensor(p, [](fb::Table& t) { return fb::AsUInt(F(t, "data_buffer_idx")) == 1; });
    ASSERT_NE(t, nullptr);
    F(*t, "data_buffer_idx") = UInt(7);  // two constant offsets
  });
  auto f = ReadPte(b);
  const efb::Tensor* t = FindTypedTensor(*f, [](const efb::Tensor& t) { return t.data_buffer_idx() == 7; });
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(FirstError(f->report(), "index-out-of-range", Off(*f, t)));
  EXPECT_EQ(FirstErrorMessage(f->report()),
            "forward: values[0] (tensor).data_buffer_idx is not a constant buffer index");
}

TEST(HostilePteIndex, AllocationMemoryId) {
  Buf b = EditPte(Fixture("arduino_add.pte"), [](fb::Table& p) {
    fb::Table* t = FindTensor(p, [](fb::Table& t) { return F(t, "allocation_info").table() != nullptr; });
    ASSERT_NE(t, nullptr);
    F(*F(*t, "allocation_info").table(), "memory_id") = UInt(9);
  });
  auto f = ReadPte(b);
  const efb::Tensor* t =
      FindTypedTensor(*f, [](const efb::Tensor& t) { return t.allocation_info() && t.allocation_info()->memory_id(); });
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(FirstError(f->report(), "index-out-of-range", Off(*f, t->allocation_info())));
  EXPECT_EQ(FirstErrorMessage(f->report()),
            "forward: values[1] (tensor).allocation_info.memory_id is not a planned buffer");
}

TEST(HostilePteIndex, ConstantSegmentIndex) {
  Buf b = EditPte(Fixture("arduino_add.pte"),
                  [](fb::Table& p) { F(*F(p, "constant_segment").table(), "segment_index") = UInt(3); });
  auto f = ReadPte(b);
  EXPECT_TRUE(FirstError(f->report(), "index-out-of-range", Off(*f, f->program()->constant_segment())));
  EXPECT_EQ(FirstErrorMessage(f->report()), "constant_segment.segment_index refers to a segment that does not exist");
}

// ---------------------------------------------------------------- memory plan
// docs/memory-plan.md has the rules. arduino_add.pte: values[1] (input, 12
// bytes at 16) and values[2] (output, 12 bytes at 0) of a 32-byte buffer 1.

// With PTEPACK_PLAN_SEEDS=DIR set, these cases also write their input there:
// tests/fuzz/seeds/plan_*.pte were written that way.
void MaybeSeed(const std::string& name, const Buf& b) {
  if (const char* dir = std::getenv("PTEPACK_PLAN_SEEDS")) testing::WriteFile(std::string(dir) + "/" + name, b);
}

fb::Table& TensorOf(fb::Table& program, size_t value, size_t plan = 0) {
  return *F(Elem(F(Plan(program, plan), "values"), value), "val").table();
}
fb::Table& AllocationOf(fb::Table& program, size_t value, size_t plan = 0) {
  return *F(TensorOf(program, value, plan), "allocation_info").table();
}
const efb::AllocationDetails* TypedAllocation(const PteFile& f, size_t value, size_t plan = 0) {
  return f.program()
      ->execution_plan()
      ->Get(static_cast<flatbuffers::uoffset_t>(plan))
      ->values()
      ->Get(static_cast<flatbuffers::uoffset_t>(value))
      ->val_as_Tensor()
      ->allocation_info();
}

TEST(HostilePtePlan, PlannedTensorPastItsBuffer) {
  Buf b =
      EditPte(Fixture("arduino_add.pte"), [](fb::Table& p) { F(AllocationOf(p, 2), "memory_offset_low") = UInt(24); });
  MaybeSeed("plan_past_buffer.pte", b);
  auto f = ReadPte(b);
  EXPECT_TRUE(FirstError(f->report(), "planned-tensor-out-of-range", Off(*f, TypedAllocation(*f, 2))));
}

TEST(HostilePtePlan, OffsetPast2To63) {
  Buf b = EditPte(Fixture("arduino_add.pte"),
                  [](fb::Table& p) { F(AllocationOf(p, 2), "memory_offset_high") = UInt(0x80000000u); });
  MaybeSeed("plan_offset_2e63.pte", b);
  auto f = ReadPte(b);
  ASSERT_TRUE(FirstError(f->report(), "planned-tensor-out-of-range", Off(*f, TypedAllocation(*f, 2))));
  EXPECT_EQ(f->report().findings()[0].found, "9223372036854775808 + 12");
}

TEST(HostilePtePlan, ReservedBufferId) {
  Buf b = EditPte(Fixture("arduino_add.pte"), [](fb::Table& p) { F(AllocationOf(p, 2), "memory_id") = UInt(0); });
  MaybeSeed("plan_reserved_buffer.pte", b);
  auto f = ReadPte(b);
  EXPECT_TRUE(FirstError(f->report(), "index-out-of-range", Off(*f, TypedAllocation(*f, 2))));
}

TEST(HostilePtePlan, OutputOverItsInput) {
  // The output moved onto the input's bytes: both live at instruction 0.
  Buf b =
      EditPte(Fixture("arduino_add.pte"), [](fb::Table& p) { F(AllocationOf(p, 2), "memory_offset_low") = UInt(16); });
  MaybeSeed("plan_output_over_input.pte", b);
  auto f = ReadPte(b);
  ASSERT_TRUE(FirstError(f->report(), "plan-overlap", Off(*f, TypedAllocation(*f, 2))));
  EXPECT_EQ(f->report().findings()[0].found, "both live at instruction 0");
}

TEST(HostilePtePlan, LoopWithNoExit) {
  // The kernel replaced by a jump to itself on the output tensor, which
  // nothing in the loop writes: once taken, it is taken forever.
  Buf b = EditPte(Fixture("arduino_add.pte"), [](fb::Table& p) {
    fb::Table& j = ReplaceFirstInstr(p, efb::InstructionArguments::JumpFalseCall, "JumpFalseCall");
    F(j, "cond_value_index") = Int(2);
    F(j, "destination_instruction") = Int(0);
  });
  MaybeSeed("plan_loop_no_exit.pte", b);
  auto f = ReadPte(b);
  EXPECT_TRUE(
      FirstError(f->report(), "plan-loop-no-exit", Off(*f, FirstTypedInstr(*f)->instr_args_as_JumpFalseCall())));
}

TEST(HostilePtePlan, MoveCallCycle) {
  // After the kernel: MoveCall(1 -> 2), MoveCall(2 -> 1).
  Buf b = EditPte(Fixture("arduino_add.pte"), [](fb::Table& p) {
    fb::Table& chain = Elem(F(Plan(p), "chains"), 0);
    auto& list = F(chain, "instructions").mutable_elems();
    for (auto [from, to] : {std::pair<int, int>{1, 2}, std::pair<int, int>{2, 1}}) {
      auto ins = fb::Clone(*list.at(0).table());
      F(*ins, "instr_args_type") =
          fb::UIntValue(reflection::UType, static_cast<uint8_t>(efb::InstructionArguments::MoveCall));
      auto args = prog::New("MoveCall");
      F(*args, "move_from") = Int(from);
      F(*args, "move_to") = Int(to);
      F(*ins, "instr_args") = fb::TableValue(args);
      list.push_back(fb::TableValue(ins));
    }
  });
  MaybeSeed("plan_move_cycle.pte", b);
  auto f = ReadPte(b);
  const auto* second = f->program()->execution_plan()->Get(0)->chains()->Get(0)->instructions()->Get(2);
  EXPECT_TRUE(FirstError(f->report(), "plan-move-cycle", Off(*f, second->instr_args_as_MoveCall())));
}

// keyword_spotting.pte: instruction 13 writes values[257] (CHAR[1, 64, 1, 1],
// 64 bytes at 8256) and instruction 14 reads it through its static view
// values[271] (CHAR[1, 64], same bytes); instruction 11 writes values[237]
// (8000 bytes at 8000), instruction 12 reads it and writes values[244]
// (8000 bytes at 0).
TEST(HostilePtePlan, ViewMovedOffItsBase) {
  Buf b = EditPte(Fixture("keyword_spotting.pte"),
                  [](fb::Table& p) { F(AllocationOf(p, 271), "memory_offset_low") = UInt(8320); });
  auto f = ReadPte(b);
  ASSERT_TRUE(FirstError(f->report(), "plan-read-before-write", Off(*f, TypedAllocation(*f, 271))));
  EXPECT_NE(f->report().findings()[0].message.find("a view moved off its base"), std::string::npos);
}

TEST(HostilePtePlan, TensorWrittenOverOneStillRead) {
  Buf b = EditPte(Fixture("keyword_spotting.pte"),
                  [](fb::Table& p) { F(AllocationOf(p, 244), "memory_offset_low") = UInt(8000); });
  auto f = ReadPte(b);
  ASSERT_TRUE(FirstError(f->report(), "plan-overlap", Off(*f, TypedAllocation(*f, 244))));
  EXPECT_EQ(f->report().findings()[0].found, "both live at instruction 12");
}

// `ptepack plan` on every bad plan above (tests/fuzz/seeds/plan_*.pte hold the same inputs;
// the keyword_spotting cases are rebuilt here): with -o, exit 2, the finding verify reports
// first (code and offset) on stderr, nothing written; without -o, the report of a plan that
// only the plan checks reject is shown (exit 0), a file with other errors is refused (exit 2).
TEST(HostilePtePlan, PlanCommandRefusesWhereVerifyLocates) {
  const std::string dir = testing::TempDir("hostile_plan_cmd");
  const std::string seeds = std::string(PTEPACK_SOURCE_DIR) + "/tests/fuzz/seeds/";
  std::vector<std::pair<std::string, Buf>> inputs;
  for (const char* name : {"plan_past_buffer.pte", "plan_offset_2e63.pte", "plan_reserved_buffer.pte",
                           "plan_output_over_input.pte", "plan_loop_no_exit.pte", "plan_move_cycle.pte"}) {
    inputs.emplace_back(name, testing::ReadFile(seeds + name));
  }
  inputs.emplace_back("view_moved.pte", EditPte(Fixture("keyword_spotting.pte"), [](fb::Table& p) {
                        F(AllocationOf(p, 271), "memory_offset_low") = UInt(8320);
                      }));
  inputs.emplace_back("written_over.pte", EditPte(Fixture("keyword_spotting.pte"), [](fb::Table& p) {
                        F(AllocationOf(p, 244), "memory_offset_low") = UInt(8000);
                      }));
  for (const auto& [name, bytes] : inputs) {
    const std::string in = dir + "/" + name, out = dir + "/out_" + name;
    testing::WriteFile(in, bytes);
    auto f = PteFile::Open(in);
    ASSERT_FALSE(f->ok()) << name;
    const Finding& first = f->report().findings().at(0);
    ASSERT_TRUE(first.offset.has_value()) << name;
    CliResult r = RunCli("plan " + in + " -o " + out, dir);
    EXPECT_EQ(r.status, 2) << name;
    EXPECT_NE(r.err.find("error at offset " + std::to_string(*first.offset) + " "), std::string::npos)
        << name << ": " << r.err;
    EXPECT_NE(r.err.find("[" + first.code + "]"), std::string::npos) << name << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << name;
    const bool plan_only = first.code.rfind("plan-", 0) == 0;
    CliResult report = RunCli("plan " + in, dir);
    EXPECT_EQ(report.status, plan_only ? 0 : 2) << name << ": " << report.err;
    std::printf("DUMP plan | %s | %s | %llu | -o: exit %d; report: exit %d\n", name.c_str(), first.code.c_str(),
                static_cast<unsigned long long>(*first.offset), r.status, report.status);
  }
}

// arduino_add.pte with two named blobs in segments of its own.
Buf WithNamedData(const std::string& second_key) {
  auto pte = ReadPte(Fixture("arduino_add.pte"));
  PackageParts pkg = PackageFromPte(*pte);
  InferredConfig inf = InferConfig(*pte, pkg);
  inf.ApplyBlobAlignments(pkg);
  static const uint8_t a[24] = {1, 2, 3}, b[16] = {4, 5, 6};
  pkg.named_data.push_back(NamedBlob{"blob.a", Bytes::View(a, sizeof a), 1, nullptr, false});
  pkg.named_data.push_back(NamedBlob{second_key, Bytes::View(b, sizeof b), 1, nullptr, false});
  return RenderPte(LayoutPte(pkg, inf.config));
}

TEST(HostilePteIndex, NamedDataSegmentIndex) {
  Buf b =
      EditPte(WithNamedData("blob.b"), [](fb::Table& p) { F(Elem(F(p, "named_data"), 1), "segment_index") = UInt(9); });
  auto f = ReadPte(b);
  EXPECT_TRUE(FirstError(f->report(), "index-out-of-range", Off(*f, f->program()->named_data()->Get(1))));
}

TEST(HostilePteIndex, DelegateInlineIndex) {
  // stories260k_qnn.pte keeps its delegate payloads in segments and has no
  // backend_delegate_data: point the first delegate at inline entry 0.
  Buf b = EditPte(Fixture("stories260k_qnn.pte"), [](fb::Table& p) {
    for (auto& plan : F(p, "execution_plan").elems()) {
      for (auto& d : F(*plan.table(), "delegates").elems()) {
        fb::Table& pr = *F(*d.table(), "processed").table();
        F(pr, "location") = fb::UIntValue(reflection::Byte, 0);
        F(pr, "index") = UInt(0);
        return;
      }
    }
  });
  auto f = ReadPte(b);
  const efb::BackendDelegateDataReference* pr = nullptr;
  for (const auto* plan : *f->program()->execution_plan()) {
    if (!pr && plan->delegates() && plan->delegates()->size() > 0) pr = plan->delegates()->Get(0)->processed();
  }
  ASSERT_NE(pr, nullptr);
  ASSERT_TRUE(FirstError(f->report(), "index-out-of-range", Off(*f, pr)));
  EXPECT_NE(f->report().findings()[0].message.find("backend_delegate_data"), std::string::npos);
}

TEST(HostilePteIndex, DelegateSegmentIndex) {
  Buf b = EditPte(Fixture("stories260k_qnn.pte"), [](fb::Table& p) {
    for (auto& plan : F(p, "execution_plan").elems()) {
      for (auto& d : F(*plan.table(), "delegates").elems()) {
        F(*F(*d.table(), "processed").table(), "index") = UInt(99);
        return;
      }
    }
  });
  auto f = ReadPte(b);
  const efb::BackendDelegateDataReference* pr = nullptr;
  for (const auto* plan : *f->program()->execution_plan()) {
    if (!pr && plan->delegates() && plan->delegates()->size() > 0) pr = plan->delegates()->Get(0)->processed();
  }
  ASSERT_NE(pr, nullptr);
  ASSERT_EQ(pr->location(), efb::DataLocation::SEGMENT);
  EXPECT_TRUE(FirstError(f->report(), "index-out-of-range", Off(*f, pr)));
}

// ------------------------------------------------- flatbuffer structure

TEST(HostileFlatbuffer, RootOffsetPastEnd) {
  Buf b = Fixture("add.pte");
  PutU32(b, 0, 0x7FFFFFF0u);
  EXPECT_TRUE(FirstError(ReadPte(b)->report(), "flatbuffer-invalid", 0));
}

TEST(HostileFlatbuffer, FieldOffsetPointingAtItself) {
  // Program.execution_plan's uoffset set to 0: the field would point at
  // itself (the smallest cycle).
  Buf b = Fixture("add.pte");
  uint32_t table = LoadU32(b.data());
  uint32_t vtable = table - LoadU32(b.data() + table);
  uint16_t field = 0;
  std::memcpy(&field, b.data() + vtable + efb::Program::VT_EXECUTION_PLAN, 2);
  ASSERT_NE(field, 0);
  PutU32(b, table + field, 0);
  EXPECT_TRUE(FirstError(ReadPte(b)->report(), "flatbuffer-invalid", 0));
}

TEST(HostileFlatbuffer, VectorElementPointingAtItself) {
  // execution_plan[0]'s uoffset set to 0. The FlatBuffers verifier reads
  // the element as a table whose vtable is itself with size 0: an empty
  // table. The reader then finds the plan's required name missing.
  Buf b = Fixture("add.pte");
  auto f = ReadPte(b);
  uint64_t elem = Off(*f, f->program()->execution_plan()->Data());
  PutU32(b, elem, 0);
  EXPECT_TRUE(FirstError(ReadPte(b)->report(), "missing-string"));
}

TEST(HostileFlatbuffer, VtableOffsetOutsideBuffer) {
  Buf b = Fixture("add.pte");
  uint32_t root = LoadU32(b.data());
  PutU32(b, root, 0x7FFFFFFFu);  // soffset to the root table's vtable
  EXPECT_TRUE(FirstError(ReadPte(b)->report(), "flatbuffer-invalid", 0));
}

TEST(HostileFlatbuffer, NestingDeeperThanLimit) {
  // Acyclic schemas bound the real depth; the verifier limit is what stops
  // deep or runaway nesting.
  ReadOptions o;
  o.max_depth = 3;
  EXPECT_TRUE(FirstError(ReadPte(Fixture("add.pte"), o)->report(), "flatbuffer-invalid", 0));
  EXPECT_TRUE(ReadPte(Fixture("add.pte"))->ok());
}

TEST(HostileFlatbuffer, MoreTablesThanLimit) {
  ReadOptions o;
  o.max_tables = 10;
  auto f = ReadPte(Fixture("add.pte"), o);
  EXPECT_TRUE(FirstError(f->report(), "flatbuffer-invalid", 0));
  // A sound program over the limit is told apart from a damaged one: the
  // finding names the limit (the runtime's verifier has the same one).
  ASSERT_FALSE(f->report().findings().empty());
  const Finding& e = f->report().findings()[0];
  EXPECT_NE(e.message.find("more than 10 tables"), std::string::npos) << e.message;
  EXPECT_EQ(e.expected, "at most 10 tables");
  // A damaged program (root offset past the end) under the same limit is
  // still "rejected": the table count is not blamed for it.
  Buf bad = Fixture("add.pte");
  PutU32(bad, 0, 0x7FFFFFF0);
  auto g = ReadPte(bad, o);
  ASSERT_FALSE(g->report().findings().empty());
  EXPECT_EQ(g->report().findings()[0].code, "flatbuffer-invalid");
  EXPECT_NE(g->report().findings()[0].message.find("rejected the program"), std::string::npos)
      << g->report().findings()[0].message;
}

TEST(HostileFlatbuffer, ProgramWithoutPlansIsRejectedButRewritten) {
  // ExecuTorch's validate_program refuses a null execution_plan.
  Buf b = EditPte(Fixture("add.pte"), [](fb::Table& p) { F(p, "execution_plan") = fb::Value{}; });
  auto f = ReadPte(b);
  EXPECT_TRUE(FirstError(f->report(), "missing-field", Off(*f, f->program())));
  EXPECT_EQ(fuzz::CheckPteBytes(b.data(), b.size()), "");
  // An empty list is loadable (a program with no methods): only a warning.
  Buf c =
      EditPte(Fixture("add.pte"), [](fb::Table& p) { F(p, "execution_plan") = fb::OffsetVector({}, reflection::Obj); });
  auto g = ReadPte(c);
  EXPECT_TRUE(g->ok()) << AllFindings(g->report());
  EXPECT_TRUE(g->report().Has("no-methods"));
}

TEST(HostileFlatbuffer, UnionTagWithoutValue) {
  Buf b = EditPte(Fixture("arduino_add.pte"), [](fb::Table& p) {
    F(Elem(F(Plan(p), "values"), 0), "val") = fb::Value{};  // keeps val_type
  });
  auto f = ReadPte(b);
  EXPECT_TRUE(
      FirstError(f->report(), "missing-field", Off(*f, f->program()->execution_plan()->Get(0)->values()->Get(0))));
}

TEST(HostileFlatbuffer, UnknownUnionTag) {
  // The verifier accepts tags beyond the enum without looking at the value.
  Buf b = EditPte(Fixture("arduino_add.pte"), [](fb::Table& p) {
    F(Elem(F(Plan(p), "values"), 0), "val_type") = fb::UIntValue(reflection::UType, 42);
  });
  auto f = ReadPte(b);
  EXPECT_TRUE(FirstError(f->report(), "bad-enum", Off(*f, f->program()->execution_plan()->Get(0)->values()->Get(0))));
  Buf c = EditPte(Fixture("arduino_add.pte"), [](fb::Table& p) {
    fb::Table& chain = Elem(F(Plan(p), "chains"), 0);
    F(Elem(F(chain, "instructions"), 0), "instr_args_type") = fb::UIntValue(reflection::UType, 9);
  });
  auto g = ReadPte(c);
  EXPECT_TRUE(FirstError(g->report(), "bad-enum", Off(*g, FirstTypedInstr(*g))));
}

// --------------------------------------------------------------- strings

TEST(HostileStrings, NonUtf8) {
  const std::vector<std::string> bad = {"\xff", "add\xC0\xAF", "\xED\xA0\x80", "x\xE2\x82"};
  for (const std::string& s : bad) {
    Buf b = EditPte(Fixture("arduino_add.pte"),
                    [&](fb::Table& p) { F(Elem(F(Plan(p), "operators"), 0), "name") = fb::StringValue(s); });
    auto f = ReadPte(b);
    EXPECT_TRUE(FirstError(f->report(), "non-utf8",
                           Off(*f, f->program()->execution_plan()->Get(0)->operators()->Get(0)->name())));
  }
}

TEST(HostileStrings, NonUtf8MethodName) {
  Buf b = EditPte(Fixture("arduino_add.pte"), [](fb::Table& p) { F(Plan(p), "name") = fb::StringValue("fwd\x80"); });
  auto f = ReadPte(b);
  EXPECT_TRUE(FirstError(f->report(), "non-utf8", Off(*f, f->program()->execution_plan()->Get(0)->name())));
}

// ------------------------------------------------------------ .ptd files

TEST(HostilePtd, EmptyFile) { EXPECT_TRUE(FirstError(ReadPtd({})->report(), "truncated", 0)); }

TEST(HostilePtd, WrongMagic) {
  Buf b = Fixture("xor.ptd");
  std::memcpy(b.data() + 4, "FT99", 4);
  EXPECT_TRUE(FirstError(ReadPtd(b)->report(), "bad-magic", 4));
  auto f = ReadPtd(Fixture("add.pte"));
  ASSERT_TRUE(FirstError(f->report(), "bad-magic", 4));
  EXPECT_NE(f->report().findings()[0].message.find(".pte program"), std::string::npos);
}

TEST(HostilePtd, EndsInsideHeader) {
  Buf b = Fixture("xor.ptd");
  b.resize(30);
  EXPECT_TRUE(FirstError(ReadPtd(b)->report(), "truncated", 30));
}

TEST(HostilePtd, HeaderMagicMissing) {
  Buf b = Fixture("xor.ptd");
  std::memcpy(b.data() + 8, "XXXX", 4);
  EXPECT_TRUE(FirstError(ReadPtd(b)->report(), "bad-magic", 8));
}

TEST(HostilePtd, HeaderLengthLies) {
  for (uint32_t len : {8u, 0xFFFFFF00u}) {
    Buf b = Fixture("xor.ptd");
    PutU32(b, 12, len);
    EXPECT_TRUE(FirstError(ReadPtd(b)->report(), "header-length", 12)) << len;
  }
}

TEST(HostilePtd, FlatbufferPastEof) {
  Buf b = Fixture("xor.ptd");
  PutU64(b, 24, b.size());  // flatbuffer_size
  EXPECT_TRUE(FirstError(ReadPtd(b)->report(), "program-size-past-eof", 16));
  Buf w = Fixture("xor.ptd");
  PutU64(w, 16, UINT64_MAX - 4);  // flatbuffer_offset + size wraps
  EXPECT_TRUE(FirstError(ReadPtd(w)->report(), "program-size-past-eof", 16));
}

TEST(HostilePtd, SegmentDataSizeWraps) {
  Buf b = Fixture("xor.ptd");
  PutU64(b, 40, UINT64_MAX - 8);
  EXPECT_TRUE(FirstError(ReadPtd(b)->report(), "segment-overflow", 32));
}

TEST(HostilePtd, SegmentDataCutShort) {
  Buf b = Fixture("xor.ptd");
  b.resize(b.size() - 4);
  EXPECT_TRUE(FirstError(ReadPtd(b)->report(), "truncated", b.size()));
}

uint64_t PtdSegmentTable(const PtdFile& f, size_t i) {
  return static_cast<uint64_t>(reinterpret_cast<const uint8_t*>(f.flat_tensor()->segments()->Get(i)) - f.file().data);
}

TEST(HostilePtd, SegmentOffsetWraps) {
  Buf b = EditPtd(Fixture("xor.ptd"), [](const fb::Schema& s, fb::Table& t) {
    fb::Field(s, *fb::Field(s, t, "segments").elems()[0].table(), "offset") =
        fb::UIntValue(reflection::ULong, UINT64_MAX - 1);
  });
  auto f = ReadPtd(b);
  EXPECT_TRUE(FirstError(f->report(), "segment-overflow", PtdSegmentTable(*f, 0)));
}

TEST(HostilePtd, SegmentPastEnd) {
  Buf b = EditPtd(Fixture("xor.ptd"), [](const fb::Schema& s, fb::Table& t) {
    fb::Field(s, *fb::Field(s, t, "segments").elems()[3].table(), "size") = fb::UIntValue(reflection::ULong, 4000);
  });
  auto f = ReadPtd(b);
  EXPECT_TRUE(FirstError(f->report(), "segment-out-of-range", f->segments()[3].file_offset));
}

TEST(HostilePtd, OverlappingSegments) {
  Buf b = EditPtd(Fixture("xor.ptd"), [](const fb::Schema& s, fb::Table& t) {
    fb::Field(s, *fb::Field(s, t, "segments").elems()[1].table(), "offset") = fb::UIntValue(reflection::ULong, 0);
  });
  auto f = ReadPtd(b);
  EXPECT_TRUE(FirstError(f->report(), "segment-overlap", f->header().segment_base_offset));
}

TEST(HostilePtd, SegmentNotAtRequestedAlignment) {
  ReadOptions o;
  o.segment_alignment = 128;  // xor.ptd's segments are 16-aligned, the first at 544
  EXPECT_TRUE(FirstError(ReadPtd(Fixture("xor.ptd"), o)->report(), "segment-misaligned", 544));
}

TEST(HostilePtd, EntrySegmentIndex) {
  Buf b = EditPtd(Fixture("xor.ptd"), [](const fb::Schema& s, fb::Table& t) {
    fb::Field(s, *fb::Field(s, t, "named_data").elems()[1].table(), "segment_index") = UInt(9);
  });
  auto f = ReadPtd(b);
  EXPECT_TRUE(FirstError(f->report(), "index-out-of-range", f->entries()[1].table_offset));
}

TEST(HostilePtd, DuplicateKey) {
  Buf b = EditPtd(Fixture("xor.ptd"), [](const fb::Schema& s, fb::Table& t) {
    auto& nd = fb::Field(s, t, "named_data").elems();
    fb::Field(s, *nd[2].table(), "key") = fb::Field(s, *nd[0].table(), "key");
  });
  auto f = ReadPtd(b);
  EXPECT_TRUE(FirstError(f->report(), "duplicate-key", f->entries()[2].table_offset));
}

TEST(HostilePtd, NonUtf8Key) {
  Buf b = EditPtd(Fixture("xor.ptd"), [](const fb::Schema& s, fb::Table& t) {
    fb::Field(s, *fb::Field(s, t, "named_data").elems()[0].table(), "key") = fb::StringValue("net.\xff");
  });
  auto f = ReadPtd(b);
  EXPECT_TRUE(FirstError(f->report(), "non-utf8", f->entries()[0].table_offset));
}

TEST(HostilePtd, LegacyTensorAlignmentNotPowerOfTwo) {
  Buf b = EditPtd(Fixture("linear.ptd"),
                  [](const fb::Schema& s, fb::Table& t) { fb::Field(s, t, "tensor_alignment") = UInt(24); });
  EXPECT_TRUE(FirstError(ReadPtd(b)->report(), "bad-alignment"));
}

// linear.ptd (legacy layout) with "linear.bias" renamed.
Buf LinearPtdWithoutBias() {
  return EditPtd(Fixture("linear.ptd"), [](const fb::Schema& s, fb::Table& t) {
    for (auto& e : fb::Field(s, t, "tensors").elems()) {
      auto& name = fb::Field(s, *e.table(), "fully_qualified_name");
      if (name.str() == "linear.bias") name = fb::StringValue("linear.bias_renamed");
    }
  });
}

const efb::ExtraTensorInfo* ExternalInfo(const PteFile& f, const std::string& key) {
  const efb::Tensor* t = FindTypedTensor(f, [&](const efb::Tensor& t) {
    return t.extra_tensor_info() && t.extra_tensor_info()->fully_qualified_name() &&
           t.extra_tensor_info()->fully_qualified_name()->str() == key;
  });
  return t ? t->extra_tensor_info() : nullptr;
}

TEST(HostilePtd, ExternalKeyMissing) {
  auto pte = ReadPte(Fixture("linear.pte"));
  ASSERT_TRUE(pte->ok());
  Buf renamed = LinearPtdWithoutBias();
  auto ptd = ReadPtd(renamed);
  ASSERT_TRUE(ptd->ok()) << AllFindings(ptd->report());
  pte->CheckExternalKeys({ptd.get()});
  const efb::ExtraTensorInfo* eti = ExternalInfo(*pte, "linear.bias");
  ASSERT_NE(eti, nullptr);
  EXPECT_TRUE(FirstError(pte->report(), "dangling-external-key", Off(*pte, eti)));
  EXPECT_EQ(pte->report().error_count(), 1u);
}

TEST(HostilePtd, ExternalKeysWithoutAnyPtd) {
  auto pte = ReadPte(Fixture("linear.pte"));
  pte->CheckExternalKeys({});
  EXPECT_TRUE(FirstError(pte->report(), "dangling-external-key"));
  EXPECT_EQ(pte->report().error_count(), 2u);  // linear.weight and linear.bias
}

TEST(HostilePte, DuplicateNamedDataKey) {
  Buf b = WithNamedData("blob.a");
  auto f = ReadPte(b);
  EXPECT_TRUE(FirstError(f->report(), "duplicate-key", Off(*f, f->program()->named_data()->Get(1))));
}

// ---------------------------------------------------------------- config

TEST(HostileConfig, AlignmentNotAPowerOfTwo) {
  struct Case {
    std::function<void(BackendConfig&)> set;
    const char* field;
    const char* found;
  };
  const std::vector<Case> cases = {
      {[](BackendConfig& c) { c.segment_alignment = 48; }, "segment_alignment", "48"},
      {[](BackendConfig& c) { c.segment_alignment = 0; }, "segment_alignment", "0"},
      {[](BackendConfig& c) { c.constant_tensor_alignment = 24; }, "constant_tensor_alignment", "24"},
      {[](BackendConfig& c) { c.delegate_alignment = 3; }, "delegate_alignment", "3"},
      {[](BackendConfig& c) { c.ptd_segment_alignment = 100; }, "ptd_segment_alignment", "100"},
  };
  for (const auto& c : cases) {
    BackendConfig cfg;
    c.set(cfg);
    try {
      cfg.Validate();
      ADD_FAILURE() << c.field << " accepted";
    } catch (const Error& e) {
      Dump(e.finding());
      EXPECT_EQ(e.finding().code, "bad-config");
      EXPECT_EQ(e.finding().message.rfind(c.field, 0), 0u) << e.finding().message;
      EXPECT_EQ(e.finding().found, c.found);
    }
  }
}

TEST(HostileConfig, FromJsonValidates) {
  for (const char* j :
       {R"({"segment_alignment": 48})", R"({"constant_tensor_alignment": 0})", R"({"ptd_segment_alignment": 12})"}) {
    try {
      ConfigFromJson(nlohmann::json::parse(j));
      ADD_FAILURE() << j << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.finding().code, "bad-config") << j;
    }
  }
}

TEST(HostileConfig, LayoutRefusesBeforeWriting) {
  auto pte = ReadPte(Fixture("arduino_add.pte"));
  PackageParts pkg = PackageFromPte(*pte);
  BackendConfig cfg;
  cfg.segment_alignment = 48;
  std::string dir = testing::TempDir("hostile_config_layout");
  try {
    WritePackage(PackageOf(pkg), cfg, dir + "/out.pte");
    ADD_FAILURE() << "bad config accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.finding().code, "bad-config");
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

// ------------------------------------------------------------------- CLI

TEST(HostileCli, VerifyExitsOneOnBadFile) {
  std::string dir = testing::TempDir("hostile_cli_verify");
  Buf b = Fixture("arduino_add.pte");
  b.resize(b.size() - 2);
  testing::WriteFile(dir + "/cut.pte", b);
  CliResult r = RunCli("verify " + dir + "/cut.pte", dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("[truncated]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("INVALID"), std::string::npos) << r.err;

  EXPECT_EQ(RunCli("verify " + testing::FixturePath("arduino_add.pte"), dir).status, 0);
  r = RunCli("verify --segment-alignment 256 " + testing::FixturePath("arduino_add.pte"), dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("[segment-misaligned]"), std::string::npos) << r.err;

  testing::WriteFile(dir + "/linear.ptd", LinearPtdWithoutBias());
  r = RunCli("verify " + testing::FixturePath("linear.pte") + " --ptd " + dir + "/linear.ptd", dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("[dangling-external-key]"), std::string::npos) << r.err;

  testing::WriteFile(dir + "/empty.pte", {});
  r = RunCli("verify " + dir + "/empty.pte", dir);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("[truncated]"), std::string::npos) << r.err;
}

TEST(HostileCli, RepackWithBadAlignmentWritesNothing) {
  std::string dir = testing::TempDir("hostile_cli_repack");
  CliResult r = RunCli(
      "repack " + testing::FixturePath("arduino_add.pte") + " --segment-alignment 48 -o " + dir + "/out.pte", dir);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--segment-alignment: must be a power of two"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("[bad-number]"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/out.pte"));
}

// ---------------------------------------------------- NUL bytes in strings

// The runtime reads names as C strings: a NUL in one makes it look up a
// shorter name, an error at the string. A String value's bytes are read with
// their size, so a NUL there is not. The method here is named "f.string_val":
// the check once skipped every string whose location text held ".string_val",
// and the location of an operator's name starts with its method's name.
TEST(HostileNames, NulInANameIsAnErrorNulInAStringValueIsNot) {
  ProgramBuilder b;
  auto& m = b.AddMethod("f.string_val");
  const uint32_t x = m.Tensor({ScalarType::kFloat, {2}, PlannedLocation{1, 0}});
  const int32_t text = m.String("abcYdef");
  m.KernelCall(m.Operator("aten::strings", "out"), {static_cast<int32_t>(x), text});
  m.Inputs({static_cast<int32_t>(x)});
  m.Outputs({static_cast<int32_t>(x)});
  m.PlannedBufferSizes({0, 16});
  const Package pkg = b.Build();
  Buf buf = RenderPte(LayoutPte(PartsOf(pkg), BackendConfig{}));
  auto find = [&](const std::string& what) {
    auto it = std::search(buf.begin(), buf.end(), what.begin(), what.end());
    EXPECT_NE(it, buf.end()) << what;
    EXPECT_EQ(std::search(it + 1, buf.end(), what.begin(), what.end()), buf.end()) << what << " twice";
    return static_cast<size_t>(it - buf.begin());
  };
  const size_t value_at = find("abcYdef"), op_at = find("aten::strings");
  ASSERT_TRUE(ReadPte(buf)->ok()) << AllFindings(ReadPte(buf)->report());

  buf[value_at + 3] = 0;  // "abc\0def": a value, read with its size
  auto pte = ReadPte(buf);
  EXPECT_TRUE(pte->ok()) << AllFindings(pte->report());

  buf[op_at + 9] = 0;  // "aten::str\0ngs": a name
  pte = ReadPte(buf);
  // The string's offset is that of its length, the 4 bytes before its text.
  EXPECT_TRUE(FirstError(pte->report(), "nul-in-name", op_at - 4));
  EXPECT_EQ(
      FirstErrorMessage(pte->report()),
      std::string("f.string_val: operators[0].name contains a NUL byte (the runtime reads it as a shorter name)"));
  const Finding* f = ErrorWithCode(pte->report(), "nul-in-name");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->found, "NUL at 9");
}

// ---------------------------------------------------- fuzzer regressions

// Every input a fuzzer crashed on (testdata/regressions) goes through what
// the fuzz targets do, and the reader reports the problem it now detects.
std::string RegressionDir() { return std::string(PTEPACK_SOURCE_DIR) + "/testdata/regressions"; }

TEST(FuzzRegressions, ReplayAll) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(RegressionDir())) {
    Buf b = testing::ReadFile(e.path().string());
    std::string ext = e.path().extension().string();
    std::string problem =
        ext == ".ptd" ? fuzz::CheckPtdBytes(b.data(), b.size()) : fuzz::CheckPteBytes(b.data(), b.size());
    EXPECT_EQ(problem, "") << e.path();
    ++n;
  }
  EXPECT_GE(n, 5u);
}

// The fuzz seeds and the real files through what the fuzz targets do (re-plans included,
// tests/fuzz/pipeline.h CheckReplan): the plan seeds hold loops, cond MoveCalls, et_view,
// delegates with planned outputs, state shared by methods and static views.
TEST(FuzzRegressions, SeedsAndFixturesPassThePipeline) {
  size_t n = 0;
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(std::string(PTEPACK_SOURCE_DIR) + "/tests/fuzz/seeds")) {
    if (e.path().extension() == ".pte") files.push_back(e.path().string());
  }
  for (const auto& name : testing::PteFixtures()) files.push_back(testing::FixturePath(name));
  for (const std::string& path : files) {
    Buf b = testing::ReadFile(path);
    EXPECT_EQ(fuzz::CheckPteBytes(b.data(), b.size()), "") << path;
    ++n;
  }
  EXPECT_GE(n, 20u);
}

TEST(FuzzRegressions, ExpectedFindings) {
  struct Case {
    const char* file;
    const char* code;  // nullptr: accepted
  };
  for (const Case& c : std::vector<Case>{{"pte-no-execution-plan.pte", "missing-field"},
                                         {"pte-union-tag-without-value.pte", "missing-field"},
                                         {"pte-misaligned-u64-vector.pte", "flatbuffer-misaligned"},
                                         {"ptd-legacy-huge-tensor-alignment.ptd", "bad-alignment"},
                                         {"ptd-non-utf8-key.ptd", "non-utf8"},
                                         {"ptd-key-with-nul.ptd", nullptr},
                                         // No methods; the runtime loads it, and ReplayAll checks
                                         // that its re-encoding (44 bytes) is padded to the 64
                                         // bytes the runtime reads first.
                                         {"pte-no-methods-tiny-program.pte", nullptr}}) {
    Buf b = testing::ReadFile(RegressionDir() + "/" + c.file);
    std::string name = c.file;
    std::unique_ptr<PteFile> pte;
    std::unique_ptr<PtdFile> ptd;
    const Report* rep;
    if (name.compare(name.size() - 4, 4, ".ptd") == 0) {
      ptd = ReadPtd(b);
      rep = &ptd->report();
    } else {
      pte = ReadPte(b);
      rep = &pte->report();
    }
    if (c.code == nullptr) {
      EXPECT_TRUE(rep->ok()) << c.file << AllFindings(*rep);
    } else {
      EXPECT_TRUE(ErrorWithCode(*rep, c.code)) << c.file << AllFindings(*rep);
    }
  }
}

}  // namespace
}  // namespace ptepack
