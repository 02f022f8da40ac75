#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan+UBSan) in build-fuzz/ and runs
# each for FUZZ_SECONDS (default 60). Fails on any crash, leak, timeout or
# out-of-memory. Seeds come from the ExecuTorch fixtures plus tests/fuzz/seeds;
# the growing corpus is kept in build-fuzz/corpus/<target>/ between runs.
#
#   FUZZ_SECONDS=300 scripts/fuzz.sh          # every target, 5 minutes each
#   scripts/fuzz.sh fuzz_ptd_reader           # only one target
#   FUZZ_SEED=1 scripts/fuzz.sh               # a fixed mutation sequence (what CI runs),
#                                             # so a failure there replays here
# Targets: fuzz_pte_reader, fuzz_ptd_reader, fuzz_spec_reader (pack specs and
# configs as JSON), fuzz_bundle_reader (.ptebundle index and members),
# fuzz_bpte_reader (BundledProgram .bpte files).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_PER_TARGET=${FUZZ_SECONDS:-60}
SEED=${FUZZ_SEED:-0}  # 0: libFuzzer picks one
JOBS=${FUZZ_BUILD_JOBS:-2}
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
FIXTURES=${PTEPACK_FIXTURES_DIR:-$ROOT/../shared/fixtures/executorch}
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(fuzz_pte_reader fuzz_ptd_reader fuzz_spec_reader fuzz_bundle_reader fuzz_bpte_reader)

# -O1: a plain Debug build (-O0) runs several times slower under the sanitizers.
CC=clang CXX=clang++ cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-g -O1" -DPTEPACK_SANITIZE=ON \
  -DPTEPACK_BUILD_FUZZERS=ON -DPTEPACK_BUILD_TESTS=OFF -DPTEPACK_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD" -j"$JOBS" --target "${TARGETS[@]}"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

status=0
for t in "${TARGETS[@]}"; do
  case $t in
    fuzz_pte_reader) pattern='*.pte' ;;
    fuzz_ptd_reader) pattern='*.ptd' ;;
    fuzz_spec_reader) pattern='*.json' ;;
    fuzz_bundle_reader) pattern='*.ptebundle' ;;
    fuzz_bpte_reader) pattern='*.bpte' ;;
    *) echo "unknown target $t" >&2; exit 2 ;;
  esac
  corpus=$BUILD/corpus/$t
  seeds=$BUILD/seeds/$t
  artifacts=$BUILD/artifacts/$t/
  mkdir -p "$corpus" "$seeds" "$artifacts"
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
  echo "== $t: ${SECONDS_PER_TARGET}s (corpus $corpus, seeds $seeds)"
  log=$BUILD/$t.log
  set +e
  "$BUILD/$t" "$corpus" "$seeds" -max_total_time="$SECONDS_PER_TARGET" -seed="$SEED" -rss_limit_mb=2048 -timeout=10 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$artifacts" 2>&1 | tee "$log" | grep -E '^(#[0-9]+ +(INITED|DONE)|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY|FUZZ INVARIANT)' 
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" -ne 0 ]; then
    echo "== $t FAILED (exit $rc); log: $log; inputs: $artifacts" >&2
    tail -n 60 "$log" >&2
    status=1
  else
    echo "== $t OK"
  fi
done
exit $status
