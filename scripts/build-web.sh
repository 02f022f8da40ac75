#!/usr/bin/env bash
# Builds the in-browser viewer (issue 26): ptepack's read side compiled to WebAssembly with
# Emscripten, and the page around it, into build-web/:
#
#   build-web/index.html    the page (web/index.html)
#   build-web/ptepack.js    Emscripten's loader, then the page's code (web/app.js)
#   build-web/ptepack.wasm  the reader, checks, describe, size, byte map and graph (web/ptepack_web.cpp)
#
# Open build-web/index.html (file:// works) or serve the folder with any static server.
#
# What the WebAssembly build links is built here from Debian's own source packages, for the
# versions the host has installed (the host's flatc generates the headers, so FlatBuffers must be
# the same version): FlatBuffers, xxHash and nlohmann-json. `apt-get source` needs a deb-src entry;
# the script adds one for the machine's release (copied from its deb entries) when there is none.
# Nothing is downloaded from anywhere else. zstd is not needed: the page does not read bundles.
#
#   scripts/build-web.sh     installs what is missing (Debian: emscripten, dpkg-dev, ...), builds
#
# scripts/test-web.sh tests the page in headless Chromium.
# Times of each step are printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/build-web
DEPS=$OUT/deps
PREFIX=$DEPS/prefix
mkdir -p "$DEPS"
# Emscripten's JS optimizer needs acorn, which Debian installs for its own node (node-acorn);
# a node from elsewhere (nodesource) does not look there.
export NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}
JOBS=${JOBS:-$(nproc)}
CCACHE=${CCACHE-$(command -v ccache || true)}  # shared compiler cache, when there is one
declare -a TIMES=()
step_start() { STEP_NAME=$1; STEP_T0=$EPOCHREALTIME; echo "build-web: $1"; }
step_end() { TIMES+=("$(awk -v a="$STEP_T0" -v b="$EPOCHREALTIME" -v n="$STEP_NAME" 'BEGIN{printf "%-34s %6.1f s", n, b - a}')"); }

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo

step_start "install emscripten, dpkg-dev"
need=()
for p in emscripten dpkg-dev flatbuffers-compiler libflatbuffers-dev libxxhash-dev nlohmann-json3-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
step_end

# deb-src entries for the machine's Debian release, copied from its deb entries.
add_deb_src() {
  local list=/etc/apt/sources.list.d/ptepack-deb-src.sources
  if grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then return; fi
  echo "build-web: adding deb-src entries ($list) for apt-get source"
  local tmp
  tmp=$(mktemp)
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -e "$f" ] || continue
    # deb822 stanzas: keep those of type deb, typed deb-src.
    awk 'BEGIN{RS=""; ORS="\n\n"} /(^|\n)Types:[ \t]*deb([ \t]|\n|$)/ { sub(/Types:[ \t]*deb/, "Types: deb-src"); print }' "$f" >>"$tmp"
  done
  if [ -s "$tmp" ]; then
    $SUDO install -m 644 "$tmp" "$list"
  else
    # One-line sources.list format.
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | grep -E '^deb ' |
      sed 's/^deb /deb-src /' | $SUDO tee /etc/apt/sources.list.d/ptepack-deb-src.list >/dev/null
  fi
  rm -f "$tmp"
  $SUDO apt-get update -qq
}

# Source package $1 at the version of the installed binary package $2, unpacked in $DEPS/src.
fetch_source() {
  local src=$1 bin=$2 ver
  ver=$(dpkg-query -W -f='${Version}' "$bin")
  local stamp=$DEPS/src/$src-$ver.unpacked
  if [ -f "$stamp" ]; then return; fi
  add_deb_src
  mkdir -p "$DEPS/src"
  # (As root, apt warns that it downloads unsandboxed: said in the log only.)
  (cd "$DEPS/src" && rm -rf "$src"-*/ && apt-get source -qq "$src=$ver" >"$DEPS/src/$src.log" 2>&1) ||
    { cat "$DEPS/src/$src.log"; exit 1; }
  touch "$stamp"
}

# ---- Dependencies for wasm32, from Debian's source packages, installed into $PREFIX.
step_start "dependencies from Debian sources"
# Built again when the host's versions change (the stamp names them).
STAMP=$PREFIX/.built-$(dpkg-query -W -f='${Version}_' libflatbuffers-dev libxxhash-dev nlohmann-json3-dev)
if [ ! -f "$STAMP" ]; then
  fetch_source flatbuffers libflatbuffers-dev
  fetch_source xxhash libxxhash-dev
  fetch_source nlohmann-json3 nlohmann-json3-dev
  rm -rf "$PREFIX" "$DEPS/build"
  mkdir -p "$PREFIX/include" "$PREFIX/lib" "$DEPS/build"
  # FlatBuffers: the runtime library (reflection, the IDL parser and JSON printer); no flatc,
  # no tests.
  emcmake cmake -S "$DEPS"/src/flatbuffers-*/ -B "$DEPS/build/flatbuffers" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$PREFIX" -DFLATBUFFERS_BUILD_TESTS=OFF -DFLATBUFFERS_BUILD_FLATC=OFF \
    -DFLATBUFFERS_BUILD_FLATHASH=OFF -DFLATBUFFERS_BUILD_FLATLIB=ON -DFLATBUFFERS_INSTALL=ON \
    -DCMAKE_C_COMPILER_LAUNCHER="${CCACHE:-}" -DCMAKE_CXX_COMPILER_LAUNCHER="${CCACHE:-}" >"$DEPS/flatbuffers.log" 2>&1 ||
    { cat "$DEPS/flatbuffers.log"; exit 1; }
  cmake --build "$DEPS/build/flatbuffers" -j"$JOBS" >>"$DEPS/flatbuffers.log" 2>&1 || { tail -40 "$DEPS/flatbuffers.log"; exit 1; }
  cmake --install "$DEPS/build/flatbuffers" >>"$DEPS/flatbuffers.log" 2>&1
  # xxHash: one C file.
  xx=$(echo "$DEPS"/src/xxhash-*/)
  emcc -O2 -c "$xx/xxhash.c" -o "$DEPS/build/xxhash.o"
  emar rcs "$PREFIX/lib/libxxhash.a" "$DEPS/build/xxhash.o"
  cp "$xx/xxhash.h" "$xx/xxh3.h" "$PREFIX/include/"
  # nlohmann-json: headers only.
  cp -r "$DEPS"/src/nlohmann-json3-*/include/nlohmann "$PREFIX/include/"
  touch "$STAMP"
fi
step_end

# ---- The WebAssembly module: the library's read side and web/ptepack_web.cpp.
step_start "wasm module (emcmake, build)"
# MinSizeRel (-Os): a smaller module, and quicker to compile than -O3.
emcmake cmake -S "$ROOT" -B "$OUT/wasm" -DCMAKE_BUILD_TYPE=MinSizeRel -DCMAKE_FIND_ROOT_PATH="$PREFIX" \
  -DFLATC="$(command -v flatc)" -DCMAKE_C_COMPILER_LAUNCHER="${CCACHE:-}" -DCMAKE_CXX_COMPILER_LAUNCHER="${CCACHE:-}" \
  >"$OUT/wasm-configure.log" 2>&1 || { cat "$OUT/wasm-configure.log"; exit 1; }
cmake --build "$OUT/wasm" -j"$JOBS" --target ptepack_web
step_end

# ---- The page: index.html, ptepack.js (Emscripten's loader, the module as base64 for file://
# pages, then web/app.js) and ptepack.wasm (what the page loads when served over http(s)).
step_start "page (index.html, ptepack.js)"
# Written beside the result and renamed into place: a failed build leaves the last page whole.
stage=$(mktemp -d "$OUT/.page.XXXXXX")
trap 'rm -rf "$stage"' EXIT
cp "$ROOT/web/index.html" "$stage/index.html"
cp "$OUT/wasm/web/ptepack.wasm" "$stage/ptepack.wasm"
{
  cat "$OUT/wasm/web/ptepack.js"
  printf '\n// ptepack.wasm as base64, for pages opened from file:// (where nothing beside the page can be read).\n'
  printf 'var PTEPACK_WASM_BASE64 = "%s";\n' "$(base64 -w0 "$stage/ptepack.wasm")"
  cat "$ROOT/web/app.js"
} >"$stage/ptepack.js"
for f in index.html ptepack.js ptepack.wasm; do mv -f "$stage/$f" "$OUT/$f"; done
step_end

echo "build-web: $OUT/index.html, ptepack.js ($(stat -c %s "$OUT/ptepack.js") bytes), ptepack.wasm ($(stat -c %s "$OUT/ptepack.wasm") bytes)"
for t in "${TIMES[@]}"; do echo "  $t"; done
