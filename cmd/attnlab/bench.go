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
)

var benchCmd = register(&command{
	name:  "bench",
	usage: "[-json] [-seconds S] [-max-n N] [-torch=false]",
	short: "measure GEMM, fused attention, decoding and memory, beside PyTorch",
	long: `Bench measures, on this machine and in one run:

  GEMM GFLOP/s (float32 and float64, n = 256 … 2048, 2n³ flops);
  attention forward+backward GFLOP/s for B=1, H=8, D=64, causal,
    n = 256 … 4096, float32 and float64, counting 12·n²·D·H flops as a
    non-fused implementation computes them, so numbers compare across
    implementations;
  decoding latency per token at contexts 1024 and 8192 (H=8, D=64);
  peak resident memory of a causal forward+backward at n = 16384, H=1,
    D=64, float32 (in a child process, so nothing else counts).

When /usr/bin/python3 can import torch, the same workloads run in PyTorch
(2 threads) in the same invocation and the table shows both and the ratio;
PyTorch's GEMM is the machine's BLAS (OpenBLAS when installed), its ceiling.
Each number is the median of repeated runs within -seconds.

Example: attnlab bench -max-n 2048`,
})

type benchOpts struct {
	json, torch, memory bool
	seconds             float64
	maxN, memCase       int
}

func init() {
	benchCmd.define = func(fs *flag.FlagSet) runFunc {
		o := &benchOpts{}
		fs.BoolVar(&o.json, "json", false, "print the results as JSON")
		fs.Float64Var(&o.seconds, "seconds", 1, "time budget per measurement (at least 3 runs)")
		fs.IntVar(&o.maxN, "max-n", 4096, "largest attention length")
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
	opt := bench.Options{Seconds: o.seconds, MaxN: o.maxN, Torch: o.torch}
	if err := opt.Validate(); err != nil {
		return usageError{err.Error()}
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
		return enc.Encode(r)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "attnlab bench on %s, %d threads; %s\n\n", r.CPU, runtime.GOMAXPROCS(0), r.Torch)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "group\tcase\tunit\tattnlab\tPyTorch\tratio\t\n")
	for _, r := range r.Rows {
		torch, ratio := "", ""
		if r.Torch > 0 {
			torch, ratio = fmt.Sprintf("%.1f", r.Torch), fmt.Sprintf("%.2f×", r.Ratio)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%s\t%s\t\n", r.Group, r.Case, r.Unit, r.Ours, torch, ratio)
	}
	tw.Flush()
	b.WriteString("\nratio > 1: attnlab faster (rates: attnlab/PyTorch; latency: PyTorch/attnlab)\n")
	_, err = io.WriteString(stdout, b.String())
	return err
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
