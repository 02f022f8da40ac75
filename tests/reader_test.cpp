// Reads every real ExecuTorch fixture and checks what PteFile / PtdFile report
// against facts derived by hand from the raw bytes, without ptepack.
//
// How the expected numbers were obtained (F = /work/shared/fixtures/executorch/<file>):
//  [size]   stat -c %s F
//  [hdr]    xxd -l 48 F, then in python3:
//             b = open(F, 'rb').read()
//             b[4:8], b[8:12]                                  # file id, "eh00"
//             struct.unpack_from('<IQQ', b, 12)                # length, program_size, segment_base_offset
//             struct.unpack_from('<Q', b, 32)                  # segment_data_size, only if length >= 32
//  [json]   flatc on the program flatbuffer. Files with an eh00 header (always padded to 32 bytes)
//           first get it cut out and the root offset moved back by 32:
//             ps = struct.unpack_from('<Q', b, 16)[0]
//             fb = struct.pack('<I', struct.unpack_from('<I', b, 0)[0] - 32) + b[4:8] + b[40:ps]
//           files without a header are used as they are; then
//             flatc --json --strict-json --raw-binary serialize/schema/program.fbs -- fb.bin
//           and in python3 over the JSON d (fields flatc omits are 0 / absent):
//             [p['name'] for p in d['execution_plan']], len(p['values']), len(p['operators']),
//             sum(len(c.get('instructions', [])) for c in p['chains']), [x['id'] for x in p['delegates']],
//             d['segments'], d['constant_segment'], d['constant_buffer'],
//             v['val']['extra_tensor_info'] of the Tensor values
//  [ptd]    head -c $((flatbuffer_offset + flatbuffer_size)) F > t.bin (the FH01 header is part of the
//           flatbuffer region, root offset is absolute), header via struct.unpack_from('<4sIQQQQ', b, 8), and
//             flatc --json --strict-json --raw-binary -I serialize/schema serialize/schema/flat_tensor.fbs -- t.bin
//           (flat_tensor_legacy.fbs for linear.ptd: flatc with the current schema crashes on it)
//  [bytes]  xxd -s OFFSET -l N F
//  [align]  largest power of two dividing the segment's file offset (python3: o & -o)
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "layout/alignment.h"
#include "serialize/format/fbtree.h"
#include "serialize/model/program_parts.h"
#include "serialize/read/ptd_reader.h"
#include "serialize/read/pte_reader.h"
#include "tests/test_util.h"

namespace ptepack {
namespace {

namespace efb = executorch_flatbuffer;
using testing::FixturePath;
using testing::ReadFile;

struct MethodFacts {
  const char* name;
  size_t values;
  size_t operators;
  size_t instructions;
  std::vector<std::string> delegates;  // backend ids, in order
};

struct PteFacts {
  const char* file;
  uint64_t file_size;                                   // [size]
  bool has_header;                                      // [hdr] "eh00" at bytes 8..12
  uint32_t header_length;                               // [hdr]
  uint64_t program_size;                                // [hdr] (the file size without a header)
  uint64_t segment_base_offset;                         // [hdr] (0 without a header)
  bool has_segment_data_size;                           // [hdr] length >= 32
  uint64_t segment_data_size;                           // [hdr]
  std::vector<std::pair<uint64_t, uint64_t>> segments;  // [json] d['segments'] (offset, size)
  uint32_t constant_segment_index;                      // [json] d['constant_segment']['segment_index']
  size_t constant_offsets;                              // [json] len(d['constant_segment']['offsets'])
  size_t constant_buffers;                              // [json] len(d['constant_buffer'])
  std::vector<std::string> external_keys;  // [json] fully_qualified_name of EXTERNAL tensors, plan 0, in order
  std::vector<MethodFacts> methods;        // [json]
};

std::vector<MethodFacts> StoriesMethods() {
  // [json] stories260k_qnn: 29 plans. The two forwards are a single delegate call each; the
  // 27 getters are constant-returning methods with no instructions at all.
  std::vector<MethodFacts> m = {{"kv_forward", 24, 0, 1, {"QnnBackend"}},
                                {"prefill_forward", 24, 0, 1, {"QnnBackend"}}};
  for (const char* n :
       {"get_ar_len", "get_bos_id", "get_eos_id", "get_dim", "get_head_dim", "get_max_batch_size", "get_max_seq_len",
        "get_max_context_len", "get_n_bos", "get_n_eos", "get_n_kv_heads", "get_n_layers", "get_vocab_size",
        "get_use_kv_cache", "get_kv_io_bit_width", "get_logits_scale", "get_logits_zero_point"}) {
    m.push_back({n, 1, 0, 0, {}});
  }
  for (int i = 0; i < 10; ++i) {
    m.push_back({nullptr, 5, 0, 0, {}});
  }
  return m;
}

const std::vector<std::string>& StoriesQuantAttrNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (int i = 0; i < 10; ++i) v.push_back("get_kv_output_" + std::to_string(i) + "_quant_attr");
    return v;
  }();
  return names;
}

const std::vector<PteFacts>& AllPteFacts() {
  static const std::vector<PteFacts> facts = [] {
    std::vector<PteFacts> f = {
        // add.pte: no eh00 (bytes 8..12 are 00000000), one empty segment for the constants.
        {"add.pte", 728, false, 0, 728, 0, false, 0, {{0, 0}}, 0, 1, 0, {}, {{"forward", 4, 1, 1, {}}}},
        // arduino_add.pte: eh00 length 32; 4 constant bytes at 1152 (1040 padded to 128).
        {"arduino_add.pte", 1156, true, 32, 1040, 1152, true, 4, {{0, 4}}, 0, 2, 0, {}, {{"forward", 4, 1, 1, {}}}},
        {"conv2d_quantized.pte",
         12096,
         true,
         32,
         2416,
         2432,
         true,
         9664,
         {{0, 9664}},
         0,
         3,
         0,
         {},
         {{"forward", 33, 3, 3, {}}}},
        {"keyword_spotting.pte",
         54192,
         true,
         32,
         14904,
         14976,
         true,
         39216,
         {{0, 39216}},
         0,
         64,
         0,
         {},
         {{"forward", 289, 8, 16, {}}}},
        // linear.pte: weights are EXTERNAL (in linear.ptd); the constant segment is empty.
        {"linear.pte",
         1208,
         false,
         0,
         1208,
         0,
         false,
         0,
         {{0, 0}},
         0,
         1,
         0,
         {"linear.weight", "linear.bias"},
         {{"forward", 10, 2, 2, {}}}},
        {"maxpool2d.pte", 1504, false, 0, 1504, 0, false, 0, {{0, 0}}, 0, 1, 0, {}, {{"forward", 17, 1, 1, {}}}},
        // Legacy: constants inline in constant_buffer (3 buffers, the first empty), no segments at all.
        {"module_linear_no_constant_segment.pte",
         1040,
         false,
         0,
         1040,
         0,
         false,
         0,
         {},
         0,
         0,
         3,
         {},
         {{"forward", 6, 2, 2, {}}}},
        {"softmax.pte", 976, false, 0, 976, 0, false, 0, {{0, 0}}, 0, 1, 0, {}, {{"forward", 4, 1, 1, {}}}},
        // stories260k_qnn.pte: segment_base_offset == program_size (18688 is already 256-aligned); segment 0
        // is the empty constant segment, segment 1 the QNN context binary, and both start at offset 0.
        {"stories260k_qnn.pte",
         1350144,
         true,
         32,
         18688,
         18688,
         true,
         1331456,
         {{0, 0}, {0, 1331456}},
         0,
         1,
         0,
         {},
         StoriesMethods()},
        // xor.pte: the old 24-byte eh00 header (no segment_data_size; bytes 32..40 are zero padding).
        {"xor.pte",
         13832,
         true,
         24,
         13704,
         13824,
         false,
         0,
         {{0, 8}},
         0,
         2,
         0,
         {"net.linear.weight", "net.linear.bias", "net.linear2.weight", "net.linear2.bias"},
         {{"forward", 155, 23, 66, {}},
          {"__et_training_gradients_index_forward", 1, 0, 0, {}},
          {"__et_training_fqn_forward", 4, 0, 0, {}},
          {"__et_training_parameters_index_forward", 1, 0, 0, {}}}},
    };
    return f;
  }();
  return facts;
}

void PrintTo(const PteFacts& f, std::ostream* os) { *os << f.file; }

std::string MethodName(const PteFacts& f, size_t i) {
  const char* n = f.methods[i].name;
  if (n) return n;
  return StoriesQuantAttrNames()[i - 19];  // only stories260k uses generated names, from index 19 on
}

std::string FirstError(const Report& r) {
  for (const auto& f : r.findings()) {
    if (f.severity == Finding::Severity::kError) return f.ToString();
  }
  return "";
}

// ---------------------------------------------------------------------------
// Every file in the fixture directory is known to this test.

TEST(ReaderFixtureDir, EveryFileIsCovered) {
  std::set<std::string> known = {"SOURCES.md", "linear.ptd", "xor.ptd", "bundled_program.bpte"};
  for (const auto& f : AllPteFacts()) known.insert(f.file);
  std::set<std::string> seen;
  if (!testing::HaveFixtures()) testing::SkipWithoutFixtures();
  for (const auto& e : std::filesystem::directory_iterator(testing::FixturesDir())) {
    std::string n = e.path().filename().string();
    seen.insert(n);
    EXPECT_TRUE(known.count(n)) << n << " is a fixture without hand-derived facts in reader_test.cpp";
  }
  for (const auto& n : known) EXPECT_TRUE(seen.count(n)) << n << " is missing from the fixture directory";
  // [size] ls | wc -l: 10 .pte, 2 .ptd, 1 .bpte, SOURCES.md
  EXPECT_EQ(seen.size(), 14u);
  EXPECT_EQ(testing::PteFixtures().size(), 10u);
}

// ---------------------------------------------------------------------------
// Per-.pte facts.

class ReaderPte : public ::testing::TestWithParam<PteFacts> {
 protected:
  void SetUp() override {
    pte_ = PteFile::Open(FixturePath(GetParam().file));
    ASSERT_TRUE(pte_->ok()) << FirstError(pte_->report());
    ASSERT_NE(pte_->program(), nullptr);
  }
  std::unique_ptr<PteFile> pte_;
};

TEST_P(ReaderPte, NoErrors) {
  EXPECT_EQ(pte_->report().error_count(), 0u);
  EXPECT_EQ(pte_->file().size, GetParam().file_size);
  // [size] cross-check against the raw file
  EXPECT_EQ(ReadFile(FixturePath(GetParam().file)).size(), GetParam().file_size);
}

TEST_P(ReaderPte, Header) {
  const PteFacts& f = GetParam();
  // [hdr] b[4:8] == b'ET12' for every .pte
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(pte_->file().data + 4), 4), "ET12");
  ASSERT_EQ(pte_->header().has_value(), f.has_header);
  EXPECT_EQ(pte_->program_size(), f.program_size);
  EXPECT_EQ(pte_->segment_base_offset(), f.segment_base_offset);
  EXPECT_EQ(pte_->flatbuffer().size, f.program_size);
  if (f.has_header) {
    const ExtendedHeader& h = *pte_->header();
    EXPECT_EQ(h.length, f.header_length);
    EXPECT_EQ(h.program_size, f.program_size);
    EXPECT_EQ(h.segment_base_offset, f.segment_base_offset);
    EXPECT_EQ(h.has_segment_data_size, f.has_segment_data_size);
    if (f.has_segment_data_size) {
      EXPECT_EQ(h.segment_data_size, f.segment_data_size);
      // [hdr] every fixture's segments end exactly at the end of the file
      EXPECT_EQ(f.segment_base_offset + f.segment_data_size, f.file_size);
    }
  }
}

TEST_P(ReaderPte, Segments) {
  const PteFacts& f = GetParam();
  const auto& segs = pte_->segments();
  ASSERT_EQ(segs.size(), f.segments.size());
  const auto* psegs = pte_->program()->segments();
  ASSERT_EQ(psegs ? psegs->size() : 0u, f.segments.size());
  for (size_t i = 0; i < segs.size(); ++i) {
    SCOPED_TRACE("segment " + std::to_string(i));
    EXPECT_EQ(segs[i].offset, f.segments[i].first);
    EXPECT_EQ(segs[i].size, f.segments[i].second);
    EXPECT_EQ(segs[i].file_offset, f.segment_base_offset + f.segments[i].first);
    EXPECT_TRUE(segs[i].in_file);
    EXPECT_EQ(pte_->SegmentData(i).size, f.segments[i].second);
    EXPECT_LE(segs[i].file_offset + segs[i].size, f.file_size);
  }
}

TEST_P(ReaderPte, Constants) {
  const PteFacts& f = GetParam();
  const efb::Program& p = *pte_->program();
  const auto* cs = p.constant_segment();
  size_t n_off = cs && cs->offsets() ? cs->offsets()->size() : 0;
  EXPECT_EQ(n_off, f.constant_offsets);
  if (cs) {
    EXPECT_EQ(cs->segment_index(), f.constant_segment_index);
  }
  EXPECT_EQ(p.constant_buffer() ? p.constant_buffer()->size() : 0u, f.constant_buffers);
  // [json] no fixture has inline delegate data, mutable_data_segments or program-level named_data.
  EXPECT_EQ(p.backend_delegate_data() ? p.backend_delegate_data()->size() : 0u, 0u);
  EXPECT_EQ(p.mutable_data_segments(), nullptr);
  EXPECT_EQ(p.named_data(), nullptr);
  // [json] version is absent (0) everywhere.
  EXPECT_EQ(p.version(), 0u);
}

TEST_P(ReaderPte, Methods) {
  const PteFacts& f = GetParam();
  const auto* plans = pte_->program()->execution_plan();
  ASSERT_NE(plans, nullptr);
  ASSERT_EQ(plans->size(), f.methods.size());
  for (size_t i = 0; i < f.methods.size(); ++i) {
    const MethodFacts& m = f.methods[i];
    const auto* plan = plans->Get(static_cast<flatbuffers::uoffset_t>(i));
    std::string want = MethodName(f, i);
    SCOPED_TRACE("method " + want);
    ASSERT_NE(plan->name(), nullptr);
    EXPECT_EQ(plan->name()->str(), want);
    EXPECT_EQ(plan->values() ? plan->values()->size() : 0u, m.values);
    EXPECT_EQ(plan->operators() ? plan->operators()->size() : 0u, m.operators);
    size_t ninstr = 0;
    if (plan->chains()) {
      // [json] every method has exactly one chain
      EXPECT_EQ(plan->chains()->size(), 1u);
      for (const auto* c : *plan->chains()) ninstr += c->instructions() ? c->instructions()->size() : 0;
    }
    EXPECT_EQ(ninstr, m.instructions);
    std::vector<std::string> dels;
    if (plan->delegates()) {
      for (const auto* d : *plan->delegates()) dels.push_back(d->id() ? d->id()->str() : "");
    }
    EXPECT_EQ(dels, m.delegates);
  }
}

TEST_P(ReaderPte, ExternalKeys) {
  const PteFacts& f = GetParam();
  std::vector<std::string> keys;
  const auto* plan = pte_->program()->execution_plan()->Get(0);
  for (const auto* v : *plan->values()) {
    if (v->val_type() != efb::KernelTypes::Tensor) continue;
    const auto* eti = v->val_as_Tensor()->extra_tensor_info();
    if (eti && eti->location() == efb::TensorDataLocation::EXTERNAL && eti->fully_qualified_name()) {
      keys.push_back(eti->fully_qualified_name()->str());
    }
  }
  EXPECT_EQ(keys, f.external_keys);
}

TEST_P(ReaderPte, SegmentAlignmentOption) {
  // [align] segment file offsets: 1152 (0x480), 2432 (0x980), 14976 (0x3a80), 18688 (0x4900),
  // 13824 (0x3600), and 0 for the empty segments of header-less files: all multiples of 128.
  ReadOptions ro;
  ro.segment_alignment = 128;
  auto pte = PteFile::Open(FixturePath(GetParam().file), ro);
  EXPECT_TRUE(pte->ok()) << FirstError(pte->report());
  EXPECT_FALSE(pte->report().Has("segment-misaligned"));
}

INSTANTIATE_TEST_SUITE_P(ReaderFixtures, ReaderPte, ::testing::ValuesIn(AllPteFacts()),
                         [](const ::testing::TestParamInfo<PteFacts>& info) {
                           std::string n = info.param.file;
                           return n.substr(0, n.find('.'));
                         });

// ---------------------------------------------------------------------------
// Details of single fixtures.

TEST(ReaderPteDetail, ArduinoConstantSegmentBytes) {
  auto pte = PteFile::Open(FixturePath("arduino_add.pte"));
  ASSERT_TRUE(pte->ok());
  // [bytes] xxd -s 1152 arduino_add.pte: 0000 803f (1.0f); offsets [0, 0]: buffer 1 is those 4 bytes.
  Bytes seg = pte->SegmentData(0);
  ASSERT_EQ(seg.size, 4u);
  EXPECT_EQ(seg.data - pte->file().data, 1152);
  EXPECT_EQ(std::vector<uint8_t>(seg.data, seg.data + 4), (std::vector<uint8_t>{0x00, 0x00, 0x80, 0x3f}));
  const auto* offs = pte->program()->constant_segment()->offsets();
  EXPECT_EQ(offs->Get(0), 0u);
  EXPECT_EQ(offs->Get(1), 0u);
  // [align] 1152 = 0x480: a 4096-aligned layout is not what this file has.
  ReadOptions ro;
  ro.segment_alignment = 4096;
  auto strict = PteFile::Open(FixturePath("arduino_add.pte"), ro);
  EXPECT_TRUE(strict->report().Has("segment-misaligned"));
  ro.segment_alignment = 256;
  EXPECT_TRUE(PteFile::Open(FixturePath("arduino_add.pte"), ro)->report().Has("segment-misaligned"));
}

TEST(ReaderPteDetail, XorConstantIsInt64One) {
  auto pte = PteFile::Open(FixturePath("xor.pte"));
  ASSERT_TRUE(pte->ok());
  // [bytes] xxd -s 13824 xor.pte: 0100 0000 0000 0000, the LONG scalar (value 4, data_buffer_idx 1).
  Bytes seg = pte->SegmentData(0);
  ASSERT_EQ(seg.size, 8u);
  EXPECT_EQ(seg.data - pte->file().data, 13824);
  EXPECT_EQ(LoadU64(seg.data), 1u);
  // [hdr] bytes 32..40 (header padding) are zero since the 24-byte header has no segment_data_size.
  for (int i = 32; i < 40; ++i) EXPECT_EQ(pte->file().data[i], 0) << i;
}

TEST(ReaderPteDetail, Conv2dConstantOffsets) {
  auto pte = PteFile::Open(FixturePath("conv2d_quantized.pte"));
  ASSERT_TRUE(pte->ok());
  // [json] offsets [0, 0, 9408]: buffer 1 is CHAR[64,3,7,7] = 9408 bytes, buffer 2 INT[64] = 256 bytes,
  // 9408 + 256 = 9664 = the segment size.
  const auto* offs = pte->program()->constant_segment()->offsets();
  ASSERT_EQ(offs->size(), 3u);
  EXPECT_EQ(offs->Get(0), 0u);
  EXPECT_EQ(offs->Get(1), 0u);
  EXPECT_EQ(offs->Get(2), 9408u);
  EXPECT_EQ(9408u + 256u, pte->segments()[0].size);
}

TEST(ReaderPteDetail, KeywordSpottingConstantOffsets) {
  auto pte = PteFile::Open(FixturePath("keyword_spotting.pte"));
  ASSERT_TRUE(pte->ok());
  // [json] d['constant_segment']['offsets']
  const std::vector<uint64_t> want = {
      0,     0,     256,   768,   1024,  1280,  1536,  1792,  2048,  2304,  2560,  2816,  3072,  3328,  3584,  3840,
      4096,  4352,  4608,  4864,  5120,  5376,  7936,  8192,  8448,  11008, 11264, 11840, 12096, 12352, 12928, 13184,
      17280, 17536, 17792, 18048, 18624, 18880, 19136, 19712, 19968, 24064, 24320, 24576, 24832, 25408, 25664, 25920,
      26496, 26752, 30848, 31104, 31360, 31616, 32192, 32448, 32704, 33280, 33536, 37632, 37888, 38144, 38400, 39168};
  const auto* offs = pte->program()->constant_segment()->offsets();
  std::vector<uint64_t> got(offs->begin(), offs->end());
  EXPECT_EQ(got, want);
  // [json] the last constant (at 39168) ends within the 39216-byte segment.
  EXPECT_LT(want.back(), pte->segments()[0].size);
  // Operator names, in table order.
  std::vector<std::string> ops;
  for (const auto* op : *pte->program()->execution_plan()->Get(0)->operators()) {
    ops.push_back(op->name()->str() + "." + op->overload()->str());
  }
  std::set<std::string> uniq(ops.begin(), ops.end());
  EXPECT_EQ(ops.size(), 8u);
  EXPECT_EQ(uniq.size(), 8u);
  EXPECT_TRUE(uniq.count("cortex_m::quantized_conv2d.out"));
  EXPECT_TRUE(uniq.count("dim_order_ops::_clone_dim_order.out"));
}

TEST(ReaderPteDetail, LegacyConstantBuffer) {
  auto pte = PteFile::Open(FixturePath("module_linear_no_constant_segment.pte"));
  ASSERT_TRUE(pte->ok());
  const auto* cb = pte->program()->constant_buffer();
  ASSERT_EQ(cb->size(), 3u);
  // [json] storage lengths 0, 16, 16; buffer 1 is 4 x 3.0f (0x40400000), buffer 2 is 4 x 2.0f (0x40000000).
  EXPECT_EQ(cb->Get(0)->storage() ? cb->Get(0)->storage()->size() : 0u, 0u);
  ASSERT_EQ(cb->Get(1)->storage()->size(), 16u);
  ASSERT_EQ(cb->Get(2)->storage()->size(), 16u);
  EXPECT_EQ(LoadU32(cb->Get(1)->storage()->data()), 0x40400000u);
  EXPECT_EQ(LoadU32(cb->Get(2)->storage()->data()), 0x40000000u);
  // [json] no segments, empty constant_segment: the file has no extended header.
  EXPECT_TRUE(pte->segments().empty());
  EXPECT_FALSE(pte->header().has_value());
  // [hdr] root offset 36 (not 28 like the other flatc-written files)
  EXPECT_EQ(LoadU32(pte->file().data), 36u);
  // [json] ops aten::mul.out, aten::add.out
  const auto* ops = pte->program()->execution_plan()->Get(0)->operators();
  EXPECT_EQ(ops->Get(0)->name()->str(), "aten::mul");
  EXPECT_EQ(ops->Get(1)->name()->str(), "aten::add");
}

TEST(ReaderPteDetail, StoriesDelegatesShareSegmentOne) {
  auto pte = PteFile::Open(FixturePath("stories260k_qnn.pte"));
  ASSERT_TRUE(pte->ok());
  const auto* plans = pte->program()->execution_plan();
  ASSERT_EQ(plans->size(), 29u);
  // [json] both forwards: processed {'location': 'SEGMENT', 'index': 1}, one compile spec "qnn_compile_spec".
  for (int i = 0; i < 2; ++i) {
    const auto* d = plans->Get(i)->delegates()->Get(0);
    EXPECT_EQ(d->processed()->location(), efb::DataLocation::SEGMENT);
    EXPECT_EQ(d->processed()->index(), 1u);
    ASSERT_EQ(d->compile_specs()->size(), 1u);
    EXPECT_EQ(d->compile_specs()->Get(0)->key()->str(), "qnn_compile_spec");
    // [json] 13 inputs, 11 outputs
    EXPECT_EQ(plans->Get(i)->inputs()->size(), 13u);
    EXPECT_EQ(plans->Get(i)->outputs()->size(), 11u);
  }
  // [bytes] xxd -s 18688 -l 8: cdab 7856 168e 07de (start of the QNN context binary)
  Bytes blob = pte->SegmentData(1);
  EXPECT_EQ(blob.data - pte->file().data, 18688);
  EXPECT_EQ(blob.size, 1331456u);
  EXPECT_EQ(LoadU32(blob.data), 0x5678abcdu);
  // Empty constant segment: 0 bytes at the same place.
  EXPECT_EQ(pte->segments()[0].size, 0u);
  EXPECT_EQ(pte->segments()[0].file_offset, 18688u);
}

TEST(ReaderPteDetail, XorTrainingMethods) {
  auto pte = PteFile::Open(FixturePath("xor.pte"));
  ASSERT_TRUE(pte->ok());
  const auto* fwd = pte->program()->execution_plan()->Get(0);
  // [json] inputs 2, outputs 10; the four external weights are values 0..3, FLOAT, requires_grad.
  EXPECT_EQ(fwd->inputs()->size(), 2u);
  EXPECT_EQ(fwd->outputs()->size(), 10u);
  const std::vector<std::vector<int32_t>> shapes = {{10, 2}, {10}, {2, 10}, {2}};
  for (int i = 0; i < 4; ++i) {
    const auto* t = fwd->values()->Get(i)->val_as_Tensor();
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->scalar_type(), efb::ScalarType::FLOAT);
    EXPECT_TRUE(t->requires_grad());
    EXPECT_EQ(std::vector<int32_t>(t->sizes()->begin(), t->sizes()->end()), shapes[i]);
    EXPECT_NE(t->allocation_info(), nullptr);  // mutable: planned memory
  }
}

// ---------------------------------------------------------------------------
// The BundledProgram is not a program.

TEST(ReaderBundled, PteReaderRejectsWithBadMagic) {
  std::vector<uint8_t> raw = ReadFile(FixturePath("bundled_program.bpte"));
  // [size] 4608; [hdr] b[4:8] == b'BP08'
  ASSERT_EQ(raw.size(), 4608u);
  ASSERT_EQ(std::string(raw.begin() + 4, raw.begin() + 8), "BP08");
  auto pte = PteFile::Open(FixturePath("bundled_program.bpte"));
  EXPECT_FALSE(pte->ok());
  EXPECT_EQ(pte->program(), nullptr);
  ASSERT_FALSE(pte->report().findings().empty());
  const Finding& f = pte->report().findings().front();
  EXPECT_EQ(f.code, "bad-magic");
  EXPECT_NE(f.message.find("BundledProgram"), std::string::npos) << f.message;
  EXPECT_TRUE(pte->segments().empty());
}

TEST(ReaderBundled, PtdReaderRejectsToo) {
  auto ptd = PtdFile::Open(FixturePath("bundled_program.bpte"));
  EXPECT_FALSE(ptd->ok());
  EXPECT_TRUE(ptd->report().Has("bad-magic"));
  EXPECT_TRUE(ptd->entries().empty());
}

// ---------------------------------------------------------------------------
// .ptd files.

TEST(ReaderPtd, LinearIsLegacyLayout) {
  auto ptd = PtdFile::Open(FixturePath("linear.ptd"));
  ASSERT_TRUE(ptd->ok()) << FirstError(ptd->report());
  // A legacy file is readable but flagged.
  EXPECT_TRUE(ptd->legacy());
  EXPECT_TRUE(ptd->report().Has("legacy-format"));
  EXPECT_EQ(ptd->flat_tensor(), nullptr);
  // [size] 336; [hdr] b[4:8] == b'FT01', b[8:12] == b'FH01', unpack '<IQQQQ' at 12: 40, 48, 224, 272, 64
  EXPECT_EQ(ptd->file().size, 336u);
  const FlatTensorHeader& h = ptd->header();
  EXPECT_EQ(h.length, 40u);
  EXPECT_EQ(h.flatbuffer_offset, 48u);
  EXPECT_EQ(h.flatbuffer_size, 224u);
  EXPECT_EQ(h.segment_base_offset, 272u);
  EXPECT_EQ(h.segment_data_size, 64u);
  // [ptd] tensor_alignment 16, no named_data, one segment {offset 0, size 64}
  EXPECT_EQ(ptd->legacy_tensor_alignment(), 16u);
  EXPECT_FALSE(ptd->legacy_has_named_data());
  ASSERT_EQ(ptd->segments().size(), 1u);
  EXPECT_EQ(ptd->segments()[0].offset, 0u);
  EXPECT_EQ(ptd->segments()[0].size, 64u);
  EXPECT_EQ(ptd->segments()[0].file_offset, 272u);
  // [ptd] tensors: linear.weight FLOAT [3,3] dim_order [0,1] offset 0 (36 bytes, padded to 48);
  //       linear.bias FLOAT [3] dim_order [0] offset 48 (12 bytes, 16 to the segment end).
  ASSERT_EQ(ptd->entries().size(), 2u);
  const PtdEntry& w = ptd->entries()[0];
  const PtdEntry& b = ptd->entries()[1];
  EXPECT_EQ(w.key, "linear.weight");
  EXPECT_TRUE(w.legacy_tensor);
  EXPECT_TRUE(w.has_layout);
  EXPECT_EQ(w.scalar_type, 6);  // FLOAT
  EXPECT_EQ(w.sizes, (std::vector<int32_t>{3, 3}));
  EXPECT_EQ(w.dim_order, (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(w.segment_index, 0u);
  EXPECT_EQ(w.offset, 0u);
  EXPECT_EQ(w.size, 36u);
  EXPECT_EQ(w.extent, 48u);
  EXPECT_TRUE(w.valid);
  EXPECT_EQ(b.key, "linear.bias");
  EXPECT_EQ(b.sizes, (std::vector<int32_t>{3}));
  EXPECT_EQ(b.dim_order, (std::vector<uint8_t>{0}));
  EXPECT_EQ(b.offset, 48u);
  EXPECT_EQ(b.size, 12u);
  EXPECT_EQ(b.extent, 16u);
  // [bytes] xxd -s 272 linear.ptd: weight starts 9751 813e; xxd -s 320: bias starts b93c 823e
  Bytes wd = ptd->EntryData(w);
  Bytes bd = ptd->EntryData(b);
  EXPECT_EQ(wd.data - ptd->file().data, 272);
  EXPECT_EQ(bd.data - ptd->file().data, 320);
  EXPECT_EQ(LoadU32(wd.data), 0x3e815197u);
  EXPECT_EQ(LoadU32(bd.data), 0x3e823cb9u);
  auto found = ptd->Find("linear.bias");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->size, 12u);
  EXPECT_FALSE(ptd->Find("linear.nothing").has_value());
}

TEST(ReaderPtd, XorIsCurrentLayout) {
  auto ptd = PtdFile::Open(FixturePath("xor.ptd"));
  ASSERT_TRUE(ptd->ok()) << FirstError(ptd->report());
  EXPECT_FALSE(ptd->legacy());
  EXPECT_FALSE(ptd->report().Has("legacy-format"));
  ASSERT_NE(ptd->flat_tensor(), nullptr);
  // [size] 760; [hdr] 40, 48, 496, 544, 216 (544 + 216 = 760)
  EXPECT_EQ(ptd->file().size, 760u);
  const FlatTensorHeader& h = ptd->header();
  EXPECT_EQ(h.length, 40u);
  EXPECT_EQ(h.flatbuffer_offset, 48u);
  EXPECT_EQ(h.flatbuffer_size, 496u);
  EXPECT_EQ(h.segment_base_offset, 544u);
  EXPECT_EQ(h.segment_data_size, 216u);
  // [ptd] segments (0,80) (80,40) (128,80) (208,8); one per named_data entry, in order.
  const std::vector<std::pair<uint64_t, uint64_t>> segs = {{0, 80}, {80, 40}, {128, 80}, {208, 8}};
  ASSERT_EQ(ptd->segments().size(), segs.size());
  for (size_t i = 0; i < segs.size(); ++i) {
    EXPECT_EQ(ptd->segments()[i].offset, segs[i].first);
    EXPECT_EQ(ptd->segments()[i].size, segs[i].second);
    EXPECT_EQ(ptd->segments()[i].file_offset, 544 + segs[i].first);
    EXPECT_TRUE(ptd->segments()[i].in_file);
  }
  struct E {
    const char* key;
    std::vector<int32_t> sizes;
    std::vector<uint8_t> dim_order;
  };
  // [ptd] named_data keys with tensor_layout FLOAT sizes / dim_order
  const std::vector<E> want = {{"net.linear.weight", {10, 2}, {0, 1}},
                               {"net.linear.bias", {10}, {0}},
                               {"net.linear2.weight", {2, 10}, {0, 1}},
                               {"net.linear2.bias", {2}, {0}}};
  ASSERT_EQ(ptd->entries().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const PtdEntry& e = ptd->entries()[i];
    SCOPED_TRACE(want[i].key);
    EXPECT_EQ(e.key, want[i].key);
    EXPECT_EQ(e.segment_index, i);
    EXPECT_FALSE(e.legacy_tensor);
    EXPECT_TRUE(e.has_layout);
    EXPECT_EQ(e.scalar_type, 6);
    EXPECT_EQ(e.sizes, want[i].sizes);
    EXPECT_EQ(e.dim_order, want[i].dim_order);
    EXPECT_EQ(e.offset, 0u);
    EXPECT_EQ(e.size, segs[i].second);  // whole segment; equals 4 * numel
    EXPECT_TRUE(e.valid);
  }
  // [bytes] xxd -s 544 -l 4 xor.ptd: 2279 adbb; xxd -s 752 xor.ptd: cc19 4f3e 6ef5 a03e
  EXPECT_EQ(LoadU32(ptd->EntryData(ptd->entries()[0]).data), 0xbbad7922u);
  Bytes last = ptd->EntryData(ptd->entries()[3]);
  ASSERT_EQ(last.size, 8u);
  EXPECT_EQ(LoadU64(last.data), 0x3ea0f56e3e4f19ccull);
}

// Keys are views of the file's FlatBuffers strings (length-prefixed), and
// duplicates are found by sorting: every later copy of a key is reported, at
// its own entry and in entry order, and the first copy is not.
TEST(ReaderPtd, EveryLaterCopyOfAKeyIsADuplicate) {
  std::vector<uint8_t> b = ReadFile(FixturePath("xor.ptd"));
  // [bytes] xxd -s 148 -l 24 xor.ptd: u32 16, "net.linear2.bias", NUL (entry 3's key);
  //         xxd -s 224 -l 24: u32 18, "net.linear2.weight", NUL (entry 2's key).
  // Both become the 15-byte "net.linear.bias" (entry 1's key): new length, text, NUL.
  const std::string bias = "net.linear.bias";
  const std::vector<std::pair<size_t, std::string>> keys = {{152, "net.linear2.bias"}, {228, "net.linear2.weight"}};
  for (const auto& [at, old] : keys) {
    ASSERT_EQ(LoadU32(b.data() + at - 4), old.size());
    ASSERT_EQ(std::string(b.begin() + at, b.begin() + at + old.size()), old);
    StoreU32(b.data() + at - 4, static_cast<uint32_t>(bias.size()));
    std::copy(bias.begin(), bias.end(), b.begin() + at);
    b[at + bias.size()] = 0;
  }
  auto ptd = PtdFile::FromBytes(Bytes::Copy(b.data(), b.size()), "dup.ptd");
  ASSERT_EQ(ptd->entries().size(), 4u);
  EXPECT_EQ(ptd->entries()[0].key, "net.linear.weight");
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(ptd->entries()[i].key, bias);
    EXPECT_EQ(ptd->entries()[i].key.size(), bias.size());
  }
  std::vector<uint64_t> at;
  for (const Finding& f : ptd->report().findings()) {
    ASSERT_EQ(f.code, "duplicate-key") << f.ToString();
    EXPECT_NE(f.message.find("\"" + bias + "\""), std::string::npos) << f.message;
    at.push_back(f.offset.value_or(0));
  }
  EXPECT_EQ(at, (std::vector<uint64_t>{ptd->entries()[2].table_offset, ptd->entries()[3].table_offset}));
  // The other checks still ran: every entry is in the file.
  for (const PtdEntry& e : ptd->entries()) EXPECT_TRUE(e.valid);
}

TEST(ReaderPtd, PteReaderRejectsPtdWithHint) {
  auto pte = PteFile::Open(FixturePath("xor.ptd"));
  EXPECT_FALSE(pte->ok());
  ASSERT_FALSE(pte->report().findings().empty());
  EXPECT_EQ(pte->report().findings().front().code, "bad-magic");
}

// ---------------------------------------------------------------------------
// External keys of the programs against their .ptd files.

struct KeyCase {
  const char* pte;
  const char* ptd;  // nullptr: no .ptd at all
  size_t dangling;  // number of [json] external keys not among the [ptd] keys
};

class ReaderExternalKeys : public ::testing::TestWithParam<KeyCase> {};

TEST_P(ReaderExternalKeys, DanglingCount) {
  const KeyCase& c = GetParam();
  auto pte = PteFile::Open(FixturePath(c.pte));
  ASSERT_TRUE(pte->ok());
  std::unique_ptr<PtdFile> ptd;
  std::vector<const PtdFile*> ptds;
  if (c.ptd) {
    ptd = PtdFile::Open(FixturePath(c.ptd));
    ASSERT_TRUE(ptd->ok());
    ptds.push_back(ptd.get());
  }
  pte->CheckExternalKeys(ptds);
  size_t n = 0;
  for (const auto& f : pte->report().findings()) n += f.code == "dangling-external-key";
  EXPECT_EQ(n, c.dangling);
  EXPECT_EQ(pte->ok(), c.dangling == 0);
}

INSTANTIATE_TEST_SUITE_P(ReaderFixtures, ReaderExternalKeys,
                         ::testing::Values(KeyCase{"linear.pte", "linear.ptd", 0}, KeyCase{"xor.pte", "xor.ptd", 0},
                                           // linear.weight / linear.bias vs net.linear*: nothing matches.
                                           KeyCase{"linear.pte", "xor.ptd", 2}, KeyCase{"xor.pte", "linear.ptd", 4},
                                           KeyCase{"linear.pte", nullptr, 2}, KeyCase{"xor.pte", nullptr, 4},
                                           // No external tensors: any .ptd (or none) is fine.
                                           KeyCase{"add.pte", "xor.ptd", 0},
                                           KeyCase{"stories260k_qnn.pte", nullptr, 0}),
                         [](const ::testing::TestParamInfo<KeyCase>& info) {
                           std::string a = info.param.pte;
                           std::string b = info.param.ptd ? info.param.ptd : "none";
                           return a.substr(0, a.find('.')) + "_with_" + b.substr(0, b.find('.'));
                         });

// ---------------------------------------------------------------------------
// What ExecuTorch's runtime refuses while loading (Program::load with
// InternalConsistency, load_method, FlatTensorDataMap): each check gets a
// mutant of a real fixture with one field changed, and the finding's code and
// offset. The facts come from the runtime's sources: program_validation.cpp
// (validate_tensor, validate_program), method.cpp (parse_values, init),
// tensor_parser_portable.cpp (parseTensor), tensor_parser_exec_aten.cpp
// (validateTensorLayout), flat_tensor_data_map.cpp, merged_data_map.cpp.

using Buf = std::vector<uint8_t>;
using prog::F;

std::unique_ptr<PteFile> Pte(const Buf& b, const ReadOptions& o = {}) {
  return PteFile::FromBytes(Bytes::Copy(b.data(), b.size()), "mutant.pte", o);
}
std::unique_ptr<PtdFile> Ptd(const Buf& b, const ReadOptions& o = {}) {
  return PtdFile::FromBytes(Bytes::Copy(b.data(), b.size()), "mutant.ptd", o);
}
template <typename T>
uint64_t At(const Bytes& file, const T* p) {
  return static_cast<uint64_t>(reinterpret_cast<const uint8_t*>(p) - file.data);
}

// Re-encodes the program of a .pte after `edit`, keeping its segment data at
// a 128-aligned base behind an updated eh00 header.
Buf EditPte(const Buf& file, const std::function<void(fb::Table&)>& edit) {
  auto pte = Pte(file);
  if (!pte->program()) throw std::runtime_error("EditPte: input does not verify");
  Bytes fbb = pte->flatbuffer();
  auto tree = fb::Decode(prog::S(), fbb.data, fbb.size, fbb.owner);
  edit(*tree);
  fb::Encoded enc = fb::Encode(prog::S(), *tree, fb::EncodeOptions{});
  if (!pte->header()) return enc.data;
  ExtendedHeader h = *pte->header();
  uint64_t padded = AlignUp(kExtendedHeaderLength, enc.max_force_align);
  h.length = kExtendedHeaderLength;
  h.has_segment_data_size = true;
  h.program_size = padded + enc.data.size();
  uint64_t old_base = pte->segment_base_offset();
  h.segment_base_offset = old_base == 0 ? 0 : AlignUp(h.program_size, 128);
  h.segment_data_size = old_base == 0 ? 0 : file.size() - old_base;
  Buf hb = EncodeExtendedHeader(h);
  hb.resize(padded, 0);
  Buf out = InsertHeader(enc.data, hb);
  if (old_base != 0) {
    out.resize(h.segment_base_offset, 0);
    out.insert(out.end(), file.begin() + static_cast<std::ptrdiff_t>(old_base), file.end());
  }
  return out;
}

// The same for current-layout .ptd files.
Buf EditPtd(const Buf& file, const std::function<void(fb::Table&)>& edit) {
  auto ptd = Ptd(file);
  if (!ptd->flat_tensor()) throw std::runtime_error("EditPtd: input is not a current-layout .ptd");
  const fb::Schema& s = fb::FlatTensorSchema();
  const FlatTensorHeader& old = ptd->header();
  auto tree = fb::Decode(s, ptd->file().data, old.flatbuffer_offset + old.flatbuffer_size, ptd->file().owner);
  edit(*tree);
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

fb::Value& PtdF(fb::Table& t, const char* name) { return fb::Field(fb::FlatTensorSchema(), t, name); }

fb::Table& Elem(fb::Value& v, size_t i) { return *v.elems().at(i).table(); }
fb::Table& Plan0(fb::Table& p) { return Elem(F(p, "execution_plan"), 0); }
fb::Table& Value(fb::Table& p, size_t i) { return Elem(F(Plan0(p), "values"), i); }
fb::Table& ValTable(fb::Table& p, size_t i) { return *F(Value(p, i), "val").table(); }

const efb::ExecutionPlan* TPlan(const PteFile& f) { return f.program()->execution_plan()->Get(0); }
const efb::EValue* TValue(const PteFile& f, size_t i) {
  return TPlan(f)->values()->Get(static_cast<flatbuffers::uoffset_t>(i));
}

// The first error with `code` is at `offset`.
::testing::AssertionResult HasError(const Report& r, const std::string& code, std::optional<uint64_t> offset) {
  std::string all;
  for (const auto& f : r.findings()) {
    all += "\n  " + f.ToString();
    if (f.severity == Finding::Severity::kError && f.code == code) {
      if (offset && f.offset != offset) {
        return ::testing::AssertionFailure()
               << "[" << code << "] at " << (f.offset ? *f.offset : 0) << ", expected " << *offset << ":" << all;
      }
      return ::testing::AssertionSuccess();
    }
  }
  return ::testing::AssertionFailure() << "no error [" << code << "]:" << all;
}

Buf Arduino() { return ReadFile(FixturePath("arduino_add.pte")); }
// arduino_add.pte, [json]: values 0 = FLOAT[] constant, 1 = FLOAT[3] input (planned, memory 1 offset 16),
// 2 = FLOAT[3] output, 3 = Int 1; one chain with one KernelCall aten::add.out args [1, 0, 3, 2, 2].

TEST(ReaderRuntime, ArduinoLoadsAsIs) { EXPECT_TRUE(Pte(Arduino())->ok()); }

TEST(ReaderRuntime, TensorWithoutSizes) {
  auto f = Pte(EditPte(Arduino(), [](fb::Table& p) { F(ValTable(p, 1), "sizes") = fb::Value{}; }));
  EXPECT_TRUE(HasError(f->report(), "missing-field", At(f->file(), TValue(*f, 1)->val())));
}

TEST(ReaderRuntime, TensorWithoutDimOrder) {
  auto f = Pte(EditPte(Arduino(), [](fb::Table& p) { F(ValTable(p, 1), "dim_order") = fb::Value{}; }));
  EXPECT_TRUE(HasError(f->report(), "missing-field", At(f->file(), TValue(*f, 1)->val())));
}

TEST(ReaderRuntime, DimOrderLengthDiffersFromRank) {
  auto f = Pte(EditPte(Arduino(), [](fb::Table& p) {
    F(ValTable(p, 1), "dim_order") = fb::ScalarVectorOf<uint8_t>(reflection::UByte, {0, 1});
  }));
  EXPECT_TRUE(HasError(f->report(), "dim-order-mismatch", At(f->file(), TValue(*f, 1)->val_as_Tensor()->dim_order())));
}

TEST(ReaderRuntime, DimOrderNotAPermutation) {
  auto f = Pte(EditPte(Arduino(), [](fb::Table& p) {
    F(ValTable(p, 1), "sizes") = fb::ScalarVectorOf<int32_t>(reflection::Int, {1, 3});
    F(ValTable(p, 1), "dim_order") = fb::ScalarVectorOf<uint8_t>(reflection::UByte, {1, 1});
  }));
  EXPECT_TRUE(HasError(f->report(), "bad-dim-order", At(f->file(), TValue(*f, 1)->val_as_Tensor()->dim_order())));
}

TEST(ReaderRuntime, RankAbove16) {
  auto f = Pte(EditPte(Arduino(), [](fb::Table& p) {
    std::vector<int32_t> sizes(17, 1);
    std::vector<uint8_t> dims(17);
    for (uint8_t i = 0; i < 17; ++i) dims[i] = i;
    F(ValTable(p, 2), "sizes") = fb::ScalarVectorOf<int32_t>(reflection::Int, sizes);
    F(ValTable(p, 2), "dim_order") = fb::ScalarVectorOf<uint8_t>(reflection::UByte, dims);
  }));
  EXPECT_TRUE(HasError(f->report(), "rank-too-large", At(f->file(), TValue(*f, 2)->val_as_Tensor()->sizes())));
}

TEST(ReaderRuntime, StorageOffsetAndUnboundDynamism) {
  auto f = Pte(EditPte(
      Arduino(), [](fb::Table& p) { F(ValTable(p, 1), "storage_offset") = fb::ScalarValue(reflection::Int, 4); }));
  EXPECT_TRUE(HasError(f->report(), "unsupported", At(f->file(), TValue(*f, 1)->val())));
  auto g = Pte(EditPte(Arduino(), [](fb::Table& p) {
    F(ValTable(p, 2), "shape_dynamism") = fb::ScalarValue(reflection::Byte, 2);  // DYNAMIC_UNBOUND
  }));
  EXPECT_TRUE(HasError(g->report(), "unsupported", At(g->file(), TValue(*g, 2)->val())));
}

TEST(ReaderRuntime, ElementCountOverflowsSigned64Bits) {
  // BYTE[2^30, 2^30, 8]: 2^63 elements fit in 64 unsigned bits but not in the
  // runtime's signed count; [2^30, 2^30, 2^30, 0] overflows before the 0.
  for (std::vector<int32_t> sizes :
       {std::vector<int32_t>{1 << 30, 1 << 30, 8}, std::vector<int32_t>{1 << 30, 1 << 30, 1 << 30, 0}}) {
    auto f = Pte(EditPte(Arduino(), [&](fb::Table& p) {
      std::vector<uint8_t> dims(sizes.size());
      for (size_t i = 0; i < dims.size(); ++i) dims[i] = static_cast<uint8_t>(i);
      F(ValTable(p, 2), "allocation_info") = fb::Value{};
      F(ValTable(p, 2), "scalar_type") = fb::ScalarValue(reflection::Byte, 0);
      F(ValTable(p, 2), "sizes") = fb::ScalarVectorOf<int32_t>(reflection::Int, sizes);
      F(ValTable(p, 2), "dim_order") = fb::ScalarVectorOf<uint8_t>(reflection::UByte, dims);
    }));
    EXPECT_TRUE(HasError(f->report(), "bad-shape", At(f->file(), TValue(*f, 2)->val_as_Tensor()->sizes())));
  }
}

TEST(ReaderRuntime, ComplexAndBitsTypesAreAccepted) {
  // isValid(): every ScalarType below Undefined (30), also those program.fbs does not name.
  for (int st : {8, 9, 10, 18, 21}) {
    auto f = Pte(EditPte(Arduino(), [&](fb::Table& p) {
      F(ValTable(p, 1), "scalar_type") = fb::ScalarValue(reflection::Byte, static_cast<uint64_t>(st));
      F(ValTable(p, 1), "allocation_info") = fb::Value{};
    }));
    EXPECT_TRUE(f->ok()) << st << f->report().findings().front().ToString();
  }
  auto g = Pte(EditPte(Arduino(), [](fb::Table& p) {
    F(ValTable(p, 1), "scalar_type") = fb::ScalarValue(reflection::Byte, 30);  // Undefined
  }));
  EXPECT_TRUE(HasError(g->report(), "bad-enum", At(g->file(), TValue(*g, 1)->val())));
}

TEST(ReaderRuntime, PlanFieldsTheRuntimeRequires) {
  for (const char* field : {"values", "non_const_buffer_sizes", "inputs", "outputs", "delegates"}) {
    auto f = Pte(EditPte(Arduino(), [&](fb::Table& p) { F(Plan0(p), field) = fb::Value{}; }));
    ASSERT_TRUE(f->program()) << field;
    EXPECT_TRUE(HasError(f->report(), "missing-field", At(f->file(), TPlan(*f)))) << field;
  }
}

TEST(ReaderRuntime, MethodWithoutChains) {
  // ExecuTorch's serializer writes an empty method like this; Method::init says "No chains".
  auto f = Pte(EditPte(Arduino(), [](fb::Table& p) { F(Plan0(p), "chains") = fb::OffsetVector({}, reflection::Obj); }));
  EXPECT_TRUE(HasError(f->report(), "no-chains", At(f->file(), TPlan(*f))));
  auto g = Pte(EditPte(Arduino(), [](fb::Table& p) { F(Plan0(p), "chains") = fb::Value{}; }));
  EXPECT_TRUE(HasError(g->report(), "no-chains", At(g->file(), TPlan(*g))));
}

TEST(ReaderRuntime, ChainWithoutInstructions) {
  auto f =
      Pte(EditPte(Arduino(), [](fb::Table& p) { F(Elem(F(Plan0(p), "chains"), 0), "instructions") = fb::Value{}; }));
  EXPECT_TRUE(HasError(f->report(), "missing-field", At(f->file(), TPlan(*f)->chains()->Get(0))));
}

TEST(ReaderRuntime, ValueOfTypeNone) {
  auto f = Pte(EditPte(Arduino(), [](fb::Table& p) {
    F(Value(p, 3), "val_type") = fb::UIntValue(reflection::UType, 0);
    F(Value(p, 3), "val") = fb::Value{};
  }));
  EXPECT_TRUE(HasError(f->report(), "null-value", At(f->file(), TValue(*f, 3))));
}

TEST(ReaderRuntime, KernelCallWithoutArgs) {
  auto f = Pte(EditPte(Arduino(), [](fb::Table& p) {
    fb::Table& ins = Elem(F(Elem(F(Plan0(p), "chains"), 0), "instructions"), 0);
    F(*F(ins, "instr_args").table(), "args") = fb::Value{};
  }));
  const auto* k = TPlan(*f)->chains()->Get(0)->instructions()->Get(0)->instr_args_as_KernelCall();
  EXPECT_TRUE(HasError(f->report(), "missing-field", At(f->file(), k)));
}

TEST(ReaderRuntime, OperatorNameTooLongForTheRuntime) {
  auto f = Pte(EditPte(Arduino(), [](fb::Table& p) {
    F(Elem(F(Plan0(p), "operators"), 0), "name") = fb::StringValue("aten::" + std::string(90, 'a'));  // + ".out"
  }));
  EXPECT_TRUE(HasError(f->report(), "operator-name-too-long", At(f->file(), TPlan(*f)->operators()->Get(0))));
}

TEST(ReaderRuntime, ListsWithoutItemsOrWithBadItems) {
  auto list = [](fb::Table& p, const char* type, uint8_t tag, fb::Value items) {
    auto t = prog::New(type);
    if (items.present()) F(*t, "items") = std::move(items);
    F(Value(p, 3), "val_type") = fb::UIntValue(reflection::UType, tag);
    F(Value(p, 3), "val") = fb::TableValue(t);
  };
  // KernelTypes: IntList 7, TensorList 10, OptionalTensorList 11.
  auto a = Pte(EditPte(Arduino(), [&](fb::Table& p) { list(p, "IntList", 7, fb::Value{}); }));
  EXPECT_TRUE(HasError(a->report(), "missing-list", At(a->file(), TValue(*a, 3))));
  auto b = Pte(EditPte(Arduino(), [&](fb::Table& p) {
    list(p, "IntList", 7, fb::ScalarVectorOf<int64_t>(reflection::Long, {0, 9}));
  }));
  EXPECT_TRUE(HasError(b->report(), "index-out-of-range", At(b->file(), TValue(*b, 3)->val_as_IntList()->items())));
  // Value 3 is an input argument of the kernel, not a method input: a TensorList of value 0.
  auto c = Pte(EditPte(Arduino(), [&](fb::Table& p) {
    list(p, "TensorList", 10, fb::ScalarVectorOf<int32_t>(reflection::Int, {0, 3}));
  }));
  EXPECT_TRUE(HasError(c->report(), "bad-list-item", At(c->file(), TValue(*c, 3)->val_as_TensorList()->items())));
  auto e = Pte(EditPte(Arduino(), [&](fb::Table& p) {
    list(p, "OptionalTensorList", 11, fb::ScalarVectorOf<int32_t>(reflection::Int, {-1, 0, 1}));
  }));
  EXPECT_TRUE(e->ok()) << e->report().findings().front().ToString();
}

TEST(ReaderRuntime, ForwardReferenceInATensorList) {
  // The runtime parses values in order: value 0 made a TensorList of value 1 refers to a value not yet parsed.
  auto f = Pte(EditPte(Arduino(), [](fb::Table& p) {
    auto t = prog::New("TensorList");
    F(*t, "items") = fb::ScalarVectorOf<int32_t>(reflection::Int, {1});
    F(Value(p, 0), "val_type") = fb::UIntValue(reflection::UType, 10);
    F(Value(p, 0), "val") = fb::TableValue(t);
  }));
  EXPECT_TRUE(HasError(f->report(), "forward-reference", At(f->file(), TValue(*f, 0)->val_as_TensorList()->items())));
}

TEST(ReaderRuntime, MethodInputThatIsAList) {
  // MethodMeta::input_tag knows Null, Int, Double, Bool, String and Tensor only.
  auto f = Pte(EditPte(Arduino(), [](fb::Table& p) {
    auto t = prog::New("IntList");
    F(*t, "items") = fb::ScalarVectorOf<int64_t>(reflection::Long, {});
    F(Value(p, 3), "val_type") = fb::UIntValue(reflection::UType, 7);
    F(Value(p, 3), "val") = fb::TableValue(t);
    F(Plan0(p), "inputs") = fb::ScalarVectorOf<int32_t>(reflection::Int, {3});
  }));
  EXPECT_TRUE(HasError(f->report(), "bad-io-type", At(f->file(), TPlan(*f)->inputs())));
}

TEST(ReaderRuntime, NamedDataWithoutSegmentsList) {
  // PteDataMap::create refuses named_data without segments (an empty named_data list suffices).
  auto f = Pte(EditPte(ReadFile(FixturePath("add.pte")), [](fb::Table& p) {
    F(p, "named_data") = fb::OffsetVector({}, reflection::Obj);
    F(p, "segments") = fb::Value{};
    F(p, "constant_segment") = fb::Value{};
  }));
  EXPECT_TRUE(HasError(f->report(), "missing-field", At(f->file(), f->program())));
}

TEST(ReaderRuntime, ShorterThanTheRuntimesHeadRead) {
  // A headerless program of 48 bytes is refused before it is parsed: Program::load reads 64 bytes first.
  Buf b = ReadFile(FixturePath("add.pte"));
  auto f = Pte(Buf(b.begin(), b.begin() + 48));
  EXPECT_TRUE(HasError(f->report(), "truncated", 48));
}

TEST(ReaderRuntime, ConstantBufferPathIsAWarning) {
  auto f = PteFile::Open(FixturePath("module_linear_no_constant_segment.pte"));
  EXPECT_TRUE(f->ok());
  EXPECT_TRUE(f->report().Has("deprecated-constant-buffer"));
  EXPECT_FALSE(PteFile::Open(FixturePath("arduino_add.pte"))->report().Has("deprecated-constant-buffer"));
}

TEST(ReaderRuntime, CompileSpecWithoutValue) {
  auto f = Pte(EditPte(ReadFile(FixturePath("stories260k_qnn.pte")), [](fb::Table& p) {
    fb::Table& dl = Elem(F(Plan0(p), "delegates"), 0);
    auto spec = prog::New("CompileSpec");
    F(*spec, "key") = fb::StringValue("k");
    F(dl, "compile_specs") = fb::OffsetVector({fb::TableValue(spec)}, reflection::Obj);
  }));
  EXPECT_TRUE(
      HasError(f->report(), "missing-field", At(f->file(), TPlan(*f)->delegates()->Get(0)->compile_specs()->Get(0))));
}

// ---- .ptd, as FlatTensorDataMap reads it (no verifier: it crashes where we report)

Buf Xor() { return ReadFile(FixturePath("xor.ptd")); }

TEST(ReaderRuntimePtd, NoSegmentsList) {
  auto f = Ptd(EditPtd(Xor(), [](fb::Table& t) { PtdF(t, "segments") = fb::Value{}; }));
  EXPECT_TRUE(HasError(f->report(), "missing-field", LoadU32(f->file().data)));
}

TEST(ReaderRuntimePtd, TensorLayoutWithoutSizesOrDimOrder) {
  for (const char* field : {"sizes", "dim_order"}) {
    auto f = Ptd(EditPtd(Xor(), [&](fb::Table& t) {
      PtdF(*PtdF(Elem(PtdF(t, "named_data"), 0), "tensor_layout").table(), field) = fb::Value{};
    }));
    const auto* tl = f->flat_tensor()->named_data()->Get(0)->tensor_layout();
    EXPECT_TRUE(HasError(f->report(), "missing-field", At(f->file(), tl))) << field;
  }
}

TEST(ReaderRuntimePtd, TensorLayoutDimOrder) {
  auto f = Ptd(EditPtd(Xor(), [](fb::Table& t) {
    PtdF(*PtdF(Elem(PtdF(t, "named_data"), 0), "tensor_layout").table(), "dim_order") =
        fb::ScalarVectorOf<uint8_t>(reflection::UByte, {0});
  }));
  const auto* tl = f->flat_tensor()->named_data()->Get(0)->tensor_layout();
  ASSERT_NE(tl->sizes()->size(), 1u);
  EXPECT_TRUE(HasError(f->report(), "dim-order-mismatch", At(f->file(), tl)));
  auto g = Ptd(EditPtd(Xor(), [](fb::Table& t) {
    auto& tl = *PtdF(Elem(PtdF(t, "named_data"), 0), "tensor_layout").table();
    std::vector<uint8_t> dims(PtdF(tl, "sizes").scalars().size / 4, 0);
    PtdF(tl, "dim_order") = fb::ScalarVectorOf<uint8_t>(reflection::UByte, dims);
  }));
  const auto* tl2 = g->flat_tensor()->named_data()->Get(0)->tensor_layout();
  EXPECT_TRUE(HasError(g->report(), "bad-dim-order", At(g->file(), tl2)));
}

TEST(ReaderRuntimePtd, LegacyLayoutIsAnErrorUnlessAllowed) {
  ReadOptions strict;
  strict.allow_legacy_ptd = false;
  auto f = PtdFile::Open(FixturePath("linear.ptd"), strict);
  EXPECT_TRUE(HasError(f->report(), "legacy-format", LoadU32(f->file().data)));
  EXPECT_TRUE(PtdFile::Open(FixturePath("linear.ptd"))->ok());
}

// ---- a program and its .ptd files together (validateTensorLayout, MergedDataMap)

const efb::Tensor* ExternalTensor(const PteFile& f, const std::string& key) {
  for (const auto* plan : *f.program()->execution_plan()) {
    for (const auto* v : *plan->values()) {
      const auto* t = v->val_as_Tensor();
      if (t && t->extra_tensor_info() && t->extra_tensor_info()->fully_qualified_name() &&
          t->extra_tensor_info()->fully_qualified_name()->str() == key)
        return t;
    }
  }
  return nullptr;
}

// xor.ptd holds net.linear.weight FLOAT[2, 2] etc. [ptd]; a .ptd whose first entry changed.
TEST(ReaderRuntimeExternal, LayoutMismatches) {
  auto ptd0 = Ptd(Xor());
  const std::string key = ptd0->entries().at(0).key;
  struct Case {
    const char* what;
    std::function<void(fb::Table&)> edit;
    const char* code;
  };
  std::vector<Case> cases = {
      {"dtype", [](fb::Table& tl) { PtdF(tl, "scalar_type") = fb::ScalarValue(reflection::Byte, 7); },
       "external-layout-mismatch"},
      {"shape",
       [](fb::Table& tl) {
         std::vector<int32_t> sizes(PtdF(tl, "sizes").scalars().size / 4, 1);
         PtdF(tl, "sizes") = fb::ScalarVectorOf<int32_t>(reflection::Int, sizes);
       },
       "external-layout-mismatch"},
      {"no layout", nullptr, "external-layout-missing"},
  };
  auto pte = PteFile::Open(FixturePath("xor.pte"));
  ASSERT_TRUE(pte->ok());
  for (const Case& c : cases) {
    auto ptd = Ptd(EditPtd(Xor(), [&](fb::Table& t) {
      auto& e = Elem(PtdF(t, "named_data"), 0);
      if (c.edit)
        c.edit(*PtdF(e, "tensor_layout").table());
      else
        PtdF(e, "tensor_layout") = fb::Value{};
    }));
    auto p = PteFile::Open(FixturePath("xor.pte"));
    p->CheckExternalKeys({ptd.get()});
    const efb::Tensor* t = ExternalTensor(*p, key);
    ASSERT_NE(t, nullptr);
    uint64_t off =
        std::string(c.code) == "external-layout-missing" ? At(p->file(), t->extra_tensor_info()) : At(p->file(), t);
    EXPECT_TRUE(HasError(p->report(), c.code, off)) << c.what;
  }
  auto ok = PteFile::Open(FixturePath("xor.pte"));
  ok->CheckExternalKeys({ptd0.get()});
  EXPECT_TRUE(ok->ok());
}

TEST(ReaderRuntimeExternal, ByteSizeDiffers) {
  // [ptd] net.linear.bias FLOAT[10] is segment 1 (offset 80, 40 bytes; the next starts at 128):
  // 44 bytes still fit in the file, but no longer match the .pte's 40-byte tensor.
  auto ptd = Ptd(EditPtd(Xor(), [](fb::Table& t) {
    auto& s = Elem(PtdF(t, "segments"), 1);
    PtdF(s, "size") = fb::UIntValue(reflection::ULong, 44);
  }));
  ASSERT_TRUE(ptd->ok());
  auto p = PteFile::Open(FixturePath("xor.pte"));
  p->CheckExternalKeys({ptd.get()});
  const efb::Tensor* t = ExternalTensor(*p, "net.linear.bias");
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(HasError(p->report(), "external-size-mismatch", At(p->file(), t)));
}

TEST(ReaderRuntimeExternal, SameKeyInTwoPtdFiles) {
  auto a = PtdFile::Open(FixturePath("xor.ptd"));
  auto b = PtdFile::Open(FixturePath("xor.ptd"));
  auto p = PteFile::Open(FixturePath("xor.pte"));
  p->CheckExternalKeys({a.get(), b.get()});
  EXPECT_TRUE(HasError(p->report(), "duplicate-key", std::nullopt));
}

}  // namespace
}  // namespace ptepack
