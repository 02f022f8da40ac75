#!/usr/bin/env bash
# Fresh Debian machine to a working ptepack: install dependencies, build
# (release, in build/) and explain one of the real ExecuTorch fixtures.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DPTEPACK_BUILD_PYTHON=ON >/dev/null
cmake --build build -j"$(nproc)"
./scripts/demo.sh build
echo "built: ./build/ptepack, the C++ library, and the Python module (PYTHONPATH=build/python python3 -c 'import ptepack')"
