package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/attnlab/attnlab/internal/bench"
	"github.com/attnlab/attnlab/train"
)

var benchCmd = register(&command{
	name:  "bench",
	usage: "[-json] [-seconds S] [-max-n N] [-model DIR] [-torch=false] [-memory=false]",
	short: "measure GEMM, memory bandwidth, attention, decoding, generation and memory, beside PyTorch",
	long: `Bench measures, on this machine and in one run, and states each rate as a
fraction of the machine's ceiling measured in the same run:

  gemm: GFLOP/s of an n×n×n product (float32 and float64, n = 256 … 2048;
    2n³ flops);
  stream: memory bandwidth in GB/s (1e9 bytes/s) over float32 arrays of
    256 MiB, or 8× the largest cache if more: read (sum of squares, bytes
    read once) and copy (bytes read + bytes written), with 1 thread and
    with GOMAXPROCS threads each taking a part;
  ceiling: the best float32 and float64 gemm rows, the best stream row and
    the best stream read row, attnlab or PyTorch: the SGEMM, DGEMM, memory
    bandwidth and read bandwidth ceilings;
  attention fwd+bwd: B=1, H=8, D=64, causal, n = 256 … -max-n, float32 and
    float64, and float32 at n = 1024 and 2048 without the mask and at
    D = 128. GFLOP/s count 12·n²·D·H flops, what a non-fused
    implementation executes (PyTorch's), so numbers compare across
    implementations; the executed GFLOP/s count what the fused kernel runs,
    the forward's 2 products and a backward that recomputes S before its
    4 products: 14·n²·D·H, half that causal; efficiency is executed
    GFLOP/s over the GEMM ceiling of the dtype;
  attention variants: the fused float32 fwd+bwd at n = 1024 (H=8, D=64,
    causal) with sinks, ALiBi or softcap 30, each as the median over
    interleaved rounds of its time over plain attention's in the same round;
  decode: µs per token of one query per head against a cache of 256 …
    32768 keys (H=8, D=64) and of 8192 keys at Hq=32, Hkv=8, D=128;
    bandwidth = K and V bytes read (2·Hkv·context·D·4) / time, efficiency
    = bandwidth / read bandwidth ceiling (the short contexts fit in the
    caches: their share can pass 100%);
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
median of repeated runs within -seconds. -json prints every row with its
counts (flops, executed_flops, bytes) and derived fields (executed_gflops,
bandwidth_gbs, efficiency and their torch_ twins) and the ceilings; the
README's "Fast kernels" section lists them.

Example: attnlab bench -max-n 2048`,
})

type benchOpts struct {
	json, torch, memory bool
	seconds             float64
	maxN, memCase       int
	model               string
}

func init() {
	benchCmd.define = func(fs *flag.FlagSet) runFunc {
		o := &benchOpts{}
		fs.BoolVar(&o.json, "json", false, "print the results as JSON")
		fs.Float64Var(&o.seconds, "seconds", 1, "time budget per measurement (at least 3 runs)")
		fs.IntVar(&o.maxN, "max-n", 4096, "largest attention length")
		fs.StringVar(&o.model, "model", "", "checkpoint directory of the generate row (default: attnlab train's default model, random weights)")
		fs.BoolVar(&o.torch, "torch", true, "also run PyTorch when /usr/bin/python3 has it")
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
	opt := bench.Options{Seconds: o.seconds, MaxN: o.maxN, Torch: o.torch, Model: o.model}
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
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
		return r.Err()
	}
	if err := r.WriteText(stdout); err != nil {
		return err
	}
	return r.Err()
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
