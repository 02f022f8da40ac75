// JSON and text forms of a SizeReport (see size.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "serialize/insight/size.h"

namespace ptepack {
namespace {

const char* const kGroups[] = {"header", "flatbuffer", "data", "segments", "padding"};

template <typename T>
std::vector<T> Top(std::vector<T> v, size_t top, SizeSort sort) {
  if (sort == SizeSort::kName) {
    auto key = [](const T& x) {
      if constexpr (std::is_same_v<T, SizeTensor>) {
        return x.name;
      } else {
        return x.backend_id;
      }
    };
    std::stable_sort(v.begin(), v.end(), [&](const T& a, const T& b) { return key(a) < key(b); });
  }
  if (v.size() > top) v.resize(top);
  return v;
}

nlohmann::json FileJson(const FileSize& f) {
  nlohmann::json parts = nlohmann::json::array();
  nlohmann::json groups = nlohmann::json::object();
  for (const auto& p : f.parts) {
    parts.push_back({{"group", p.group}, {"name", p.name}, {"bytes", p.bytes}, {"percent", p.percent}});
    if (!groups.contains(p.group)) groups[p.group] = {{"bytes", 0}, {"percent", 0.0}};
    auto& g = groups[p.group];
    g["bytes"] = g["bytes"].get<uint64_t>() + p.bytes;
    g["percent"] = std::round((g["percent"].get<double>() + p.percent) * 10) / 10;
  }
  nlohmann::json bands = nlohmann::json::array();
  for (const auto& b : f.bands) {
    bands.push_back({{"kind", b.kind}, {"label", b.label}, {"offset", b.offset}, {"size", b.size}});
  }
  return {{"file", f.file}, {"file_size", f.file_size}, {"groups", groups},
          {"parts", parts}, {"bands", bands},           {"shared_bytes", f.shared_bytes}};
}

std::string Grouped(uint64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

void FileText(std::ostringstream& o, const FileSize& f) {
  o << f.file << ": " << Grouped(f.file_size) << " bytes (" << HumanBytes(f.file_size) << ")\n";
  char line[200];
  for (const char* g : kGroups) {
    uint64_t bytes = 0;
    double pct = 0;
    size_t n = 0;
    for (const auto& p : f.parts) {
      if (p.group == g) bytes += p.bytes, pct += p.percent, ++n;
    }
    if (n == 0) continue;
    std::snprintf(line, sizeof line, "  %-44s %14s %6.1f%%\n", g, Grouped(bytes).c_str(), pct);
    o << line;
    for (const auto& p : f.parts) {
      if (p.group != g || (n == 1 && p.name == g)) continue;
      std::snprintf(line, sizeof line, "    %-42s %14s %6.1f%%\n", p.name.c_str(), Grouped(p.bytes).c_str(), p.percent);
      o << line;
    }
  }
}

std::string Shape(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

std::string HumanBytes(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  }
  return buf;
}

nlohmann::json SizeJson(const SizeReport& r, size_t top, SizeSort sort) {
  nlohmann::json j = FileJson(r.pte);
  j["ptds"] = nlohmann::json::array();
  for (const auto& p : r.ptds) j["ptds"].push_back(FileJson(p));
  j["tensors_total"] = r.tensors.size();
  j["tensors"] = nlohmann::json::array();
  for (const auto& t : Top(r.tensors, top, sort)) {
    nlohmann::json e = {{"name", t.name}, {"bytes", t.bytes}, {"location", t.location}, {"uses", t.uses}};
    if (!t.method.empty()) {
      e["method"] = t.method;
      e["value_index"] = t.value_index;
      e["dtype"] = t.dtype;
      e["shape"] = t.shape;
    }
    j["tensors"].push_back(e);
  }
  j["delegates_total"] = r.delegates.size();
  j["delegates"] = nlohmann::json::array();
  for (const auto& d : Top(r.delegates, top, sort)) {
    j["delegates"].push_back({{"method", d.method},
                              {"index", d.index},
                              {"backend_id", d.backend_id},
                              {"location", d.location},
                              {"bytes", d.bytes},
                              {"compile_specs", d.compile_specs}});
  }
  j["memory"] = MemoryJson(r.memory);
  return j;
}

std::string RenderSizeText(const SizeReport& r, size_t top, SizeSort sort) {
  std::ostringstream o;
  FileText(o, r.pte);
  for (const auto& p : r.ptds) o << "\n", FileText(o, p);
  char line[400];
  if (!r.tensors.empty()) {
    o << "\ntensors and named data (" << std::min(top, r.tensors.size()) << " of " << r.tensors.size() << ")\n";
    for (const auto& t : Top(r.tensors, top, sort)) {
      std::string where = t.method.empty() ? "" : t.method + "[" + std::to_string(t.value_index) + "]";
      std::string type = t.method.empty() ? "" : t.dtype + Shape(t.shape);
      std::string uses = t.uses > 1 ? " (" + std::to_string(t.uses) + " uses)" : "";
      std::snprintf(line, sizeof line, "  %10s  %-26s %-16s %-22s %s%s\n", HumanBytes(t.bytes).c_str(),
                    t.location.c_str(), where.c_str(), type.c_str(), t.name.c_str(), uses.c_str());
      o << line;
    }
  }
  if (!r.delegates.empty()) {
    o << "\ndelegates (" << std::min(top, r.delegates.size()) << " of " << r.delegates.size() << ")\n";
    for (const auto& d : Top(r.delegates, top, sort)) {
      std::snprintf(line, sizeof line, "  %10s  %-24s %-12s %s[%u], %u compile spec%s\n", HumanBytes(d.bytes).c_str(),
                    d.backend_id.c_str(), d.location.c_str(), d.method.c_str(), d.index, d.compile_specs,
                    d.compile_specs == 1 ? "" : "s");
      o << line;
    }
  }
  if (!r.memory.methods.empty()) o << "\n" << RenderMemoryText(r.memory, top, sort == SizeSort::kName);
  return o.str();
}

}  // namespace ptepack
