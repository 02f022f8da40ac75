#!/usr/bin/env bash
# The end of setup.sh: explains one of the real ExecuTorch fixtures with a built CLI, and fails
# if that does not work (.ci/run runs it too, so a fresh machine's setup is checked).
# Usage: scripts/demo.sh [BUILD_DIR]   (default build/)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
fixtures=../shared/fixtures/executorch
if [ ! -f "$fixtures/linear.pte" ]; then
  echo "demo.sh: skipped: $fixtures/linear.pte is absent (../shared/fixtures not on this machine)"
  exit 0
fi
# linear.ptd is in FlatTensor's layout from before June 2025, which current runtimes refuse
# (inspect reports it, exit 1); --allow-legacy-ptd accepts it as the older runtimes it was
# written for do, so the demo shows the program and its external tensors.
"$build/ptepack" inspect "$fixtures/linear.pte" --ptd "$fixtures/linear.ptd" --allow-legacy-ptd
