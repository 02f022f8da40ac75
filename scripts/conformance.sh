#!/usr/bin/env bash
# Conformance with ExecuTorch's runtime (tests/conformance, label `conformance`), in the
# sanitizer build (build-asan, scripts/builds.sh). Needs the oracle extract at ../shared/oracles
# (tests skip without it).
#
#   scripts/conformance.sh          the conformance tests at their CI sizes (what scripts/test.sh
#                                   and .ci/run run; docs/ci.md says what each size keeps)
#   scripts/conformance.sh --full   the long versions: PTEPACK_CONFORMANCE_FULL=1, which every
#                                   sized test reads (the mutation test: 100,000 mutants,
#                                   PTEPACK_MUTANTS overrides; the writer grid: every pair of
#                                   axis values; JsonTree's random edits: 1,000 a text;
#                                   PlanMutants: 10,000 fixture plan mutants, PTEPACK_PLAN_MUTANTS
#                                   overrides), and PTEPACK_PLAN_FULL=1 (the planner's random
#                                   instances: 23,000),
#                                   in both test binaries (the whole suite, not only the
#                                   conformance label), without ctest's timeouts.
#                                   Hours, not minutes. --long: the same.
#
# A test made shorter for CI reads PTEPACK_CONFORMANCE_FULL=1 for its long version and says in
# a comment what its CI size keeps; docs/ci.md lists them.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/builds.sh
full=0
case "${1:-}" in
  --full | --long) full=1 ;;
  "") ;;
  *) echo "conformance.sh: unknown argument $1 (--full)" >&2; exit 2 ;;
esac
configure_asan_build
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
if [ "$full" = 0 ]; then
  cmake --build "$ASAN_BUILD" -j"$(nproc)" --target ptepack ptepack_conformance_tests
  exec ctest --test-dir "$ASAN_BUILD" --output-on-failure -L conformance -j"$(nproc)"
fi

cmake --build "$ASAN_BUILD" -j"$(nproc)" --target ptepack ptepack_tests ptepack_conformance_tests
export PTEPACK_CONFORMANCE_FULL=1 PTEPACK_PLAN_FULL=1
# The two binaries side by side (one a core), each whole; logs in $ASAN_BUILD/full-*.log.
status=0
pids=()
for bin in tests/ptepack_tests tests/conformance/ptepack_conformance_tests; do
  log=$ASAN_BUILD/full-$(basename "$bin").log
  echo "conformance.sh --full: $bin (log: $log)"
  "$ASAN_BUILD/$bin" --gtest_brief=1 >"$log" 2>&1 &
  pids+=($!)
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || status=1
done
for bin in ptepack_tests ptepack_conformance_tests; do
  log=$ASAN_BUILD/full-$bin.log
  echo "== $bin"
  grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|FAILED' "$log" | tail -n 20 || true
done
exit $status
