// Package bench measures attnlab's kernels and, in the same run, PyTorch's
// on the same workloads: GEMM, memory bandwidth, fused attention
// forward+backward, decoding, greedy generation with a model and peak
// memory. Each number is the median of repeated runs. From the GEMM and
// stream rows it derives the machine's ceilings (the best SGEMM and DGEMM
// rate, the best memory bandwidth) and states every attention and decoding
// row as a fraction of them; formulas.go holds every count.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	"time"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/internal/vec"
	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/python"
)

// Row is one line of the bench table. Ours and Torch are in Unit; the
// fields after Ratio are derived from them (see derive) and from the
// workload's counts, and are left out where they do not apply.
type Row struct {
	Group string  `json:"group"`
	Case  string  `json:"case"`
	Unit  string  `json:"unit"`
	Ours  float64 `json:"attnlab"`
	Torch float64 `json:"torch,omitempty"`
	Ratio float64 `json:"ratio,omitempty"` // ours/torch for rates, torch/ours for latencies: > 1 means attnlab is faster

	DType         string  `json:"dtype,omitempty"`
	Flops         float64 `json:"flops,omitempty"`          // nominal flops of one run (gemm, attention)
	ExecutedFlops float64 `json:"executed_flops,omitempty"` // flops attnlab's fused attention executes in one run
	Bytes         float64 `json:"bytes,omitempty"`          // bytes one run reads and writes (stream, decode)

	Executed        float64 `json:"executed_gflops,omitempty"`       // attention: attnlab's executed GFLOP/s
	TorchExecuted   float64 `json:"torch_executed_gflops,omitempty"` // attention: PyTorch's (its nominal count)
	Bandwidth       float64 `json:"bandwidth_gbs,omitempty"`         // decode: bytes / time, attnlab
	TorchBandwidth  float64 `json:"torch_bandwidth_gbs,omitempty"`   // decode: bytes / time, PyTorch
	Efficiency      float64 `json:"efficiency,omitempty"`            // attnlab's fraction of the ceiling (GEMM of the dtype, or memory bandwidth)
	TorchEfficiency float64 `json:"torch_efficiency,omitempty"`      // PyTorch's fraction of the same ceiling

	Level string `json:"level,omitempty"` // stream: the level the array lives in; decode: the level the K and V cache fits in (L2, L3, DRAM)

	// Peers are the other engines' columns, by column name ("ggml",
	// "ggml f16 K/V", "onnxruntime"), measured interleaved with attnlab
	// (see PeerCell); a column the row has no cell for did not run.
	Peers map[string]*PeerCell `json:"peers,omitempty"`

	Error string `json:"error,omitempty"` // generate: the tokens differ from PyTorch's, or a run failed
}

type spec struct {
	Threads   int              `json:"threads"`
	Seconds   float64          `json:"seconds"`
	GEMM      []map[string]any `json:"gemm"`
	Stream    []map[string]any `json:"stream"`
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
	// Model is the checkpoint directory of the generate row (config.json,
	// model.safetensors and optionally tokenizer.json). When it is empty
	// and DefaultModel is not nil, a model of that config with random
	// weights is written to a temporary directory instead; when both are
	// unset there is no generate row.
	Model        string
	DefaultModel *model.Config
	// Peers are the peers to run beside attnlab on the attention forward,
	// decode and BLAS check rows (PeerNames; none when empty), found by
	// FindPeer, or by bench's FindPeer when it is nil.
	Peers    []string
	FindPeer func(name string) (PeerProgram, error)
	// Only, when not empty, keeps the sections of these names (Sections)
	// and skips the others; the ceilings of a skipped gemm or stream
	// section are missing, and so are the efficiencies they give.
	Only []string
}

// Sections are the parts of the bench Options.Only chooses from, in the
// order they run.
var Sections = []string{"gemm", "stream", "blas", "fwd+bwd", "variants", "fwd", "decode", "generate", "memory"}

// Validate checks the options.
func (o Options) Validate() error {
	if !(o.Seconds > 0) || o.Seconds > 600 || o.MaxN < 256 || o.MaxN > 1<<16 {
		return fmt.Errorf("seconds %v, max-n %d: want seconds in (0, 600] and max-n in [256, 65536]", o.Seconds, o.MaxN)
	}
	for _, s := range o.Only {
		if !slices.Contains(Sections, s) {
			return fmt.Errorf("no section %q (want %s)", s, strings.Join(Sections, ", "))
		}
	}
	for i, p := range o.Peers {
		if !slices.Contains(PeerNames, p) {
			return fmt.Errorf("no peer %q (want %s)", p, strings.Join(PeerNames, ", "))
		}
		if slices.Contains(o.Peers[:i], p) {
			return fmt.Errorf("peer %q named twice", p)
		}
	}
	return nil
}

// runs reports whether the section called name runs.
func (o Options) runs(name string) bool { return len(o.Only) == 0 || slices.Contains(o.Only, name) }

// Report is what Run measured.
type Report struct {
	CPU      string     `json:"cpu"`
	Threads  int        `json:"threads"` // attnlab's (GOMAXPROCS) and every peer's
	Torch    string     `json:"torch"`
	Peers    []PeerInfo `json:"peers,omitempty"`
	Model    string     `json:"model,omitempty"` // the model of the generate row
	Ceilings Ceilings   `json:"ceilings"`
	Rows     []Row      `json:"rows"`
}

// Err returns the errors of the rows (a generation whose tokens differ
// from PyTorch's), or nil.
func (r *Report) Err() error {
	var errs []error
	for _, row := range r.Rows {
		if row.Error != "" {
			errs = append(errs, fmt.Errorf("%s %s: %s", row.Group, row.Case, row.Error))
		}
	}
	return errors.Join(errs...)
}

// attentionCases are the attention workloads up to length maxN: causal,
// H = 8, D = 64 from n = 256 in both dtypes, then float32 at n = 1024 and
// 2048 without the mask and at D = 128.
func attentionCases(maxN int) []attnCase {
	var cs []attnCase
	for _, dt := range []string{"float32", "float64"} {
		for n := 256; n <= maxN; n *= 2 {
			cs = append(cs, attnCase{dtype: dt, n: n, H: 8, D: 64, causal: true, shortName: true})
		}
	}
	for _, n := range []int{1024, 2048} {
		if n > maxN {
			break
		}
		cs = append(cs,
			attnCase{dtype: "float32", n: n, H: 8, D: 64, causal: false},
			attnCase{dtype: "float32", n: n, H: 8, D: 128, causal: true},
			attnCase{dtype: "float32", n: n, H: 8, D: 128, causal: false})
	}
	return cs
}

// decodeCases are the decoding workloads: one query row per head against
// a cache of 256 to 32768 keys, D = 128, MHA (8 heads) and GQA (32 query
// heads on 8 KV heads). Both read the same K and V (8 KiB per key), from
// 2 MiB to 256 MiB: the caches, then DRAM.
var decodeCases = func() []decodeCase {
	var cs []decodeCase
	for _, ctx := range []int{256, 1024, 4096, 16384, 32768} {
		cs = append(cs, decodeCase{ctx: ctx, Hq: 8, Hkv: 8, D: 128}, decodeCase{ctx: ctx, Hq: 32, Hkv: 8, D: 128})
	}
	return cs
}()

// Run measures, in one process and one invocation, attnlab's kernels and,
// with o.Torch, PyTorch's on the same workloads, then derives the
// ceilings and each row's efficiency. When ctx is done it stops at once
// (a measurement in progress goes on in the background until its run
// ends) and returns ctx's error.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	threads := runtime.GOMAXPROCS(0)
	report := &Report{CPU: cpuName(), Threads: threads, Torch: "PyTorch: not run"}
	// the generation model first, so that a bad -model fails at once
	var gen *genWork
	if (o.Model != "" || o.DefaultModel != nil) && o.runs("generate") {
		tmp, err := os.MkdirTemp("", "attnlab-bench")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		var cfg model.Config
		if o.DefaultModel != nil {
			cfg = *o.DefaultModel
		}
		if gen, err = prepareGenerate(o.Model, cfg, tmp, GeneratePrompt, GenerateNew); err != nil {
			return nil, err
		}
		report.Model = gen.label
	}
	// then the peers: one that is missing or fails to start is known at
	// once, and has no column
	find := o.FindPeer
	if find == nil {
		find = FindPeer
	}
	var peers []string
	if o.runs("blas") || o.runs("fwd") || o.runs("decode") {
		peers = o.Peers
	}
	ps, err := startPeers(ctx, peers, find, threads)
	if err != nil {
		return nil, err
	}
	defer ps.close()
	report.Peers = ps.info

	budget := time.Duration(o.Seconds * float64(time.Second))
	var rows []Row
	sp := spec{Threads: 2, Seconds: o.Seconds}
	measure := func(mk func() func()) float64 { return medianTimeCtx(ctx, budget, mk) }

	for _, dt := range []string{"float32", "float64"} {
		for _, n := range []int{256, 512, 1024, 2048} {
			if !o.runs("gemm") {
				break
			}
			t := measure(func() func() { return gemmRunner(dt, n) })
			rows = append(rows, gemmRow(dt, n, t))
			sp.GEMM = append(sp.GEMM, map[string]any{"n": n, "dtype": dt})
		}
	}

	size := streamSize()
	if ctx.Err() == nil && o.runs("stream") {
		arrays := newStreamArrays(size)
		ths := []int{1}
		if threads > 1 {
			ths = append(ths, threads)
		}
		for _, op := range []string{"read", "copy"} {
			for _, th := range ths {
				t := measure(func() func() { return arrays.runner(op, th, 1) })
				rows = append(rows, streamRow(op, size, th, 1, levelDRAM, t))
				sp.Stream = append(sp.Stream, map[string]any{"op": op, "bytes": size, "threads": th})
			}
		}
	}
	// the read bandwidth of the caches, the ceilings of decoding rows whose
	// cache fits in them
	for _, ls := range cacheLevelSizes(threads) {
		if ctx.Err() != nil || !o.runs("stream") {
			break
		}
		arrays := newStreamArrays(ls.size)
		passes := streamPasses(ls.size)
		t := measure(func() func() { return arrays.runner("read", threads, passes) })
		rows = append(rows, streamRow("read", ls.size, threads, passes, ls.level, t))
		sp.Stream = append(sp.Stream, map[string]any{"op": "read", "bytes": ls.size, "threads": threads})
	}
	ceilingAt := len(rows)

	// beside the peers: interleaved when one runs the op, else alone; in a
	// goroutine of its own, so that an interrupt need not wait for a run
	// in progress
	timed := func(mk func() *peerWork) (float64, map[string]*PeerCell) {
		type result struct {
			t     float64
			cells map[string]*PeerCell
		}
		done := make(chan result, 1)
		go func() {
			if ctx.Err() != nil {
				done <- result{t: math.NaN()}
				return
			}
			w := mk()
			if ps.any(w.req.Op) {
				t, cells := ps.interleave(ctx, budget, w)
				done <- result{t, cells}
				return
			}
			done <- result{t: measure(func() func() { return w.run })}
		}()
		select {
		case r := <-done:
			return r.t, r.cells
		case <-ctx.Done():
			return math.NaN(), nil
		}
	}

	// each peer's SGEMM beside attnlab's: a peer far below it is flagged
	if ps.any("sgemm") && ctx.Err() == nil && o.runs("blas") {
		t, cells := timed(blasWork)
		row := blasRow(t)
		row.Peers = cells
		flagSlowBLAS(&row)
		rows = append(rows, row)
	}

	for _, a := range attentionCases(o.MaxN) {
		if !o.runs("fwd+bwd") {
			break
		}
		t := measure(func() func() { return attentionRunner(a) })
		rows = append(rows, attentionRow(a, t))
		sp.Attention = append(sp.Attention, map[string]any{"n": a.n, "h": a.H, "d": a.D, "dtype": a.dtype, "causal": a.causal})
	}
	if ctx.Err() == nil && o.MaxN >= 1024 && o.runs("variants") {
		rows = append(rows, variantRows(ctx, budget)...)
	}
	for _, a := range forwardCases(o.MaxN) {
		if !o.runs("fwd") {
			break
		}
		t, cells := timed(func() *peerWork { return forwardWork(a) })
		row := forwardRow(a, t)
		row.Peers = cells
		rows = append(rows, row)
	}
	l2, l3 := cacheSize(2), cacheSize(3)
	for _, d := range decodeCases {
		if !o.runs("decode") {
			break
		}
		t, cells := timed(func() *peerWork { return decodeWork(d) })
		row := decodeRow(d, t)
		row.Peers = cells
		row.Level = cacheLevel(row.Bytes, threads, l2, l3)
		rows = append(rows, row)
		sp.Decode = append(sp.Decode, map[string]any{"context": d.ctx, "h": d.Hq, "hkv": d.Hkv, "d": d.D})
	}
	var genTokens []int
	if gen != nil {
		var row Row
		row, genTokens = measureGenerate(ctx, gen, budget)
		rows = append(rows, row)
	}
	if o.ChildMemory != nil && ctx.Err() == nil && o.runs("memory") {
		mem, err := o.ChildMemory(ctx, 16384)
		if err != nil && ctx.Err() == nil {
			return nil, err
		}
		rows = append(rows, Row{Group: "memory", Case: "float32 fwd+bwd n=16384 H=1 D=64, peak RSS", Unit: "MiB", Ours: mem})
	}

	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if o.Torch {
		info, err := torchBench(ctx, sp, rows)
		if err != nil {
			report.Torch = "PyTorch: " + err.Error()
		} else {
			report.Torch = info
		}
		if gen != nil && err == nil {
			tokens, times, _, err := torchGenerate(ctx, gen, sp.Threads, o.Seconds)
			if err != nil {
				report.Torch += "; generate: " + err.Error()
			} else {
				fillGenerate(&rows[slices.IndexFunc(rows, func(r Row) bool { return r.Group == "generate" })], genTokens, tokens, times, gen.new)
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	report.Ceilings = ceilings(rows)
	derive(rows, report.Ceilings)
	report.Rows = slices.Concat(rows[:ceilingAt], ceilingRows(report.Ceilings), rows[ceilingAt:])
	return report, nil
}

// medianTimeCtx builds a run with mk, runs it until the budget is spent (at
// least 3 times, after one warm-up) and returns the median duration in
// seconds; once ctx is done it runs no more and returns NaN.
func medianTimeCtx(ctx context.Context, budget time.Duration, mk func() func()) float64 {
	// the runs go on in a goroutine of their own, so that an interrupt
	// need not wait for the one in progress (a second or more at n = 4096)
	done := make(chan float64, 1)
	go func() {
		if ctx.Err() != nil {
			done <- math.NaN()
			return
		}
		f := mk()
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
	fillRand(r, x)
	return x
}

// fillRand fills x with standard normal values drawn from r.
func fillRand[T float32 | float64](r *rand.Rand, x []T) {
	for i := range x {
		x[i] = T(r.NormFloat64())
	}
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

func attentionRunner(a attnCase) func() {
	c := &attention.Config{B: 1, Hq: a.H, Hkv: a.H, M: a.n, N: a.n, D: a.D, Dv: a.D, Causal: a.causal}
	if a.dtype == "float32" {
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

// MemoryCase runs one causal float32 forward+backward at length n (H=1,
// D=64) and returns the process's peak resident set in MiB: run it in a
// fresh process, so that nothing else counts.
//
// The peak is the VmHWM line of /proc/self/status, the high-water mark of
// this program's own address space. getrusage's ru_maxrss would not do:
// Linux carries it over an exec, and Go starts a child with vfork, sharing
// the parent's memory until the exec, so the child would report the
// parent's resident set whenever that is larger (the bench's parent holds
// hundreds of MiB of arrays by then).
func MemoryCase(n int) (float64, error) {
	attentionOf[float32](&attention.Config{B: 1, Hq: 1, Hkv: 1, M: n, N: n, D: 64, Dv: 64, Causal: true})()
	if kib, err := statusKiB("VmHWM"); err == nil {
		return kib / 1024, nil
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return float64(ru.Maxrss) / 1024, nil // Linux reports KiB
}

// statusKiB returns a "Name: N kB" field of /proc/self/status.
func statusKiB(name string) (float64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
		}
	}
	return 0, fmt.Errorf("bench: no %s in /proc/self/status", name)
}

// torchBench runs python/torch_bench.py on spec and fills the PyTorch
// columns of rows. It returns a one-line description of PyTorch.
func torchBench(ctx context.Context, spec spec, rows []Row) (string, error) {
	if err := torchAvailable(); err != nil {
		return "", err
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
	cmd.Env = torchEnv()
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
		Stream    []float64 `json:"stream"`
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
	fill("stream", res.Stream, false)
	fill("attention fwd+bwd", res.Attention, false)
	fill("decode", res.Decode, true)
	return fmt.Sprintf("PyTorch %s (BLAS %s, %d threads)", res.Torch, res.BLAS, res.Threads), nil
}

// torchAvailable returns an error unless python.Interpreter can import
// torch.
func torchAvailable() error {
	if exec.Command(python.Interpreter, "-c", "import torch").Run() != nil {
		return fmt.Errorf("not run (%s cannot import torch)", python.Interpreter)
	}
	return nil
}

// torchEnv is the environment of the PyTorch scripts: this process's, but
// OpenBLAS picks its kernels for this CPU (the machine's defaults pin an
// older core type).
func torchEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "OPENBLAS_CORETYPE=") && !strings.HasPrefix(e, "OPENBLAS_L2_SIZE=") {
			env = append(env, e)
		}
	}
	return env
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
