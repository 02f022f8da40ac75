#!/usr/bin/env bash
# Fetches the real ExecuTorch files the tests use (../shared/fixtures/executorch in the
# project's CI) from the public pytorch/executorch repository, by commit and path, and checks
# each download's git blob id, so a clone without ../shared beside it can run every test.
#
#   scripts/fetch-fixtures.sh [--dest DIR] [--ref COMMIT]   fetch (needs network and curl)
#   scripts/fetch-fixtures.sh --check DIR                   check DIR's files against the blob ids
#   scripts/fetch-fixtures.sh --list                        print the manifest
#
# DIR defaults to ../shared/fixtures/executorch beside the checkout; point the tests at another
# directory with PTEPACK_FIXTURES_DIR (cmake -D or the environment). Files whose upstream path is
# not recorded ("-") cannot be fetched: copy them by hand; the tests that need them skip.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
REPO=https://raw.githubusercontent.com/pytorch/executorch
# The ExecuTorch commit the oracles were extracted from (2026-08-22).
REF=cff6f4dd32e630945b7188512c1f2b4f102b05ad
DEST=$ROOT/../shared/fixtures/executorch
MODE=fetch

# name | upstream path at REF | git blob id (git hash-object)
MANIFEST='add.pte|extension/module/test/resources/add.pte|43252ca7d3d05e8fe847e122c9c7de976e0e0096
linear.pte|extension/module/test/resources/linear.pte|707815ad8810e481887667342751cb5d8d8c0b00
linear.ptd|extension/module/test/resources/linear.ptd|edab857bb3f24db7f53e812ae6949588d6e62fb8
module_linear_no_constant_segment.pte|test/models/deprecated/ModuleLinear-no-constant-segment.pte|42b8643fb91a6709d40a70b0ac68d0a194d9e878
arduino_add.pte|examples/arduino/examples/AddModel/model.pte|58b1bb235d2b4bb0d75e33bd7246d6cdd50203f4
keyword_spotting.pte|examples/arduino/examples/KeywordSpotting/model.pte|ab7e2a64d1e1c95d55d5f585ae0f209935c8c083
stories260k_qnn.pte|examples/qualcomm/oss_scripts/llama/artifacts/stories260k_hybrid_llama_qnn.pte|942773b06331b06bedeecb993ff9303e0d8e4a9c
xor.pte|extension/android/executorch_android/src/androidTest/resources/xor.pte|8d5b6aba939a7225fb18519f06b9db209630d16d
xor.ptd|extension/android/executorch_android/src/androidTest/resources/xor.ptd|3351e75bec40dd090e9914681309af7252494727
bundled_program.bpte|extension/module/test/resources/bundled_program.bpte|ea5b42c03d0f299bf56bfcccc42200cd951e5109
softmax.pte|-|5cc36ecac73807b6fa0110b58a2229836186e90c
maxpool2d.pte|-|a00cd21fc21d4b2c8a7d7fb6b2b1fc5c63c73fc6
conv2d_quantized.pte|-|90424e940f9d0758202ba78ee8b5c0f65e132cb6'

usage() {
  echo "usage: scripts/fetch-fixtures.sh [--dest DIR] [--ref COMMIT] | --check DIR | --list" >&2
  exit 2
}

while [ $# -gt 0 ]; do
  case "$1" in
    --dest) [ $# -ge 2 ] || usage; DEST=$2; shift 2 ;;
    --ref) [ $# -ge 2 ] || usage; REF=$2; shift 2 ;;
    --check) [ $# -ge 2 ] || usage; MODE=check; DEST=$2; shift 2 ;;
    --list) MODE=list; shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fetch-fixtures.sh: unknown argument \"$1\"" >&2; usage ;;
  esac
done
if ! [[ "$REF" =~ ^[0-9a-f]{40}$ ]]; then
  echo "fetch-fixtures.sh: --ref must be a full 40-digit commit id (found \"$REF\")" >&2
  exit 2
fi

# The git blob id of a file: sha1("blob <size>\0" + bytes), as `git hash-object` prints it.
blob_id() {
  if command -v git >/dev/null; then
    git hash-object --no-filters "$1"
  else
    { printf 'blob %d\0' "$(stat -c %s "$1")"; cat "$1"; } | sha1sum | cut -d' ' -f1
  fi
}

case "$MODE" in
  list)
    echo "$MANIFEST" | tr '|' ' '
    exit 0
    ;;
  check)
    [ -d "$DEST" ] || { echo "fetch-fixtures.sh: $DEST: not a directory" >&2; exit 2; }
    bad=0
    while IFS='|' read -r name path blob; do
      if [ ! -f "$DEST/$name" ]; then
        echo "$DEST/$name: missing (expected blob $blob)"
        bad=1
      elif [ "$(blob_id "$DEST/$name")" != "$blob" ]; then
        echo "$DEST/$name: blob $(blob_id "$DEST/$name"), expected $blob"
        bad=1
      else
        echo "$DEST/$name: ok $blob"
      fi
    done <<< "$MANIFEST"
    exit $bad
    ;;
esac

command -v curl >/dev/null || { echo "fetch-fixtures.sh: curl is needed to fetch" >&2; exit 2; }
mkdir -p "$DEST"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
{
  echo "# Real ExecuTorch outputs, fetched by scripts/fetch-fixtures.sh"
  echo
  echo "From https://github.com/pytorch/executorch at $REF (git blob id checked)."
  echo
  echo "| file | upstream path | blob |"
  echo "|---|---|---|"
} > "$tmp/SOURCES.md"
while IFS='|' read -r name path blob; do
  if [ "$path" = "-" ]; then
    echo "$name: upstream path not recorded; copy it by hand (tests that need it skip)" >&2
    continue
  fi
  if ! curl -fsSL --retry 2 -o "$tmp/$name" "$REPO/$REF/$path"; then
    echo "$name: cannot fetch $REPO/$REF/$path" >&2
    failed=1
    continue
  fi
  got=$(blob_id "$tmp/$name")
  if [ "$got" != "$blob" ]; then
    echo "$name: $REPO/$REF/$path has blob $got, expected $blob (not installed)" >&2
    failed=1
    continue
  fi
  mv -f "$tmp/$name" "$DEST/$name"
  echo "| $name | $path | $blob |" >> "$tmp/SOURCES.md"
  echo "$DEST/$name: ok $blob"
done <<< "$MANIFEST"
[ -f "$DEST/SOURCES.md" ] || mv "$tmp/SOURCES.md" "$DEST/SOURCES.md"
exit $failed
