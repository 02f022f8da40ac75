#!/usr/bin/env bash
# Conformance with ExecuTorch's runtime (tests/conformance, label `conformance`), in the
# sanitizer build. Needs the oracle extract at ../shared/oracles (tests skip without it).
#   scripts/conformance.sh          the default run (5,000 mutants in the mutation test, 2,000
#                                   fixture plan mutants in PlanMutants)
#   scripts/conformance.sh --long   the mutation test with 100,000 mutants (PTEPACK_MUTANTS overrides)
#                                   and PlanMutants with 10,000 (PTEPACK_PLAN_MUTANTS overrides)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DPTEPACK_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$(nproc)" --target ptepack ptepack_conformance_tests
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
if [[ "${1:-}" == "--long" ]]; then
  export PTEPACK_MUTANTS="${PTEPACK_MUTANTS:-100000}"
  export PTEPACK_PLAN_MUTANTS="${PTEPACK_PLAN_MUTANTS:-10000}"
  exec ./build-asan/tests/conformance/ptepack_conformance_tests --gtest_filter='Mutation.*:PlanMutants.*'
fi
ctest --test-dir build-asan --output-on-failure -L conformance -j"$(nproc)"
