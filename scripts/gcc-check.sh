#!/usr/bin/env bash
# g++ compiles every translation unit of ours cleanly with -Wall -Wextra -Werror at -O0, with the
# flags of a plain `cmake -S . -B build` (no build type: no optimisation, no NDEBUG): the library,
# the CLI, the tests, the conformance tests, the runtime oracle's harnesses and the benchmarks.
# Users build with both compilers; the sanitized build (scripts/builds.sh: build-asan) is clang's,
# and the g++ Release build (build-py) holds only the library, the CLI and the Python module.
#
# Compile only: each file is compiled (-c, every GCC pass that runs at -O0, so the middle end's
# warnings too, e.g. -Wreturn-type) into /dev/null; nothing is linked or kept. ExecuTorch's own
# sources (the oracle's runtime, compiled with -w: not held to our warnings) are left out.
#
#   scripts/gcc-check.sh        configures build-gcc/ (flatc's headers only), compiles, prints
#                               the count, the CPU time and each failure's messages
#   GCC_CHECK_JOBS=N            parallel compiles (default: nproc)
#   GCC_CHECK_SKIP_BUILT=DIR    leave out the files a g++ build in DIR has compiled already with
#                               -Werror (scripts/test.sh passes its Release build, build-py: the
#                               library and the CLI, whose -O2 compile runs every warning -O0
#                               runs; a file that mentions assert( or NDEBUG, whose code differs
#                               under NDEBUG, is checked anyway; left to check are the tests,
#                               benchmarks and harnesses)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${PTEPACK_GCC_CHECK_DIR:-build-gcc}
JOBS=${GCC_CHECK_JOBS:-$(nproc)}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if [ -f "$BUILD/CMakeCache.txt" ] && ! grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*g++' "$BUILD/CMakeCache.txt"; then
  rm -rf "$BUILD"
fi
CC=gcc CXX=g++ cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE= -DPTEPACK_BUILD_TESTS=ON -DPTEPACK_BUILD_BENCH=ON \
  -DPTEPACK_BUILD_PYTHON=OFF -DPTEPACK_BUILD_FUZZERS=OFF -DPTEPACK_SANITIZE=OFF "${launcher[@]}" >/dev/null
# The headers flatc generates (ours and, when the oracle is there, ExecuTorch's).
targets=(ptepack_schemas)
for t in et_oracle_schemas et_oracle_bp_schema; do
  grep -q "^$t:" "$BUILD/Makefile" 2>/dev/null && targets+=("$t")
done
cmake --build "$BUILD" --target "${targets[@]}" >/dev/null

python3 - "$BUILD/compile_commands.json" "$PWD" "$JOBS" "${GCC_CHECK_SKIP_BUILT:-}" <<'PY'
import json, os, resource, shlex, subprocess, sys, time
from concurrent.futures import ThreadPoolExecutor

db, root, jobs, skip_dir = sys.argv[1], os.path.realpath(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
built = set()  # sources a g++ build compiled with -Werror, and whose object is there
if skip_dir and os.path.exists(os.path.join(skip_dir, "compile_commands.json")):
    for entry in json.load(open(os.path.join(skip_dir, "compile_commands.json"))):
        args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
        if args and os.path.basename(args[0]) == "ccache":
            args = args[1:]
        obj = args[args.index("-o") + 1] if "-o" in args else ""
        if ("g++" in os.path.basename(args[0]) and "-Werror" in args
                and os.path.exists(os.path.join(entry["directory"], obj))):
            built.add(os.path.realpath(os.path.join(entry["directory"], entry["file"])))
oracles = None
for line in open(os.path.join(os.path.dirname(db), "CMakeCache.txt")):
    if line.startswith("PTEPACK_ORACLES_DIR:"):
        oracles = os.path.realpath(line.split("=", 1)[1].strip())
units = []
for entry in json.load(open(db)):
    src = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
    if oracles and src.startswith(oracles + os.sep):
        continue  # ExecuTorch's sources (built with -w)
    if src in built:
        text = open(src, errors="replace").read()
        if "assert(" not in text and "NDEBUG" not in text:
            continue  # compiled by g++ with -Werror in GCC_CHECK_SKIP_BUILT, the same code with or without NDEBUG
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    if args and os.path.basename(args[0]) == "ccache":
        args = args[1:]
    if "-Werror" not in args:
        sys.exit(f"gcc-check: {src} is compiled without -Werror: {' '.join(args)}")
    kept = []  # the command without its dependency-file options, its object into /dev/null
    it = iter(args)
    for a in it:
        if a in ("-MT", "-MF"):
            next(it)
        elif a == "-o":
            next(it)
            kept += ["-o", "/dev/null"]
        elif a != "-MD":
            kept.append(a)
    args = kept
    units.append((os.path.relpath(src, root), entry["directory"], args))

def compile_one(unit):
    name, cwd, args = unit
    p = subprocess.run(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return name, p.returncode, p.stdout

t0 = time.monotonic()
with ThreadPoolExecutor(jobs) as pool:
    results = list(pool.map(compile_one, units))
wall = time.monotonic() - t0
cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
failed = [r for r in results if r[1] != 0]
for name, rc, out in failed:
    print(f"gcc-check: {name}: g++ -O0 failed (exit {rc}):\n{out}", file=sys.stderr)
also = f"; {len(built)} more compiled by g++ -Werror in {skip_dir}" if built else ""
print(f"gcc-check: {len(results) - len(failed)} of {len(results)} translation units compile with g++ -O0 "
      f"-Wall -Wextra -Werror ({wall:.0f} s wall, {cpu.ru_utime + cpu.ru_stime:.0f} s CPU{also})")
sys.exit(1 if failed else 0)
PY
