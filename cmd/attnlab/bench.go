package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/attnlab/attnlab/cmd/attnlab/internal/bench"
	"github.com/attnlab/attnlab/train"
)

var benchCmd = register(&command{
	name:  "bench",
	usage: "[-json] [-seconds S] [-max-n N] [-model DIR] [-torch=false] [-peers LIST] [-only LIST] [-memory=false]",
	short: "measure GEMM, memory bandwidth, attention, decoding, generation and memory, beside PyTorch, ggml and ONNX Runtime",
	long: `Bench measures, on this machine and in one run, and states each rate as a
fraction of the machine's ceiling measured in the same run:

  gemm: GFLOP/s of an n×n×n product (float32 and float64, n = 256 … 2048;
    2n³ flops);
  stream: memory bandwidth in GB/s (1e9 bytes/s) over float32 arrays of
    256 MiB, or 8× the largest cache if more: read (sum of squares, bytes
    read once) and copy (bytes read + bytes written), with 1 thread and
    with GOMAXPROCS threads each taking a part; and the read bandwidth of
    the caches with GOMAXPROCS threads, over half of each core's L2 per
    thread (L2) and a quarter of L3 (L3), read again and again;
  ceiling: the best float32 and float64 gemm rows, the best DRAM stream
    row, the best DRAM, L3 and L2 stream read rows, attnlab or PyTorch: the
    SGEMM, DGEMM, memory bandwidth and read bandwidth ceilings;
  blas check: an SGEMM of n = 1024 in attnlab and in each peer,
    interleaved; a peer at half of attnlab's rate or less is flagged (its
    BLAS is misdetected or single-threaded, and its ratios are suspect);
  attention fwd+bwd: B=1, H=8, D=64, causal, n = 256 … -max-n, float32 and
    float64, and float32 at n = 1024 and 2048 without the mask and at
    D = 128. GFLOP/s count 12·n²·D·H flops, what a non-fused
    implementation executes (PyTorch's), so numbers compare across
    implementations; the executed GFLOP/s count what the fused kernel runs,
    the forward's 2 products and a backward that recomputes S before its
    4 products: 14·n²·D·H, half that causal; efficiency is executed
    GFLOP/s over the GEMM ceiling of the dtype. PyTorch only: neither
    ggml's flash_attn_ext nor ONNX Runtime's attention ops have a backward;
  attention variants: the fused float32 fwd+bwd at n = 1024 (H=8, D=64,
    causal) with sinks, ALiBi or softcap 30, each as the median over
    interleaved rounds of its time over plain attention's in the same round;
  attention fwd: the fused forward (prefill), float32, H = 8, causal and
    full, D = 64 and 128, n = 512 … -max-n, and GQA (8 query heads on 2 KV
    heads) at n = 2048, causal; GFLOP/s count 4·n²·D·H (executed: half
    that causal). Beside ggml's flash_attn_ext (float32 K/V, and F16 K/V
    as llama.cpp stores its cache) and ONNX Runtime's MultiHeadAttention
    (GroupQueryAttention for GQA);
  decode: µs per token of one query per head against a cache of 256 …
    32768 keys, D = 128, MHA (H = 8) and GQA (32 query heads on 8 KV
    heads), attnlab's K and V allocated as its KV cache allocates them
    (attention.CacheSlice: on transparent huge pages where the system
    gives them; each peer allocates its own); bandwidth = K and V bytes
    read (2·Hkv·context·D·4) / time,
    efficiency = bandwidth / the read bandwidth of the level the K and V
    fit in (L2, L3 or DRAM, from the caches' sizes); beside PyTorch, ggml
    and ONNX Runtime;
  generate: tokens per second of greedy decoding with the KV cache (a
    32-token prompt in one chunk, then 128 new tokens, no end-of-text stop)
    for the checkpoint of -model, or for attnlab train's default model with
    random weights (speed does not depend on them); PyTorch runs the same
    weights with its own eager Llama and KV cache, and the new tokens must
    be identical: bench fails (exit 1) after printing when they are not;
  memory: peak resident memory of a causal forward+backward at n = 16384,
    H=1, D=64, float32 (in a child process, so nothing else counts;
    VmHWM of /proc/self/status).

When /usr/bin/python3 can import torch, the same workloads run in PyTorch
(2 threads; the stream rows with the row's thread count) in the same
invocation and the table shows both and the ratio. Each number is the
median of repeated runs within -seconds.

The peers of -peers (default ggml,onnxruntime; "" for none) are other
engines' programs speaking the protocol of docs/bench-peers.md, started
once with attnlab's thread count: ggml is adapters/ggml's ggml-peer,
built by (cd adapters/ggml && go run ./cmd/build) into $ATTNLAB_GGML or
~/.cache/attnlab/ggml; onnxruntime is adapters/node/ort_bench.js on
onnxruntime-node. On the blas check, attention fwd and decode rows each
peer first computes the row's inputs and must give attnlab's output
(within 1e-3; 2e-2 with F16 K/V), then it and attnlab run interleaved,
attnlab then each peer, in rounds (at least 5 after a warm-up, each side
at least 20 ms a round) until -seconds per side is spent; a peer's ratio
is the median over the rounds of its time over attnlab's in the same
round (> 1: attnlab faster), shown with the smallest and largest round.
On a shared machine only these ratios hold from run to run. A peer that
is not installed, refuses a shape, gives another output or fails has an
empty cell and a note saying why.

-only keeps some sections: gemm, stream, blas, fwd+bwd, variants, fwd,
decode, generate, memory (comma-separated).

-json prints every row with its counts (flops, executed_flops, bytes),
derived fields (executed_gflops, bandwidth_gbs, efficiency and their
torch_ twins; level: the cache level of a stream or decode row), its peer
cells under "peers" (value, ratio, ratio_min, ratio_max, rounds, reps,
max_abs_diff, kernel, warning, error), the peers of the run (name,
version, build, threads, or error) and the ceilings; docs/bench-peers.md
and docs/kernels.md list them.

Example: attnlab bench -max-n 2048`,
})

type benchOpts struct {
	json, torch, memory bool
	seconds             float64
	maxN, memCase       int
	model, peers, only  string
}

func init() {
	benchCmd.define = func(fs *flag.FlagSet) runFunc {
		o := &benchOpts{}
		fs.BoolVar(&o.json, "json", false, "print the results as JSON")
		fs.Float64Var(&o.seconds, "seconds", 1, "time budget per measurement (at least 3 runs)")
		fs.IntVar(&o.maxN, "max-n", 4096, "largest attention length")
		fs.StringVar(&o.model, "model", "", "checkpoint directory of the generate row (default: attnlab train's default model, random weights)")
		fs.BoolVar(&o.torch, "torch", true, "also run PyTorch when /usr/bin/python3 has it")
		fs.StringVar(&o.peers, "peers", strings.Join(bench.PeerNames, ","), "the peers to run beside attnlab (comma-separated; \"\" for none)")
		fs.StringVar(&o.only, "only", "", "run only these sections (comma-separated: "+strings.Join(bench.Sections, ", ")+")")
		fs.BoolVar(&o.memory, "memory", true, "measure peak memory at n = 16384 in a child process")
		fs.IntVar(&o.memCase, "memory-case", 0, "internal: run one forward+backward at this n and print the peak RSS")
		return func(ctx context.Context, args []string, stdout io.Writer) error {
			if err := noArgs(args); err != nil {
				return err
			}
			return runBench(ctx, o, stdout)
		}
	}
}

func runBench(ctx context.Context, o *benchOpts, stdout io.Writer) error {
	if o.memCase < 0 || o.memCase > 1<<16 {
		return usagef("-memory-case %d: want an attention length in [1, 65536] (0: the whole bench)", o.memCase)
	}
	if o.memCase > 0 {
		mem, err := bench.MemoryCase(o.memCase)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%.1f\n", mem)
		return err
	}
	opt := bench.Options{Seconds: o.seconds, MaxN: o.maxN, Torch: o.torch, Model: o.model,
		Peers: splitList(o.peers), Only: splitList(o.only)}
	if err := opt.Validate(); err != nil {
		return usageError{err.Error()}
	}
	if o.model == "" {
		cfg := train.DefaultModel()
		opt.DefaultModel = &cfg
	}
	if o.memory {
		opt.ChildMemory = childMemory
	}
	r, err := bench.Run(ctx, opt)
	if err != nil {
		return err
	}
	if o.json {
		if err := writeJSON(stdout, r); err != nil {
			return err
		}
		return r.Err()
	}
	if err := r.WriteText(stdout); err != nil {
		return err
	}
	return r.Err()
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// childMemory runs memoryCase in a fresh process and returns its peak RSS.
func childMemory(ctx context.Context, n int) (float64, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	out, err := exec.CommandContext(ctx, exe, "bench", "-memory-case", strconv.Itoa(n)).Output()
	if err != nil {
		return 0, fmt.Errorf("memory case: %w", err)
	}
	return strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
}
