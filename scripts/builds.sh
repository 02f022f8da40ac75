# The build directories the scripts share, configured one way wherever they are used, so that
# .ci/run compiles each only once (sourced by test.sh, fuzz.sh, conformance.sh, check-install.sh;
# docs/ci.md has what each step costs).
#
#   build-asan  clang, AddressSanitizer + UndefinedBehaviorSanitizer at -O1 -g: the GoogleTest
#               suite (ctest), the conformance tests with ExecuTorch's runtime as an oracle
#               (tests/oracle, sanitized too) and the libFuzzer targets (PTEPACK_BUILD_FUZZERS:
#               the library carries libFuzzer's coverage instrumentation, which the tests ignore).
#               PTEPACK_ASAN_BUILD_DIR (or, for fuzz.sh, FUZZ_BUILD_DIR) names another directory.
#   build-py    g++, Release (so both compilers build the library with -Werror): the CLI, the library, the Python
#               module (when python3 has pybind11 and pytest) and the install check.
#               PTEPACK_INSTALL_BUILD_DIR names another directory.
#
# ccache is used when it is on PATH (CCACHE_DISABLE=1 turns it off, as a CI without a cache).
# Call from the repository's root.

ASAN_BUILD=${PTEPACK_ASAN_BUILD_DIR:-build-asan}
REL_BUILD=${PTEPACK_INSTALL_BUILD_DIR:-build-py}

_ptepack_launcher=()
if command -v ccache >/dev/null; then
  _ptepack_launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

# Sets _ptepack_fresh to (--fresh) when $1 holds a cache made with another C++ compiler than $2
# (a build-asan configured by g++ before the suite moved to clang): CMake keeps the compiler it
# cached, and only reads CC/CXX on a first (or fresh) configure.
_ptepack_fresh=()
_ptepack_check_compiler() {
  local dir=$1 want=$2 have
  _ptepack_fresh=()
  [ -f "$dir/CMakeCache.txt" ] || return 0
  have=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$dir/CMakeCache.txt")
  case "$(basename "$have")" in "$want" | "$want"-[0-9]*) return 0 ;; esac
  echo "builds.sh: $dir was configured with $have; configuring it afresh with $want" >&2
  _ptepack_fresh=(--fresh)
}

# The sanitized clang build: everything (tests, oracle, fuzzers), -O1 -g (a -O0 build runs
# several times slower under the sanitizers). Extra arguments go to cmake.
configure_asan_build() {
  _ptepack_check_compiler "$ASAN_BUILD" clang++
  CC=clang CXX=clang++ cmake "${_ptepack_fresh[@]}" -S . -B "$ASAN_BUILD" -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_C_FLAGS_DEBUG="-g -O1" -DCMAKE_CXX_FLAGS_DEBUG="-g -O1" -DPTEPACK_SANITIZE=ON \
    -DPTEPACK_BUILD_FUZZERS=ON -DPTEPACK_BUILD_TESTS=ON -DPTEPACK_BUILD_BENCH=OFF \
    "${_ptepack_launcher[@]}" "$@" >/dev/null
}

# The python3 that has pybind11 and pytest, or nothing.
find_module_python() {
  local p
  for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c "import pybind11, pytest" 2>/dev/null; then
      command -v "$p"
      return 0
    fi
  done
}

# The Release build of the Python module and the install check (the same options from both,
# so neither rebuilds what the other built). Extra arguments go to cmake.
configure_release_build() {
  local py python=(-DPTEPACK_BUILD_PYTHON=OFF)
  py=$(find_module_python || true)
  [ -n "$py" ] && python=(-DPTEPACK_BUILD_PYTHON=ON -DPython3_EXECUTABLE="$py")
  _ptepack_check_compiler "$REL_BUILD" g++
  CC=gcc CXX=g++ cmake "${_ptepack_fresh[@]}" -S . -B "$REL_BUILD" -DCMAKE_BUILD_TYPE=Release \
    "${python[@]}" -DPTEPACK_BUILD_TESTS=OFF -DPTEPACK_BUILD_BENCH=OFF "${_ptepack_launcher[@]}" "$@" >/dev/null
}

# Runs a command and prints, on stderr, "[time] NAME: W s wall, U s user + S s sys" (CPU time
# of the command and the children it waited for); the command's exit status is kept.
ci_step() {
  local name=$1 TIMEFORMAT
  shift
  TIMEFORMAT="[time] $name: %0R s wall, %0U s user + %0S s sys (load average $(cut -d' ' -f1-3 /proc/loadavg) before)"
  time "$@"
}
