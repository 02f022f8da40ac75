// SVG and HTML pictures of the memory plan (see plan_map.h).
#include "serialize/insight/plan_map.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>
#include <vector>

#include "ptepack/error.h"
#include "serialize/insight/byte_map.h"
#include "serialize/insight/plan.h"
#include "serialize/insight/size.h"
#include "serialize/read/plan_checks.h"
#include "serialize/read/plan_lifetimes.h"
#include "serialize/read/pte_reader.h"

namespace ptepack {
namespace {

namespace efb = executorch_flatbuffer;

constexpr double kWidth = 1200, kMargin = 20, kPlotX = 150, kPlotH = 260;
constexpr double kPlotW = kWidth - kPlotX - kMargin;
// At most this many boxes a panel: a program of 100,000 tensors still gives a picture one can open.
constexpr size_t kMaxBoxes = 20000;

struct Kind {
  const char* name;
  const char* colour;
};
constexpr Kind kInput{"input", "#4e79a7"};
constexpr Kind kTemporary{"temporary", "#59a14f"};
constexpr Kind kOutput{"output", "#f28e2b"};
constexpr Kind kState{"state", "#b07aa1"};
constexpr Kind kShared{"state shared by methods (fixed)", "#7b4173"};
constexpr Kind kWorkspace{"workspace", "#edc948"};
constexpr Kind kOverlap{"overlap (plan-overlap)", "#d62728"};

Kind KindOf(const MethodLifetimes& m, const PlanStorage& s, bool overlap) {
  if (overlap) return kOverlap;
  if (s.shared_across_methods) return kShared;
  if (s.persistent) return kState;
  bool input = false, output = false, workspace = false;
  for (uint32_t v : s.values) {
    const PlannedTensor* t = m.Tensor(v);
    if (!t) continue;
    input = input || t->origin == PlanOrigin::kInput;
    output = output || t->output;
    workspace = workspace || t->origin == PlanOrigin::kUnwritten;
  }
  if (input) return kInput;
  if (output) return kOutput;
  if (workspace) return kWorkspace;
  return kTemporary;
}

std::string Num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

std::string Thousands(uint64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

// "aten::add.out (2), aten::mm.out (5, 9)": each operator with the instructions using it.
std::string Operators(const efb::Program& p, const MethodLifetimes& m, const std::vector<uint32_t>& instrs) {
  std::vector<std::pair<std::string, std::string>> ops;
  for (uint32_t i : instrs) {
    const std::string label = InstructionLabel(p, m, i);
    auto it = std::find_if(ops.begin(), ops.end(), [&](const auto& o) { return o.first == label; });
    if (it == ops.end()) {
      ops.emplace_back(label, std::to_string(i));
    } else {
      it->second += ", " + std::to_string(i);
    }
  }
  std::string s;
  for (const auto& [label, at] : ops) s += (s.empty() ? "" : "; ") + label + " at " + at;
  return s.empty() ? "none" : s;
}

// The hover title of a storage's box.
std::string Title(const efb::Program& p, const MethodLifetimes& m, const PlanStorage& s, const LiveRun& run,
                  const Kind& kind) {
  std::ostringstream o;
  for (size_t i = 0; i < s.values.size(); ++i) {
    const PlannedTensor* t = m.Tensor(s.values[i]);
    o << (i == 0 ? "" : "\nview ") << DescribePlannedValue(m, s.values[i]);
    if (t && t->input) o << ", method input";
    if (t && t->output) o << ", method output";
  }
  o << "\n"
    << kind.name << "; bytes [" << s.offset << ", " << s.offset + s.nbytes << ") of buffer " << s.memory_id << " ("
    << Thousands(s.nbytes) << " B)";
  o << "\nlive at instructions " << run.first << ".." << run.last;
  if (s.live.size() > 1) o << " (one of " << s.live.size() << " runs)";
  std::vector<uint32_t> writers, readers;
  for (uint32_t v : s.values) {
    if (const PlannedTensor* t = m.Tensor(v)) {
      const auto w = m.Writers(*t), r = m.Readers(*t);
      writers.insert(writers.end(), w.begin(), w.end());
      readers.insert(readers.end(), r.begin(), r.end());
    }
  }
  for (auto* list : {&writers, &readers}) {
    std::sort(list->begin(), list->end());
    list->erase(std::unique(list->begin(), list->end()), list->end());
  }
  o << "\nwritten by: " << Operators(p, m, writers) << "\nread by: " << Operators(p, m, readers);
  if (!m.PointedBy(s).empty()) {
    o << "\nalso used through";
    for (uint32_t v : m.PointedBy(s)) o << " values[" << v << "]";
    o << " (MoveCall/et_view)";
  }
  return o.str();
}

class Drawer {
 public:
  explicit Drawer(const PteFile& pte) : pte_(pte), p_(*pte.program()) {}

  std::string Svg() {
    PlanReportOptions po;
    po.run_planners = false;
    const PlanReport report = AnalyzePlan(pte_, po);
    const ProgramLifetimes lt = DeriveLifetimes(p_);
    std::ostringstream body;
    double y = 70;
    size_t panels = 0;
    for (const MethodPlan& mp : report.methods) {
      const MethodLifetimes& ml = lt.methods[mp.index];
      if (!mp.not_checked.empty()) {
        body << "<text class=\"not-checked\" x=\"" << kMargin << "\" y=\"" << y << "\">"
             << XmlText("method \"" + mp.name + "\": lifetimes not derived (" + mp.not_checked + "), nothing drawn")
             << "</text>\n";
        y += 24;
        continue;
      }
      for (const BufferPlan& b : mp.buffers) {
        y = Panel(body, ml, mp, b, y);
        ++panels;
      }
    }
    if (panels == 0) {
      body << "<text x=\"" << kMargin << "\" y=\"" << y << "\">no planned tensors</text>\n";
      y += 24;
    }
    y = Legend(body, y + 10);
    std::ostringstream o;
    const double height = y + kMargin;
    o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << Num(height)
      << "\" viewBox=\"0 0 " << kWidth << " " << Num(height)
      << "\" font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n"
      << "<text id=\"title\" x=\"" << kMargin << "\" y=\"28\" font-size=\"16\" font-weight=\"bold\">"
      << XmlText(std::filesystem::path(pte_.name()).filename().string()) << ": memory plan, "
      << Thousands(report.size_now) << " bytes planned, lower bound " << Thousands(report.lower_bound) << "</text>\n"
      << "<text x=\"" << kMargin << "\" y=\"48\" fill=\"#555555\">"
      << "instruction index across, byte offset down; one box per tensor's bytes while they hold needed data "
         "(hover for details)</text>\n"
      << body.str() << "</svg>\n";
    return o.str();
  }

 private:
  double Panel(std::ostringstream& o, const MethodLifetimes& ml, const MethodPlan& mp, const BufferPlan& b, double y) {
    const uint64_t now = static_cast<uint64_t>(std::max<int64_t>(0, b.size_now));
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.1f %%", PercentAbove(now, b.lower_bound));
    o << "<g class=\"panel\" data-method=\"" << XmlText(mp.name) << "\" data-memory-id=\"" << b.memory_id << "\">\n";
    o << "<text class=\"panel-title\" x=\"" << kMargin << "\" y=\"" << Num(y) << "\" font-weight=\"bold\">"
      << XmlText("method \"" + mp.name + "\", buffer " + std::to_string(b.memory_id) + ": " + Thousands(now) +
                 " bytes, lower bound " + Thousands(b.lower_bound) + " (" + pct + " above), " +
                 std::to_string(b.tensors) + " tensors")
      << "</text>\n";
    const double top = y + 14;
    const uint32_t n = std::max<uint32_t>(1, ml.instruction_count);
    const double cw = kPlotW / n;
    const uint64_t ymax = std::max({now, b.used_now, b.lower_bound, uint64_t{1}});
    auto Y = [&](uint64_t off) { return top + kPlotH * static_cast<double>(off) / static_cast<double>(ymax); };
    // Frame, the peak's column, axis labels.
    o << "<rect class=\"plot\" x=\"" << kPlotX << "\" y=\"" << Num(top) << "\" width=\"" << kPlotW << "\" height=\""
      << kPlotH << "\" fill=\"#f7f7f7\" stroke=\"#999999\" stroke-width=\"0.5\"/>\n";
    if (b.peak_instruction) {
      o << "<rect class=\"peak\" data-instruction=\"" << *b.peak_instruction << "\" x=\""
        << Num(kPlotX + cw * *b.peak_instruction) << "\" y=\"" << Num(top) << "\" width=\"" << Num(std::max(cw, 1.0))
        << "\" height=\"" << kPlotH << "\" fill=\"#fff3bf\">"
        << "<title>"
        << XmlText("peak: instruction " + std::to_string(*b.peak_instruction) + " (" + b.peak_label + "), " +
                   Thousands(b.peak_bytes) + " bytes live")
        << "</title></rect>\n";
    }
    o << "<text x=\"" << kPlotX - 6 << "\" y=\"" << Num(top + 10)
      << "\" text-anchor=\"end\" fill=\"#555555\">0</text>\n"
      << "<text x=\"" << kPlotX << "\" y=\"" << Num(top + kPlotH + 14) << "\" fill=\"#555555\">instruction 0</text>\n"
      << "<text x=\"" << kPlotX + kPlotW << "\" y=\"" << Num(top + kPlotH + 14)
      << "\" text-anchor=\"end\" fill=\"#555555\">" << n - 1 << "</text>\n";
    // Boxes.
    std::set<uint32_t> overlapping;
    for (const PlanConflict& c : FindPlanConflicts(ml, 1000)) {
      if (ml.storages[c.a].memory_id == b.memory_id) overlapping.insert(c.a), overlapping.insert(c.b);
    }
    size_t boxes = 0;
    for (uint32_t s = 0; s < ml.storages.size(); ++s) {
      const PlanStorage& st = ml.storages[s];
      if (st.memory_id != b.memory_id || st.nbytes == 0) continue;
      const Kind kind = KindOf(ml, st, overlapping.count(s) > 0);
      for (const LiveRun& run : st.live) {
        if (++boxes > kMaxBoxes) break;
        const double x = kPlotX + cw * run.first, w = std::max(cw * (run.last - run.first + 1), 0.5);
        const double y0 = Y(st.offset), h = std::max(Y(st.offset + st.nbytes) - y0, 0.75);
        o << "<rect class=\"tensor\" data-value=\"" << st.values.front() << "\" data-offset=\"" << st.offset
          << "\" data-size=\"" << st.nbytes << "\" data-first=\"" << run.first << "\" data-last=\"" << run.last
          << "\" data-kind=\"" << kind.name << "\"" << (kind.colour == kOverlap.colour ? " data-overlap=\"1\"" : "")
          << " x=\"" << Num(x) << "\" y=\"" << Num(y0) << "\" width=\"" << Num(w) << "\" height=\"" << Num(h)
          << "\" fill=\"" << kind.colour << "\" stroke=\"#ffffff\" stroke-width=\"0.5\">"
          << "<title>" << XmlText(Title(p_, ml, st, run, kind)) << "</title></rect>\n";
      }
    }
    if (boxes > kMaxBoxes) {
      o << "<text x=\"" << kPlotX + 4 << "\" y=\"" << Num(top + 14) << "\" fill=\"#d62728\">"
        << "more than " << kMaxBoxes << " boxes: the first " << kMaxBoxes << " are drawn</text>\n";
    }
    // The lower bound and the buffer's size, labelled at the left (apart when they are close).
    auto Line = [&](const char* cls, uint64_t bytes, const std::string& label, const char* colour, bool dashed,
                    double dy) {
      const double ly = Y(bytes);
      o << "<line class=\"" << cls << "\" data-bytes=\"" << bytes << "\" x1=\"" << kPlotX << "\" x2=\""
        << kPlotX + kPlotW << "\" y1=\"" << Num(ly) << "\" y2=\"" << Num(ly) << "\" stroke=\"" << colour
        << "\" stroke-width=\"1.5\"" << (dashed ? " stroke-dasharray=\"6,4\"" : "") << "/>\n"
        << "<text class=\"" << cls << "-label\" x=\"" << kPlotX - 6 << "\" y=\"" << Num(ly + dy)
        << "\" text-anchor=\"end\" fill=\"" << colour << "\">" << XmlText(label) << "</text>\n";
    };
    if (now == b.lower_bound) {
      Line("lower-bound", b.lower_bound, "lower bound " + Thousands(now), "#1f77b4", true, 4);
      o << "<text class=\"buffer-size-label\" x=\"" << kPlotX - 6 << "\" y=\"" << Num(Y(now) - 10)
        << "\" text-anchor=\"end\" fill=\"#333333\">planned =</text>\n";
    } else {
      const bool close = std::abs(Y(now) - Y(b.lower_bound)) < 14;
      const bool lb_above = b.lower_bound < now;
      Line("lower-bound", b.lower_bound, "lower bound " + Thousands(b.lower_bound), "#1f77b4", true,
           close ? (lb_above ? -3 : 12) : 4);
      Line("buffer-size", now, "planned " + Thousands(now), "#333333", false, close ? (lb_above ? 12 : -3) : 4);
    }
    if (b.idle_values > 0) {
      o << "<text x=\"" << kPlotX + kPlotW << "\" y=\"" << Num(top + kPlotH + 14)
        << "\" text-anchor=\"end\" dx=\"-60\" fill=\"#555555\">"
        << XmlText(std::to_string(b.idle_values) + " tensor(s) never live, not drawn") << "</text>\n";
    }
    o << "</g>\n";
    return top + kPlotH + 40;
  }

  double Legend(std::ostringstream& o, double y) {
    o << "<g id=\"legend\">\n";
    double x = kMargin;
    for (const Kind& k : {kInput, kTemporary, kOutput, kWorkspace, kState, kShared, kOverlap}) {
      o << "<rect x=\"" << Num(x) << "\" y=\"" << Num(y - 11) << "\" width=\"12\" height=\"12\" fill=\"" << k.colour
        << "\"/><text class=\"legend-label\" x=\"" << Num(x + 16) << "\" y=\"" << Num(y) << "\">" << k.name
        << "</text>\n";
      x += 16 + 7.0 * static_cast<double>(std::string(k.name).size()) + 18;
    }
    o << "<rect x=\"" << Num(x) << "\" y=\"" << Num(y - 11)
      << "\" width=\"12\" height=\"12\" fill=\"#fff3bf\"/><text class=\"legend-label\" x=\"" << Num(x + 16) << "\" y=\""
      << Num(y) << "\">peak</text>\n";
    o << "</g>\n";
    return y + 8;
  }

  const PteFile& pte_;
  const efb::Program& p_;
};

}  // namespace

std::string MemoryMapSvg(const PteFile& pte) {
  if (!pte.program()) throw Error("flatbuffer-invalid", pte.name() + ": no verified program to draw");
  return Drawer(pte).Svg();
}

std::string MemoryMapHtml(const PteFile& pte) {
  std::string svg = MemoryMapSvg(pte);
  svg.erase(0, svg.find("<svg"));
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>ptepack map --memory: " +
         XmlText(std::filesystem::path(pte.name()).filename().string()) +
         "</title>\n<style>body { margin: 0; background: #ffffff; } rect.tensor:hover { stroke: #000000; "
         "stroke-width: 1.5; }</style>\n</head>\n<body>\n" +
         svg + "</body>\n</html>\n";
}

}  // namespace ptepack
