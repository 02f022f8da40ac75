#!/usr/bin/env bash
# Builds the libFuzzer targets in the sanitized clang build the test suite runs in
# (build-asan/, ASan+UBSan at -O1: scripts/builds.sh; after scripts/test.sh nothing is
# compiled again) and runs each for FUZZ_SECONDS (default 60). Fails on any crash, leak,
# timeout or out-of-memory. Seeds come from the ExecuTorch fixtures plus tests/fuzz/seeds;
# the growing corpus is kept in build-asan/corpus/<target>/ between runs.
#
#   FUZZ_SECONDS=300 scripts/fuzz.sh          # every target, 5 minutes each
#   scripts/fuzz.sh fuzz_ptd_reader           # only one target
#   FUZZ_SEED=1 scripts/fuzz.sh               # the seed CI runs (its runs still differ from
#                                             # machine to machine: coverage and time vary)
# A failing target prints each input it failed on, base64 (up to 64 KiB), so a
# failure seen only in CI's log replays here:
#   base64 -d > crash.pte <<< 'PRINTED TEXT'; build-asan/fuzz_pte_reader crash.pte
# Targets: fuzz_pte_reader, fuzz_ptd_reader, fuzz_spec_reader (pack specs and
# configs as JSON), fuzz_bundle_reader (.ptebundle index and members),
# fuzz_bpte_reader (BundledProgram .bpte files).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_PER_TARGET=${FUZZ_SECONDS:-60}
SEED=${FUZZ_SEED:-0}  # 0: libFuzzer picks one
JOBS=${FUZZ_BUILD_JOBS:-$(nproc)}
# FUZZ_BUILD_DIR (older name) or PTEPACK_ASAN_BUILD_DIR: the build directory.
[ -n "${FUZZ_BUILD_DIR:-}" ] && export PTEPACK_ASAN_BUILD_DIR=$FUZZ_BUILD_DIR
source scripts/builds.sh
BUILD=$ASAN_BUILD
FIXTURES=${PTEPACK_FIXTURES_DIR:-$ROOT/../shared/fixtures/executorch}
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(fuzz_pte_reader fuzz_ptd_reader fuzz_spec_reader fuzz_bundle_reader fuzz_bpte_reader)

configure_asan_build
cmake --build "$BUILD" -j"$JOBS" --target "${TARGETS[@]}"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# Each target's seeds, then the targets FUZZ_JOBS at a time (default: nproc; each runs
# FUZZ_SECONDS of wall time on its own core, so running them side by side on an idle machine
# executes as many inputs as running them one after another, in a fraction of the time).
FUZZ_JOBS=${FUZZ_JOBS:-$(nproc)}
prepare() {
  local t=$1 pattern
  case $t in
    fuzz_pte_reader) pattern='*.pte' ;;
    fuzz_ptd_reader) pattern='*.ptd' ;;
    fuzz_spec_reader) pattern='*.json' ;;
    fuzz_bundle_reader) pattern='*.ptebundle' ;;
    fuzz_bpte_reader) pattern='*.bpte' ;;
    *) echo "unknown target $t" >&2; exit 2 ;;
  esac
  local seeds=$BUILD/seeds/$t
  rm -f "$BUILD/$t.status"
  mkdir -p "$BUILD/corpus/$t" "$seeds" "$BUILD/artifacts/$t/"
  # Seeds: fixtures up to 64 KiB (larger ones slow every execution down),
  # and derived small files covering what only the large fixtures have.
  find "$FIXTURES" -maxdepth 1 -name "$pattern" -size -65k -exec cp -f {} "$seeds/" \;
  if [ -d tests/fuzz/seeds ]; then
    find tests/fuzz/seeds -maxdepth 1 -name "$pattern" -exec cp -f {} "$seeds/" \;
  fi
  if [ "$t" = fuzz_spec_reader ]; then
    find testdata/pack -maxdepth 1 -name '*.json' -exec cp -f {} "$seeds/" \;
  fi
  if [ -d testdata/regressions ]; then
    find testdata/regressions -maxdepth 1 -name "$pattern" -exec cp -f {} "$seeds/" \;
  fi
}
# One target; its summary lines prefixed with its name, its whole output in $BUILD/<target>.log.
run() {
  local t=$1 corpus=$BUILD/corpus/$1 seeds=$BUILD/seeds/$1 artifacts=$BUILD/artifacts/$1/ log=$BUILD/$1.log rc
  echo "== $t: ${SECONDS_PER_TARGET}s (corpus $corpus, seeds $seeds)"
  touch "$BUILD/$t.start"
  set +e
  "$BUILD/$t" "$corpus" "$seeds" -max_total_time="$SECONDS_PER_TARGET" -seed="$SEED" -rss_limit_mb=2048 -timeout=10 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$artifacts" >"$log" 2>&1
  rc=$?
  set -e
  grep -E '^(#[0-9]+ +(INITED|DONE)|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY|FUZZ INVARIANT)' "$log" |
    sed "s/^/$t: /" || true
  if [ "$rc" -ne 0 ]; then
    echo "== $t FAILED (exit $rc); log: $log; inputs: $artifacts" >&2
    tail -n 60 "$log" >&2
    local f
    # This run's inputs only (earlier runs' stay in the directory).
    find "$artifacts" -maxdepth 1 -type f -newer "$BUILD/$t.start" -size -65537c | while read -r f; do
      echo "== $t input $(basename "$f") ($(stat -c %s "$f") bytes), base64:" >&2
      base64 -w 0 "$f" >&2
      echo >&2
    done
    return 1
  fi
  echo "== $t OK"
}

for t in "${TARGETS[@]}"; do prepare "$t"; done
for t in "${TARGETS[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$FUZZ_JOBS" ]; do wait -n || true; done
  (
    rc=0
    run "$t" || rc=1
    echo $rc >"$BUILD/$t.status"
  ) &
done
wait
status=0
for t in "${TARGETS[@]}"; do
  [ "$(cat "$BUILD/$t.status" 2>/dev/null)" = 0 ] || status=1
done
exit $status
