#!/usr/bin/env bash
# Regenerates the README's retrieval table (the block between the
# "retrieval table" markers of the "Code retrieval" section) from one run of
# attnlab retriever eval. Arguments go to retriever eval, e.g.
#
#   scripts/retrieval-readme.sh -data retr-std/test.jsonl -rerank-depth 10 \
#       -systems bm25,dense,hybrid,hybrid+rerank,hybrid+rerank+fused
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/attnlab" ./cmd/attnlab
{
  echo '<!-- retrieval table: scripts/retrieval-readme.sh -->'
  echo "\`attnlab retriever eval $* -markdown\`:"
  echo
  "$work/attnlab" retriever eval -quiet -markdown "$@"
  echo '<!-- end of retrieval table -->'
} > "$work/table"
if ! grep -q '<!-- retrieval table:' README.md; then
  echo "README.md has no retrieval table markers" >&2
  exit 1
fi
awk -v table="$work/table" '
  /<!-- retrieval table:/ { while ((getline line < table) > 0) print line; skip = 1; next }
  /<!-- end of retrieval table -->/ { skip = 0; next }
  !skip { print }
' README.md > "$work/README.md"
cp "$work/README.md" README.md
echo "README retrieval table regenerated"
