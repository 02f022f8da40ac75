#!/usr/bin/env bash
# The test command: builds ptepack with AddressSanitizer + UndefinedBehavior-
# Sanitizer in build-asan/ and runs the whole GoogleTest suite with ctest.
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
./scripts/install-deps.sh
# Includes run one way between folders (docs/architecture.md).
python3 scripts/layers.py --check --doc docs/architecture.md >/dev/null
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DPTEPACK_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build-asan --output-on-failure -j"$(nproc)"

# The browser viewer (web/, issue 26): built with Emscripten and tested in headless Chromium
# against the sanitized CLI. Skipped, saying so, without Chromium or npm.
./scripts/test-web.sh build-asan/ptepack

# The Python module (a plain Release build: a sanitized extension would need
# the sanitizer runtime preloaded into python) and its pytest suite, which
# compares it with the CLI. Skipped, saying so, without pybind11 or pytest.
PY=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c "import pybind11, pytest" 2>/dev/null; then
    PY=$(command -v "$p")
    break
  fi
done
if [ -z "$PY" ]; then
  echo "test.sh: SKIPPED the Python module tests: no python3 with pybind11 and pytest (Debian: python3-pybind11 python3-pytest)"
else
  cmake -S . -B build-py -DCMAKE_BUILD_TYPE=Release -DPTEPACK_BUILD_PYTHON=ON -DPTEPACK_BUILD_TESTS=OFF \
    -DPTEPACK_BUILD_BENCH=OFF -DPython3_EXECUTABLE="$PY" >/dev/null
  cmake --build build-py -j"$(nproc)" --target ptepack_python ptepack
  PTEPACK_PYTHON_DIR="$PWD/build-py/python" PTEPACK_CLI="$PWD/build-py/ptepack" "$PY" -m pytest -q -rs python/tests
fi
