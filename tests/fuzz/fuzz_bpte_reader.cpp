// libFuzzer target: the BundledProgram (.bpte) reader on arbitrary bytes. Must hold:
//  - no crash, and no exception but ptepack::Error;
//  - a decoded file's wrapped program (what `bpte extract-program` writes) is accepted by
//    PteFile exactly when the .bpte reader said the wrapped program was;
//  - a file the reader accepts, re-encoded from what was read (EncodeBpte), is accepted again
//    and reads back the same test cases.
// Run with scripts/fuzz.sh fuzz_bpte_reader.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "serialize/bpte/bpte.h"

namespace {

[[noreturn]] void Broken(const std::string& what) {
  std::fprintf(stderr, "FUZZ INVARIANT BROKEN: %s\n", what.c_str());
  std::abort();
}

bool SameValue(const ptepack::bpte::TestValue& a, const ptepack::bpte::TestValue& b) {
  if (a.kind != b.kind || a.int_val != b.int_val || a.bool_val != b.bool_val) return false;
  if (std::memcmp(&a.double_val, &b.double_val, sizeof(double)) != 0) return false;
  const auto &x = a.tensor, &y = b.tensor;
  return x.scalar_type == y.scalar_type && x.sizes == y.sizes && x.dim_order == y.dim_order && x.data.Equals(y.data);
}

void CheckRoundTrip(const ptepack::bpte::BpteFile& f) {
  using namespace ptepack;
  std::vector<uint8_t> again = bpte::EncodeBpte(f.content());
  auto g = bpte::BpteFile::FromBytes(Bytes::Copy(again.data(), again.size()), "re-encoded");
  if (!g->ok()) Broken("an accepted file, re-encoded, is rejected: " + g->report().findings()[0].ToString());
  if (!g->content().program.Equals(f.content().program)) Broken("re-encoded program differs");
  const auto &s1 = f.content().suites, &s2 = g->content().suites;
  if (s1.size() != s2.size()) Broken("re-encoded suite count differs");
  for (size_t i = 0; i < s1.size(); ++i) {
    if (s1[i].method_name != s2[i].method_name || s1[i].test_cases.size() != s2[i].test_cases.size()) {
      Broken("re-encoded suite differs");
    }
    for (size_t c = 0; c < s1[i].test_cases.size(); ++c) {
      const auto &a = s1[i].test_cases[c], &b = s2[i].test_cases[c];
      if (a.inputs.size() != b.inputs.size() || a.expected_outputs.size() != b.expected_outputs.size()) {
        Broken("re-encoded case differs");
      }
      for (size_t k = 0; k < a.inputs.size(); ++k) {
        if (!SameValue(a.inputs[k], b.inputs[k])) Broken("re-encoded input differs");
      }
      for (size_t k = 0; k < a.expected_outputs.size(); ++k) {
        if (!SameValue(a.expected_outputs[k], b.expected_outputs[k])) Broken("re-encoded output differs");
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ptepack;
  try {
    auto f = bpte::BpteFile::FromBytes(Bytes::Copy(data, size), "fuzz.bpte");
    (void)bpte::RenderBpteText(bpte::DescribeBpte(*f));
    if (f->decoded() && f->content().program.size > 0) {
      (void)bpte::TestsToFiles(f->content());
      const Bytes& p = f->content().program;
      auto alone = PteFile::FromBytes(Bytes::Copy(p.data, p.size), "extracted.pte");
      if (alone->ok() != f->program_ok()) Broken("extracted program's verdict differs from the wrapped one's");
    }
    if (f->ok()) CheckRoundTrip(*f);
  } catch (const Error&) {
  }
  return 0;
}
