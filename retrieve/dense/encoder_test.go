package dense

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/attnlab/attnlab/gradcheck"
	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/nn"
	"github.com/attnlab/attnlab/train"
)

func tinyConfig() model.Config {
	return model.Config{HiddenSize: 8, IntermediateSize: 12, NumHiddenLayers: 2, NumAttentionHeads: 2, NumKeyValueHeads: 1,
		RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: 23, MaxPositionEmbeddings: 32, TieWordEmbeddings: true}
}

func tinyEncoder[T float32 | float64](t *testing.T, seed uint64) *Encoder[T] {
	t.Helper()
	m, err := model.New[T](tinyConfig())
	if err != nil {
		t.Fatal(err)
	}
	p := m.NewParams()
	m.Init(p, 0.3, seed)
	return &Encoder[T]{Model: m, Params: p}
}

// dualLoss is the loss of a training step in float64, written out: each
// sequence encoded alone at padded length Tn, mean-pooled, normalised, then
// InfoNCE with the given mask. It returns the loss and a function that runs
// the backward into g.
func dualLoss(e *Encoder[float64], queries, docs [][]int, Tn int, tau float64, sym bool, mask []bool) (float64, func(g *model.Params[float64]), error) {
	D := e.Model.Config.HiddenSize
	all := append(append([][]int{}, queries...), docs...)
	acts := make([]*Acts[float64], len(all))
	pooled := make([]float64, len(all)*D)
	for x, s := range all {
		acts[x] = e.NewActs(1, Tn)
		if err := e.Forward(acts[x], [][]int{s}); err != nil {
			return 0, nil, err
		}
		nn.MeanPool[float64]{D: D}.Forward(pooled[x*D:(x+1)*D], acts[x].Out, acts[x].Valid, 1, Tn)
	}
	nrm := nn.L2Norm[float64]{D: D, Eps: 1e-12}
	emb, norms := make([]float64, len(pooled)), make([]float64, len(all))
	nrm.Forward(emb, norms, pooled, len(all))
	B, N := len(queries), len(docs)
	c := nn.InfoNCE[float64]{B: B, N: N, D: D, Symmetric: sym}
	la := c.NewActs()
	l := c.Forward(la, emb[:B*D], emb[B*D:], tau, mask)
	back := func(g *model.Params[float64]) {
		demb := make([]float64, len(emb))
		c.Backward(demb[:B*D], demb[B*D:], nil, 1, emb[:B*D], emb[B*D:], tau, mask, la)
		dp := make([]float64, len(pooled))
		nrm.Backward(dp, demb, emb, norms, len(all))
		for x, a := range acts {
			dOut := make([]float64, len(a.Out))
			nn.MeanPool[float64]{D: D}.Backward(dOut, dp[x*D:(x+1)*D], a.Valid, 1, Tn)
			e.Backward(g, a, dOut)
		}
	}
	return l, back, nil
}

// TestDualEncoderGrad differentiates the whole training loss (encoder with
// bidirectional, padded attention, pooling, normalisation, InfoNCE with a
// mask and a hard negative) with respect to every weight, in float64.
func TestDualEncoderGrad(t *testing.T) {
	for _, tc := range []struct{ sym, causal bool }{{false, false}, {true, false}, {true, true}} {
		sym := tc.sym
		t.Run(fmt.Sprintf("symmetric=%v/causal=%v", sym, tc.causal), func(t *testing.T) {
			e := tinyEncoder[float64](t, 3)
			e.Causal = tc.causal
			queries := [][]int{{1, 2, 3}, {4, 5}, {6, 7, 8, 9}}
			docs := [][]int{{10, 11, 12, 13, 14}, {15, 16}, {17, 18, 19, 20, 21, 22, 1}, {2, 4, 6}}
			mask := make([]bool, 3*4)
			mask[1*4+3] = true // document 3 is a false negative of query 1
			loss := func() float64 {
				l, _, err := dualLoss(e, queries, docs, 8, 0.5, sym, mask)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			_, back, err := dualLoss(e, queries, docs, 8, 0.5, sym, mask)
			if err != nil {
				t.Fatal(err)
			}
			g := e.Model.NewParams()
			back(g)
			var params []gradcheck.Param
			pt, gt := e.Model.Tensors(e.Params), e.Model.Tensors(g)
			for i := range pt {
				params = append(params, gradcheck.Param{Name: pt[i].Name, X: pt[i].Data, Grad: gt[i].Data})
			}
			// ε = 2e-4: weights drawn with std 0.3 make the loss curved
			// enough that the 4-point stencil's ε⁴ error shows at 1e-3
			rep := gradcheck.Check(loss, params, gradcheck.Options{Precise: true, Eps: 2e-4, Abs: 1e-10, Rel: 1e-7, MaxPerParam: 40})
			if err := rep.Err(); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d elements, max rel %.1e", rep.Checked, rep.MaxRel)
		})
	}
}

// TestPaddingInvariance: a sequence's token vectors and embedding do not
// depend on how far it is padded, and padding gets no gradient.
func TestPaddingInvariance(t *testing.T) {
	e := tinyEncoder[float64](t, 5)
	s := []int{3, 1, 4, 1, 5}
	D := e.Model.Config.HiddenSize
	var ref []float64
	for _, Tn := range []int{5, 8, 16} {
		a := e.NewActs(1, Tn)
		if err := e.Forward(a, [][]int{s}); err != nil {
			t.Fatal(err)
		}
		out := a.Out[:len(s)*D]
		if ref == nil {
			ref = append([]float64(nil), out...)
			continue
		}
		for i := range out {
			if math.Abs(out[i]-ref[i]) > 1e-12 {
				t.Fatalf("T=%d: token vector %d differs by %g", Tn, i/D, out[i]-ref[i])
			}
		}
	}
	// the two paddings of a batch row: a batch of 2 gives the same as alone
	a := e.NewActs(2, 8)
	if err := e.Forward(a, [][]int{{7, 7}, s}); err != nil {
		t.Fatal(err)
	}
	for i := range ref {
		if math.Abs(a.Out[8*D+i]-ref[i]) > 1e-12 {
			t.Fatalf("batched: token vector %d differs", i/D)
		}
	}
}

// TestTrainerLearns trains on a toy task (each query is its code's tokens
// shuffled) and expects the in-batch accuracy to rise.
func TestTrainerLearns(t *testing.T) {
	if testing.Short() {
		t.Skip("trains for a few seconds")
	}
	cfg := tinyConfig()
	cfg.HiddenSize, cfg.IntermediateSize, cfg.NumAttentionHeads, cfg.NumKeyValueHeads = 16, 32, 2, 2
	cfg.VocabSize = 64
	m, err := model.New[float32](cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := m.NewParams()
	m.Init(p, 0.02, 1)
	enc := &Encoder[float32]{Model: m, Params: p}
	d := &Data{}
	for i := range 64 {
		code := []int{i % 64, (i * 7) % 64, (i * 13) % 64, (i*29 + 1) % 64}
		d.Codes = append(d.Codes, code)
		d.Queries = append(d.Queries, []int{code[2], code[0], code[3]})
		d.Keys = append(d.Keys, fmt.Sprint(code))
		d.QueryText = append(d.QueryText, fmt.Sprint(i))
		d.Negatives = append(d.Negatives, []int{(i + 1) % 64})
	}
	tr, err := NewTrainer(enc, d, Options{Batch: 16, HardNegatives: 1, Tau: 0.1,
		Schedule: train.Schedule{Peak: 3e-3, Min: 3e-4, Warmup: 10, Total: 150}, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Clip: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var first, last float64
	for s := range 150 {
		r, err := tr.TrainStep()
		if err != nil {
			t.Fatal(err)
		}
		if s < 10 {
			first += r.Loss / 10
		}
		if s >= 140 {
			last += r.Loss / 10
		}
	}
	if !(last < first/2) {
		t.Errorf("loss %.3f over the first 10 steps, %.3f over the last 10: want it halved", first, last)
	}
}

// TestSegmentsEncodeApart: in the isolated blocks each part of a sequence
// is encoded as if alone (RoPE sees only position differences), so with
// every block isolated the parts' token vectors are those of separate
// passes; with one block shared they are not.
func TestSegmentsEncodeApart(t *testing.T) {
	e := tinyEncoder[float64](t, 7)
	D := e.Model.Config.HiddenSize
	query, code := []int{3, 1, 4}, []int{1, 5, 9, 2, 6}
	seq := append(append(append([]int{}, query...), 22), code...)
	segs := []int{0, 0, 0, 2, 1, 1, 1, 1, 1}
	alone := func(s []int) []float64 {
		a := e.NewActs(1, 16)
		if err := e.Forward(a, [][]int{s}); err != nil {
			t.Fatal(err)
		}
		return a.Out[:len(s)*D]
	}
	wantQ, wantC := alone(query), alone(code)
	diff := func(isolated int) float64 {
		e.Isolated = isolated
		a := e.NewActs(1, 16)
		if err := e.ForwardSegments(a, [][]int{seq}, [][]int{segs}); err != nil {
			t.Fatal(err)
		}
		var worst float64
		for i, v := range wantQ {
			worst = max(worst, math.Abs(a.Out[i]-v))
		}
		for i, v := range wantC {
			worst = max(worst, math.Abs(a.Out[(len(query)+1)*D+i]-v))
		}
		return worst
	}
	if d := diff(2); d > 1e-12 {
		t.Errorf("every block isolated: parts differ from separate passes by %.3g", d)
	}
	if d := diff(1); d < 1e-6 {
		t.Errorf("one block shared: parts equal separate passes (max difference %.3g): the parts never met", d)
	}
	if err := e.ForwardSegments(e.NewActs(1, 16), [][]int{seq}, [][]int{segs[:4]}); err == nil {
		t.Error("segments shorter than the sequence: no error")
	}
}

// TestSegmentsGrad differentiates a loss through ForwardSegments, with one
// isolated block, with respect to every weight in float64; and shows the
// check fails when the backward sees other masks than the forward did (the
// isolated blocks' backward run with attention across parts).
func TestSegmentsGrad(t *testing.T) {
	e := tinyEncoder[float64](t, 11)
	e.Isolated = 1
	seq := []int{3, 1, 4, 22, 1, 5, 9, 2}
	segs := []int{0, 0, 0, 2, 1, 1, 1, 1}
	D := e.Model.Config.HiddenSize
	g := make([]float64, 8*D) // a fixed random readout of every token vector
	for i := range g {
		g[i] = math.Sin(float64(3*i + 1))
	}
	a := e.NewActs(1, 8)
	loss := func() float64 {
		if err := e.ForwardSegments(a, [][]int{seq}, [][]int{segs}); err != nil {
			t.Fatal(err)
		}
		var l float64
		for i, v := range a.Out {
			l += v * g[i]
		}
		return l
	}
	check := func(backIsolated int) error {
		loss()
		e.Isolated = backIsolated
		grads := e.Model.NewParams()
		e.Backward(grads, a, g)
		e.Isolated = 1
		var params []gradcheck.Param
		pt, gt := e.Model.Tensors(e.Params), e.Model.Tensors(grads)
		for i := range pt {
			params = append(params, gradcheck.Param{Name: pt[i].Name, X: pt[i].Data, Grad: gt[i].Data})
		}
		return gradcheck.Check(loss, params, gradcheck.Options{Precise: true, Eps: 2e-4, Abs: 1e-10, Rel: 1e-7, MaxPerParam: 30}).Err()
	}
	if err := check(1); err != nil {
		t.Fatal(err)
	}
	if err := check(0); err == nil {
		t.Error("a backward that lets the parts attend to each other in the isolated block passed the finite-difference check")
	}
}

// TestCausalEncoder: with Causal, a token's vector depends on the tokens
// before it only, so appending tokens leaves it unchanged; without, it
// changes.
func TestCausalEncoder(t *testing.T) {
	for _, causal := range []bool{false, true} {
		e := tinyEncoder[float64](t, 5)
		e.Causal = causal
		short, long := []int{3, 1, 4, 1, 5}, []int{3, 1, 4, 1, 5, 9, 2, 6}
		a := e.NewActs(2, len(long))
		if err := e.Forward(a, [][]int{short, long}); err != nil {
			t.Fatal(err)
		}
		D := e.Model.Config.HiddenSize
		var diff float64
		for x := range len(short) * D {
			diff = max(diff, math.Abs(a.Out[x]-a.Out[len(long)*D+x]))
		}
		if causal && diff > 1e-12 {
			t.Errorf("causal: appending tokens changed the first tokens' vectors by %.2g", diff)
		}
		if !causal && diff < 1e-6 {
			t.Errorf("bidirectional: appending tokens left the first tokens' vectors unchanged (%.2g)", diff)
		}
	}
}

// TestForwardActs: activations that keep no block's intermediates give the
// same token vectors as the full ones, bit for bit, and refuse a backward.
func TestForwardActs(t *testing.T) {
	e := tinyEncoder[float32](t, 3)
	seqs := [][]int{{1, 5, 7, 2}, {3, 9}}
	full, fwd := e.NewActs(2, 4), e.NewForwardActs(2, 4)
	if err := e.Forward(full, seqs); err != nil {
		t.Fatal(err)
	}
	if err := e.Forward(fwd, seqs); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(full.Out, fwd.Out) {
		t.Errorf("forward-only activations: %v, want %v", fwd.Out, full.Out)
	}
	defer func() {
		if recover() == nil {
			t.Errorf("Backward of forward-only activations did not panic")
		}
	}()
	e.Backward(e.Model.NewParams(), fwd, make([]float32, len(fwd.Out)))
}
