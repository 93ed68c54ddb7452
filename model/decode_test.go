package model

import (
	"math"
	"runtime"
	"slices"
	"testing"

	"github.com/attnlab/attnlab/nn"
)

func maxDiff(a, b []float64) float64 {
	var d float64
	for i := range a {
		d = max(d, math.Abs(a[i]-b[i]))
	}
	return d
}

// TestDecodingAgrees: the full pass, token-by-token decoding and chunked
// decoding give the same logits.
func TestDecodingAgrees(t *testing.T) {
	m, _ := New[float64](tinyConfig(false))
	p := m.NewParams()
	m.Init(p, 0.5, 2)
	tokens := []int{1, 5, 9, 2, 2, 7, 0, 3, 10, 4, 6, 8, 1, 3}
	const B, T = 2, 7
	a := m.NewActs(B, T)
	if _, _, err := m.Forward(a, p, &Batch{B: B, T: T, Tokens: tokens}); err != nil {
		t.Fatal(err)
	}
	V := m.Config.VocabSize
	for _, sizes := range [][]int{{1, 1, 1, 1, 1, 1, 1}, {2, 2, 2, 1}, {3, 3, 1}, {5, 2}, {7}, {1, 2, 3, 1}} {
		cache := m.NewCache(B, 9)
		got := make([]float64, B*T*V)
		start := 0
		for _, M := range sizes {
			chunk := make([]int, 0, B*M)
			for b := range B {
				chunk = append(chunk, tokens[b*T+start:b*T+start+M]...)
			}
			logits := make([]float64, B*M*V)
			if err := m.Step(logits, cache, p, chunk, nil, M); err != nil {
				t.Fatal(err)
			}
			for b := range B {
				copy(got[(b*T+start)*V:(b*T+start+M)*V], logits[b*M*V:(b+1)*M*V])
			}
			start += M
		}
		if d := maxDiff(got, a.Logits); d > 1e-12 {
			t.Errorf("chunks %v: max |Δlogit| = %.2g", sizes, d)
		}
	}
}

// TestCacheBytesShrinkWithGQA measures what NewCache allocates (the Go
// runtime's count, not a formula) for MHA, GQA and MQA: the K/V storage
// shrinks by Hq/Hkv.
func TestCacheBytesShrinkWithGQA(t *testing.T) {
	measure := func(hkv int) uint64 {
		cfg := tinyConfig(false)
		cfg.HiddenSize, cfg.NumKeyValueHeads = 256, hkv // head dimension 64
		m, _ := New[float32](cfg)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		c := m.NewCache(4, 4096)
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(c)
		return after.TotalAlloc - before.TotalAlloc
	}
	mha := measure(4)
	for _, hkv := range []int{2, 1} {
		got := measure(hkv)
		// the per-slot positions and validity (9 bytes a slot) do not shrink
		ratio := float64(mha) / float64(got)
		t.Logf("Hkv=%d: %d bytes, MHA/this = %.2f (Hq/Hkv = %d)", hkv, got, ratio, 4/hkv)
		if want := float64(4 / hkv); ratio < 0.98*want || ratio > 1.02*want {
			t.Errorf("Hkv=%d: cache %d bytes, MHA %d: ratio %.2f, want about %v", hkv, got, mha, ratio, want)
		}
	}
}

// TestDecodingAgreesFloat32: the same in float32, to 1e-4 on the logits.
func TestDecodingAgreesFloat32(t *testing.T) {
	m, _ := New[float32](tinyConfig(false))
	p := m.NewParams()
	m.Init(p, 0.5, 2)
	tokens := []int{1, 5, 9, 2, 2, 7, 0}
	a := m.NewActs(1, 7)
	if _, _, err := m.Forward(a, p, &Batch{B: 1, T: 7, Tokens: tokens}); err != nil {
		t.Fatal(err)
	}
	V := m.Config.VocabSize
	for _, sizes := range [][]int{{1, 1, 1, 1, 1, 1, 1}, {3, 3, 1}, {5, 2}} {
		cache := m.NewCache(1, 7)
		var got []float32
		start := 0
		for _, M := range sizes {
			logits := make([]float32, M*V)
			if err := m.Step(logits, cache, p, tokens[start:start+M], nil, M); err != nil {
				t.Fatal(err)
			}
			got = append(got, logits...)
			start += M
		}
		var d float64
		for i := range got {
			d = max(d, math.Abs(float64(got[i]-a.Logits[i])))
		}
		if d > 1e-4 {
			t.Errorf("chunks %v: max |Δlogit| = %.2g", sizes, d)
		}
	}
}

// TestStepAllocatesNothing: once the cache's working memory is warm, a
// decoding step (one token, or a chunk of a few) allocates nothing, on one
// thread or two.
func TestStepAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop entries: allocations are not counted")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2} {
		runtime.GOMAXPROCS(procs)
		wide := Config{HiddenSize: 256, IntermediateSize: 512, NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2,
			RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: 4096, MaxPositionEmbeddings: 64} // products split across threads
		for _, tc := range []struct {
			c Config
			M int
		}{{tinyConfig(true), 1}, {tinyConfig(true), 4}, {wide, 1}, {wide, 4}} {
			M := tc.M
			m, _ := New[float32](tc.c)
			p := m.NewParams()
			m.Init(p, 0.5, 2)
			const B, steps = 2, 6
			cache := m.NewCache(B, (steps+2)*M)
			logits := make([]float32, B*M*m.Config.VocabSize)
			tokens := make([]int, B*M)
			step := func() {
				if err := m.Step(logits, cache, p, tokens, nil, M); err != nil {
					t.Fatal(err)
				}
			}
			step()
			step()
			if n := testing.AllocsPerRun(steps-1, step); n != 0 {
				t.Errorf("GOMAXPROCS=%d hidden=%d M=%d: %v allocations per step", procs, tc.c.HiddenSize, M, n)
			}
		}
	}
}

// TestStepLastIsStep: StepLast's logits are the bits Step writes for the
// last LastRows(M) positions of each row, float32 and float64, one and two
// rows (one left-padded), chunks shorter and longer than vec.PackedMinRows,
// a vocabulary wide enough for the packed products; and the cache is
// extended the same way (the next step's logits agree too).
func TestStepLastIsStep(t *testing.T) {
	t.Run("float32", func(t *testing.T) { testStepLast[float32](t) })
	t.Run("float64", func(t *testing.T) { testStepLast[float64](t) })
}

func testStepLast[T nn.Float](t *testing.T) {
	c := Config{HiddenSize: 32, IntermediateSize: 48, NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2,
		RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: 300, MaxPositionEmbeddings: 128, TieWordEmbeddings: true}
	m, err := New[T](c)
	if err != nil {
		t.Fatal(err)
	}
	p := m.NewParams()
	m.Init(p, 0.3, 7)
	V := c.VocabSize
	for _, B := range []int{1, 2} {
		for _, M := range []int{1, 5, 9, 10, 40} {
			tokens, valid := make([]int, B*M), make([]bool, B*M)
			for i := range tokens {
				tokens[i] = (i*37 + 5) % V
				valid[i] = i >= M || i >= M/3 // row 0 left-padded
			}
			full := m.NewCache(B, M+1)
			want := make([]T, B*M*V)
			if err := m.Step(want, full, p, tokens, valid, M); err != nil {
				t.Fatal(err)
			}
			last := m.NewCache(B, M+1)
			rows := LastRows(M)
			got := make([]T, B*rows*V)
			if err := m.StepLast(got, last, p, tokens, valid, M); err != nil {
				t.Fatal(err)
			}
			for b := range B {
				for r := range rows {
					w := want[(b*M+M-rows+r)*V:][:V]
					g := got[(b*rows+r)*V:][:V]
					for i := range w {
						if w[i] != g[i] && !(w[i] != w[i] && g[i] != g[i]) {
							t.Fatalf("B=%d M=%d: row %d position %d logit %d: %v, Step %v", B, M, b, M-rows+r, i, g[i], w[i])
						}
					}
				}
			}
			next := []int{3, 4}[:B]
			a, z := make([]T, B*V), make([]T, B*V)
			if err := m.Step(a, full, p, next, nil, 1); err != nil {
				t.Fatal(err)
			}
			if err := m.Step(z, last, p, next, nil, 1); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(a, z) {
				t.Fatalf("B=%d M=%d: the step after StepLast differs from the step after Step", B, M)
			}
		}
	}
}
