// ptepack_bench: ptepack at model scale, measured against the plain tools
// doing the same work on the same bytes in the same run.
//
// For each data size it writes a random data file, describes a program whose
// constants are slices of it (mapped, as `ptepack pack` does), and measures:
//   write     WritePackage (temp file, fsync, rename) against a raw copy of
//             the same bytes (read()+write() and mmap+write(), each + fsync)
//   read      PteFile::Open + verification, `ptepack verify` and
//             `ptepack inspect` as processes: O(tensors), not O(bytes)
//   checksum  ChecksumPte (XXH3-64 of every region) against `xxhsum -H3` and
//             against one in-process XXH3 stream over the whole file
//   memory    peak RSS (ru_maxrss of a child process doing only that step)
// Each step runs --repeat times, alternating with its baseline; medians are
// reported. One size at a time: it never runs two multi-GiB jobs at once.
//
//   ptepack_bench [--sizes 64M,512M,2G] [--tmp DIR] [--tensors 256]
//                 [--repeat 3] [--cli PATH/ptepack] [--no-scaling] [--keep]
#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ptepack/error.h"
#include "serialize/api/package_access.h"
#include "serialize/io/hash.h"
#include "serialize/model/spec.h"
#include "serialize/read/checksum.h"
#include "serialize/read/describe.h"
#include "serialize/read/pte_reader.h"
#include "serialize/write/pte_writer.h"

extern char** environ;

namespace ptepack::bench {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

struct Args {
  std::vector<uint64_t> sizes{64 * kMiB, 512 * kMiB, 2048 * kMiB};
  std::string tmp = "/tmp";
  uint64_t tensors = 256;
  int repeat = 3;
  std::string cli;
  bool scaling = true;
  bool keep = false;
};

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

uint64_t ParseSize(const std::string& s) {
  size_t pos = 0;
  uint64_t v = std::stoull(s, &pos);
  std::string unit = s.substr(pos);
  if (unit == "K" || unit == "k") return v << 10;
  if (unit == "M" || unit == "m") return v << 20;
  if (unit == "G" || unit == "g") return v << 30;
  if (unit.empty()) return v;
  throw std::invalid_argument("bad size " + s);
}

std::string Human(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) {
    std::snprintf(buf, sizeof buf, "%llu GiB", static_cast<unsigned long long>(b >> 30));
  } else if (b >= kMiB) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / kMiB);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  }
  return buf;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// What a step measured in a child process.
struct Run {
  double seconds = 0;   // wall time of the timed part (or of a spawned command)
  double cpu = 0;       // user + system time of the timed part
  uint64_t maxrss = 0;  // bytes, peak of the whole child
  bool ok = false;
};

struct Timing {
  double wall = -1, cpu = 0;
};

double Cpu(const rusage& ru) {
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

double SelfCpu() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return Cpu(ru);
}

// Wall and CPU time of fn.
Timing Timed(const std::function<void()>& fn) {
  double t0 = Now(), c0 = SelfCpu();
  fn();
  return Timing{Now() - t0, SelfCpu() - c0};
}

// Runs fn in a forked child so that ru_maxrss is this step's own peak.
Run InChild(const std::function<Timing()>& fn) {
  int p[2];
  if (::pipe(p) != 0) throw std::runtime_error("pipe failed");
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    Timing t;
    try {
      t = fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench step failed: %s\n", e.what());
    }
    ssize_t w = ::write(p[1], &t, sizeof t);
    ::_exit(w == sizeof t && t.wall >= 0 ? 0 : 1);
  }
  ::close(p[1]);
  Run r;
  Timing t;
  ssize_t got = ::read(p[0], &t, sizeof t);
  ::close(p[0]);
  int status = 0;
  rusage ru{};
  ::wait4(pid, &status, 0, &ru);
  r.ok = got == sizeof t && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  r.seconds = t.wall;
  r.cpu = t.cpu;
  r.maxrss = static_cast<uint64_t>(ru.ru_maxrss) * 1024;
  return r;
}

// Runs a command, output discarded; wall time and peak RSS.
Run Spawn(const std::vector<std::string>& argv) {
  std::vector<char*> av;
  for (const auto& a : argv) av.push_back(const_cast<char*>(a.c_str()));
  av.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  Run r;
  double t0 = Now();
  pid_t pid;
  if (posix_spawnp(&pid, av[0], &fa, nullptr, av.data(), environ) != 0) {
    posix_spawn_file_actions_destroy(&fa);
    return r;
  }
  int status = 0;
  rusage ru{};
  ::wait4(pid, &status, 0, &ru);
  r.seconds = Now() - t0;
  posix_spawn_file_actions_destroy(&fa);
  r.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  r.cpu = Cpu(ru);
  r.maxrss = static_cast<uint64_t>(ru.ru_maxrss) * 1024;
  return r;
}

void Check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what + " failed");
}

void WriteAll(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    Check(w > 0, "write");
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Incompressible data (xorshift), so nothing can shortcut it.
void MakeSource(const std::string& path, uint64_t size) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  Check(fd >= 0, "create " + path);
  std::vector<uint64_t> block((8 * kMiB) / 8);
  uint64_t x = 0x9E3779B97F4A7C15ull ^ size;
  for (uint64_t done = 0; done < size;) {
    for (auto& w : block) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      w = x;
    }
    size_t n = static_cast<size_t>(std::min<uint64_t>(size - done, block.size() * 8));
    WriteAll(fd, reinterpret_cast<const uint8_t*>(block.data()), n);
    done += n;
  }
  ::fsync(fd);
  ::close(fd);
}

// A one-method program: `tensors` BYTE constants tiling the source file.
std::string MakeSpec(const std::string& dir, const std::string& src, uint64_t size, uint64_t tensors) {
  nlohmann::json values = nlohmann::json::array(), constants = nlohmann::json::array();
  uint64_t each = size / tensors;
  for (uint64_t i = 0; i < tensors; ++i) {
    uint64_t off = i * each, n = i + 1 == tensors ? size - off : each;
    uint64_t a = 1, b = n;
    while (b > (1u << 30) && b % 2 == 0) {
      a *= 2;
      b /= 2;
    }
    values.push_back(
        {{"val_type", "Tensor"},
         {"val", {{"scalar_type", "BYTE"}, {"sizes", {a, b}}, {"dim_order", {0, 1}}, {"data_buffer_idx", i + 1}}}});
    constants.push_back({{"file", src}, {"offset", off}, {"size", n}});
  }
  nlohmann::json plan{{"name", "forward"},
                      {"values", values},
                      {"inputs", nlohmann::json::array()},
                      {"outputs", {0}},
                      {"chains", nlohmann::json::array()},
                      {"operators", nlohmann::json::array()},
                      {"delegates", nlohmann::json::array()},
                      {"non_const_buffer_sizes", {0}}};
  nlohmann::json spec{{"program", {{"version", 0}, {"execution_plan", {plan}}}}, {"constants", constants}};
  std::string path = dir + "/spec_" + std::to_string(tensors) + ".json";
  std::ofstream(path) << spec.dump();
  return path;
}

// Raw copy of the source bytes: read()+write() through a 1 MiB buffer, or
// write() straight from a mapping; then fsync, like the writer's commit.
Timing RawCopy(const std::string& src, const std::string& dst, bool mapped) {
  int in = ::open(src.c_str(), O_RDONLY);
  int out = ::open(dst.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  Check(in >= 0 && out >= 0, "open for raw copy");
  struct stat st {};
  ::fstat(in, &st);
  const size_t size = static_cast<size_t>(st.st_size);
  double t0 = Now(), c0 = SelfCpu();
  if (mapped) {
    auto* p = static_cast<const uint8_t*>(::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, in, 0));
    Check(p != MAP_FAILED, "mmap");
    for (size_t off = 0; off < size; off += 8 * kMiB) WriteAll(out, p + off, std::min<size_t>(8 * kMiB, size - off));
    ::munmap(const_cast<uint8_t*>(p), size);
  } else {
    std::vector<uint8_t> buf(kMiB);
    for (;;) {
      ssize_t r = ::read(in, buf.data(), buf.size());
      Check(r >= 0, "read");
      if (r == 0) break;
      WriteAll(out, buf.data(), static_cast<size_t>(r));
    }
  }
  ::fsync(out);
  Timing t{Now() - t0, SelfCpu() - c0};
  ::close(in);
  ::close(out);
  return t;
}

struct SizeResult {
  uint64_t data = 0, file = 0, flatbuffer = 0, tensors = 0;
  double write = 0, write_cpu = 0, raw_rw = 0, raw_rw_cpu = 0, raw_mm = 0, raw_mm_cpu = 0;
  uint64_t write_rss = 0;
  double pack = 0;
  uint64_t pack_rss = 0;
  double open = 0, cli_verify = 0, cli_inspect = 0;
  uint64_t verify_rss = 0;
  double checksum = 0, xxh3_stream = 0, xxhsum = 0;
  uint64_t checksum_rss = 0;
  bool xxhsum_ok = false;
};

void RemoveIfExists(const std::string& p) { ::unlink(p.c_str()); }

SizeResult Measure(const Args& a, const std::string& dir, uint64_t size, uint64_t tensors, bool full) {
  SizeResult r;
  r.data = size;
  r.tensors = tensors;
  const std::string src = dir + "/source.bin";
  std::fprintf(stderr, "[%s, %llu tensors] generating data...\n", Human(size).c_str(),
               static_cast<unsigned long long>(tensors));
  if (!std::filesystem::exists(src) || std::filesystem::file_size(src) != size) MakeSource(src, size);
  const std::string spec = MakeSpec(dir, src, size, tensors);
  const std::string out = dir + "/model.pte", raw = dir + "/raw.bin";

  std::vector<double> w, wc, rr, rrc, rm, rmc;
  for (int i = 0; i < (full ? a.repeat : 1); ++i) {
    RemoveIfExists(out);
    ::sync();  // start each timed write with no writeback pending
    Run run = InChild([&] {
      const Package pkg = PackageOf(LoadSpec(spec));
      WriteResult res;
      Timing t = Timed([&] { res = WritePackage(pkg, BackendConfig{}, out); });
      std::ofstream(dir + "/fb_size") << res.flatbuffer_size;
      return t;
    });
    Check(run.ok, "write");
    w.push_back(run.seconds);
    wc.push_back(run.cpu);
    r.write_rss = std::max(r.write_rss, run.maxrss);
    if (!full) break;
    for (bool mapped : {false, true}) {
      RemoveIfExists(raw);
      ::sync();
      Run c = InChild([&] { return RawCopy(src, raw, mapped); });
      Check(c.ok, "raw copy");
      (mapped ? rm : rr).push_back(c.seconds);
      (mapped ? rmc : rrc).push_back(c.cpu);
      RemoveIfExists(raw);
    }
    std::fprintf(stderr, "  write %.3f s, raw read/write %.3f s, raw mmap/write %.3f s\n", w.back(), rr.back(),
                 rm.back());
  }
  if (full && !a.cli.empty()) {
    // The same write as a user runs it: a fresh process, spec parsing included.
    std::ofstream(dir + "/config.json") << "{}";
    RemoveIfExists(out);
    ::sync();
    Run p = Spawn({a.cli, "pack", dir + "/config.json", spec, "-o", out, "-q"});
    Check(p.ok, "ptepack pack");
    r.pack = p.seconds;
    r.pack_rss = p.maxrss;
  }
  r.write = Median(w);
  r.write_cpu = Median(wc);
  r.raw_rw = Median(rr);
  r.raw_rw_cpu = Median(rrc);
  r.raw_mm = Median(rm);
  r.raw_mm_cpu = Median(rmc);
  std::ifstream(dir + "/fb_size") >> r.flatbuffer;
  r.file = std::filesystem::file_size(out);

  // Reading: in-process open+verify, and the CLI as a user runs it.
  std::vector<double> o, cv, ci;
  for (int i = 0; i < a.repeat; ++i) {
    Run run = InChild([&] {
      return Timed([&] {
        auto pte = PteFile::Open(out);
        Check(pte->ok(), "verify");
      });
    });
    Check(run.ok, "open");
    o.push_back(run.seconds);
    r.verify_rss = std::max(r.verify_rss, run.maxrss);
    if (!a.cli.empty()) {
      Run v = Spawn({a.cli, "verify", out});
      Check(v.ok, "ptepack verify");
      cv.push_back(v.seconds);
      Run in = Spawn({a.cli, "inspect", out});
      Check(in.ok, "ptepack inspect");
      ci.push_back(in.seconds);
      r.verify_rss = std::max(r.verify_rss, std::max(v.maxrss, in.maxrss));
    }
  }
  r.open = Median(o);
  r.cli_verify = Median(cv);
  r.cli_inspect = Median(ci);
  if (!full) return r;

  // Checksums, alternating with xxhsum and a plain XXH3 stream.
  std::vector<double> cs, xs, xh;
  r.xxhsum_ok = true;
  for (int i = 0; i < a.repeat; ++i) {
    Run run = InChild([&] {
      auto pte = PteFile::Open(out);
      return Timed([&] { ChecksumPte(*pte); });
    });
    Check(run.ok, "checksum");
    cs.push_back(run.seconds);
    r.checksum_rss = std::max(r.checksum_rss, run.maxrss);
    Run x = Spawn({"xxhsum", "-H3", out});
    r.xxhsum_ok = r.xxhsum_ok && x.ok;
    xh.push_back(x.seconds);
    Run st = InChild([&] {
      int fd = ::open(out.c_str(), O_RDONLY);
      Timing t = Timed([&] { HashFileRange(fd, 0, std::filesystem::file_size(out)); });
      ::close(fd);
      return t;
    });
    xs.push_back(st.seconds);
  }
  r.checksum = Median(cs);
  r.xxhsum = Median(xh);
  r.xxh3_stream = Median(xs);
  return r;
}

std::string Machine() {
  std::string cpu = "unknown CPU";
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  utsname u{};
  ::uname(&u);
  long mem_kib = 0;
  std::ifstream mi("/proc/meminfo");
  std::string k;
  mi >> k >> mem_kib;
  char buf[512];
  std::snprintf(buf, sizeof buf, "%s, %ld cores, %.0f GiB RAM, Linux %s", cpu.c_str(), ::sysconf(_SC_NPROCESSORS_ONLN),
                static_cast<double>(mem_kib) / (1 << 20), u.release);
  return buf;
}

int Main(int argc, char** argv) {
  Args a;
  std::string self = argv[0];
  auto slash = self.find_last_of('/');
  std::string sibling = (slash == std::string::npos ? std::string(".") : self.substr(0, slash)) + "/ptepack";
  if (::access(sibling.c_str(), X_OK) == 0) a.cli = sibling;
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(f + " needs a value");
      return argv[++i];
    };
    if (f == "--sizes") {
      a.sizes.clear();
      std::string s = next();
      for (size_t p = 0; p < s.size();) {
        size_t c = s.find(',', p);
        a.sizes.push_back(ParseSize(s.substr(p, c == std::string::npos ? std::string::npos : c - p)));
        p = c == std::string::npos ? s.size() : c + 1;
      }
    } else if (f == "--tmp") {
      a.tmp = next();
    } else if (f == "--tensors") {
      a.tensors = std::stoull(next());
    } else if (f == "--repeat") {
      a.repeat = std::max(1, std::stoi(next()));
    } else if (f == "--cli") {
      a.cli = next();
    } else if (f == "--no-scaling") {
      a.scaling = false;
    } else if (f == "--keep") {
      a.keep = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--sizes 64M,512M,2G] [--tmp DIR] [--tensors N] [--repeat R] [--cli PATH] "
                   "[--no-scaling] [--keep]\n",
                   argv[0]);
      return f == "--help" || f == "-h" ? 0 : 2;
    }
  }
  const std::string dir = a.tmp + "/ptepack_bench_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::vector<SizeResult> results;
  std::vector<SizeResult> scaling;
  for (uint64_t s : a.sizes) {
    results.push_back(Measure(a, dir, s, a.tensors, true));
    if (!a.keep) std::filesystem::remove_all(dir), std::filesystem::create_directories(dir);
  }
  if (a.scaling) {
    for (uint64_t t : {a.tensors * 16, a.tensors * 128}) scaling.push_back(Measure(a, dir, 64 * kMiB, t, false));
  }
  if (!a.keep) std::filesystem::remove_all(dir);

  auto gbs = [](uint64_t b, double s) { return s > 0 ? static_cast<double>(b) / s / 1e9 : 0.0; };
  std::printf("Machine: %s\n", Machine().c_str());
  std::printf("Temp dir: %s (%d runs per step, medians)\n\n", a.tmp.c_str(), a.repeat);
  std::printf("Write (WritePackage incl. fsync) vs raw copy of the same bytes (incl. fsync)\n\n");
  std::printf(
      "| constants | tensors | file | write s (GB/s) | raw read+write s | raw mmap+write s | write / best raw | write "
      "CPU s | raw CPU s | peak RSS (write) | `ptepack pack` s, peak RSS | limit: flatbuffer + 64 MiB "
      "|\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& r : results) {
    double best = std::min(r.raw_rw, r.raw_mm);
    uint64_t limit = r.flatbuffer + 64 * kMiB;
    bool within = r.write_rss < limit && (a.cli.empty() || r.pack_rss < limit);
    std::printf(
        "| %s | %llu | %s | %.2f (%.2f) | %.2f | %.2f | **%.2fx** | %.2f | %.2f | %s | %.2f, %s | %s (%s) %s |\n",
        Human(r.data).c_str(), static_cast<unsigned long long>(r.tensors), Human(r.file).c_str(), r.write,
        gbs(r.file, r.write), r.raw_rw, r.raw_mm, best / r.write, r.write_cpu, std::min(r.raw_rw_cpu, r.raw_mm_cpu),
        Human(r.write_rss).c_str(), r.pack, Human(r.pack_rss).c_str(), Human(limit).c_str(),
        Human(r.flatbuffer).c_str(), within ? "ok" : "EXCEEDED");
  }
  std::printf("\nRead (no checksum): PteFile::Open + verify in-process; `ptepack verify` / `inspect` as processes\n\n");
  std::printf(
      "| constants | tensors | open+verify ms | `verify` ms | `inspect` ms | peak RSS |\n|---|---|---|---|---|---|\n");
  auto read_row = [&](const SizeResult& r) {
    std::printf("| %s | %llu | %.2f | %.1f | %.1f | %s |\n", Human(r.data).c_str(),
                static_cast<unsigned long long>(r.tensors), r.open * 1e3, r.cli_verify * 1e3, r.cli_inspect * 1e3,
                Human(r.verify_rss).c_str());
  };
  for (const auto& r : results) read_row(r);
  for (const auto& r : scaling) read_row(r);
  std::printf("\nChecksum (XXH3-64 of every region) vs `xxhsum -H3 FILE` and one XXH3 stream over the file\n\n");
  std::printf(
      "| constants | file | checksum s (GB/s) | xxhsum -H3 s | checksum / xxhsum | XXH3 stream s | peak RSS "
      "|\n|---|---|---|---|---|---|---|\n");
  for (const auto& r : results) {
    std::printf("| %s | %s | %.3f (%.2f) | %s | **%s** | %.3f | %s |\n", Human(r.data).c_str(), Human(r.file).c_str(),
                r.checksum, gbs(r.file, r.checksum),
                r.xxhsum_ok ? std::to_string(r.xxhsum).substr(0, 5).c_str() : "n/a",
                r.xxhsum_ok ? (std::to_string(r.xxhsum / r.checksum).substr(0, 4) + "x").c_str() : "n/a", r.xxh3_stream,
                Human(r.checksum_rss).c_str());
  }
  return 0;
}

}  // namespace
}  // namespace ptepack::bench

int main(int argc, char** argv) {
  try {
    return ptepack::bench::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ptepack_bench: %s\n", e.what());
    return 2;
  }
}
