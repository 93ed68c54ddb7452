#!/usr/bin/env bash
# Regenerates what docs/lab.md shows of the lab from the code as it is: the
# block of lab numbers (the summary line and the finite-difference
# measures, which lab's tests compare with docs/lab.md on every run) and
# the screenshot docs/lab-report.png of the HTML report, taken in headless
# Chromium (Debian's chromium). Run from anywhere:
#
#   scripts/docs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
go test ./lab -run README -update
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go run ./cmd/attnlab lab -html "$work/report" >/dev/null
/usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$work/profile" --screenshot="$work/shot.png" --window-size=1280,2000 \
  "file://$work/report/index.html" 2>/dev/null
cp "$work/shot.png" docs/lab-report.png
echo "docs/lab.md lab numbers and docs/lab-report.png regenerated"
