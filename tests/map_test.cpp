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

#include "serialize/read/pte_reader.h"
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

}  // namespace
}  // namespace ptepack
