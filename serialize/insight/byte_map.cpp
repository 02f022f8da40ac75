// SVG and HTML byte maps (see byte_map.h).
#include "serialize/insight/byte_map.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <vector>

namespace ptepack {
namespace {

constexpr double kWidth = 1200, kMargin = 20, kBarY = 56, kBarH = 64;

const char* Colour(const std::string& kind) {
  static const std::map<std::string, const char*> colours = {
      {"header", "#4e79a7"},     {"flatbuffer", "#f28e2b"},   {"constants", "#59a14f"}, {"delegate", "#e15759"},
      {"named data", "#76b7b2"}, {"mutable data", "#edc948"}, {"segment", "#b07aa1"},   {"padding", "#bab0ac"},
      {"tensor", "#59a14f"},     {"metadata", "#f28e2b"}};
  auto it = colours.find(kind);
  return it == colours.end() ? "#9c755f" : it->second;
}

std::string Xml(const std::string& s) { return XmlText(s); }

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string Describe(const SizeBand& b, uint64_t total) {
  char pct[16];
  std::snprintf(pct, sizeof pct, "%.2f%%", total ? 100.0 * static_cast<double>(b.size) / total : 0.0);
  return b.label + " \u00b7 offset " + std::to_string(b.offset) + " (" + Hex(b.offset) + ") \u00b7 " +
         std::to_string(b.size) + " bytes (" + HumanBytes(b.size) + ", " + pct + ")";
}

// Left edges of the bands (and the right edge of the last): cumulative weights scaled to the bar.
std::vector<double> Edges(const std::vector<SizeBand>& bands, bool log_scale) {
  std::vector<double> w;
  double sum = 0;
  for (const auto& b : bands) {
    w.push_back(log_scale ? std::log2(1.0 + static_cast<double>(b.size)) : static_cast<double>(b.size));
    sum += w.back();
  }
  std::vector<double> x{kMargin};
  const double inner = kWidth - 2 * kMargin;
  double acc = 0;
  for (double v : w) {
    acc += v;
    x.push_back(kMargin + (sum > 0 ? inner * acc / sum : 0));
  }
  return x;
}

void Bar(std::ostringstream& o, const FileSize& f, const std::vector<double>& x) {
  o << "<g id=\"bar\">\n";
  for (size_t i = 0; i < f.bands.size(); ++i) {
    const SizeBand& b = f.bands[i];
    const double w = x[i + 1] - x[i];
    char geom[160];
    std::snprintf(geom, sizeof geom, "x=\"%.3f\" y=\"%.0f\" width=\"%.3f\" height=\"%.0f\"", x[i], kBarY, w, kBarH);
    o << "<rect class=\"band\" data-kind=\"" << Xml(b.kind) << "\" data-offset=\"" << b.offset << "\" data-size=\""
      << b.size << "\" " << geom << " fill=\"" << Colour(b.kind) << "\" stroke=\"#ffffff\" stroke-width=\"0.5\">"
      << "<title>" << Xml(Describe(b, f.file_size)) << "</title></rect>\n";
    // The band's label where it fits, else its kind, else nothing (the list below has it).
    const std::string& text = w >= 7.0 * static_cast<double>(b.label.size()) + 8 ? b.label : b.kind;
    if (w >= 7.0 * static_cast<double>(text.size()) + 8) {
      std::snprintf(geom, sizeof geom, "x=\"%.3f\" y=\"%.0f\"", x[i] + w / 2, kBarY + kBarH / 2 + 5);
      o << "<text class=\"band-label\" " << geom << " text-anchor=\"middle\" fill=\"#ffffff\">" << Xml(text)
        << "</text>\n";
    }
  }
  o << "</g>\n";
}

// The kinds present, in order of first appearance, and one row per band.
double LegendAndList(std::ostringstream& o, const FileSize& f) {
  std::vector<std::string> kinds;
  for (const auto& b : f.bands) {
    if (std::find(kinds.begin(), kinds.end(), b.kind) == kinds.end()) kinds.push_back(b.kind);
  }
  double y = kBarY + kBarH + 30;
  o << "<g id=\"legend\">\n";
  double lx = kMargin;
  for (const auto& k : kinds) {
    o << "<rect x=\"" << lx << "\" y=\"" << y - 11 << "\" width=\"12\" height=\"12\" fill=\"" << Colour(k)
      << "\"/><text class=\"legend-label\" x=\"" << lx + 16 << "\" y=\"" << y << "\">" << Xml(k) << "</text>\n";
    lx += 16 + 8.0 * static_cast<double>(k.size()) + 18;
  }
  o << "</g>\n<g id=\"list\">\n";
  y += 28;
  for (const auto& b : f.bands) {
    o << "<rect x=\"" << kMargin << "\" y=\"" << y - 10 << "\" width=\"10\" height=\"10\" fill=\"" << Colour(b.kind)
      << "\"/><text class=\"row\" x=\"" << kMargin + 16 << "\" y=\"" << y << "\">" << Xml(Describe(b, f.file_size))
      << "</text>\n";
    y += 18;
  }
  o << "</g>\n";
  return y;
}

}  // namespace

// Text for XML: markup characters escaped, characters XML 1.0 forbids
// (control characters from names in the file) shown as '?'.
std::string XmlText(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += (c < 0x20 && c != '\t' && c != '\n') || c == 0x7f ? '?' : static_cast<char>(c);
        break;
    }
  }
  return out;
}

std::string ByteMapSvg(const FileSize& f, const ByteMapOptions& opt) {
  std::ostringstream body;
  std::vector<double> x = Edges(f.bands, opt.log_scale);
  Bar(body, f, x);
  double height = LegendAndList(body, f) + kMargin;
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << height << "\" viewBox=\"0 0 "
    << kWidth << " " << height << "\" font-family=\"DejaVu Sans, Arial, sans-serif\" "
    << "font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n"
    << "<text id=\"title\" x=\"" << kMargin << "\" y=\"28\" font-size=\"16\" font-weight=\"bold\">"
    << Xml(std::filesystem::path(f.file).filename().string()) << ": " << f.file_size << " bytes ("
    << HumanBytes(f.file_size) << ")" << (opt.log_scale ? ", band widths on a log scale" : "") << "</text>\n"
    << "<text x=\"" << kMargin << "\" y=\"46\" fill=\"#555555\">offset 0</text>\n"
    << "<text x=\"" << kWidth - kMargin << "\" y=\"46\" fill=\"#555555\" text-anchor=\"end\">offset " << f.file_size
    << "</text>\n"
    << body.str() << "</svg>\n";
  return o.str();
}

std::string ByteMapHtml(const FileSize& f, const ByteMapOptions& opt) {
  std::string svg = ByteMapSvg(f, opt);
  svg.erase(0, svg.find("<svg"));  // no XML declaration inside HTML
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>ptepack map: " +
         Xml(std::filesystem::path(f.file).filename().string()) +
         "</title>\n<style>body { margin: 0; background: #ffffff; } rect.band:hover { opacity: 0.8; }</style>\n"
         "</head>\n<body>\n" +
         svg + "</body>\n</html>\n";
}

}  // namespace ptepack
