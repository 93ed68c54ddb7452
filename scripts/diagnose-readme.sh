#!/usr/bin/env bash
# Regenerates the table of the seed's warnings in docs/retrieval.md:
# attnlab retriever diagnose -json with the shipped encoder and reranker on
# the pairs of DATA (attnlab retriever data) and the corpus folder CORPUS
# (attnlab corpus fetch), kept in docs/diagnose.json, then the table
# rendered from it (go test ./docs -run DiagnoseTable -update; without
# -update that test checks the page against the file). Some minutes:
#
#   scripts/diagnose-readme.sh retr ~/.cache/attnlab/corpus
set -euo pipefail
data=${1:?usage: scripts/diagnose-readme.sh DATA CORPUS}
corpus=${2:?usage: scripts/diagnose-readme.sh DATA CORPUS}
data=$(cd "$data" && pwd)
corpus=$(cd "$corpus" && pwd)
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/attnlab" ./cmd/attnlab
"$work/attnlab" retriever diagnose -data "$data" -model models/weights/encoder \
  -reranker models/weights/reranker -corpus "$corpus" -json > "$work/diagnose.json"
cp "$work/diagnose.json" docs/diagnose.json
go test ./docs -run DiagnoseTable -update
echo "docs/retrieval.md diagnose table regenerated"
