package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/internal/vec"
	"github.com/attnlab/attnlab/python"
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

// Row is one line of the bench table.
type benchRow struct {
	Group string  `json:"group"`
	Case  string  `json:"case"`
	Unit  string  `json:"unit"`
	Ours  float64 `json:"attnlab"`
	Torch float64 `json:"torch,omitempty"`
	Ratio float64 `json:"ratio,omitempty"` // ours/torch for rates, torch/ours for latencies: > 1 means attnlab is faster
}

type benchSpec struct {
	Threads   int              `json:"threads"`
	Seconds   float64          `json:"seconds"`
	GEMM      []map[string]any `json:"gemm"`
	Attention []map[string]any `json:"attention"`
	Decode    []map[string]any `json:"decode"`
}

func runBench(ctx context.Context, o *benchOpts, stdout io.Writer) error {
	if o.memCase > 0 {
		return memoryCase(stdout, o.memCase)
	}
	if !(o.seconds > 0) || o.seconds > 600 || o.maxN < 256 || o.maxN > 1<<16 {
		return usageError{fmt.Sprintf("-seconds %v, -max-n %d: want seconds in (0, 600] and max-n in [256, 65536]", o.seconds, o.maxN)}
	}
	budget := time.Duration(o.seconds * float64(time.Second))
	var rows []benchRow
	spec := benchSpec{Threads: 2, Seconds: o.seconds}
	medianTime := func(budget time.Duration, f func()) float64 { return medianTimeCtx(ctx, budget, f) }

	gemmSizes := []int{256, 512, 1024, 2048}
	for _, dt := range []string{"float32", "float64"} {
		for _, n := range gemmSizes {
			t := medianTime(budget, gemmRunner(dt, n))
			rows = append(rows, benchRow{Group: "gemm", Case: fmt.Sprintf("%s n=%d", dt, n), Unit: "GFLOP/s", Ours: 2 * float64(n*n*n) / t / 1e9})
			spec.GEMM = append(spec.GEMM, map[string]any{"n": n, "dtype": dt})
		}
	}
	for _, dt := range []string{"float32", "float64"} {
		for n := 256; n <= o.maxN; n *= 2 {
			t := medianTime(budget, attentionRunner(dt, n))
			rows = append(rows, benchRow{Group: "attention fwd+bwd", Case: fmt.Sprintf("%s n=%d", dt, n), Unit: "GFLOP/s", Ours: 12 * float64(n*n) * 64 * 8 / t / 1e9})
			spec.Attention = append(spec.Attention, map[string]any{"n": n, "h": 8, "d": 64, "dtype": dt})
		}
	}
	for _, ctxLen := range []int{1024, 8192} {
		t := medianTime(budget, decodeRunner(ctxLen))
		rows = append(rows, benchRow{Group: "decode", Case: fmt.Sprintf("float32 context=%d", ctxLen), Unit: "µs/token", Ours: t * 1e6})
		spec.Decode = append(spec.Decode, map[string]any{"context": ctxLen, "h": 8, "d": 64})
	}
	if o.memory {
		mem, err := childMemory(ctx, 16384)
		if err != nil {
			return err
		}
		rows = append(rows, benchRow{Group: "memory", Case: "float32 fwd+bwd n=16384 H=1 D=64, peak RSS", Unit: "MiB", Ours: mem})
	}

	if err := ctx.Err(); err != nil {
		return err
	}
	torchInfo := "PyTorch: not run"
	if o.torch {
		info, err := torchBench(ctx, spec, rows)
		if err != nil {
			torchInfo = "PyTorch: " + err.Error()
		} else {
			torchInfo = info
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			CPU   string     `json:"cpu"`
			Torch string     `json:"torch"`
			Rows  []benchRow `json:"rows"`
		}{cpuName(), torchInfo, rows})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "attnlab bench on %s, %d threads; %s\n\n", cpuName(), runtime.GOMAXPROCS(0), torchInfo)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "group\tcase\tunit\tattnlab\tPyTorch\tratio\t\n")
	for _, r := range rows {
		torch, ratio := "", ""
		if r.Torch > 0 {
			torch, ratio = fmt.Sprintf("%.1f", r.Torch), fmt.Sprintf("%.2f×", r.Ratio)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%s\t%s\t\n", r.Group, r.Case, r.Unit, r.Ours, torch, ratio)
	}
	tw.Flush()
	b.WriteString("\nratio > 1: attnlab faster (rates: attnlab/PyTorch; latency: PyTorch/attnlab)\n")
	_, err := io.WriteString(stdout, b.String())
	return err
}

// medianTimeCtx runs f until the budget is spent (at least 3 times, after
// one warm-up) and returns the median duration in seconds; once ctx is done
// it runs f no more.
func medianTimeCtx(ctx context.Context, budget time.Duration, f func()) float64 {
	if ctx.Err() != nil {
		return math.NaN()
	}
	f()
	var ts []float64
	start := time.Now()
	for (len(ts) < 3 || time.Since(start) < budget) && ctx.Err() == nil {
		t0 := time.Now()
		f()
		ts = append(ts, time.Since(t0).Seconds())
	}
	if len(ts) == 0 {
		return math.NaN()
	}
	slices.Sort(ts)
	return ts[len(ts)/2]
}

func randSlice[T float32 | float64](r *rand.Rand, n int) []T {
	x := make([]T, n)
	for i := range x {
		x[i] = T(r.NormFloat64())
	}
	return x
}

func gemmRunner(dt string, n int) func() {
	r := rand.New(rand.NewPCG(1, uint64(n)))
	if dt == "float32" {
		a, b, c := randSlice[float32](r, n*n), randSlice[float32](r, n*n), make([]float32, n*n)
		return func() { vec.Gemm32(false, false, n, n, n, 1, a, n, b, n, 0, c, n) }
	}
	a, b, c := randSlice[float64](r, n*n), randSlice[float64](r, n*n), make([]float64, n*n)
	return func() { vec.Gemm64(false, false, n, n, n, 1, a, n, b, n, 0, c, n) }
}

func attentionRunner(dt string, n int) func() {
	c := &attention.Config{B: 1, Hq: 8, Hkv: 8, M: n, N: n, D: 64, Dv: 64, Causal: true}
	if dt == "float32" {
		return attentionOf[float32](c)
	}
	return attentionOf[float64](c)
}

func attentionOf[T float32 | float64](c *attention.Config) func() {
	r := rand.New(rand.NewPCG(2, uint64(c.M)))
	size := c.B * c.Hq * c.M * c.D
	q, k, v, do := randSlice[T](r, size), randSlice[T](r, size), randSlice[T](r, size), randSlice[T](r, size)
	o, lse := make([]T, size), make([]T, c.B*c.Hq*c.M)
	dq, dk, dv := make([]T, size), make([]T, size), make([]T, size)
	return func() {
		if err := attention.FlashForward(o, lse, q, k, v, c); err != nil {
			panic(err)
		}
		attention.FlashBackward(dq, dk, dv, do, q, k, v, o, lse, c)
	}
}

func decodeRunner(ctxLen int) func() {
	c := &attention.Config{B: 1, Hq: 8, Hkv: 8, M: 1, N: ctxLen, D: 64, Dv: 64, Causal: true}
	r := rand.New(rand.NewPCG(3, uint64(ctxLen)))
	q, k, v := randSlice[float32](r, 8*64), randSlice[float32](r, 8*ctxLen*64), randSlice[float32](r, 8*ctxLen*64)
	o, lse := make([]float32, 8*64), make([]float32, 8)
	return func() {
		if err := attention.DecodeForward(o, lse, q, k, v, c); err != nil {
			panic(err)
		}
	}
}

// memoryCase runs one causal float32 forward+backward at length n (H=1,
// D=64) and prints the process's peak resident set in MiB.
func memoryCase(stdout io.Writer, n int) error {
	attentionOf[float32](&attention.Config{B: 1, Hq: 1, Hkv: 1, M: n, N: n, D: 64, Dv: 64, Causal: true})()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%.1f\n", float64(ru.Maxrss)/1024) // Linux reports KiB
	return nil
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

// torchBench runs python/torch_bench.py on spec and fills the PyTorch
// columns of rows. It returns a one-line description of PyTorch.
func torchBench(ctx context.Context, spec benchSpec, rows []benchRow) (string, error) {
	if exec.Command(python.Interpreter, "-c", "import torch").Run() != nil {
		return "", fmt.Errorf("not run (%s cannot import torch)", python.Interpreter)
	}
	dir, err := os.MkdirTemp("", "attnlab-bench")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	script, err := python.Extract(dir, "torch_bench.py")
	if err != nil {
		return "", err
	}
	data, _ := json.Marshal(spec)
	specPath := filepath.Join(dir, "spec.json")
	if err := os.WriteFile(specPath, data, 0o644); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, python.Interpreter, script, specPath)
	// Let OpenBLAS pick its kernels for this CPU (the machine's defaults pin
	// an older core type); only for this process.
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "OPENBLAS_CORETYPE=") && !strings.HasPrefix(e, "OPENBLAS_L2_SIZE=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("torch_bench.py: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var res struct {
		Torch     string    `json:"torch"`
		BLAS      string    `json:"blas"`
		Threads   int       `json:"threads"`
		GEMM      []float64 `json:"gemm"`
		Attention []float64 `json:"attention"`
		Decode    []float64 `json:"decode"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return "", fmt.Errorf("torch_bench.py output: %w", err)
	}
	fill := func(group string, vals []float64, latency bool) {
		i := 0
		for x := range rows {
			if rows[x].Group != group || i >= len(vals) {
				continue
			}
			rows[x].Torch = vals[i]
			if latency {
				rows[x].Ratio = vals[i] / rows[x].Ours
			} else {
				rows[x].Ratio = rows[x].Ours / vals[i]
			}
			i++
		}
	}
	fill("gemm", res.GEMM, false)
	fill("attention fwd+bwd", res.Attention, false)
	fill("decode", res.Decode, true)
	return fmt.Sprintf("PyTorch %s (BLAS %s, %d threads)", res.Torch, res.BLAS, res.Threads), nil
}

// cpuName returns the CPU model from /proc/cpuinfo, or GOARCH.
func cpuName() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if name, ok := strings.CutPrefix(line, "model name"); ok {
				return strings.TrimSpace(strings.TrimLeft(name, "\t :"))
			}
		}
	}
	return runtime.GOARCH
}
