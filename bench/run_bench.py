#!/usr/bin/env python3
"""Runs issue 16's goals (and issue 23's planner goals) side by side and prints one table of ratios.

Called by scripts/bench.sh (which builds the binaries first):

    python3 bench/run_bench.py --build BUILD_DIR --work DIR [--quick] [--repeat N]
                               [--only NAME,...] [--oracles DIR]

Every command runs as a child process; its wall time comes from a monotonic
clock around it and its peak RSS from wait4() (ru_maxrss of that child, i.e.
getrusage). Each step runs --repeat times, alternating with its baseline, and
the median is reported. Programs come from bench/gen_programs.py (generated
once into DIR/programs, reused while the generator is unchanged).
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20


# Measures one command from a small process of its own. A child's ru_maxrss
# includes the peak RSS of the process that exec'ed it (Linux keeps the larger
# across exec, and Python spawns with vfork, sharing this runner's memory), so
# a command started from here would report at least this runner's peak: after
# reading one `inspect` of the 300,000-key .ptd (37 MB of text), every later
# run reported >= 122 MiB. The launcher forks the command from a fresh
# interpreter (about 7 MiB, the floor of every figure) and writes wall time,
# peak RSS, exit status and CPU time to argv[1].
LAUNCHER = (
    "import os,sys,time\n"
    "t0=time.perf_counter()\n"
    "pid=os.fork()\n"
    "if pid==0:\n"
    "  try: os.execvp(sys.argv[2],sys.argv[2:])\n"
    "  finally: os._exit(127)\n"
    "_,st,ru=os.wait4(pid,0)\n"
    "w=time.perf_counter()-t0\n"
    "open(sys.argv[1],'w').write('%r %d %d %r'%(w,ru.ru_maxrss,os.waitstatus_to_exitcode(st),ru.ru_utime+ru.ru_stime))\n"
)


def run(cmd, env=None, stdout=subprocess.DEVNULL):
    """(wall seconds, peak RSS bytes, stdout text, CPU seconds) of one child process."""
    fd, res = tempfile.mkstemp(prefix="ptepack-bench-rusage.")
    os.close(fd)
    try:
        p = subprocess.Popen([sys.executable, "-S", "-c", LAUNCHER, res] + list(cmd), env=env,
                             stdout=subprocess.PIPE if stdout is None else stdout, stderr=subprocess.PIPE)
        out = p.stdout.read() if stdout is None else b""
        err = p.stderr.read()
        p.wait()
        with open(res) as f:
            text = f.read().split()
    finally:
        os.unlink(res)
    if p.returncode != 0 or len(text) != 4:
        sys.exit("launcher failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), err.decode(errors="replace")[-2000:]))
    wall, maxrss_kib, code, cpu = float(text[0]), int(text[1]), int(text[2]), float(text[3])
    if code != 0:
        sys.exit("command failed (%d): %s\n%s" % (code, " ".join(cmd), err.decode(errors="replace")[-2000:]))
    return wall, maxrss_kib * 1024, out.decode(), cpu


def median_runs(cmds, repeat):
    """Runs each command of `cmds` (name -> (argv, env, prepare)) `repeat` times,
    alternating, and returns name -> (median wall, max peak RSS, last stdout,
    median CPU seconds (user + system))."""
    res = {k: ([], [], "", []) for k in cmds}
    for _ in range(repeat):
        for name, (argv, env, prep) in cmds.items():
            if prep:
                prep()
            w, r, out, cpu = run(argv, env, stdout=None)
            res[name][0].append(w)
            res[name][1].append(r)
            res[name][3].append(cpu)
            res[name] = (res[name][0], res[name][1], out, res[name][3])
    return {k: (statistics.median(v[0]), max(v[1]), v[2], statistics.median(v[3])) for k, v in res.items()}


def program_size(pte):
    """Bytes of the flatbuffer region (eh00 program_size, else the file size)."""
    with open(pte, "rb") as f:
        head = f.read(32)
    if head[8:12] == b"eh00":
        return struct.unpack_from("<Q", head, 16)[0]
    return os.path.getsize(pte)


def rm(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def copy_file_range_copy(src, dst):
    """The raw baseline: os.copy_file_range of the whole file, then fsync."""
    code = (
        "import os,sys\n"
        "s=os.open(sys.argv[1],os.O_RDONLY);d=os.open(sys.argv[2],os.O_WRONLY|os.O_CREAT|os.O_TRUNC,0o644)\n"
        "n=os.fstat(s).st_size\n"
        "while n>0:\n"
        "  k=os.copy_file_range(s,d,min(n,1<<30))\n"
        "  if k<=0: break\n"
        "  n-=k\n"
        "os.fsync(d)\n"
    )
    return [sys.executable, "-c", code, src, dst]


class Table:
    def __init__(self):
        self.rows = []

    def add(self, goal, ours, theirs, ratio, target, ok):
        self.rows.append((goal, ours, theirs, ratio, target, "yes" if ok else "**no**"))
        print("  %s: %s | %s | %s (goal %s)" % (goal, ours, theirs, ratio, target), file=sys.stderr, flush=True)

    def print(self):
        head = ("goal", "ptepack", "baseline", "ratio", "target", "met")
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in self.rows:
            print("| " + " | ".join(r) + " |")


def s(x):
    return "%.3f s" % x if x < 10 else "%.1f s" % x


def mb(x):
    return "%.1f MiB" % (x / MiB)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=0)
    ap.add_argument("--only", default="")
    ap.add_argument("--oracles", default=os.path.join(HERE, "..", "..", "shared", "oracles"))
    a = ap.parse_args()
    repeat = a.repeat or (1 if a.quick else 3)
    only = set(filter(None, a.only.split(",")))
    want = lambda name: not only or name in only  # noqa: E731

    cli = os.path.join(a.build, "ptepack")
    micro = os.path.join(a.build, "ptepack_micro_bench")
    work = os.path.abspath(a.work)
    progs = os.path.join(work, "programs-quick" if a.quick else "programs")
    gen = os.path.join(HERE, "gen_programs.py")
    stamp = os.path.join(progs, ".generated")
    gen_text = open(gen).read()
    if not os.path.exists(stamp) or open(stamp).read() != gen_text:
        rm(progs)
        print("generating programs in %s ..." % progs, file=sys.stderr, flush=True)
        subprocess.check_call([sys.executable, gen, progs] + (["--quick"] if a.quick else []))
        with open(stamp, "w") as f:
            f.write(gen_text)
    out = os.path.join(work, "out")
    rm(out)
    os.makedirs(out)
    cfg = os.path.join(out, "config.json")
    with open(cfg, "w") as f:
        f.write("{}")
    P = lambda *p: os.path.join(progs, *p)  # noqa: E731
    O = lambda *p: os.path.join(out, *p)  # noqa: E731

    oracles = os.path.abspath(a.oracles)
    have_py = os.path.isdir(os.path.join(oracles, "executorch"))
    py_env = dict(os.environ, PYSER_SRC=os.path.join(oracles, "executorch"),
                  PYTHONPATH=os.path.join(oracles, "py-stubs"), PYTHONDONTWRITEBYTECODE="1")
    py = ["/usr/bin/python3", os.path.join(HERE, "py_serialize_bench.py")]
    if not have_py:
        print("note: %s not found: no Python serializer columns" % oracles, file=sys.stderr)

    t = Table()
    pack = lambda name, o: [cli, "pack", cfg, P(name, "spec.json"), "-o", o, "--force"]  # noqa: E731

    # 1. Metadata-heavy program: pack, ProgramBuilder, Python serializer.
    if want("meta"):
        cmds = {"ours": (pack("meta", O("meta.pte")), None, None)}
        if have_py:
            cmds["py"] = (py + [P("meta", "spec.json"), O("meta.py.pte")], py_env, None)
        r = median_runs(cmds, repeat)
        ours = r["ours"][0]
        fb = program_size(O("meta.pte"))
        if have_py:
            theirs = json.loads(r["py"][2])["serialize_s"]
            t.add("meta: `pack` spec vs serialize_pte_binary (20,002 values, 5,000 instr.)",
                  "%s (CPU %s)" % (s(ours), s(r["ours"][3])), "%s (process CPU %s)" % (s(theirs), s(r["py"][3])),
                  "%.1fx faster" % (theirs / ours), ">= 10x", theirs / ours >= 10)
        mr = run([micro, "--benchmark_filter=BM_ProgramBuilderMeta", "--benchmark_format=json",
                  "--benchmark_min_time=%s" % ("0.5" if a.quick else "2")], stdout=None)[2]
        bm = json.loads(mr)["benchmarks"][0]
        pb = bm["real_time"] / 1000.0
        pb_cpu = bm["cpu_time"] / 1000.0
        if have_py:
            t.add("meta: ProgramBuilder + LayoutPte + RenderPte (in memory) vs serialize_pte_binary",
                  "%s (CPU %s)" % (s(pb), s(pb_cpu)), s(theirs), "%.1fx faster" % (theirs / pb), ">= 50x",
                  theirs / pb >= 50)
        t.add("meta: `pack` peak RSS vs flatbuffer (%s)" % mb(fb), mb(r["ours"][1]),
              mb(r["py"][1]) + " (Python)" if have_py else "-", "%.1fx fb" % (r["ours"][1] / fb),
              "<= 4x fb + 64 MiB", r["ours"][1] <= 4 * fb + 64 * MiB)

    # 2. 2,000 constants: pack vs the Python serializer, RSS.
    if want("const"):
        cmds = {"ours": (pack("const", O("const.pte")), None, None)}
        if have_py:
            cmds["py"] = (py + [P("const", "spec.json"), O("const.py.pte")], py_env, None)
        r = median_runs(cmds, repeat)
        fb = program_size(O("const.pte"))
        data = os.path.getsize(P("const", "data.bin"))
        if have_py:
            theirs = json.loads(r["py"][2])["serialize_s"]
            t.add("const: `pack` vs serialize_pte_binary (2,000 x %d KiB)" % (data // 2000 >> 10), s(r["ours"][0]),
                  s(theirs), "%.1fx faster" % (theirs / r["ours"][0]), "(faster)", theirs > r["ours"][0])
            t.add("const: `pack` peak RSS vs Python's", mb(r["ours"][1]), mb(r["py"][1]),
                  "%.2fx" % (r["ours"][1] / r["py"][1]), "(smaller)", r["ours"][1] < r["py"][1])
        t.add("const: `pack` peak RSS vs flatbuffer (%s), %s of constants" % (mb(fb), mb(data)), mb(r["ours"][1]),
              "-", "%.1fx fb" % (r["ours"][1] / fb), "<= 4x fb + 64 MiB", r["ours"][1] <= 4 * fb + 64 * MiB)

    # 3. Writing constants vs a raw copy of the same number of bytes.
    if want("copy"):
        src = P("copy", "out.pte")
        if not os.path.exists(src):
            run(pack("copy", src))
        # Every command starts alike: its output from the last round removed
        # (pack would otherwise pay for unlinking 1 GiB in its rename, the
        # copies not) and nothing left to write back (syncfs: the last
        # command's freed blocks and any dirty data are not charged to the
        # next one). Both sources are read once first, so all three read
        # from the page cache.
        def fresh(path):
            return lambda: (rm(path), os.sync())

        for f in (P("copy", "data.bin"), src):
            with open(f, "rb") as fh:
                while fh.read(8 * MiB):
                    pass
        cmds = {
            "ours": (pack("copy", O("copy.pte")), None, fresh(O("copy.pte"))),
            "cp": (["sh", "-c", 'cp "$0" "$1" && sync "$1"', src, O("copy.cp")], None, fresh(O("copy.cp"))),
            "cfr": (copy_file_range_copy(src, O("copy.cfr")), None, fresh(O("copy.cfr"))),
        }
        r = median_runs(cmds, max(repeat, 3))
        raw = min(r["cp"][0], r["cfr"][0])
        size = os.path.getsize(src)
        t.add("copy: `pack` of %s of constants vs `cp`+sync / copy_file_range+fsync" % mb(size),
              "%s (%.2f GB/s, CPU %s)" % (s(r["ours"][0]), size / r["ours"][0] / 1e9, s(r["ours"][3])),
              "cp %s, cfr %s (CPU %s, %s)" % (s(r["cp"][0]), s(r["cfr"][0]), s(r["cp"][3]), s(r["cfr"][3])),
              "%.2fx raw throughput" % (raw / r["ours"][0]),
              ">= 0.85x", raw / r["ours"][0] >= 0.85)
        fb = program_size(O("copy.pte"))
        t.add("copy: `pack` peak RSS (flatbuffer %s)" % mb(fb), mb(r["ours"][1]), "-",
              "%.1f MiB over fb" % ((r["ours"][1] - fb) / MiB), "<= 4x fb + 64 MiB", r["ours"][1] <= 4 * fb + 64 * MiB)
        # verify: metadata only, and with checksums vs xxhsum.
        r = median_runs({"verify": ([cli, "verify", src], None, None)}, max(repeat, 3))
        t.add("copy: `verify` of %s (no checksum)" % mb(size), s(r["verify"][0]), "-",
              "%.2f GB/s apparent" % (size / r["verify"][0] / 1e9), "O(metadata)", r["verify"][0] < 0.5)
        r = median_runs({"ours": ([cli, "verify", src, "--checksum"], None, None),
                         "xxh": (["xxhsum", "-H3", src], None, None)}, max(repeat, 3))
        t.add("copy: `verify --checksum` vs `xxhsum -H3`", "%s (CPU %s)" % (s(r["ours"][0]), s(r["ours"][3])),
              "%s (CPU %s)" % (s(r["xxh"][0]), s(r["xxh"][3])),
              "%.2fx xxhsum throughput" % (r["xxh"][0] / r["ours"][0]), ">= 0.9x", r["xxh"][0] / r["ours"][0] >= 0.9)

    # 4. 10,000 methods: pack and repack peak RSS.
    if want("methods"):
        r = median_runs({"pack": (pack("methods", O("methods.pte")), None, None)}, repeat)
        fb = program_size(O("methods.pte"))
        t.add("methods: `pack` of 10,000 methods, peak RSS (fb %s)" % mb(fb), mb(r["pack"][1]),
              "%s" % s(r["pack"][0]), "%.1fx fb" % (r["pack"][1] / fb), "<= 4x fb + 64 MiB",
              r["pack"][1] <= 4 * fb + 64 * MiB)
        r = median_runs({"repack": ([cli, "repack", O("methods.pte"), "-o", O("methods.re.pte"), "--force",
                                     "--segment-alignment", "256"], None, None)}, repeat)
        t.add("methods: `repack` of 10,000 methods, peak RSS", mb(r["repack"][1]), s(r["repack"][0]),
              "%.1fx fb" % (r["repack"][1] / fb), "<= 100 MB", r["repack"][1] <= 100e6)

    # 5. extract and split of 10,000 tensors.
    if want("tensors"):
        src = O("tensors.pte")
        run(pack("tensors", src))
        r = median_runs({"extract": ([cli, "extract", src, "-o", O("tensors.d"), "--force"], None, None)}, repeat)
        t.add("tensors: `extract` of 10,000 constants", "%s (CPU %s)" % (s(r["extract"][0]), s(r["extract"][3])), "-", mb(r["extract"][1]) + " peak",
              "<= 3 s", r["extract"][0] <= 3)
        r = median_runs({"split": ([cli, "split", src, "--external-constants", "weights", "-o",
                                    O("tensors.split.pte"), "--force"], None, None)}, repeat)
        fb = program_size(src)
        t.add("tensors: `split` of 10,000 constants to a .ptd", s(r["split"][0]), "-",
              mb(r["split"][1]) + " peak (%.1fx fb)" % (r["split"][1] / fb), "<= 3 s, <= 4x fb + 64 MiB",
              r["split"][0] <= 3 and r["split"][1] <= 4 * fb + 64 * MiB)

    # 6. A .ptd of 300,000 keys: made by split, then inspected.
    if want("ptd"):
        keys = 100000 if a.quick else 300000
        src = O("ptd.pte")
        run(pack("ptd", src))
        w, rss, _, _ = run([cli, "split", src, "--external-constants", "weights", "-o", O("ptd.split.pte"), "--force"])
        fb = program_size(src)
        t.add("ptd: `split` of %d constants to a .ptd" % keys, s(w), "-", mb(rss) + " peak (%.1fx fb)" % (rss / fb),
              "<= 4x fb + 64 MiB", rss <= 4 * fb + 64 * MiB)
        r = median_runs({"inspect": ([cli, "inspect", O("weights.ptd")], None, None)}, repeat)
        t.add("ptd: `inspect` of a .ptd of %d keys (%s)" % (keys, mb(os.path.getsize(O("weights.ptd")))),
              mb(r["inspect"][1]), s(r["inspect"][0]), "-", "<= 100 MB", r["inspect"][1] <= 100e6)

    # 7. The memory planner (issue 23): generated methods against the lower
    # bound, ExecuTorch's greedy beside ours, and one method of 100,000 tensors.
    if want("plan"):
        planner = os.path.join(a.build, "ptepack_plan_bench")
        r = subprocess.run([planner, "--json"] + (["--instances", "60"] if a.quick else []),
                           stdout=subprocess.PIPE, text=True)
        res = json.loads(r.stdout)
        algo = {x["name"]: x for x in res["algorithms"]}
        best, greedy = algo["best"], algo["executorch-greedy"]
        t.add("plan: size / lower bound over %d generated methods (%d tensors), `best` median / worst"
              % (res["instances"], res["blocks"]),
              "%.4f / %.4f" % (best["median"], best["worst"]),
              "executorch-greedy %.4f / %.4f" % (greedy["median"], greedy["worst"]),
              "%d of %d at the bound or proven optimal" % (best["optimal"], res["instances"]),
              "<= 1.02 / <= 1.10", best["median"] <= 1.02 and best["worst"] <= 1.10)
        t.add("plan: `best` larger than another algorithm, or overlapping", "%d, %d" % (
              res["best_above_another"], res["overlapping"]), "-", "-", "0, 0",
              res["best_above_another"] == 0 and res["overlapping"] == 0)
        t.add("plan: best + FindPlanOverlaps + PlanLowerBound of one method of %d tensors" % res["big_blocks"],
              "%s CPU (%s wall)" % (s(res["big_total_cpu_s"]), s(res["big_total_s"])),
              "executorch-greedy alone %s CPU" % s(algo["executorch-greedy"]["big_seconds"]), "-", "<= 1 s",
              res["big_total_cpu_s"] <= 1)

    # 8. `ptepack plan --algorithm best` on generated programs (issue 23), through the whole
    # read / lifetimes / plan / write path, against the input plan ExecuTorch's greedy makes.
    if want("replan"):
        bench = os.path.join(a.build, "ptepack_replan_bench")
        r = subprocess.run([bench, "--json"] + (["--programs", "60", "--max-ops", "1000"] if a.quick else []),
                           stdout=subprocess.PIPE, text=True)
        res = json.loads(r.stdout)
        best, inp = res["best"], res["input"]
        t.add("replan: planned / lower bound over %d generated programs (%d tensors), `plan -o` best median / worst"
              % (res["programs"], res["tensors"]),
              "%.4f / %.4f" % (best["median"], best["worst"]),
              "input (ExecuTorch's greedy) %.4f / %.4f" % (inp["median"], inp["worst"]),
              "%.1f %% fewer bytes" % (100.0 * (1 - res["bytes_best"] / max(1, res["bytes_input"]))),
              "<= 1.02 / <= 1.10", best["median"] <= 1.02 and best["worst"] <= 1.10)
        t.add("replan: best larger than the input or our greedy; methods not derived", "%d, %d" % (
              res["best_above"], res["not_checked"]), "-", "-", "0, 0",
              res["best_above"] == 0 and res["not_checked"] == 0)

    u = platform.uname()
    print("\nptepack bench (%s), %s UTC, %s %s, %d CPUs, load average %.1f at the end, repeat %d" % (
        "quick" if a.quick else "full", time.strftime("%Y-%m-%d %H:%M", time.gmtime()), u.system, u.release,
        os.cpu_count(), os.getloadavg()[0], repeat))
    print()
    t.print()


if __name__ == "__main__":
    main()
