#!/usr/bin/env bash
# The test command: builds ptepack with AddressSanitizer + UndefinedBehavior-
# Sanitizer in build-asan/ and runs the whole GoogleTest suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
# Includes run one way between folders (docs/architecture.md).
python3 scripts/layers.py --check --doc docs/architecture.md >/dev/null
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DPTEPACK_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build-asan --output-on-failure -j"$(nproc)"
