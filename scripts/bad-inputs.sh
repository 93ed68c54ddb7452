#!/usr/bin/env bash
# Replays bad inputs and interrupts against attnlab, as a new user would
# type them, and checks each answer: the exit status (0 ok, 1 failure,
# 2 usage, 130/143 interrupted), a one-line error on stderr that names the
# offending thing, and that nothing already written was changed.
#
#   scripts/bad-inputs.sh            # builds attnlab into a temporary folder
#   ATTNLAB=/path/to/attnlab scripts/bad-inputs.sh
#
# It prints one line per case and exits 1 if any case fails.
set -u
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bin=${ATTNLAB:-$work/attnlab}
[ -n "${ATTNLAB:-}" ] || go build -o "$bin" ./cmd/attnlab || exit 1
fails=0

# expect STATUS PATTERN -- ARGS...: run attnlab ARGS; the status must be
# STATUS, and stderr must match PATTERN (grep -E) and hold at most two
# lines (the error and a pointer to -h).
expect() {
  local want=$1 pat=$2; shift 3
  local out err code
  out=$("$bin" "$@" 2>"$work/stderr"); code=$?
  err=$(cat "$work/stderr")
  local lines; lines=$(printf '%s' "$err" | grep -c '' || true)
  if [ "$code" != "$want" ] || ! grep -qE -- "$pat" <<<"$err" || [ "$lines" -gt 2 ]; then
    echo "FAIL attnlab $* -> exit $code (want $want), stderr: $err"
    fails=$((fails + 1))
  else
    echo "ok   attnlab $* -> $code: $(head -1 <<<"$err")"
  fi
}

# interrupt SIGNAL STATUS DELAY -- ARGS...: start attnlab ARGS, send SIGNAL
# after DELAY seconds, and want STATUS within 3 seconds.
interrupt() {
  local sig=$1 want=$2 delay=$3; shift 4
  "$bin" "$@" >"$work/out" 2>"$work/err" &
  local pid=$!
  sleep "$delay"
  kill -s "$sig" "$pid" 2>/dev/null
  local t=0
  while kill -0 "$pid" 2>/dev/null && [ $t -lt 30 ]; do sleep 0.1; t=$((t + 1)); done
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid"; wait "$pid" 2>/dev/null
    echo "FAIL attnlab $* still running 3 s after SIG$sig"; fails=$((fails + 1)); return
  fi
  wait "$pid"; local code=$?
  if [ "$code" != "$want" ]; then
    echo "FAIL attnlab $* after SIG$sig -> exit $code (want $want): $(tail -1 "$work/err")"; fails=$((fails + 1))
  else
    echo "ok   attnlab $* after SIG$sig -> $code within $((t * 100)) ms"
  fi
}

# same FILE...: fail if a file changed since snapshot
snapshot() { (cd "$1" && find . -type f -exec sha256sum {} + | sort) >"$work/snap-$(basename "$1")"; }
unchanged() {
  if (cd "$1" && find . -type f -exec sha256sum {} + | sort) | cmp -s - "$work/snap-$(basename "$1")"; then
    echo "ok   $1 unchanged"
  else
    echo "FAIL $1 changed"; fails=$((fails + 1))
  fi
}

src=$work/src
mkdir -p "$src"
for p in alpha beta gamma delta epsilon zeta eta theta; do
  mkdir -p "$src/$p"
  { echo "package $p"; echo
    # the queries differ (above N): pairs of one query text are each other's false negatives
    for i in $(seq 1 20); do printf '\n// F%d returns twice x, or x minus one above %d.\nfunc F%d(x int) int {\n\tif x > %d {\n\t\treturn x - 1\n\t}\n\treturn x * 2\n}\n' $i $i $i $i; done
  } >"$src/$p/$p.go"
done
tiny="-src $src -vocab 300 -dim 16 -layers 1 -heads 2 -kv-heads 1 -ffn 32 -window 32 -batch 2 -eval-every 2 -save-every 2 -quiet -val-frac 0.3"

echo "== usage and help"
expect 2 'unknown command "nosuch"' -- nosuch
expect 2 '-no-such-flag' -- train -no-such-flag
expect 2 'missing subcommand' -- retriever
expect 2 'unknown subcommand "index"' -- retriever index
expect 0 '^$' -- train -h
expect 0 '^$' -- retriever eval -h
expect 2 'past\+new' -- mask -past 100000 -new 100000
expect 2 '-window -1' -- mask -window -1
expect 2 'lr -1' -- train $tiny -lr -1 -out "$work/r-lr"
expect 2 'lr NaN' -- train $tiny -lr NaN -out "$work/r-lr"
expect 2 'wd -1' -- train $tiny -wd -1 -out "$work/r-lr"
expect 2 'val-frac' -- retriever data -val-frac 0.7 -test-frac 0.5
expect 2 'val-frac -1' -- retriever data -val-frac -1
expect 2 '-src DIR and -files LIST' -- lm-eval
expect 2 'seconds' -- bench -seconds 0

echo "== training never loses a finished run"
expect 0 '' -- train $tiny -steps 4 -out "$work/run"
snapshot "$work/run"
expect 2 'step 4 of 4.*-resume.*-force' -- train $tiny -steps 2 -out "$work/run"
unchanged "$work/run"
# files that only look like temporaries are the user's: kept
mkdir -p "$work/run/.checkpoint.tmp-999" "$work/.run.tmp-1.old"; echo mine >"$work/run/.notes.tmp1"
expect 0 '' -- train $tiny -steps 4 -resume -out "$work/run"
[ -e "$work/run/.checkpoint.tmp-999" ] && [ -e "$work/run/.notes.tmp1" ] && [ -e "$work/.run.tmp-1.old" ] && echo "ok   the user's look-alikes of temporaries kept" || { echo "FAIL a user's file removed"; fails=$((fails + 1)); }
rm -rf "$work/run/.checkpoint.tmp-999" "$work/run/.notes.tmp1" "$work/.run.tmp-1.old"
expect 2 'choose one' -- train $tiny -steps 4 -resume -force -out "$work/run"
expect 1 'config.json' -- generate -model "$work/run" -prompt x
mkdir -p "$work/empty"
expect 1 'no usable Go file' -- train -src "$work/empty" -out "$work/r-empty" -quiet
expect 1 'no such file' -- train -src "$work/missing" -out "$work/r-missing" -quiet

echo "== one writer per folder, the truth about a run"
"$bin" train $tiny -steps 100000 -save-every 100000 -eval-every 100000 -out "$work/run-lock" >/dev/null 2>&1 &
first=$!
for _ in $(seq 50); do [ -e "$work/run-lock/heldout.txt" ] && break; sleep 0.1; done
expect 1 "being written by another attnlab process \(pid $first\)" -- train $tiny -steps 4 -out "$work/run-lock"
expect 1 "being written by another attnlab process \(pid $first\)" -- train $tiny -steps 4 -force -out "$work/run-lock"
kill -TERM $first; wait $first
expect 1 'the run was trained with other options \(-steps 4 \(now 6\)\)' -- train $tiny -steps 6 -resume -out "$work/run"
expect 1 'no checkpoint had been saved, so nothing of the run is kept' -- train $tiny -steps 10 -lr 1e30 -out "$work/run-nan"
[ -e "$work/run-nan" ] && { echo "FAIL a run that kept nothing left its folder"; fails=$((fails + 1)); } || echo "ok   a run that kept nothing left no folder"
expect 1 'the last good checkpoint, step 1, is kept' -- train $tiny -steps 10 -lr 1e30 -save-every 1 -out "$work/run-nan"
expect 2 '-out ""' -- train $tiny -steps 2 -out ""

echo "== the oracle never overwrites"
python3 - "$work/in.safetensors" <<'PY' 2>/dev/null || printf '\x10\x00\x00\x00\x00\x00\x00\x00{"q":' >"$work/in.safetensors"
import json, struct, sys
h = {"q": {"dtype": "F64", "shape": [1, 1, 1, 2], "data_offsets": [0, 16]},
     "k": {"dtype": "F64", "shape": [1, 1, 1, 2], "data_offsets": [16, 32]},
     "v": {"dtype": "F64", "shape": [1, 1, 1, 2], "data_offsets": [32, 48]}}
b = json.dumps(h).encode()
data = struct.pack("<6d", 1, 2, 3, 4, 5, 6)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(b)) + b + data)
PY
cp "$work/in.safetensors" "$work/in.copy"
expect 2 'input' -- ref -op attention -in "$work/in.safetensors" -out "$work/in.safetensors" -force
cmp -s "$work/in.safetensors" "$work/in.copy" && echo "ok   ref input unchanged" || { echo "FAIL ref overwrote its input"; fails=$((fails + 1)); }
expect 0 '' -- ref -op attention -in "$work/in.safetensors" -out "$work/out.safetensors"
expect 2 'exists.*-force' -- ref -op attention -in "$work/in.safetensors" -out "$work/out.safetensors"
ln -s "$work/in.safetensors" "$work/in-link.safetensors"
expect 2 'would overwrite the input' -- ref -op attention -in "$work/in-link.safetensors" -out "$work/in.safetensors" -force
cmp -s "$work/in.safetensors" "$work/in.copy" && echo "ok   ref input unchanged through a link" || { echo "FAIL ref overwrote its input through a link"; fails=$((fails + 1)); }
# the checkpoint a decoder input names is an input too
python3 - "$work/dec.safetensors" <<'PY' 2>/dev/null
import json, struct, sys
h = {"__metadata__": {"checkpoint": "run/checkpoint"}, "tokens": {"dtype": "I64", "shape": [1, 2], "data_offsets": [0, 16]}}
b = json.dumps(h).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(b)) + b + struct.pack("<2q", 1, 2))
PY
snapshot "$work/run"
expect 2 'would overwrite the input .*run/checkpoint' -- ref -op decoder -in "$work/dec.safetensors" -out "$work/run/checkpoint/model.safetensors" -force
unchanged "$work/run"
# a held-out list over a source file it reads
cp "$src/alpha/alpha.go" "$work/alpha.copy"
expect 2 'would overwrite the input' -- corpus stats -std=false -corpus "$src" -list-heldout "$src/alpha/alpha.go" -force
cmp -s "$src/alpha/alpha.go" "$work/alpha.copy" && echo "ok   a source file unchanged" || { echo "FAIL corpus stats overwrote a source file"; fails=$((fails + 1)); }

echo "== retrieval"
expect 0 '' -- retriever data -src "$src" -out "$work/retr" -quiet
expect 2 'not empty.*-force' -- retriever data -src "$src" -out "$work/retr" -quiet
expect 1 'holds no pairs' -- retriever eval -pairs /dev/null
expect 2 'unknown system' -- retriever eval -pairs "$work/retr/train.jsonl" -systems bm25,tfidf
expect 2 'needs a' -- retriever eval -pairs "$work/retr/train.jsonl" -model none -systems dense
expect 0 '' -- retriever train -data "$work/retr" -out "$work/rrun" -quiet -steps 2 -dim 16 -layers 1 -heads 2 -kv-heads 2 -ffn 32 -vocab 300 -batch 4 -index-data "$work/retr/train.jsonl"
expect 2 'not empty.*-force' -- retriever train -data "$work/retr" -out "$work/rrun" -quiet
expect 1 'dual-encoder checkpoint, not a language-model' -- generate -model "$work/rrun/model" -prompt x
expect 1 'nothing the encoder reads' -- search -index "$work/rrun/index" '!!!'
expect 0 '' -- search -index "$work/rrun/index" twice x -k 1
snapshot "$work/retr"
expect 2 'input' -- retriever eval -pairs "$work/retr/train.jsonl" -model "$work/rrun/model" -write-index "$work/retr/train.jsonl"
expect 2 'input' -- retriever eval -pairs "$work/retr/train.jsonl" -model "$work/rrun/model" -write-index "$work/retr"
ln -s "$work/retr" "$work/retr-link"
expect 2 'input' -- retriever eval -pairs "$work/retr/train.jsonl" -model "$work/rrun/model" -write-index "$work/retr-link" -force
expect 2 'input' -- retriever eval -pairs "$work/retr-link/train.jsonl" -model "$work/rrun/model" -write-index "$work/retr" -force
expect 2 'would overwrite the input' -- retriever translate -data "$work/retr" -out "$work/retr/train.jsonl" -force
unchanged "$work/retr"
expect 0 '' -- retriever translate -data "$work/retr" -out "$work/t.tsv" -min-query 1 -min-pair 1 -min-lift 1.5
expect 2 't.tsv exists: -force replaces it' -- retriever translate -data "$work/retr" -out "$work/t.tsv" -min-query 1 -min-pair 1 -min-lift 1.5
expect 1 'the table would be empty' -- retriever translate -data "$work/retr" -out "$work/t0.tsv" -min-query 100000
printf 'sorts\tsort 1\n' >"$work/not-a-table.tsv"
expect 1 'not-a-table.tsv:1: not a term translation table' -- search -index "$work/rrun/index" -translation "$work/not-a-table.tsv" x
expect 1 'larger than' -- retriever eval -pairs "$work/retr/train.jsonl" -translation /dev/zero
expect 2 '-translate-alpha NaN' -- search -index "$work/rrun/index" -translate-alpha NaN x

echo "== non-finite values, unknown inputs, degenerate data"
# poke FILE TENSOR VALUE [ELEMENTS]: write VALUE (a Python float) over the
# first ELEMENTS (default 1; "all" for every one) elements of an F32 tensor
poke() {
  python3 - "$@" <<'PY'
import json, struct, sys
path, name, value = sys.argv[1], sys.argv[2], float(sys.argv[3])
count = sys.argv[4] if len(sys.argv) > 4 else "1"
data = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", data[:8])[0]
t = json.loads(data[8:8 + n])[name]
lo, hi = t["data_offsets"]
k = (hi - lo) // 4 if count == "all" else int(count)
for i in range(k):
    struct.pack_into("<f", data, 8 + n + lo + 4 * i, value)
open(path, "wb").write(bytes(data))
PY
}
cp -r "$work/run/checkpoint" "$work/nan-ckpt"
poke "$work/nan-ckpt/model.safetensors" model.norm.weight nan
expect 1 'model.safetensors: tensor "model.norm.weight": element 0 is NaN; the weights must be finite' -- generate -model "$work/nan-ckpt" -prompt x
expect 1 'model.safetensors: tensor "model.norm.weight": element 0 is NaN' -- lm-eval -model "$work/nan-ckpt" -src "$src" -quiet -no-compressors
cp -r "$work/run/checkpoint" "$work/big-ckpt"
poke "$work/big-ckpt/model.safetensors" model.norm.weight 1e30 all
poke "$work/big-ckpt/model.safetensors" model.embed_tokens.weight 1e30 all
expect 1 'big-ckpt: model: generate: row 0, new token 1: the logit of token id [0-9]+ is .*not finite' -- generate -model "$work/big-ckpt" -prompt x
expect 1 'big-ckpt: train: score: .*alpha.go: token 1: the logit .*not finite' -- lm-eval -model "$work/big-ckpt" -src "$src" -quiet -no-compressors
printf '%s\n%s\n' "$src/alpha/alpha.go" "$src/alpha/alpha.go" >"$work/twice.txt"
expect 1 'alpha/alpha.go is listed twice \(entries 1 and 2 of 2\)' -- lm-eval -model "$work/run/checkpoint" -files "$work/twice.txt" -quiet -no-compressors
python3 - "$work/sinks.safetensors" "$work/overflow.safetensors" <<'PY'
import json, struct, sys
def write(path, tensors):
    h, data = {}, b""
    for name, vals in tensors.items():
        h[name] = {"dtype": "F64", "shape": [1, 1, 1, len(vals)] if name != "sink" else [1], "data_offsets": [len(data), len(data) + 8 * len(vals)]}
        data += struct.pack("<%dd" % len(vals), *vals)
    b = json.dumps(h).encode()
    open(path, "wb").write(struct.pack("<Q", len(b)) + b + data)
write(sys.argv[1], {"q": [1, 2], "k": [3, 4], "v": [5, 6], "sink": [0.5]})
write(sys.argv[2], {"q": [1e200, 1e200], "k": [1e200, 1e200], "v": [5, 6], "do": [1, 1]})
PY
expect 1 'tensor "sink": not an input of op attention' -- ref -op attention -in "$work/sinks.safetensors" -out "$work/sinks-out.safetensors"
expect 1 'output tensor "[a-z]+" holds (NaN|[+-]Inf) .*overflowed for finite inputs' -- ref -op attention -in "$work/overflow.safetensors" -out "$work/overflow-out.safetensors"
[ -e "$work/sinks-out.safetensors" ] || [ -e "$work/overflow-out.safetensors" ] && { echo "FAIL a refused ref wrote"; fails=$((fails + 1)); } || echo "ok   a refused ref wrote nothing"
cp -r "$work/rrun/index" "$work/nan-index"
poke "$work/nan-index/embeddings.safetensors" embeddings nan
expect 1 'embeddings.safetensors: tensor "embeddings": vector 0 holds NaN \(element 0\)' -- search -index "$work/nan-index" twice x
cp -r "$work/rrun/index" "$work/zero-index"
poke "$work/zero-index/embeddings.safetensors" embeddings 0 all
expect 1 'tensor "embeddings": ([0-9]+) of \1 vectors are zero' -- search -index "$work/zero-index" twice x
python3 - "$work/retr/train.jsonl" "$work/dup.jsonl" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.strip()]
out = open(sys.argv[2], "w")
for l in lines:
    out.write(l)
for l in lines[:3]:
    p = json.loads(l); p["id"] += ".copy"; out.write(json.dumps(p) + "\n")
PY
expect 0 'dup.jsonl: 3 of [0-9]+ pairs repeat the code of an earlier pair' -- retriever eval -pairs "$work/dup.jsonl" -model none -quiet
mkdir -p "$work/one-code"
python3 - "$work/one-code" <<'PY'
import json, sys
for split, n in (("train", 12), ("val", 0), ("test", 0)):
    with open(sys.argv[1] + "/" + split + ".jsonl", "w") as f:
        for i in range(n):
            f.write(json.dumps({"id": "p.F%d" % i, "query": "returns twice x, case %d" % i, "code": "func F(x int) int { return 2 * x }"}) + "\n")
PY
expect 1 'every negative of the 12 training pairs is masked \(distinct code documents: 1' -- retriever train -data "$work/one-code" -out "$work/r-one" -quiet -steps 2 -dim 16 -layers 1 -heads 2 -kv-heads 2 -ffn 32 -vocab 300 -batch 4 -index-data "$work/one-code/train.jsonl"
expect 1 'none of the 12 training pairs has a hard negative' -- retriever rerank -data "$work/one-code" -out "$work/r-one" -quiet -steps 2 -model "$work/rrun/model"
[ -e "$work/r-one" ] && { echo "FAIL a refused training wrote"; fails=$((fails + 1)); } || echo "ok   a refused training wrote nothing"

echo "== sizes checked before allocating"
mkdir -p "$work/huge"
echo '{"hidden_size": 1000000000, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 300, "max_position_embeddings": 64}' >"$work/huge/config.json"
printf '\x02\x00\x00\x00\x00\x00\x00\x00{}' >"$work/huge/model.safetensors"
expect 1 'config.json: model: config hidden_size = 1000000000, want in' -- generate -model "$work/huge" -prompt x
expect 1 'config.json: model: config hidden_size' -- lm-eval -model "$work/huge" -src "$src" -quiet
expect 2 'batch 100000000: want at most' -- train $tiny -batch 100000000 -out "$work/r-big"
expect 2 'batch 1048576 × window 256 needs .* available' -- train $tiny -batch 1048576 -window 256 -out "$work/r-big"
expect 2 'dim 100000000: want at most' -- train $tiny -dim 100000000 -out "$work/r-big"
expect 2 '-m 100000 -n 100000 .*needs .* available' -- gradcheck -m 100000 -n 100000
expect 2 '-m 10000000: want in' -- gradcheck -m 10000000
expect 2 '-batch 100000000' -- lm-eval -model "$work/run/checkpoint" -src "$src" -batch 100000000
expect 2 'batch 1048576 × window 256 needs' -- lm-eval -model "$work/run/checkpoint" -src "$src" -batch 1048576
expect 2 '-n 100000' -- generate -model "$work/run/checkpoint" -prompt x -n 100000
expect 2 'batch 100000000: want at most' -- retriever train -data "$work/retr" -out "$work/r-big" -batch 100000000
expect 2 'groups 100000000: want at most' -- retriever rerank -data "$work/retr" -out "$work/r-big" -groups 100000000
expect 2 '-workers 100000000' -- retriever eval -pairs "$work/retr/train.jsonl" -workers 100000000
[ -e "$work/r-big" ] && { echo "FAIL a refused command wrote"; fails=$((fails + 1)); } || echo "ok   nothing written"

# inputs read within a limit: /dev/zero as each kind of file a command reads
expect 1 'safetensors: /dev/zero: header is empty' -- ref -op attention -in /dev/zero -out "$work/z.safetensors"
expect 1 'retrieve: /dev/zero:1: line longer than 16777216 bytes' -- retriever eval -pairs /dev/zero
expect 1 '/dev/zero: bufio.Scanner: token too long' -- lm-eval -model "$work/run/checkpoint" -files /dev/zero
mkdir -p "$work/zero" && ln -s /dev/zero "$work/zero/config.json" && cp "$work/huge/model.safetensors" "$work/zero/"
expect 1 'zero/config.json: larger than 1048576 bytes' -- generate -model "$work/zero" -prompt x

echo "== flag errors are usage errors, checked before the work"
expect 2 '-op "nosuch"' -- ref -op nosuch -in "$work/in.safetensors" -out "$work/o2.safetensors"
expect 2 '-dtype "float16"' -- ref -op attention -dtype float16 -in "$work/in.safetensors" -out "$work/o2.safetensors"
expect 2 'window 100000, want in \[2, max_position_embeddings' -- lm-eval -model "$work/run/checkpoint" -src "$src" -window 100000
expect 2 'without -sweep' -- gradcheck -plot "$work/x.png"
expect 2 '-out ""' -- train $tiny -out ""
expect 2 '-out ""' -- retriever data -src "$src" -out ""
expect 2 '-out ""' -- retriever train -data "$work/retr" -out ""
expect 2 '-mine-margin NaN' -- retriever diagnose -data "$work/retr" -mine-margin NaN
expect 1 'x.png: the folder .*none does not exist' -- lab -plot "$work/none/x.png"
expect 1 'x.png: the folder .*none does not exist' -- gradcheck -sweep -plot "$work/none/x.png"
expect 1 '^attnlab search: -reranker: ' -- search -src "$src" -cache "" -quiet -reranker "$work/nosuch" twice x
expect 2 '-json and -code' -- search -src "$src" -json -code twice x
printf '{"query": "twice", "path": "x.go"}\n' > "$work/q-nofunc.jsonl"
expect 1 'q-nofunc.jsonl:1: want a query, a path and a func' -- retriever eval -queries "$work/q-nofunc.jsonl" -src "$src" -quiet
printf '{"query": "twice", "path": "nosuch.go", "func": "Nosuch"}\n' > "$work/q-nogold.jsonl"
expect 1 'q-nogold.jsonl:1 \("twice"\): .* holds no function Nosuch in nosuch.go' -- retriever eval -queries "$work/q-nogold.jsonl" -src "$src" -cache "" -quiet
expect 1 '/dev/zero: larger than' -- retriever eval -queries /dev/zero -src "$src" -quiet

echo "== interrupts"
interrupt INT 130 1 -- bench -max-n 4096 -seconds 5 -torch=false -memory=false
interrupt TERM 143 1 -- bench -max-n 4096 -seconds 5 -torch=false -memory=false
interrupt INT 130 0.5 -- lab
interrupt TERM 143 1 -- train $tiny -steps 100000 -save-every 100000 -eval-every 100000 -out "$work/run-int"
[ -f "$work/run-int/checkpoint/model.safetensors" ] && echo "ok   SIGTERM saved the run" || { echo "FAIL SIGTERM saved nothing"; fails=$((fails + 1)); }
# SIGTERM twice, as timeout and container runtimes may send it: still saved
for gap in 0.001 0.02 0.2; do
  "$bin" train $tiny -steps 100000 -save-every 100000 -eval-every 100000 -out "$work/run-twice-$gap" >/dev/null 2>"$work/err" &
  pid=$!
  for _ in $(seq 50); do [ -e "$work/run-twice-$gap/heldout.txt" ] && break; sleep 0.1; done
  sleep 0.3
  kill -TERM $pid; sleep $gap; kill -TERM $pid 2>/dev/null; wait $pid; code=$?
  if [ $code = 143 ] && [ -f "$work/run-twice-$gap/checkpoint/trainer_state.json" ]; then
    echo "ok   SIGTERM twice ($gap s apart) -> 143, the run saved"
  else
    echo "FAIL SIGTERM twice ($gap s apart) -> exit $code, checkpoint: $(ls "$work/run-twice-$gap" 2>&1 | tr '\n' ' ')"; fails=$((fails + 1))
  fi
done
interrupt TERM 143 1 -- gradcheck -m 64 -n 128 -d 16 -dv 16
interrupt INT 130 1 -- gradcheck -m 32 -n 64 -d 16 -dv 16 -sweep
mkfifo "$work/fifo"
interrupt TERM 143 0.5 -- ref -op attention -in "$work/fifo" -out "$work/fifo-out.safetensors"
interrupt INT 130 0.5 -- ref -op attention -in "$work/fifo" -out "$work/fifo-out.safetensors"
[ -e "$work/fifo-out.safetensors" ] && { echo "FAIL an interrupted ref wrote"; fails=$((fails + 1)); } || echo "ok   an interrupted ref wrote nothing"
# the whole registry and the whole lab: the decoder's alone now end
# within these delays on a quiet machine
interrupt TERM 143 1 -- faults
interrupt INT 130 2 -- lab
interrupt TERM 143 1 -- lm-eval -src "$(go env GOROOT)/src/net/http" -quiet -no-compressors

echo
if [ $fails -gt 0 ]; then echo "$fails case(s) failed"; exit 1; fi
echo "every case answered as it should"
