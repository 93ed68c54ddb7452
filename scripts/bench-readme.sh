#!/usr/bin/env bash
# Regenerates the README's kernel table from one run of attnlab bench (the
# block between the "bench table" markers of the "Fast kernels" section).
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
' README.md > "$work/README.md"
if ! grep -q '<!-- bench table:' README.md; then
  echo "README.md has no bench table markers" >&2
  exit 1
fi
cp "$work/README.md" README.md
echo "README bench table regenerated"
