#!/usr/bin/env bash
# Installs the Debian packages ptepack needs to build and test.
set -euo pipefail
PKGS=(build-essential cmake pkg-config clang libclang-rt-dev
      libflatbuffers-dev flatbuffers-compiler libzstd-dev libxxhash-dev xxhash
      nlohmann-json3-dev libcli11-dev libgtest-dev libbenchmark-dev
      python3 python3-flatbuffers python3-dev python3-pybind11 python3-pytest)
PKGS+=(graphviz)  # `ptepack graph -o X.svg|X.html` runs Graphviz dot; its tests check dot accepts the DOT
PKGS+=(chromium)  # headless rendering test of `ptepack map` (tests/map_test.cpp)
PKGS+=(zsh groff-base)  # tests/cli_habits_test.cpp: `zsh -n` on the generated completion, groff renders the man page
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
