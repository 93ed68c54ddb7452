package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/attnlab/attnlab/internal/bench"
	"github.com/attnlab/attnlab/model"
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
		cfg, err := defaultModelConfig()
		if err != nil {
			return err
		}
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
	var b strings.Builder
	fmt.Fprintf(&b, "attnlab bench on %s, %d threads; %s\n", r.CPU, runtime.GOMAXPROCS(0), r.Torch)
	if r.Model != "" {
		fmt.Fprintf(&b, "generate: %s\n", r.Model)
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "group\tcase\tunit\tattnlab\tPyTorch\tratio\tattnlab of ceiling\tPyTorch of ceiling\t\n")
	for _, r := range r.Rows {
		torch, ratio := "", ""
		if r.Torch > 0 {
			torch, ratio = fmt.Sprintf("%.1f", r.Torch), fmt.Sprintf("%.2f×", r.Ratio)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%s\t%s\t%s\t%s\t\n", r.Group, r.Case, r.Unit, r.Ours, torch, ratio,
			ofCeiling(r.Group, r.Executed, r.Bandwidth, r.Efficiency), ofCeiling(r.Group, r.TorchExecuted, r.TorchBandwidth, r.TorchEfficiency))
	}
	tw.Flush()
	b.WriteString(`
ratio > 1: attnlab faster (rates: attnlab/PyTorch; latency: PyTorch/attnlab)
of ceiling: gemm, rate / GEMM ceiling of the dtype; attention, executed GFLOP/s
  (14·n²·D·H, causal 7·n²·D·H, for attnlab; 12·n²·D·H for PyTorch) and their share
  of the GEMM ceiling; decode, K+V bytes per token / time and their share of the
  read bandwidth ceiling
`)
	if _, err := io.WriteString(stdout, b.String()); err != nil {
		return err
	}
	return r.Err()
}

// ofCeiling is a row's efficiency cell: the derived rate where the row has
// one, and its share of the ceiling.
func ofCeiling(group string, executed, bandwidth, eff float64) string {
	if eff == 0 {
		return ""
	}
	switch group {
	case "attention fwd+bwd":
		return fmt.Sprintf("%.1f GFLOP/s %3.0f%%", executed, 100*eff)
	case "decode":
		return fmt.Sprintf("%.1f GB/s %3.0f%%", bandwidth, 100*eff)
	}
	return fmt.Sprintf("%.0f%%", 100*eff)
}

// defaultModelConfig is the model attnlab train builds with its default
// flags: the sizes are read from train's flag defaults, the fixed fields
// are those train's run function sets (RMSNorm eps, RoPE base, tied
// embeddings, max(window, 256) positions).
func defaultModelConfig() (model.Config, error) {
	fs, _ := trainCmd.flagSet()
	get := func(name string) int {
		n, _ := strconv.Atoi(fs.Lookup(name).DefValue)
		return n
	}
	c := model.Config{
		HiddenSize: get("dim"), NumHiddenLayers: get("layers"), NumAttentionHeads: get("heads"),
		NumKeyValueHeads: get("kv-heads"), IntermediateSize: get("ffn"), VocabSize: get("vocab"),
		RMSNormEps: 1e-5, RopeTheta: 10000, TieWordEmbeddings: true,
		MaxPositionEmbeddings: max(get("window"), 256), Kind: model.KindLM,
	}
	return c, c.Validate()
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
