// Package bench measures attnlab's kernels and, in the same run, PyTorch's
// on the same workloads: GEMM, fused attention forward+backward, decoding,
// and peak memory. Each number is the median of repeated runs.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/internal/vec"
	"github.com/attnlab/attnlab/python"
)

// Row is one line of the bench table.
type Row struct {
	Group string  `json:"group"`
	Case  string  `json:"case"`
	Unit  string  `json:"unit"`
	Ours  float64 `json:"attnlab"`
	Torch float64 `json:"torch,omitempty"`
	Ratio float64 `json:"ratio,omitempty"` // ours/torch for rates, torch/ours for latencies: > 1 means attnlab is faster
}

type spec struct {
	Threads   int              `json:"threads"`
	Seconds   float64          `json:"seconds"`
	GEMM      []map[string]any `json:"gemm"`
	Attention []map[string]any `json:"attention"`
	Decode    []map[string]any `json:"decode"`
}

// Options choose what Run measures.
type Options struct {
	Seconds float64 // time budget per measurement (at least 3 runs)
	MaxN    int     // largest attention length
	Torch   bool    // also run PyTorch when /usr/bin/python3 has it
	// ChildMemory, when not nil, returns the peak resident memory in MiB of
	// a fresh process that runs MemoryCase(n).
	ChildMemory func(ctx context.Context, n int) (float64, error)
}

// Validate checks the options.
func (o Options) Validate() error {
	if !(o.Seconds > 0) || o.Seconds > 600 || o.MaxN < 256 || o.MaxN > 1<<16 {
		return fmt.Errorf("seconds %v, max-n %d: want seconds in (0, 600] and max-n in [256, 65536]", o.Seconds, o.MaxN)
	}
	return nil
}

// Report is what Run measured.
type Report struct {
	CPU   string `json:"cpu"`
	Torch string `json:"torch"`
	Rows  []Row  `json:"rows"`
}

// Run measures, in one process and one invocation, attnlab's kernels and,
// with o.Torch, PyTorch's on the same workloads. When ctx is done it stops
// after the measurement in progress and returns ctx's error.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	budget := time.Duration(o.Seconds * float64(time.Second))
	var rows []Row
	sp := spec{Threads: 2, Seconds: o.Seconds}
	medianTime := func(budget time.Duration, f func()) float64 { return medianTimeCtx(ctx, budget, f) }

	gemmSizes := []int{256, 512, 1024, 2048}
	for _, dt := range []string{"float32", "float64"} {
		for _, n := range gemmSizes {
			t := medianTime(budget, gemmRunner(dt, n))
			rows = append(rows, Row{Group: "gemm", Case: fmt.Sprintf("%s n=%d", dt, n), Unit: "GFLOP/s", Ours: 2 * float64(n*n*n) / t / 1e9})
			sp.GEMM = append(sp.GEMM, map[string]any{"n": n, "dtype": dt})
		}
	}
	for _, dt := range []string{"float32", "float64"} {
		for n := 256; n <= o.MaxN; n *= 2 {
			t := medianTime(budget, attentionRunner(dt, n))
			rows = append(rows, Row{Group: "attention fwd+bwd", Case: fmt.Sprintf("%s n=%d", dt, n), Unit: "GFLOP/s", Ours: 12 * float64(n*n) * 64 * 8 / t / 1e9})
			sp.Attention = append(sp.Attention, map[string]any{"n": n, "h": 8, "d": 64, "dtype": dt})
		}
	}
	for _, ctxLen := range []int{1024, 8192} {
		t := medianTime(budget, decodeRunner(ctxLen))
		rows = append(rows, Row{Group: "decode", Case: fmt.Sprintf("float32 context=%d", ctxLen), Unit: "µs/token", Ours: t * 1e6})
		sp.Decode = append(sp.Decode, map[string]any{"context": ctxLen, "h": 8, "d": 64})
	}
	if o.ChildMemory != nil {
		mem, err := o.ChildMemory(ctx, 16384)
		if err != nil {
			return nil, err
		}
		rows = append(rows, Row{Group: "memory", Case: "float32 fwd+bwd n=16384 H=1 D=64, peak RSS", Unit: "MiB", Ours: mem})
	}

	if err := ctx.Err(); err != nil {
		return nil, err
	}
	torchInfo := "PyTorch: not run"
	if o.Torch {
		info, err := torchBench(ctx, sp, rows)
		if err != nil {
			torchInfo = "PyTorch: " + err.Error()
		} else {
			torchInfo = info
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &Report{CPU: cpuName(), Torch: torchInfo, Rows: rows}, nil
}

// medianTimeCtx runs f until the budget is spent (at least 3 times, after
// one warm-up) and returns the median duration in seconds; once ctx is done
// it runs f no more.
func medianTimeCtx(ctx context.Context, budget time.Duration, f func()) float64 {
	// the runs go on in a goroutine of their own, so that an interrupt
	// need not wait for the one in progress (a second or more at n = 4096)
	done := make(chan float64, 1)
	go func() {
		if ctx.Err() != nil {
			done <- math.NaN()
			return
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
			done <- math.NaN()
			return
		}
		slices.Sort(ts)
		done <- ts[len(ts)/2]
	}()
	select {
	case t := <-done:
		return t
	case <-ctx.Done():
		return math.NaN()
	}
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

// MemoryCase runs one causal float32 forward+backward at length n (H=1,
// D=64) and returns the process's peak resident set in MiB: run it in a
// fresh process, so that nothing else counts.
func MemoryCase(n int) (float64, error) {
	attentionOf[float32](&attention.Config{B: 1, Hq: 1, Hkv: 1, M: n, N: n, D: 64, Dv: 64, Causal: true})()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return float64(ru.Maxrss) / 1024, nil // Linux reports KiB
}

// torchBench runs python/torch_bench.py on spec and fills the PyTorch
// columns of rows. It returns a one-line description of PyTorch.
func torchBench(ctx context.Context, spec spec, rows []Row) (string, error) {
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
