// `ptepack map`: the SVG is well-formed XML (parsed by Python's xml.dom.minidom, not by us) with
// one band per segment at the segment's offset and size as the reader finds them, bands that
// cover the file; the HTML renders in headless Chromium to a non-blank picture in the bands'
// colours, with the labels in the DOM.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>

#include "ptepack/program_builder.h"
#include "serialize/api/package_access.h"
#include "serialize/insight/plan.h"
#include "serialize/read/plan_lifetimes.h"
#include "serialize/read/pte_reader.h"
#include "serialize/write/pte_writer.h"
#include "test_util.h"

namespace ptepack {
namespace {

using testing::FixturePath;
using testing::ShellQuote;

std::string Capture(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *rc = ::pclose(p);
  return out;
}

bool Have(const std::string& tool) { return std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) == 0; }

struct Band {
  std::string kind, title;
  uint64_t offset = 0, size = 0;
};

// The bands as xml.dom.minidom reads them (it raises on malformed XML).
std::vector<Band> ParseBands(const std::string& svg, std::string* error) {
  const char* script =
      "import sys, xml.dom.minidom as m\n"
      "d = m.parse(sys.argv[1])\n"
      "assert d.documentElement.tagName == 'svg'\n"
      "for r in d.getElementsByTagName('rect'):\n"
      "    if r.getAttribute('class') != 'band': continue\n"
      "    t = r.getElementsByTagName('title')[0].firstChild.data\n"
      "    print(r.getAttribute('data-kind').replace(' ', '_'), r.getAttribute('data-offset'),\n"
      "          r.getAttribute('data-size'), t.split(' \\u00b7 ')[0].replace(' ', '_'))\n";
  int rc = -1;
  std::string out = Capture("python3 -c " + ShellQuote(script) + " " + ShellQuote(svg) + " 2>&1", &rc);
  std::vector<Band> bands;
  if (rc != 0) {
    *error = out;
    return bands;
  }
  std::istringstream in(out);
  Band b;
  while (in >> b.kind >> b.offset >> b.size >> b.title) bands.push_back(b);
  return bands;
}

TEST(Map, SvgIsXmlWithOneBandPerSegment) {
  if (!Have("python3")) GTEST_SKIP() << "python3 not installed: the SVG is not parsed";
  std::string dir = testing::TempDir("map_svg");
  for (const auto& name : testing::PteFixtures()) {
    std::string svg = dir + "/" + name + ".svg";
    auto run = testing::RunCli({"map", FixturePath(name), "-o", svg});
    ASSERT_EQ(run.exit_code, 0) << name << ": " << run.err;
    std::string error;
    std::vector<Band> bands = ParseBands(svg, &error);
    ASSERT_TRUE(error.empty()) << name << ": " << error;
    ASSERT_GE(bands.size(), 1u) << name;
    EXPECT_EQ(bands[0].kind, "header") << name;
    uint64_t cursor = 0;
    for (const auto& b : bands) {
      EXPECT_EQ(b.offset, cursor) << name << " " << b.title;
      cursor = b.offset + b.size;
    }
    EXPECT_EQ(cursor, std::filesystem::file_size(FixturePath(name))) << name;
    // Every segment that has bytes of its own is one band, at the reader's offset and size.
    auto pte = PteFile::Open(FixturePath(name));
    std::set<uint64_t> starts;
    for (size_t i = 0; i < pte->segments().size(); ++i) {
      const SegmentSpan& s = pte->segments()[i];
      if (s.size == 0 || !starts.insert(s.file_offset).second) continue;
      size_t found = 0;
      for (const auto& b : bands) {
        if (b.title.rfind("segment_" + std::to_string(i) + ":", 0) != 0) continue;
        ++found;
        EXPECT_EQ(b.offset, s.file_offset) << name << " segment " << i;
        EXPECT_EQ(b.size, s.size) << name << " segment " << i;
      }
      EXPECT_EQ(found, 1u) << name << " segment " << i;
    }
  }
}

TEST(Map, StoriesQnnLabelsAndLogScale) {
  if (!Have("python3")) GTEST_SKIP() << "python3 not installed: the SVG is not parsed";
  std::string dir = testing::TempDir("map_log");
  std::string svg = dir + "/q.svg";
  ASSERT_EQ(testing::RunCli({"map", FixturePath("stories260k_qnn.pte"), "-o", svg, "--log"}).exit_code, 0);
  std::string error;
  std::vector<Band> bands = ParseBands(svg, &error);
  ASSERT_TRUE(error.empty()) << error;
  // By hand (see size_test.cpp): header 40, flatbuffer 18648, segment 1 (QnnBackend) 1331456;
  // segment 0 is empty.
  ASSERT_EQ(bands.size(), 3u);
  EXPECT_EQ(bands[1].kind, "flatbuffer");
  EXPECT_EQ(bands[1].size, 18648u);
  EXPECT_EQ(bands[2].kind, "delegate");
  EXPECT_EQ(bands[2].title, "segment_1:_delegate_QnnBackend");
  EXPECT_EQ(bands[2].size, 1331456u);
  EXPECT_EQ(testing::RunCli({"map", FixturePath("add.pte"), "-o", dir + "/x.png"}).exit_code, 2);
}

TEST(Map, HtmlRendersInHeadlessChromium) {
  if (!Have("chromium")) GTEST_SKIP() << "chromium not installed (Debian package `chromium`): rendering not checked";
  if (!Have("python3")) GTEST_SKIP() << "python3 not installed: the screenshot is not read";
  std::string dir = testing::TempDir("map_chromium");
  std::string html = dir + "/q.html", png = dir + "/q.png";
  ASSERT_EQ(testing::RunCli({"map", FixturePath("stories260k_qnn.pte"), "-o", html}).exit_code, 0);
  const std::string chromium = "chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir=" +
                               ShellQuote(dir + "/profile") + " --window-size=1200,260 ";
  int rc = -1;
  Capture(chromium + "--screenshot=" + ShellQuote(png) + " " + ShellQuote("file://" + html) + " 2>&1", &rc);
  ASSERT_TRUE(std::filesystem::exists(png)) << "chromium wrote no screenshot";
  // Pixels in the delegate band's colour (#e15759) fill most of a 1160 x 64 bar (98.6 % of the
  // file); the flatbuffer's (#f28e2b) a sliver of about 16 x 64.
  std::string stats = Capture("python3 " + ShellQuote(std::string(PTEPACK_SOURCE_DIR) + "/tests/tools/png_stats.py") +
                                  " " + ShellQuote(png) + " '#e15759' '#f28e2b'",
                              &rc);
  ASSERT_EQ(rc, 0) << stats;
  std::istringstream in(stats);
  uint64_t w = 0, h = 0, non_white = 0, delegate_px = 0, flatbuffer_px = 0;
  in >> w >> h >> non_white >> delegate_px >> flatbuffer_px;
  EXPECT_EQ(w, 1200u);
  EXPECT_GT(non_white, 60000u) << stats;
  EXPECT_GT(delegate_px, 60000u) << stats;
  EXPECT_GT(flatbuffer_px, 500u) << stats;
  EXPECT_LT(flatbuffer_px, 3000u) << stats;
  std::string dom = Capture(chromium + "--dump-dom " + ShellQuote("file://" + html) + " 2>/dev/null", &rc);
  for (const char* label : {"segment 1: delegate QnnBackend", "header", "flatbuffer", "1331456 bytes"}) {
    EXPECT_NE(dom.find(label), std::string::npos) << label << " not in the DOM";
  }
}

// ---- `map --memory`: the memory plan.

struct Box {
  uint32_t value = 0, first = 0, last = 0;
  uint64_t offset = 0, size = 0;
  bool overlap = false;
  std::string kind;
};

struct MemoryPicture {
  std::vector<Box> boxes;
  std::vector<uint64_t> lower_bounds;
  std::vector<uint32_t> peaks;
};

// The boxes, lower-bound lines and peak columns as xml.dom.minidom reads them.
MemoryPicture ParseMemory(const std::string& svg, std::string* error) {
  const char* script =
      "import sys, xml.dom.minidom as m\n"
      "d = m.parse(sys.argv[1])\n"
      "assert d.documentElement.tagName == 'svg'\n"
      "for r in d.getElementsByTagName('rect'):\n"
      "    c = r.getAttribute('class')\n"
      "    if c == 'tensor':\n"
      "        print('box', r.getAttribute('data-value'), r.getAttribute('data-offset'), r.getAttribute('data-size'),\n"
      "              r.getAttribute('data-first'), r.getAttribute('data-last'), r.getAttribute('data-overlap') or "
      "'0',\n"
      "              r.getAttribute('data-kind').replace(' ', '_'))\n"
      "    if c == 'peak': print('peak', r.getAttribute('data-instruction'))\n"
      "for l in d.getElementsByTagName('line'):\n"
      "    if l.getAttribute('class') == 'lower-bound': print('lb', l.getAttribute('data-bytes'))\n";
  int rc = -1;
  std::string out = Capture("python3 -c " + ShellQuote(script) + " " + ShellQuote(svg) + " 2>&1", &rc);
  MemoryPicture p;
  if (rc != 0) {
    *error = out;
    return p;
  }
  std::istringstream in(out);
  std::string tag;
  while (in >> tag) {
    if (tag == "box") {
      Box b;
      int overlap = 0;
      in >> b.value >> b.offset >> b.size >> b.first >> b.last >> overlap >> b.kind;
      b.overlap = overlap != 0;
      p.boxes.push_back(b);
    } else if (tag == "peak") {
      uint32_t i = 0;
      in >> i;
      p.peaks.push_back(i);
    } else if (tag == "lb") {
      uint64_t v = 0;
      in >> v;
      p.lower_bounds.push_back(v);
    }
  }
  return p;
}

uint64_t OffsetOf(const executorch_flatbuffer::Tensor& t) {
  return (uint64_t{t.allocation_info()->memory_offset_high()} << 32) | t.allocation_info()->memory_offset_low();
}

// Every box is a planned tensor at the offset the file gives it (ExecuTorch's planner wrote
// them), one per run of instructions where its bytes hold needed data; one lower-bound line and
// one peak column per buffer, at the plan report's numbers; nothing red in a file verify accepts.
TEST(MapMemory, BoxesAreTheFilesOffsets) {
  if (!Have("python3")) GTEST_SKIP() << "python3 not installed: the SVG is not parsed";
  const std::string dir = testing::TempDir("map_memory");
  for (const char* name : {"xor.pte", "keyword_spotting.pte", "conv2d_quantized.pte"}) {
    const std::string svg = dir + "/" + name + ".svg";
    auto run = testing::RunCli({"map", "--memory", FixturePath(name), "-o", svg});
    ASSERT_EQ(run.exit_code, 0) << name << ": " << run.err;
    std::string error;
    const MemoryPicture pic = ParseMemory(svg, &error);
    ASSERT_TRUE(error.empty()) << name << ": " << error;
    auto pte = PteFile::Open(FixturePath(name));
    const auto* plan = pte->program()->execution_plan()->Get(0);
    const ProgramLifetimes lt = DeriveLifetimes(*pte->program());
    size_t runs = 0;
    for (const PlanStorage& s : lt.methods[0].storages) runs += s.nbytes > 0 ? s.live.size() : 0;
    EXPECT_EQ(pic.boxes.size(), runs) << name;
    for (const Box& b : pic.boxes) {
      const auto* t = plan->values()->Get(b.value)->val_as_Tensor();
      ASSERT_NE(t, nullptr) << name << " values[" << b.value << "]";
      ASSERT_NE(t->allocation_info(), nullptr) << name << " values[" << b.value << "]";
      EXPECT_EQ(b.offset, OffsetOf(*t)) << name << " values[" << b.value << "]";
      EXPECT_GE(b.size, *TensorNbytes(*t)) << name << " values[" << b.value << "]";
      EXPECT_LE(b.first, b.last);
      EXPECT_LT(b.last, lt.methods[0].instruction_count);
      EXPECT_FALSE(b.overlap) << name << " values[" << b.value << "]";
    }
    PlanReportOptions o;
    o.run_planners = false;
    const PlanReport r = AnalyzePlan(*pte, o);
    ASSERT_EQ(pic.lower_bounds.size(), 1u) << name;
    EXPECT_EQ(pic.lower_bounds[0], r.methods[0].buffers[0].lower_bound) << name;
    ASSERT_EQ(pic.peaks.size(), 1u) << name;
    EXPECT_EQ(pic.peaks[0], *r.methods[0].buffers[0].peak_instruction) << name;
  }
}

// r = relu(P) at 0, s = exp(r) at 1 with s over r's bytes while both are live at 1
// (plan-overlap): the two boxes are red, the others are not.
std::string OverlapProgram(const std::string& dir) {
  ProgramBuilder b;
  auto& m = b.AddMethod("forward");
  const uint32_t p = m.Tensor({ScalarType::kFloat, {16}, PlannedLocation{1, 0}});
  const uint32_t r = m.Tensor({ScalarType::kFloat, {8}, PlannedLocation{1, 64}});
  const uint32_t s = m.Tensor({ScalarType::kFloat, {8}, PlannedLocation{1, 80}});
  const uint32_t q = m.Tensor({ScalarType::kFloat, {16}, PlannedLocation{1, 112}});
  m.KernelCall(m.Operator("aten::relu", "out"), {int(p), int(r), int(r)});
  m.KernelCall(m.Operator("aten::exp", "out"), {int(r), int(s), int(s)});
  m.KernelCall(m.Operator("aten::neg", "out"), {int(s), int(q), int(q)});
  m.Inputs({int(p)});
  m.Outputs({int(q)});
  m.PlannedBufferSizes({0, 176});
  const std::string path = dir + "/overlap.pte";
  testing::WriteFile(path, RenderPte(LayoutPte(PartsOf(b.Build()), BackendConfig{})));
  return path;
}

TEST(MapMemory, OverlapsAreRed) {
  if (!Have("python3")) GTEST_SKIP() << "python3 not installed: the SVG is not parsed";
  const std::string dir = testing::TempDir("map_memory_overlap");
  const std::string in = OverlapProgram(dir);
  ASSERT_EQ(testing::RunCli({"map", "--memory", in, "-o", dir + "/o.svg"}).exit_code, 0);
  std::string error;
  const MemoryPicture pic = ParseMemory(dir + "/o.svg", &error);
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_EQ(pic.boxes.size(), 4u);
  for (const Box& b : pic.boxes) EXPECT_EQ(b.overlap, b.value == 1 || b.value == 2) << "values[" << b.value << "]";
  EXPECT_EQ(testing::RunCli({"map", "--memory", FixturePath("xor.ptd"), "-o", dir + "/x.svg"}).exit_code, 2);
  EXPECT_EQ(testing::RunCli({"map", "--memory", in, "--log", "-o", dir + "/x.svg"}).exit_code, 2);
}

TEST(MapMemory, HtmlRendersInHeadlessChromium) {
  if (!Have("chromium")) GTEST_SKIP() << "chromium not installed (Debian package `chromium`): rendering not checked";
  if (!Have("python3")) GTEST_SKIP() << "python3 not installed: the screenshot is not read";
  const std::string dir = testing::TempDir("map_memory_chromium");
  const std::string chromium = "chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir=" +
                               ShellQuote(dir + "/profile") + " --window-size=1200,420 ";
  const std::string stats_py = ShellQuote(std::string(PTEPACK_SOURCE_DIR) + "/tests/tools/png_stats.py");
  int rc = -1;
  // xor.pte: temporaries (#59a14f) and state (#b07aa1) fill much of the 1030 x 260 plot; red
  // (#d62728) only in the legend.
  const std::string html = dir + "/xor.html", png = dir + "/xor.png";
  ASSERT_EQ(testing::RunCli({"map", "--memory", FixturePath("xor.pte"), "-o", html}).exit_code, 0);
  Capture(chromium + "--screenshot=" + ShellQuote(png) + " " + ShellQuote("file://" + html) + " 2>&1", &rc);
  ASSERT_TRUE(std::filesystem::exists(png)) << "chromium wrote no screenshot";
  std::string stats = Capture("python3 " + stats_py + " " + ShellQuote(png) + " '#59a14f' '#b07aa1' '#d62728'", &rc);
  ASSERT_EQ(rc, 0) << stats;
  std::istringstream in(stats);
  uint64_t w = 0, h = 0, non_white = 0, temporary = 0, state = 0, red = 0;
  in >> w >> h >> non_white >> temporary >> state >> red;
  EXPECT_EQ(w, 1200u);
  EXPECT_GT(temporary, 40000u) << stats;
  EXPECT_GT(state, 40000u) << stats;
  EXPECT_EQ(red, 144u) << stats;  // the legend's 12 x 12 swatch only
  std::string dom = Capture(chromium + "--dump-dom " + ShellQuote("file://" + html) + " 2>/dev/null", &rc);
  for (const char* label : {"lower bound 560", "planned 624", "aten::where.self_out", "net.linear.weight"}) {
    EXPECT_NE(dom.find(label), std::string::npos) << label << " not in the DOM";
  }
  // The overlapping pair is red: r and s, 32 bytes each of 176, over instructions 0..1 and 1..2.
  const std::string ohtml = dir + "/overlap.html", opng = dir + "/overlap.png";
  ASSERT_EQ(testing::RunCli({"map", "--memory", OverlapProgram(dir), "-o", ohtml}).exit_code, 0);
  Capture(chromium + "--screenshot=" + ShellQuote(opng) + " " + ShellQuote("file://" + ohtml) + " 2>&1", &rc);
  stats = Capture("python3 " + stats_py + " " + ShellQuote(opng) + " '#d62728'", &rc);
  std::istringstream oin(stats);
  oin >> w >> h >> non_white >> red;
  EXPECT_GT(red, 2000u) << stats;
}

}  // namespace
}  // namespace ptepack
