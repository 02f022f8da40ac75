#!/usr/bin/env bash
# Installs ptepack into a temporary prefix and builds examples/consumer
# against the installed tree only: with find_package(ptepack) and with
# pkg-config, with g++ and with clang++. Each build runs and its output is
# checked with the installed `ptepack verify`. Also checks that include/
# holds only the public headers (nothing generated, nothing test-only).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
JOBS=${JOBS:-2}
LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

# 1. include/ holds the public API only.
bad=0
for f in include/ptepack/*; do
  case "$f" in
    *_generated.h | *_bfbs* | *test* | *fake* | *mock*)
      echo "check-install: $f: generated or test-only header in include/" >&2
      bad=1
      ;;
  esac
  [ "${f##*.}" = h ] || { echo "check-install: $f: not a header" >&2; bad=1; }
  # A public header includes only standard headers and other public headers.
  while read -r inc; do
    case "$inc" in
      \"ptepack/*) ;;
      \<*) ;;
      *) echo "check-install: $f includes $inc (public headers include only ptepack/* and system headers)" >&2; bad=1 ;;
    esac
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*\([<"][^>"]*[>"]\).*/\1/p' "$f")
  if grep -qE '(flatbuffers|nlohmann|gtest)/' "$f"; then
    echo "check-install: $f mentions flatbuffers/nlohmann/gtest headers" >&2
    bad=1
  fi
done
[ "$bad" = 0 ] || exit 1
# The README's C++ example is an excerpt of examples/consumer/emit_model.cpp (indentation aside).
python3 - <<'PY' || exit 1
import re, sys
readme = open("README.md").read()
block = readme.split("## The library", 1)[1].split("```cpp\n", 1)[1].split("```", 1)[0]
strip = lambda text: [l.strip() for l in text.strip().splitlines()]
example = strip(open("examples/consumer/emit_model.cpp").read())
lines = strip(block)
if not any(example[i:i + len(lines)] == lines for i in range(len(example))):
    sys.exit("check-install: README.md's C++ example is not an excerpt of examples/consumer/emit_model.cpp")
print(f"check-install: README's C++ example: {len(lines)} lines of examples/consumer/emit_model.cpp")
PY
echo "check-install: include/ptepack: $(ls include/ptepack | wc -l) public headers, none generated or test-only"

# 2. Build the library and CLI alone (no tests, no bench) and install them
#    into a temporary prefix. The build directory is the g++ Release one that
#    scripts/test.sh builds the Python module in, configured the same way
#    (scripts/builds.sh), so after test.sh nothing is compiled again.
source scripts/builds.sh
BUILD=$REL_BUILD
PREFIX="$WORK/prefix"
configure_release_build
cmake --build "$BUILD" -j"$JOBS" --target ptepack_lib ptepack ptepack_shell_files >/dev/null
cmake --install "$BUILD" --prefix "$PREFIX" >/dev/null
PTEPACK="$PREFIX/bin/ptepack"
"$PTEPACK" --version
# The shell completions and the man page, generated from the CLI's parser.
for f in share/bash-completion/completions/ptepack share/zsh/site-functions/_ptepack share/man/man1/ptepack.1; do
  [ -s "$PREFIX/$f" ] || { echo "check-install: $f was not installed" >&2; exit 1; }
done
if ls "$PREFIX"/include/ptepack | grep -qv '\.h$'; then
  echo "check-install: installed include/ptepack holds non-headers" >&2
  exit 1
fi

run_and_verify() {  # $1: the built consumer, $2: a label
  local out="$WORK/out-$2"
  mkdir -p "$out"
  "$1" "$out" >"$out/log.txt"
  grep -q "^verify: OK" "$out/log.txt" || { cat "$out/log.txt"; echo "check-install: $2: consumer did not verify" >&2; exit 1; }
  "$PTEPACK" verify "$out/model.pte" --ptd "$out/weights.ptd" --strict
  echo "check-install: $2: built, ran, and the installed ptepack verifies its output"
}

for cxx in g++ clang++; do
  command -v "$cxx" >/dev/null || { echo "check-install: $cxx not found" >&2; exit 1; }
  # find_package(ptepack)
  cmake -S examples/consumer -B "$WORK/consumer-$cxx" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_PREFIX_PATH="$PREFIX" "${LAUNCHER[@]}" >/dev/null
  cmake --build "$WORK/consumer-$cxx" -j"$JOBS" >/dev/null
  run_and_verify "$WORK/consumer-$cxx/emit_model" "cmake-$cxx"
  # pkg-config
  PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig:$PREFIX/lib64/pkgconfig" pkg-config --exists ptepack
  flags=$(PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig:$PREFIX/lib64/pkgconfig" pkg-config --cflags --libs ptepack)
  # shellcheck disable=SC2086
  "$cxx" -std=c++17 -Wall -Wextra -Werror examples/consumer/emit_model.cpp -o "$WORK/emit_model-pc-$cxx" $flags
  run_and_verify "$WORK/emit_model-pc-$cxx" "pkg-config-$cxx"
done
# The build tree itself, through pkg-config (ptepack-uninstalled.pc): the
# static library with its dependencies, no install needed.
BUILD_ABS=$(cd "$BUILD" && pwd)
flags=$(PKG_CONFIG_PATH="$BUILD_ABS" pkg-config --cflags --libs ptepack)
case "$flags" in
  *"-L$BUILD_ABS"*) ;;
  *) echo "check-install: pkg-config did not use $BUILD_ABS/ptepack-uninstalled.pc ($flags)" >&2; exit 1 ;;
esac
# shellcheck disable=SC2086
g++ -std=c++17 -Wall -Wextra -Werror examples/consumer/emit_model.cpp -o "$WORK/emit_model-build-tree" $flags
run_and_verify "$WORK/emit_model-build-tree" "build-tree"

# 3. The shared library exports the public API alone: built with BUILD_SHARED_LIBS (the library
#    only, -fvisibility=hidden and cmake/ptepack.map), installed, its dynamic symbols read with nm. A symbol is allowed
#    when it belongs to a declaration include/ptepack/ marks PTEPACK_API: a class's members,
#    typeinfo and vtable ("struct PTEPACK_API Bytes"), or a function ("PTEPACK_API ... Verify(").
#    The consumer is built against it and run too.
SHARED_BUILD="$WORK/shared-build"
SHARED_PREFIX="$WORK/shared-prefix"
CC=gcc CXX=g++ cmake -S . -B "$SHARED_BUILD" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
  -DPTEPACK_BUILD_TESTS=OFF -DPTEPACK_BUILD_TOOLS=OFF -DPTEPACK_BUILD_BENCH=OFF -DPTEPACK_BUILD_PYTHON=OFF \
  "${LAUNCHER[@]}" >/dev/null
cmake --build "$SHARED_BUILD" -j"$JOBS" --target ptepack_shared >/dev/null
cmake --install "$SHARED_BUILD" --prefix "$SHARED_PREFIX" >/dev/null
SO=$(ls "$SHARED_PREFIX"/lib*/libptepack.so)
allowed=$(sed -n -e 's/.*\(struct\|class\) PTEPACK_API \([A-Za-z0-9_]*\).*/\2/p' \
  -e 's/^PTEPACK_API .*[ *&]\([A-Za-z0-9_]*\)(.*/\1/p' include/ptepack/*.h | sort -u)
[ -n "$allowed" ] || { echo "check-install: no PTEPACK_API declarations found in include/ptepack" >&2; exit 1; }
pattern=$(printf '%s\n' "$allowed" | sed 's/.*/^\\(typeinfo for \\|typeinfo name for \\|vtable for \\)\\?ptepack::&\\(::\\|(\\|$\\)/')
nm -D --defined-only -C "$SO" | cut -d' ' -f3- >"$WORK/exports.txt"
if grep -v -f <(printf '%s\n' "$pattern") "$WORK/exports.txt" >"$WORK/unexpected.txt"; then
  echo "check-install: $SO exports $(wc -l <"$WORK/unexpected.txt") symbols outside the public API, such as:" >&2
  head -20 "$WORK/unexpected.txt" >&2
  exit 1
fi
echo "check-install: $SO exports $(wc -l <"$WORK/exports.txt") symbols, all of the public API ($(echo "$allowed" | wc -l) PTEPACK_API declarations)"
cmake -S examples/consumer -B "$WORK/consumer-shared" -DCMAKE_CXX_COMPILER=g++ -DCMAKE_PREFIX_PATH="$SHARED_PREFIX" \
  "${LAUNCHER[@]}" >/dev/null
cmake --build "$WORK/consumer-shared" -j"$JOBS" >/dev/null
run_and_verify "$WORK/consumer-shared/emit_model" "cmake-shared"
echo "check-install: OK"
