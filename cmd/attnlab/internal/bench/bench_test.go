package bench

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func near(got, want float64) bool { return math.Abs(got-want) <= 1e-9*math.Abs(want) }

// TestAttentionFlops: the counts docs/kernels.md states, rebuilt from the
// products each pass runs (2·n²·D flops each).
func TestAttentionFlops(t *testing.T) {
	for _, tc := range []struct {
		n, D, H int
		causal  bool
	}{{1024, 64, 8, true}, {1024, 64, 8, false}, {2048, 128, 8, true}, {256, 64, 1, false}} {
		product := 2 * float64(tc.n*tc.n*tc.D)
		// non-fused: forward Q Kᵀ, P V; backward dV, dP, dQ, dK
		wantNominal := 6 * product * float64(tc.H)
		// fused: forward Q Kᵀ, P V; backward recomputes Q Kᵀ, then dV, dP, dQ, dK
		wantExecuted := (2 + 5) * product * float64(tc.H)
		if tc.causal {
			wantExecuted /= 2
		}
		nominal, executed := attentionFlops(tc.n, tc.D, tc.H, tc.causal)
		if !near(nominal, wantNominal) || !near(executed, wantExecuted) {
			t.Errorf("n=%d D=%d H=%d causal=%v: nominal %g executed %g, want %g %g", tc.n, tc.D, tc.H, tc.causal, nominal, executed, wantNominal, wantExecuted)
		}
	}
	// docs/kernels.md's forms: 12·n²·D·H, 14·n²·D·H full, 7·n²·D·H causal
	n2DH := float64(1024 * 1024 * 64 * 8)
	if nom, ex := attentionFlops(1024, 64, 8, true); nom != 12*n2DH || ex != 7*n2DH {
		t.Errorf("causal: %g, %g", nom/n2DH, ex/n2DH)
	}
	if _, ex := attentionFlops(1024, 64, 8, false); ex != 14*n2DH {
		t.Errorf("full: %g", ex/n2DH)
	}
}

// TestDecodeBytes: 2·Hkv·context·D·4, the 4.2 MB of issue 16 at context
// 1024, H = 8, D = 64.
func TestDecodeBytes(t *testing.T) {
	if got := decodeBytes(8, 1024, 64); got != 4194304 {
		t.Errorf("decodeBytes(8, 1024, 64) = %g, want 4194304", got)
	}
	if got := decodeBytes(8, 8192, 128); got != 2*8*8192*128*4 {
		t.Errorf("GQA: %g", got)
	}
	if streamBytes("read", 1<<28) != 1<<28 || streamBytes("copy", 1<<28) != 1<<29 {
		t.Errorf("stream bytes: read %g, copy %g", streamBytes("read", 1<<28), streamBytes("copy", 1<<28))
	}
}

// TestBenchDerive: rows built from made-up times, and every derived
// field against the numbers worked out by hand from the formulas.
func TestBenchDerive(t *testing.T) {
	g32 := gemmRow("float32", 1024, 0.01) // 2·1024³ / 0.01 s = 214.748 GFLOP/s
	g32.Torch = 250
	g64 := gemmRow("float64", 1024, 0.02)                  // 107.374 GFLOP/s
	s := streamRow("read", 256<<20, 1, 1, levelDRAM, 0.02) // 268435456 B / 0.02 s = 13.422 GB/s
	s.Torch = 12
	c := streamRow("copy", 256<<20, 2, 1, levelDRAM, 0.025) // 2·268435456 / 0.025 = 21.475 GB/s
	a := attentionRow(attnCase{dtype: "float32", n: 1024, H: 8, D: 64, causal: true, shortName: true}, 0.1)
	a.Torch = 20
	af := attentionRow(attnCase{dtype: "float32", n: 1024, H: 8, D: 64}, 0.1)
	d := decodeRow(decodeCase{ctx: 1024, Hq: 8, Hkv: 8, D: 64}, 200e-6)
	d.Torch = 400
	// 128 passes over 512 KiB = 64 MiB in 0.5 ms: 134.218 GB/s
	l2 := streamRow("read", 512<<10, 2, 128, levelL2, 0.0005)
	// 8 passes over 8 MiB = 64 MiB in 1 ms: 67.109 GB/s
	l3 := streamRow("read", 8<<20, 2, 8, levelL3, 0.001)
	d3 := decodeRow(decodeCase{ctx: 1024, Hq: 8, Hkv: 8, D: 64}, 100e-6)
	d3.Level = levelL3
	rows := []Row{g32, g64, s, c, a, af, d, l2, l3, d3}

	cl := ceilings(rows)
	if cl.SGEMM != 250 || !near(cl.DGEMM, 107.3741824) || !near(cl.MemoryBandwidth, 21.47483648) || !near(cl.ReadBandwidth, 13.4217728) ||
		!near(cl.L2Read, 134.217728) || !near(cl.L3Read, 67.108864) {
		t.Fatalf("ceilings %+v, want SGEMM 250 (PyTorch's), DGEMM 107.374, bandwidth 21.475 (the copy), read 13.422 (DRAM), L2 134.218, L3 67.109", cl)
	}
	if l2.Case != "read float32 512 KiB (L2), 2 threads" || l3.Case != "read float32 8 MiB (L3), 2 threads" || s.Case != "read float32 256 MiB, 1 thread" {
		t.Errorf("stream cases %q %q %q", l2.Case, l3.Case, s.Case)
	}
	derive(rows, cl)
	g32, g64, a, af, d, d3 = rows[0], rows[1], rows[4], rows[5], rows[6], rows[9]
	if a.Case != "float32 n=1024" || af.Case != "float32 n=1024 D=64 full" || d.Case != "float32 context=1024" {
		t.Errorf("case names %q %q %q", a.Case, af.Case, d.Case)
	}
	for _, x := range []struct {
		name      string
		got, want float64
	}{
		{"gemm f32 rate", g32.Ours, 214.7483648},
		{"gemm f32 efficiency", g32.Efficiency, 214.7483648 / 250},
		{"gemm f32 torch efficiency", g32.TorchEfficiency, 1},
		{"gemm f64 efficiency", g64.Efficiency, 1},
		// 12·1024²·64·8 = 6.442e9 flops in 0.1 s
		{"attention nominal", a.Ours, 64.42450944},
		// 7·1024²·64·8 = 3.758e9 executed flops in 0.1 s
		{"attention executed", a.Executed, 37.58096384},
		{"attention efficiency", a.Efficiency, 37.58096384 / 250},
		{"attention torch executed", a.TorchExecuted, 20},
		{"attention torch efficiency", a.TorchEfficiency, 20.0 / 250},
		// 14·1024²·64·8 in 0.1 s
		{"attention full executed", af.Executed, 75.16192768},
		// 4194304 B in 200 µs = 20.97 GB/s; PyTorch in 400 µs
		{"decode bandwidth", d.Bandwidth, 20.97152},
		{"decode efficiency", d.Efficiency, 20.97152 / 13.4217728}, // of the read ceiling: decoding only reads
		{"decode torch bandwidth", d.TorchBandwidth, 10.48576},
		{"decode torch efficiency", d.TorchEfficiency, 10.48576 / 13.4217728},
		// the same bytes in 100 µs, against the L3 ceiling
		{"decode L3 bandwidth", d3.Bandwidth, 41.94304},
		{"decode L3 efficiency", d3.Efficiency, 41.94304 / 67.108864},
	} {
		if !near(x.got, x.want) {
			t.Errorf("%s = %.10g, want %.10g", x.name, x.got, x.want)
		}
	}
	if d.Ours != 200 || d.Unit != "µs/token" || d.Level != levelDRAM {
		t.Errorf("decode row %v %s %s", d.Ours, d.Unit, d.Level)
	}
	// a level whose ceiling was not measured falls back to DRAM's
	d2 := decodeRow(decodeCase{ctx: 1024, Hq: 8, Hkv: 8, D: 64}, 200e-6)
	d2.Level = levelL2
	rows = []Row{d2}
	derive(rows, Ceilings{ReadBandwidth: 13.4217728})
	if rows[0].Level != levelDRAM || !near(rows[0].Efficiency, 20.97152/13.4217728) {
		t.Errorf("no L2 ceiling: level %s, efficiency %v", rows[0].Level, rows[0].Efficiency)
	}
}

// TestForwardFlops: 4·n²·D·H nominal, half of it executed under a causal
// mask; the GQA case names its heads.
func TestForwardFlops(t *testing.T) {
	nom, ex := forwardFlops(1024, 64, 8, true)
	if want := 2 * 2 * float64(1024*1024*64) * 8; nom != want || ex != want/2 {
		t.Errorf("causal: %g %g", nom, ex)
	}
	if nom, ex := forwardFlops(1024, 64, 8, false); nom != ex {
		t.Errorf("full: %g %g", nom, ex)
	}
	r := forwardRow(attnCase{dtype: "float32", n: 2048, H: 8, Hkv: 2, D: 64, causal: true}, 0.5)
	if r.Case != "float32 n=2048 D=64 causal Hq=8 Hkv=2" || r.Group != "attention fwd" || !near(r.Ours, 4*2048*2048*64*8/0.5/1e9) {
		t.Errorf("%+v", r)
	}
	cs := forwardCases(4096)
	if len(cs) != 4*4+2 || cs[len(cs)-1].kvHeads() != 2 || cs[0].kvHeads() != 8 {
		t.Errorf("%d cases: %+v", len(cs), cs)
	}
}

// TestRowJSON: the fields of the first bench output keep their names; the
// derived ones are left out where they do not apply.
func TestRowJSON(t *testing.T) {
	data, err := json.Marshal(Row{Group: "gemm", Case: "float32 n=256", Unit: "GFLOP/s", Ours: 1, Torch: 2, Ratio: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(data, &m)
	for _, k := range []string{"group", "case", "unit", "attnlab", "torch", "ratio"} {
		if _, ok := m[k]; !ok {
			t.Errorf("no %q in %s", k, data)
		}
	}
	for _, k := range []string{"executed_gflops", "bandwidth_gbs", "efficiency", "error"} {
		if _, ok := m[k]; ok {
			t.Errorf("%q in %s", k, data)
		}
	}
}

func TestCompareTokens(t *testing.T) {
	if err := compareTokens([]int{1, 2, 3}, []int{1, 2, 3}); err != nil {
		t.Error(err)
	}
	err := compareTokens([]int{1, 2, 3}, []int{1, 5, 3})
	if err == nil || !strings.Contains(err.Error(), "new token 1 of 3: attnlab 2, PyTorch 5") {
		t.Errorf("a differing token: %v", err)
	}
	if compareTokens([]int{1, 2, 3}, []int{1, 2}) == nil {
		t.Error("a shorter continuation passed")
	}
	row := Row{Group: "generate", Case: "c", Ours: 100}
	fillGenerate(&row, []int{7, 8}, []int{7, 9}, []float64{0.04, 0.02, 0.03}, 2)
	if row.Torch != 2/0.03 || row.Error == "" {
		t.Errorf("fillGenerate: torch %v, error %q", row.Torch, row.Error)
	}
	if err := (&Report{Rows: []Row{row}}).Err(); err == nil {
		t.Error("Report.Err is nil with a row error")
	}
}

// TestBenchStopsOnCancel: an interrupt in the middle of a long run returns
// the context's error at once, not after the measurements left.
func TestBenchStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Run(ctx, Options{Seconds: 5, MaxN: 4096})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run: %v, want the context's error", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Run returned %v after the start, 300 ms after which it was cancelled", d)
	}
}

// TestVariantRows: a row per variant, a finite positive ratio to plain
// attention, and configurations that really have the variant on.
func TestVariantRows(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the fused kernel at n = 1024")
	}
	rows := variantRows(context.Background(), time.Millisecond)
	if len(rows) != len(VariantNames) {
		t.Fatalf("%d rows, want %d", len(rows), len(VariantNames))
	}
	for x, r := range rows {
		if !strings.HasSuffix(r.Case, "+"+VariantNames[x]) || !(r.Ours > 0) || math.IsInf(r.Ours, 0) {
			t.Errorf("row %+v", r)
		}
	}
	if c := variantConfig("plain"); !c.Plain() {
		t.Error("the plain configuration has a variant on")
	}
	for _, v := range VariantNames {
		if c := variantConfig(v); c.Plain() || c.Validate() != nil {
			t.Errorf("%s: %+v", v, c)
		}
	}
}
