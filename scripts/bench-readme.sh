#!/usr/bin/env bash
# Regenerates the kernel table of docs/kernels.md from one run of attnlab
# bench (the block between its "bench table" markers).
# Arguments go to attnlab bench, e.g. -model for the generate row:
#
#   scripts/bench-readme.sh -max-n 2048
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/attnlab" ./cmd/attnlab
{
  echo '<!-- bench table: scripts/bench-readme.sh -->'
  echo '```text'
  echo "\$ attnlab bench $*"
  "$work/attnlab" bench "$@"
  echo '```'
  echo '<!-- end of bench table -->'
} > "$work/table"
awk -v table="$work/table" '
  /<!-- bench table:/ { while ((getline line < table) > 0) print line; skip = 1; next }
  /<!-- end of bench table -->/ { skip = 0; next }
  !skip { print }
' docs/kernels.md > "$work/kernels.md"
if ! grep -q '<!-- bench table:' docs/kernels.md; then
  echo "docs/kernels.md has no bench table markers" >&2
  exit 1
fi
cp "$work/kernels.md" docs/kernels.md
echo "docs/kernels.md bench table regenerated"
