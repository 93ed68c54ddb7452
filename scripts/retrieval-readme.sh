#!/usr/bin/env bash
# Regenerates a table of docs/retrieval.md from one run
# of attnlab retriever eval. Arguments go to retriever eval. Without
# --queries, the pair table (between the "retrieval table" markers), e.g.
#
#   scripts/retrieval-readme.sh -pairs retr-std/test.jsonl \
#       -systems bm25,dense,hybrid,hybrid+rerank,hybrid+rerank+fused
#
# with --queries first, the developer-query table (between the
# "developer queries table" markers), e.g.
#
#   scripts/retrieval-readme.sh --queries \
#       -queries retrieve/testdata/devqueries/std-test.jsonl,retrieve/testdata/devqueries/debian-test.jsonl \
#       -src heldout/test
#
# and with --block NAME first, the table between the "NAME" markers, e.g.
#
#   scripts/retrieval-readme.sh --block "debian pairs table" -pairs retr-deb/test.jsonl \
#       -systems bm25,dense,hybrid,hybrid+rerank,hybrid+rerank+fused
#   scripts/retrieval-readme.sh --block "rerank depth 10 table" -pairs retr-std/test.jsonl \
#       -systems hybrid,hybrid+rerank,hybrid+rerank+fused -rerank-depth 10
set -euo pipefail
cd "$(dirname "$0")/.."
marker="retrieval table"
case "${1:-}" in
--queries)
  marker="developer queries table"
  shift
  ;;
--block)
  marker="${2:?--block needs a name}"
  shift 2
  ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/attnlab" ./cmd/attnlab
{
  echo "<!-- $marker: scripts/retrieval-readme.sh -->"
  echo "\`attnlab retriever eval $* -markdown\`:"
  echo
  "$work/attnlab" retriever eval -quiet -markdown "$@"
  echo "<!-- end of $marker -->"
} > "$work/table"
if ! grep -q "<!-- $marker:" docs/retrieval.md; then
  echo "docs/retrieval.md has no $marker markers" >&2
  exit 1
fi
awk -v table="$work/table" -v start="<!-- $marker:" -v end="<!-- end of $marker -->" '
  index($0, start) == 1 { while ((getline line < table) > 0) print line; skip = 1; next }
  index($0, end) == 1 { skip = 0; next }
  !skip { print }
' docs/retrieval.md > "$work/retrieval.md"
cp "$work/retrieval.md" docs/retrieval.md
echo "docs/retrieval.md $marker regenerated"
