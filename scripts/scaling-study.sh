#!/usr/bin/env bash
# The scaling study behind attnlab train -preset pretrain: two model sizes
# trained on the same 2 M tokens (500 steps of 8 windows of 512 tokens) of
# the standard library and the Debian corpus, then their validation bits per
# byte against training tokens in one plot (docs/scaling.png, with the
# pretraining run when its folder is given).
#
#   scripts/scaling-study.sh CORPUS OUT [PRETRAIN_RUN]
set -euo pipefail
corpus=${1:?usage: scripts/scaling-study.sh CORPUS OUT [PRETRAIN_RUN]}
out=${2:?usage: scripts/scaling-study.sh CORPUS OUT [PRETRAIN_RUN]}
cd "$(dirname "$0")/.."
common=(-corpus "$corpus" -corpus-mb 0 -val-frac 0.1 -val-kb 256 -tokenizer-mb 32 -vocab 4096
  -window 512 -batch 8 -steps 500 -warmup 50 -lr 2e-3 -min-lr 2e-4 -eval-every 50 -save-every 250 -quiet)
go run ./cmd/attnlab train "${common[@]}" -out "$out/study-s" -dim 128 -layers 4 -heads 4 -kv-heads 2 -ffn 352
go run ./cmd/attnlab train "${common[@]}" -out "$out/study-m" -dim 192 -layers 6 -heads 6 -kv-heads 2 -ffn 512
runs=("S 1.3M params=$out/study-s" "M 3.1M params=$out/study-m")
if [ $# -ge 3 ]; then
  runs+=("pretrain (M, 8000 steps)=$3")
fi
go run ./scripts/plotcurves -o docs/scaling.png "${runs[@]}"
