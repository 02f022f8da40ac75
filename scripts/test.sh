#!/usr/bin/env bash
# The test command: builds ptepack with clang, AddressSanitizer + UndefinedBehaviorSanitizer
# (-O1 -g) in build-asan/ and runs the whole GoogleTest suite with ctest (the same build
# holds the fuzzers scripts/fuzz.sh runs: scripts/builds.sh); then the browser viewer's test
# and the Python module's (a g++ Release build in build-py/, which scripts/check-install.sh
# reuses); last, that g++ -O0 compiles the rest (tests, benchmarks) with -Werror
# (scripts/gcc-check.sh).
# docs/ci.md: what each step costs in CI.
#
#   PTEPACK_CONFORMANCE_FULL=1 scripts/test.sh   the long versions of the sized tests
#                                   (what scripts/conformance.sh --full runs; docs/ci.md)
#
#   scripts/test.sh --no-fixtures   instead: the suite as a clone without ../shared beside it
#                                   runs it (fixture and oracle directories empty; a Release build
#                                   in build-nofix/): 0 failures, the tests that need them skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--no-fixtures" ]; then
  empty=$PWD/build-nofix/empty  # stays the same, so a second run does not rebuild
  mkdir -p "$empty"
  [ -z "$(ls -A "$empty")" ] || { echo "test.sh: $empty is not empty" >&2; exit 2; }
  cmake -S . -B build-nofix -DCMAKE_BUILD_TYPE=Release -DPTEPACK_FIXTURES_DIR="$empty" \
    -DPTEPACK_ORACLES_DIR="$empty" >/dev/null
  cmake --build build-nofix -j"$(nproc)" --target ptepack_tests ptepack_conformance_tests ptepack
  export PTEPACK_FIXTURES_DIR="$empty" PTEPACK_ORACLES_DIR="$empty"
  # Each test binary ends with one line: how many tests skipped, and why.
  ./build-nofix/tests/ptepack_tests --gtest_brief=1
  ./build-nofix/tests/conformance/ptepack_conformance_tests --gtest_brief=1
  exit 0
fi
source scripts/builds.sh
# Each step prints one line, "[time] STEP: wall, CPU" (docs/ci.md's table comes from them).
ci_step install-deps ./scripts/install-deps.sh
# Includes run one way between folders (docs/architecture.md).
ci_step layers python3 scripts/layers.py --check --doc docs/architecture.md >/dev/null
configure_asan_build
ci_step build-asan cmake --build "$ASAN_BUILD" -j"$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ci_step ctest ctest --test-dir "$ASAN_BUILD" --output-on-failure -j"$(nproc)"

# The browser viewer (web/, issue 26): built with Emscripten and tested in headless Chromium
# against the sanitized CLI. Skipped, saying so, without Chromium or npm.
ci_step test-web ./scripts/test-web.sh "$ASAN_BUILD/ptepack"

# The Python module (a plain Release build: a sanitized extension would need
# the sanitizer runtime preloaded into python) and its pytest suite, which
# compares it with the CLI. Skipped, saying so, without pybind11 or pytest.
PY=$(find_module_python || true)
if [ -z "$PY" ]; then
  echo "test.sh: SKIPPED the Python module tests: no python3 with pybind11 and pytest (Debian: python3-pybind11 python3-pytest)"
else
  configure_release_build
  ci_step build-py cmake --build "$REL_BUILD" -j"$(nproc)" --target ptepack_python ptepack
  ci_step pytest env PTEPACK_PYTHON_DIR="$(readlink -f "$REL_BUILD")/python" \
    PTEPACK_CLI="$(readlink -f "$REL_BUILD")/ptepack" "$PY" -m pytest -q -rs python/tests
fi

# g++ -O0 compiles every file of ours with -Wall -Wextra -Werror (compile only), but for those
# the g++ Release build above compiled with -Werror already (the library and the CLI).
ci_step gcc-check env GCC_CHECK_SKIP_BUILT="$REL_BUILD" ./scripts/gcc-check.sh
