#!/usr/bin/env bash
# Issues 16 and 27's benchmarks: ptepack against ExecuTorch's Python serializer
# (from ../shared/oracles), raw copies (cp, copy_file_range, to disk and to a
# tmpfs), memcpy and xxhsum, side by side in one run; prints one table: per row
# the medians of ours and of the anchor, the median of the run-by-run ratios and
# the worst one (a goal is met only if its worst run meets it). Not part of the
# test run (CI never calls it).
#
#   scripts/bench.sh [--quick] [--repeat N (default 5)] [--tmpfs DIR (default /dev/shm)]
#                    [--only meta,const,copy,methods,tensors,ptd,scale,plan,replan]
#
# --quick (about 3 min with --repeat 2, longer with the default 5): smaller
# constants (2,000 x 16 KiB, 128 MiB to copy) and a 100,000-key .ptd, no scale
# rows. The full run (2,000 x 256 KiB, 1 GiB, 300,000 keys, the scale rows'
# 220 MB spec and sparse 4 and 40 GiB files) needs about 5.5 GiB of disk in
# $BENCH_DIR (default /tmp/ptepack-bench), 2 GiB in the tmpfs, and tens of
# minutes. Builds build-bench/ (Release) first.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BENCH_BUILD:-build-bench}
LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPTEPACK_BUILD_TESTS=OFF "${LAUNCHER[@]}" >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target ptepack ptepack_micro_bench ptepack_plan_bench ptepack_replan_bench ptepack_memcpy_bench >/dev/null
export PTEPACK_BENCH_DIR=${BENCH_DIR:-/tmp/ptepack-bench}
exec python3 bench/run_bench.py --build "$BUILD" --work "$PTEPACK_BENCH_DIR" "$@"
