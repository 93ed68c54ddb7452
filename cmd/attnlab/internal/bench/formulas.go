package bench

import (
	"fmt"
	"math"
	"strings"
)

// The counts behind every derived number of the table, one function each,
// so that the formulas of docs/kernels.md and the tests point at one place.

// gemmFlops is the work of one n×n×n matrix product: n multiply-adds per
// output element, n² elements.
//
//	flops = 2·n³
func gemmFlops(n int) float64 { return 2 * float64(n) * float64(n) * float64(n) }

// attentionFlops returns the flops of one forward+backward of attention at
// M = N = n, Dv = D, H query heads, B = 1.
//
// nominal is what a non-fused implementation executes (PyTorch's eager
// path, the mask applied to the full score matrix): forward S = Q Kᵀ and
// O = P V, backward dV = Pᵀ dO, dP = dO Vᵀ, dQ = dS K and dK = dSᵀ Q, six
// products of 2·n²·D each,
//
//	nominal = 12·n²·D·H    (causal or not)
//
// executed is what attnlab's fused kernel runs: the forward's two products
// (4·n²·D), and a backward that never stored P and so recomputes
// S = Q Kᵀ before dV, dP, dQ and dK (5 products, 10·n²·D); a causal mask
// hides half of the score matrix and its tiles are skipped:
//
//	executed = (4 + 10)·n²·D·H = 14·n²·D·H    full
//	executed = 14·n²·D·H / 2  =  7·n²·D·H    causal
//
// (The diagonal tiles of a causal mask are computed whole, so the causal
// kernel executes slightly more, about a factor 1 + tile/n; the count
// leaves that out.)
func attentionFlops(n, D, H int, causal bool) (nominal, executed float64) {
	n2DH := float64(n) * float64(n) * float64(D) * float64(H)
	nominal = 12 * n2DH
	executed = 14 * n2DH
	if causal {
		executed /= 2
	}
	return nominal, executed
}

// decodeBytes is the key and value cache one decoding step reads: for each
// of the Hkv KV heads, ctx keys and ctx values of D float32 elements.
//
//	bytes = 2·Hkv·ctx·D·4
//
// (The query, output and partial states are a few KiB and left out.)
func decodeBytes(Hkv, ctx, D int) float64 { return 2 * float64(Hkv) * float64(ctx) * float64(D) * 4 }

// streamBytes returns the bytes one stream run moves over an array of
// size bytes: a read reads it once, a copy reads it and writes as much.
func streamBytes(op string, size int) float64 {
	if op == "copy" {
		return 2 * float64(size)
	}
	return float64(size)
}

// Row constructors from a measured time in seconds (the median of the
// runs); the tests call them with made-up times.

func gemmRow(dt string, n int, seconds float64) Row {
	f := gemmFlops(n)
	return Row{Group: "gemm", Case: fmt.Sprintf("%s n=%d", dt, n), Unit: "GFLOP/s", DType: dt,
		Ours: f / seconds / 1e9, Flops: f}
}

// attnCase is one attention workload: B = 1, M = N = n, Dv = D, H query
// heads on Hkv KV heads (0: H).
type attnCase struct {
	dtype     string
	n, H, D   int
	Hkv       int
	causal    bool
	shortName bool // the case reads "float32 n=1024", as before other shapes were measured
}

func (a attnCase) name() string {
	if a.shortName {
		return fmt.Sprintf("%s n=%d", a.dtype, a.n)
	}
	mask := "full"
	if a.causal {
		mask = "causal"
	}
	if a.Hkv != 0 && a.Hkv != a.H {
		return fmt.Sprintf("%s n=%d D=%d %s Hq=%d Hkv=%d", a.dtype, a.n, a.D, mask, a.H, a.Hkv)
	}
	return fmt.Sprintf("%s n=%d D=%d %s", a.dtype, a.n, a.D, mask)
}

func attentionRow(a attnCase, seconds float64) Row {
	nominal, executed := attentionFlops(a.n, a.D, a.H, a.causal)
	return Row{Group: "attention fwd+bwd", Case: a.name(), Unit: "GFLOP/s", DType: a.dtype,
		Ours: nominal / seconds / 1e9, Flops: nominal, ExecutedFlops: executed}
}

// decodeCase is one decoding workload: one new query per head against a
// cache of ctx keys, B = 1, Dv = D.
type decodeCase struct {
	ctx, Hq, Hkv, D int
}

func (d decodeCase) name() string {
	if d.Hq == 8 && d.Hkv == 8 && d.D == 64 {
		return fmt.Sprintf("float32 context=%d", d.ctx) // the shape measured from the start
	}
	return fmt.Sprintf("float32 context=%d Hq=%d Hkv=%d D=%d", d.ctx, d.Hq, d.Hkv, d.D)
}

func decodeRow(d decodeCase, seconds float64) Row {
	return Row{Group: "decode", Case: d.name(), Unit: "µs/token", DType: "float32",
		Ours: seconds * 1e6, Bytes: decodeBytes(d.Hkv, d.ctx, d.D)}
}

// streamRow is a stream row of passes passes over an array of size bytes
// at the given cache level (levelDRAM: the array is far larger than the
// caches).
func streamRow(op string, size, threads, passes int, level string, seconds float64) Row {
	b := streamBytes(op, size) * float64(passes)
	plural := "s"
	if threads == 1 {
		plural = ""
	}
	what := fmt.Sprintf("%d MiB", size>>20)
	if level != levelDRAM {
		what = fmt.Sprintf("%s (%s)", byteSize(size), level)
	}
	return Row{Group: "stream", Case: fmt.Sprintf("%s float32 %s, %d thread%s", op, what, threads, plural),
		Unit: "GB/s", DType: "float32", Ours: b / seconds / 1e9, Bytes: b, Level: level}
}

// byteSize writes n bytes in KiB or MiB.
func byteSize(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// Ceilings are the machine's limits as this run measured them.
type Ceilings struct {
	SGEMM           float64 `json:"sgemm_gflops"`                    // best float32 gemm row, attnlab or PyTorch
	DGEMM           float64 `json:"dgemm_gflops"`                    // best float64 gemm row, attnlab or PyTorch
	MemoryBandwidth float64 `json:"memory_bandwidth_gbs"`            // best DRAM stream row, attnlab or PyTorch
	ReadBandwidth   float64 `json:"read_bandwidth_gbs"`              // best DRAM stream read row: the ceiling of a workload that only reads, as decoding
	L3Read          float64 `json:"l3_read_bandwidth_gbs,omitempty"` // best stream read row of an array in L3
	L2Read          float64 `json:"l2_read_bandwidth_gbs,omitempty"` // best stream read row of arrays in the cores' L2
}

// readCeiling is the read bandwidth of a cache level ("" is DRAM), 0 when
// it was not measured.
func (c Ceilings) readCeiling(level string) float64 {
	switch level {
	case levelL2:
		return c.L2Read
	case levelL3:
		return c.L3Read
	}
	return c.ReadBandwidth
}

// ceilings returns the best rates of the gemm and stream rows, both
// columns.
func ceilings(rows []Row) Ceilings {
	var c Ceilings
	for _, r := range rows {
		best := max(nonNaN(r.Ours), nonNaN(r.Torch))
		switch {
		case r.Group == "gemm" && r.DType == "float32":
			c.SGEMM = max(c.SGEMM, best)
		case r.Group == "gemm" && r.DType == "float64":
			c.DGEMM = max(c.DGEMM, best)
		case r.Group == "stream" && (r.Level == levelDRAM || r.Level == ""):
			c.MemoryBandwidth = max(c.MemoryBandwidth, best)
			if strings.HasPrefix(r.Case, "read ") {
				c.ReadBandwidth = max(c.ReadBandwidth, best)
			}
		case r.Group == "stream" && r.Level == levelL3 && strings.HasPrefix(r.Case, "read "):
			c.L3Read = max(c.L3Read, best)
		case r.Group == "stream" && r.Level == levelL2 && strings.HasPrefix(r.Case, "read "):
			c.L2Read = max(c.L2Read, best)
		}
	}
	return c
}

func nonNaN(x float64) float64 {
	if math.IsNaN(x) {
		return 0
	}
	return x
}

// derive fills the derived fields of rows from their measured columns
// and the ceilings c:
//
//	gemm       efficiency = GFLOP/s / GEMM ceiling of the dtype
//	attention  executed_gflops = GFLOP/s · executed_flops / flops (attnlab)
//	           torch_executed_gflops = torch (the eager path executes the nominal count)
//	           efficiency = executed GFLOP/s / GEMM ceiling of the dtype
//	           (forward+backward and forward alike)
//	decode     bandwidth_gbs = bytes / (µs/token · 1e-6) / 1e9
//	           efficiency = bandwidth_gbs / read bandwidth of the row's level
//	           (decoding only reads K and V, from the cache level its
//	           working set fits in; DRAM when that level was not measured)
//
// and the same with torch_ for PyTorch's column where it has a value.
func derive(rows []Row, c Ceilings) {
	ceil := func(dt string) float64 {
		if dt == "float64" {
			return c.DGEMM
		}
		return c.SGEMM
	}
	frac := func(x, of float64) float64 {
		if !(x > 0) || !(of > 0) {
			return 0
		}
		return x / of
	}
	for i := range rows {
		r := &rows[i]
		switch r.Group {
		case "gemm":
			r.Efficiency = frac(r.Ours, ceil(r.DType))
			r.TorchEfficiency = frac(r.Torch, ceil(r.DType))
		case "attention fwd+bwd", "attention fwd":
			if r.Flops > 0 && r.Ours > 0 {
				r.Executed = r.Ours * r.ExecutedFlops / r.Flops
			}
			if r.Torch > 0 {
				r.TorchExecuted = r.Torch
			}
			r.Efficiency = frac(r.Executed, ceil(r.DType))
			r.TorchEfficiency = frac(r.TorchExecuted, ceil(r.DType))
		case "decode":
			if r.Ours > 0 {
				r.Bandwidth = r.Bytes / (r.Ours * 1e-6) / 1e9
			}
			if r.Torch > 0 {
				r.TorchBandwidth = r.Bytes / (r.Torch * 1e-6) / 1e9
			}
			if r.Level == "" || c.readCeiling(r.Level) == 0 {
				r.Level = levelDRAM
			}
			r.Efficiency = frac(r.Bandwidth, c.readCeiling(r.Level))
			r.TorchEfficiency = frac(r.TorchBandwidth, c.readCeiling(r.Level))
		}
	}
}

// ceilingRows are the table's lines stating the ceilings the efficiencies
// are fractions of.
func ceilingRows(c Ceilings) []Row {
	return []Row{
		{Group: "ceiling", Case: "SGEMM: best float32 gemm row", Unit: "GFLOP/s", DType: "float32", Ours: c.SGEMM},
		{Group: "ceiling", Case: "DGEMM: best float64 gemm row", Unit: "GFLOP/s", DType: "float64", Ours: c.DGEMM},
		{Group: "ceiling", Case: "memory bandwidth: best DRAM stream row", Unit: "GB/s", Ours: c.MemoryBandwidth},
		{Group: "ceiling", Case: "read bandwidth: best DRAM stream read row", Unit: "GB/s", Ours: c.ReadBandwidth},
		{Group: "ceiling", Case: "L3 read bandwidth: best L3 stream read row", Unit: "GB/s", Ours: c.L3Read},
		{Group: "ceiling", Case: "L2 read bandwidth: best L2 stream read row", Unit: "GB/s", Ours: c.L2Read},
	}
}
