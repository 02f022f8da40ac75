#!/usr/bin/env bash
# The browser viewer's test (issue 26): builds the page (scripts/build-web.sh), then drives
# Debian's Chromium headless with playwright-core (pinned in web/test/package-lock.json) through
# web/test/browser_test.js: every fixture opened through the page's file input and compared
# with the CLI's --json, corrupt and random files, a 4 GiB sparse .pte, a screenshot per view.
#
#   scripts/test-web.sh [PTEPACK_CLI]    default: build-asan/ptepack, else build-rel/ptepack
#
# Screenshots go to build-web/test-output/. Without Chromium (/usr/bin/chromium, Debian package
# `chromium`) or npm it says so and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CLI=${1:-}
if [ -z "$CLI" ]; then
  for c in build-asan/ptepack build-rel/ptepack build/ptepack; do
    [ -x "$c" ] && { CLI=$c; break; }
  done
fi
[ -n "$CLI" ] && [ -x "$CLI" ] || { echo "test-web.sh: no ptepack CLI built (give its path)" >&2; exit 2; }
CHROMIUM=${PTEPACK_CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ]; then
  echo "test-web.sh: SKIPPED the browser test: no Chromium at $CHROMIUM (Debian: apt-get install chromium)"
  exit 0
fi
if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
  echo "test-web.sh: SKIPPED the browser test: no node/npm (Debian: apt-get install nodejs npm)"
  exit 0
fi
FIXTURES=${PTEPACK_FIXTURES_DIR:-$ROOT/../shared/fixtures/executorch}
if ! ls "$FIXTURES"/*.pte >/dev/null 2>&1; then
  echo "test-web.sh: SKIPPED the browser test: no fixtures in $FIXTURES (see README: a clone without ../shared)"
  exit 0
fi
t0=$(date +%s)
./scripts/build-web.sh
t1=$(date +%s)
(cd web/test && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
t2=$(date +%s)
rm -rf build-web/test-output
PTEPACK_CHROMIUM=$CHROMIUM node web/test/browser_test.js build-web "$CLI" "$FIXTURES" build-web/test-output
t3=$(date +%s)
echo "test-web.sh: build-web.sh $((t1 - t0)) s, npm ci $((t2 - t1)) s, browser test $((t3 - t2)) s"
