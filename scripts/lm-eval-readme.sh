#!/usr/bin/env bash
# Regenerates the held-out table of the shipped language model in
# docs/model.md: lists the files the pretraining recipe held out (attnlab
# corpus stats, the same split as train -preset pretrain), measures the
# shipped model and the compressors on the standard library's and on the
# Debian packages' with attnlab lm-eval -json, keeps the two results in
# docs/lm-eval-std.json and docs/lm-eval-deb.json, and renders the table
# from them (go test ./docs -run HeldOutTable -update; without -update
# that test checks the page against the two files). About 15 minutes:
#
#   scripts/lm-eval-readme.sh ~/.cache/attnlab/corpus
set -euo pipefail
corpus=${1:?usage: scripts/lm-eval-readme.sh CORPUS (the folder of attnlab corpus fetch)}
corpus=$(cd "$corpus" && pwd)
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/attnlab" ./cmd/attnlab
"$work/attnlab" corpus stats -corpus "$corpus" -list-heldout "$work/heldout.txt" -root / >/dev/null
goroot=$(go env GOROOT)
grep "^${goroot#/}/" "$work/heldout.txt" > "$work/std.txt"
grep -v "^${goroot#/}/" "$work/heldout.txt" > "$work/deb.txt"
"$work/attnlab" lm-eval -files "$work/std.txt" -root / -json > "$work/std.json"
"$work/attnlab" lm-eval -files "$work/deb.txt" -root / -json > "$work/deb.json"
cp "$work/std.json" docs/lm-eval-std.json
cp "$work/deb.json" docs/lm-eval-deb.json
go test ./docs -run HeldOutTable -update
echo "docs/model.md held-out table regenerated"
