package rerank

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/gradcheck"
	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/nn"
	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/retrieve/dense"
	"github.com/attnlab/attnlab/safetensors"
	"github.com/attnlab/attnlab/train"
)

var words = strings.Fields("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec romeo sierra tango")

// pairs returns n pairs whose queries share two words with their own code
// and none with the others'.
func pairs(n int) []retrieve.Pair {
	var ps []retrieve.Pair
	for i := range n {
		a, b := words[i%len(words)], words[(i*7+3)%len(words)]
		ps = append(ps, retrieve.Pair{
			ID:      fmt.Sprintf("p.F%d", i),
			Query:   fmt.Sprintf("reports the %s of the %s", a, b),
			Code:    fmt.Sprintf("func F%d(x %sThing) int {\n\treturn x.%s\n}", i, strings.ToUpper(b[:1])+b[1:], a),
			Package: "p", File: "p/f.go", Line: 1 + 3*i,
		})
	}
	return ps
}

func tinyDense(t testing.TB, ps []retrieve.Pair) *dense.Model {
	t.Helper()
	s := dense.Settings{Text: dense.TextTerms, MaxQuery: 12, MaxCode: 24, Tau: 0.05}
	tok, err := dense.TrainTokenizer(ps, 300, s)
	if err != nil {
		t.Fatal(err)
	}
	cfg := model.Config{HiddenSize: 16, IntermediateSize: 24, NumHiddenLayers: 2, NumAttentionHeads: 2, NumKeyValueHeads: 1,
		RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: tok.VocabSize(), MaxPositionEmbeddings: 32, TieWordEmbeddings: true}
	m, err := dense.New(cfg, tok, s, 0.1, 1)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func tinyReranker(t testing.TB, ps []retrieve.Pair) *Model {
	t.Helper()
	r, err := FromDense(tinyDense(t, ps), 12, 24, 1, false, 0.1, 2)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// trainSteps trains m for steps steps of 4 groups of 3 on ps, every other
// pair a negative.
func trainSteps(t *testing.T, m *Model, ps []retrieve.Pair, steps int) {
	t.Helper()
	tr, err := NewTrainer(m, NewData(m, ps, allNegatives(len(ps))), options(4, 3, steps))
	if err != nil {
		t.Fatal(err)
	}
	for range steps {
		if _, err := tr.TrainStep(); err != nil {
			t.Fatal(err)
		}
	}
}

func allNegatives(n int) [][]int {
	negs := make([][]int, n)
	for i := range negs {
		for j := range n {
			if j != i {
				negs[i] = append(negs[i], j)
			}
		}
	}
	return negs
}

func options(G, K int, steps int) Options {
	return Options{Groups: G, Candidates: K, Schedule: train.Schedule{Peak: 3e-3, Min: 3e-4, Warmup: 5, Total: steps},
		Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WD: 0, Clip: 1, Seed: 1}
}

// crossLoss is the reranker's training loss in float64, written out: each
// pair sequence encoded alone at padded length Tn and pooled (PairPool, the
// query ending at the first sep), then the
// listwise loss of each group (the positive first; nil sequences are
// invalid candidates), averaged over groups. It returns the loss and a
// function that runs the backward into g and dw.
//
// extra, if not nil, gives constant features appended to each sequence's
// pooled vector (extra[g][k]), weighed by the tail of w.
func crossLoss(e *dense.Encoder[float64], w []float64, groups [][][]int, extra [][][]float64, sep, Tn int) (float64, func(g *model.Params[float64], dw []float64)) {
	D := e.Model.Config.HiddenSize
	G, K := len(groups), len(groups[0])
	F := len(w)
	head := nn.Listwise[float64]{G: 1, K: K, D: F}
	pool := nn.PairPool[float64]{D: D}
	type group struct {
		p     []float64
		valid []bool
		nq    [][]int
		acts  []*dense.Acts[float64]
		pa    []*nn.PairPoolActs[float64]
		la    *nn.ListwiseActs[float64]
	}
	var gs []group
	var loss float64
	for g, seqs := range groups {
		gr := group{p: make([]float64, K*F), valid: make([]bool, K), nq: make([][]int, K), acts: make([]*dense.Acts[float64], K),
			pa: make([]*nn.PairPoolActs[float64], K), la: head.NewActs()}
		for k, s := range seqs {
			if s == nil {
				continue
			}
			gr.valid[k] = true
			gr.acts[k] = e.NewActs(1, Tn)
			gr.nq[k] = []int{slices.Index(s, sep)}
			segs := make([]int, len(s))
			for t := gr.nq[k][0]; t < len(s); t++ {
				segs[t] = min(t-gr.nq[k][0], 1) + 1 // the separator 1, the code 2
			}
			if err := e.ForwardSegments(gr.acts[k], [][]int{s}, [][]int{segs}); err != nil {
				panic(err)
			}
			gr.pa[k] = pool.NewActs(1)
			pool.Forward(gr.p[k*F:k*F+D], gr.pa[k], gr.acts[k].Out, gr.nq[k], gr.acts[k].Valid, 1, Tn)
			if extra != nil {
				copy(gr.p[k*F+D:(k+1)*F], extra[g][k])
			}
		}
		loss += head.Forward(gr.la, gr.p, w, gr.valid)
		gs = append(gs, gr)
	}
	back := func(g *model.Params[float64], dw []float64) {
		for _, gr := range gs {
			dp := make([]float64, K*F)
			head.Backward(dp, dw, 1/float64(G), gr.p, w, gr.valid, gr.la)
			for k, a := range gr.acts {
				if a == nil {
					continue
				}
				dOut := make([]float64, len(a.Out))
				pool.Backward(dOut, dp[k*F:k*F+D], gr.nq[k], a.Valid, 1, Tn, gr.pa[k])
				e.Backward(g, a, dOut)
			}
		}
	}
	return loss / float64(G), back
}

func encoder64(t *testing.T, seed uint64) *dense.Encoder[float64] {
	t.Helper()
	cfg := model.Config{HiddenSize: 8, IntermediateSize: 12, NumHiddenLayers: 2, NumAttentionHeads: 2, NumKeyValueHeads: 1,
		RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: 23, MaxPositionEmbeddings: 32, TieWordEmbeddings: true}
	m, err := model.New[float64](cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := m.NewParams()
	m.Init(p, 0.3, seed)
	return &dense.Encoder[float64]{Model: m, Params: p}
}

// TestCrossEncoderGrad differentiates the reranker's whole training loss
// (pair sequences through the bidirectional encoder, pooling, the score
// head, the listwise loss with an invalid candidate, the mean over groups)
// with respect to every weight and the head, in float64.
func TestCrossEncoderGrad(t *testing.T) {
	for _, causal := range []bool{false, true} {
		t.Run(fmt.Sprintf("causal=%v", causal), func(t *testing.T) { testCrossEncoderGrad(t, causal) })
	}
}

func testCrossEncoderGrad(t *testing.T, causal bool) {
	e := encoder64(t, 3)
	e.Isolated = 1    // block 0 encodes the sides apart, block 1 compares them
	e.Causal = causal // the code side then reads the query, not the other way
	w := []float64{0.3, -0.2, 0.5, 0.1, -0.4, 0.2, 0.6, -0.1}
	const sep = 22
	groups := [][][]int{
		{{1, 2, sep, 3, 4, 5}, {1, 2, sep, 6, 7}, {1, 2, sep, 8, 9, 10, 11}},
		{{12, sep, 13, 14}, {12, sep, 15, 16, 17, 18, 19}, nil},
	}
	loss := func() float64 { l, _ := crossLoss(e, w, groups, nil, sep, 8); return l }
	_, back := crossLoss(e, w, groups, nil, sep, 8)
	g, dw := e.Model.NewParams(), make([]float64, len(w))
	back(g, dw)
	params := []gradcheck.Param{{Name: "score.weight", X: w, Grad: dw}}
	pt, gt := e.Model.Tensors(e.Params), e.Model.Tensors(g)
	for i := range pt {
		params = append(params, gradcheck.Param{Name: pt[i].Name, X: pt[i].Data, Grad: gt[i].Data})
	}
	rep := gradcheck.Check(loss, params, gradcheck.Options{Precise: true, Eps: 2e-4, Abs: 1e-10, Rel: 1e-7, MaxPerParam: 40})
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d elements, max rel %.1e", rep.Checked, rep.MaxRel)

	// The check can fail: the backward without the mean's 1/G is caught.
	g2, dw2 := e.Model.NewParams(), make([]float64, len(w))
	back(g2, dw2)
	for i := range dw2 {
		dw2[i] *= float64(len(groups))
	}
	bad := gradcheck.Check(loss, []gradcheck.Param{{Name: "score.weight", X: w, Grad: dw2}}, gradcheck.Options{Precise: true, Eps: 2e-4, Abs: 1e-10, Rel: 1e-7})
	if bad.Err() == nil {
		t.Fatal("a head gradient twice too large passed the finite-difference check")
	}
}

// TestTrainerGradient: the float32 trainer's gradient for one step equals
// the float64 composition of crossLoss at the same weights and groups.
func TestTrainerGradient(t *testing.T) {
	for _, lexical := range []bool{false, true} {
		t.Run(fmt.Sprintf("lexical=%v", lexical), func(t *testing.T) { testTrainerGradient(t, lexical) })
	}
}

func testTrainerGradient(t *testing.T, lexical bool) {
	ps := pairs(6)
	ps[2].Query = "reports the alpha of the " + strings.Fields(ps[2].Code)[2] // words found in other code
	m, err := FromDense(tinyDense(t, ps), 12, 24, 1, lexical, 0.1, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.W {
		m.W[i] = 0.1 * float32(i%5-2)
	}
	const K = 6 // every other pair is a negative: groups do not depend on the draw
	data := NewData(m, ps, allNegatives(len(ps)))
	if lexical {
		m.SetIDF(data.Codes)
	}
	o := options(len(ps), K, 10)
	o.Clip = 0
	tr, err := NewTrainer(m, data, o)
	if err != nil {
		t.Fatal(err)
	}
	// the reference, at the weights before the step
	cfg := m.Enc.Model.Config
	m64, err := model.New[float64](cfg)
	if err != nil {
		t.Fatal(err)
	}
	p64 := m64.NewParams()
	src, dst := m.Enc.Model.Tensors(m.Enc.Params), m64.Tensors(p64)
	for i := range src {
		for j, v := range src[i].Data {
			dst[i].Data[j] = float64(v)
		}
	}
	w64 := make([]float64, len(m.W))
	for i, v := range m.W {
		w64[i] = float64(v)
	}
	var groups [][][]int
	var extra [][][]float64
	Tn := 0
	for i := range ps {
		seqs := [][]int{m.Pair(data.Queries[i], data.Codes[i])}
		for _, j := range data.Negatives[i] {
			seqs = append(seqs, m.Pair(data.Queries[i], data.Codes[j]))
		}
		if lexical {
			var ex [][]float64
			for _, j := range append([]int{i}, data.Negatives[i]...) {
				f := make([]float32, NumLexical)
				m.lexical(f, data.Queries[i], data.Codes[j])
				ex = append(ex, []float64{float64(f[0]), float64(f[1])})
			}
			extra = append(extra, ex)
		}
		for _, s := range seqs {
			Tn = max(Tn, dense.Padded(len(s)))
		}
		groups = append(groups, seqs)
	}
	want, back := crossLoss(&dense.Encoder[float64]{Model: m64, Params: p64, Isolated: m.Enc.Isolated}, w64, groups, extra, m.sep, Tn)
	g64, dw64 := m64.NewParams(), make([]float64, len(w64))
	back(g64, dw64)

	res, err := tr.TrainStep()
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(res.Loss-want) > 1e-5*(1+math.Abs(want)) {
		t.Errorf("loss %.7g, float64 reference %.7g", res.Loss, want)
	}
	cmp := func(name string, got []float32, want []float64) {
		var scale float64
		for _, v := range want {
			scale = max(scale, math.Abs(v))
		}
		for i, v := range want {
			if d := math.Abs(float64(got[i]) - v); d > 1e-4*scale+1e-7 {
				t.Errorf("%s[%d] = %.6g, float64 reference %.6g (scale %.3g)", name, i, got[i], v, scale)
				return
			}
		}
	}
	cmp("score.weight", tr.dw, dw64)
	gt, rt := m.Enc.Model.Tensors(tr.grads), m64.Tensors(g64)
	for i := range gt {
		cmp(gt[i].Name, gt[i].Data, rt[i].Data)
	}
}

// TestTrainerLearns: on a task where each query shares words only with its
// own code, the listwise loss falls and the positive wins most groups.
func TestTrainerLearns(t *testing.T) {
	ps := pairs(16)
	m := tinyReranker(t, ps)
	negs := allNegatives(len(ps))
	negs[3] = nil // a query without negatives: its group is the positive and padding
	tr, err := NewTrainer(m, NewData(m, ps, negs), options(8, 4, 150))
	if err != nil {
		t.Fatal(err)
	}
	var first, last float64
	var acc float64
	for s := range 150 {
		res, err := tr.TrainStep()
		if err != nil {
			t.Fatal(err)
		}
		if s < 10 {
			first += res.Loss / 10
		}
		if s >= 140 {
			last += res.Loss / 10
			acc += res.Accuracy / 10
		}
	}
	t.Logf("loss %.3f → %.3f, accuracy %.2f", first, last, acc)
	if !(last < 0.5*first) || acc < 0.8 {
		t.Errorf("loss %.3f → %.3f, accuracy %.2f: want the loss halved and accuracy ≥ 0.8", first, last, acc)
	}
}

func TestSaveLoad(t *testing.T) {
	ps := pairs(8)
	m := tinyReranker(t, ps)
	trainSteps(t, m, ps, 3)
	dir := filepath.Join(t.TempDir(), "rr")
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	back, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if a, b := m.Score(p.Query, p.Code), back.Score(p.Query, p.Code); a != b {
			t.Fatalf("score %v after loading, %v before", b, a)
		}
	}
	// a dual encoder's checkpoint is not a reranker's
	ddir := filepath.Join(t.TempDir(), "dense")
	if err := tinyDense(t, ps).Save(ddir); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ddir); err == nil || !strings.Contains(err.Error(), "not a reranker checkpoint") {
		t.Errorf("loading a dual encoder: %v", err)
	}
	// a head of the wrong width
	os.WriteFile(filepath.Join(dir, SettingsFile), []byte(`{"text":"terms","max_query_tokens":12,"max_code_tokens":24,"separator":"<|nope|>","pooling":"pair-product"}`), 0o644)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "<|nope|>") {
		t.Errorf("unknown separator: %v", err)
	}
}

// first is a fixed first stage: documents in the order given, scored by
// their place in it.
type first []int

func (f first) Rank(_ string, k int) []int { return f[:min(k, len(f))] }
func (f first) Score(_ string, docs []int, scores []float64) {
	for i, d := range docs {
		scores[i] = -1
		for r, x := range f {
			if x == d {
				scores[i] = float64(len(f) - r)
			}
		}
	}
}

func TestRankerReordersTheTop(t *testing.T) {
	ps := pairs(8)
	m := tinyReranker(t, ps)
	trainSteps(t, m, ps, 5)
	codes := make([]string, len(ps))
	for i, p := range ps {
		codes[i] = p.Code
	}
	fs := first{7, 6, 5, 4, 3, 2, 1, 0}
	r := NewRanker(m, fs, codes, 4)
	q := ps[2].Query
	got := r.Rank(q, 8)
	// the top 4 of the first stage, ordered by the cross-encoder, then the rest as they were
	top := []int{7, 6, 5, 4}
	ce := make([]float64, 4)
	for i, d := range top {
		ce[i] = float64(m.Score(q, codes[d]))
	}
	order(top, ce)
	want := append(top, 3, 2, 1, 0)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Rank = %v, want %v", got, want)
	}
	// Score orders any candidate set the same way
	docs := []int{0, 5, 3, 7, 6, 1, 4, 2}
	scores := make([]float64, len(docs))
	r.Score(q, docs, scores)
	ranked := append([]int(nil), docs...)
	order(ranked, scores)
	if fmt.Sprint(ranked) != fmt.Sprint(want) {
		t.Fatalf("Score orders %v, want %v", ranked, want)
	}
	if got := r.Rank(q, 2); fmt.Sprint(got) != fmt.Sprint(want[:2]) {
		t.Errorf("Rank(k=2) = %v, want %v", got, want[:2])
	}

	// With Fuse the top 4 are ordered by 1/(60 + first-stage rank) +
	// 1/(60 + cross-encoder rank), ties to the first stage.
	r.Fuse = true
	byCE := []int{7, 6, 5, 4}
	order(byCE, []float64{ce[slices.Index(top, 7)], ce[slices.Index(top, 6)], ce[slices.Index(top, 5)], ce[slices.Index(top, 4)]})
	fused := []int{7, 6, 5, 4}
	rrf := make([]float64, 4)
	for i, d := range fused {
		rrf[i] = 1/(60+float64(i+1)) + 1/(60+float64(slices.Index(byCE, d)+1))
	}
	order(fused, rrf)
	want = append(fused, 3, 2, 1, 0)
	if got := r.Rank(q, 8); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("fused Rank = %v, want %v (cross-encoder order %v)", got, want, byCE)
	}
	r.Score(q, docs, scores)
	ranked = append([]int(nil), docs...)
	order(ranked, scores)
	if fmt.Sprint(ranked) != fmt.Sprint(want) {
		t.Errorf("fused Score orders %v, want %v", ranked, want)
	}

	// RankScored: Rank's order, with scores that fall strictly down it
	for _, k := range []int{8, 6, 2} {
		hits, sc := r.RankScored(q, k)
		if fmt.Sprint(hits) != fmt.Sprint(want[:k]) || len(sc) != k {
			t.Errorf("RankScored(k=%d) = %v, %v; want %v", k, hits, sc, want[:k])
		}
		for i := 1; i < len(sc); i++ {
			if !(sc[i] < sc[i-1]) {
				t.Errorf("RankScored(k=%d) scores %v do not fall down the list", k, sc)
				break
			}
		}
	}

	// With FuseWeight the top 4 are ordered by 0.4·(first-stage score) +
	// 0.6·(cross-encoder score), each rescaled to [0, 1] over the four: the
	// first stage scores them 8, 7, 6, 5 (type first), so 1, 2/3, 1/3, 0.
	r.FuseWeight = 0.4
	lo, hi := slices.Min(ce), slices.Max(ce)
	blended := []int{7, 6, 5, 4}
	bs := make([]float64, 4)
	for i, d := range blended { // top and ce are in the cross-encoder's order
		bs[i] = 0.4*float64(3-i)/3 + 0.6*(ce[slices.Index(top, d)]-lo)/(hi-lo)
	}
	order(blended, bs)
	want = append(blended, 3, 2, 1, 0)
	if got := r.Rank(q, 8); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("score-fused Rank = %v, want %v (blended scores %v)", got, want, bs)
	}
	r.Score(q, docs, scores)
	ranked = append([]int(nil), docs...)
	order(ranked, scores)
	if fmt.Sprint(ranked) != fmt.Sprint(want) {
		t.Errorf("score-fused Score orders %v, want %v", ranked, want)
	}
	// a first stage that finds nothing: nothing to fuse
	none := NewRanker(m, first{}, codes, 4)
	none.Fuse, none.FuseWeight = true, 0.4
	if got := none.Rank(q, 8); len(got) != 0 {
		t.Errorf("Rank with no candidates = %v", got)
	}
}

func TestMineDenseAndMerge(t *testing.T) {
	ps := pairs(10)
	ps[4].Query = ps[1].Query // a shared query: never a negative of the other
	x, _ := dense.NewIndex(context.Background(), tinyDense(t, ps), ps, nil)
	negs, err := retrieve.MineRanked(context.Background(), x.Ranker(), ps, 3, 10)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range negs {
		if len(l) != 3 {
			t.Errorf("query %d: %d negatives, want 3", i, len(l))
		}
		for _, d := range l {
			if d == i || ps[d].Query == ps[i].Query {
				t.Errorf("query %d: negative %d is its own code or shares its query", i, d)
			}
		}
	}
	got := retrieve.MergeNegatives([][]int{{1, 2, 3}, {4}}, [][]int{{2, 5}, {4, 6}, {7}})
	if want := "[[1 2 5 3] [4 6] [7]]"; fmt.Sprint(got) != want {
		t.Errorf("MergeNegatives = %v, want %v", got, want)
	}
}

// TestMineFirstStage: the negatives are the hybrid first stage's own top
// candidates, in its order, without the gold, a copy of its code or a
// pair of the same query.
func TestMineFirstStage(t *testing.T) {
	ps := pairs(12)
	ps[4].Query = ps[1].Query
	ps[7].Code = ps[2].Code + "\n" // the gold's code up to white space
	x, _ := dense.NewIndex(context.Background(), tinyDense(t, ps), ps, nil)
	h := retrieve.Hybrid{BM25Weight: 0.4}
	negs, err := MineFirstStage(context.Background(), x, ps, h, 3, 8)
	if err != nil {
		t.Fatal(err)
	}
	codes := make([]string, len(ps))
	for i, p := range ps {
		codes[i] = p.Code
	}
	first := h.Ranker(retrieve.NewBM25(codes), x.Ranker())
	for i, l := range negs {
		if len(l) == 0 || len(l) > 3 {
			t.Errorf("query %d: %d negatives, want 1 to 3", i, len(l))
		}
		top := first.Rank(ps[i].Query, 8)
		at := -1
		for _, d := range l {
			if d == i || ps[d].Query == ps[i].Query || retrieve.CodeKey(ps[d].Code) == retrieve.CodeKey(ps[i].Code) {
				t.Errorf("query %d: negative %d is its gold, a copy of it or shares its query", i, d)
			}
			j := slices.Index(top, d)
			if j <= at {
				t.Errorf("query %d: negatives %v are not the first stage's top 8 %v in order", i, l, top)
			}
			at = j
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := MineFirstStage(ctx, x, ps, h, 3, 8); !errors.Is(err, context.Canceled) {
		t.Errorf("mining under a cancelled context: %v", err)
	}
}

func TestLexicalFeatures(t *testing.T) {
	ps := pairs(4)
	m, err := FromDense(tinyDense(t, ps), 12, 24, 1, true, 0.1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewTrainer(m, NewData(m, ps, nil), options(2, 2, 1)); err == nil || !strings.Contains(err.Error(), "SetIDF") {
		t.Errorf("a lexical trainer without IDF: %v", err)
	}
	// ids 1..4 over three documents: 1 in all, 2 in two, 3 in one, 4 in none
	m.SetIDF([][]int{{1, 2, 3, 1}, {1, 2}, {1}})
	idf := func(df float64) float32 { return float32(math.Log(1 + (3-df+0.5)/(df+0.5))) }
	for id, df := range map[int]float64{1: 3, 2: 2, 3: 1, 4: 0} {
		if got, want := m.IDF[id], idf(df); math.Abs(float64(got-want)) > 1e-6 {
			t.Errorf("IDF[%d] = %v, want %v", id, got, want)
		}
	}
	f := make([]float32, NumLexical)
	m.lexical(f, []int{1, 3, 3, 4}, []int{3, 5, 1, 1})
	wantIDF := (idf(3) + idf(1)) / (idf(3) + idf(1) + idf(0))
	if math.Abs(float64(f[0]-wantIDF)) > 1e-6 || f[1] != 2.0/3 {
		t.Errorf("features %v, want [%v %v]: distinct query tokens 1, 3, 4; 1 and 3 in the code", f, wantIDF, 2.0/3)
	}
	// the head starts from the dual encoder: the lexical weights are 0
	if w := m.W[m.Dim():]; len(w) != NumLexical || w[0] != 0 || w[1] != 0 {
		t.Errorf("lexical weights %v, want %d zeros", w, NumLexical)
	}
	dir := filepath.Join(t.TempDir(), "rr")
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	back, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Settings.Lexical || fmt.Sprint(back.IDF) != fmt.Sprint(m.IDF) {
		t.Errorf("the lexical head did not survive Save and Load")
	}
	for _, p := range ps {
		if a, b := m.Score(p.Query, p.Code), back.Score(p.Query, p.Code); a != b {
			t.Fatalf("score %v after loading, %v before", b, a)
		}
	}
}

// TestRankerConcurrent: Evaluate calls the ranker from several goroutines;
// the shared caches give the same ranks as one goroutine does.
func TestRankerConcurrent(t *testing.T) {
	ps := pairs(12)
	m := tinyReranker(t, ps)
	codes, queries := make([]string, len(ps)), make([]string, len(ps))
	for i, p := range ps {
		codes[i], queries[i] = p.Code, p.Query
	}
	first := retrieve.NewBM25(codes)
	one, _ := retrieve.Evaluate(context.Background(), NewRanker(m, first, codes, 5), queries, len(codes), retrieve.EvalOptions{Candidates: 8, Workers: 1})
	many, _ := retrieve.Evaluate(context.Background(), NewRanker(m, first, codes, 5), queries, len(codes), retrieve.EvalOptions{Candidates: 8, Workers: 4})
	if fmt.Sprint(one.Ranks, one.CSNRanks) != fmt.Sprint(many.Ranks, many.CSNRanks) {
		t.Errorf("ranks with 4 workers %v %v, with 1 %v %v", many.Ranks, many.CSNRanks, one.Ranks, one.CSNRanks)
	}
}

// TestScoreBatch: scoring many documents in one pass gives the scores of
// scoring them one by one, lexical features included.
func TestScoreBatch(t *testing.T) {
	ps := pairs(9)
	for _, causal := range []bool{false, true} {
		d := tinyDense(t, ps)
		d.Enc.Causal = causal
		m, err := FromDense(d, 12, 24, 1, true, 0.1, 2)
		if err != nil {
			t.Fatal(err)
		}
		var codes [][]int
		for _, p := range ps {
			codes = append(codes, m.Tokens(p.Code, m.Settings.MaxCode))
		}
		m.SetIDF(codes)
		// documents of other padded lengths, in between: the batch is
		// run in groups of one length and the scores must come back in order
		mixed := slices.Insert(slices.Clone(codes), 2, codes[0][:2], codes[1][:1])
		// documents of one padded length: one group, cut in two batches
		// (5: 3 + 2) or more (11: 6 + 5)
		var same [][]int
		for i := range 11 {
			same = append(same, slices.Concat(codes[i%len(codes)][:1], codes[0][:3]))
		}
		q := m.QueryTokens(ps[0].Query)
		for _, docs := range [][][]int{mixed, same[:5], same, same[:1]} {
			got, err := m.ScoreBatch(q, docs)
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range docs {
				want, err := m.ScoreTokens(q, c)
				if err != nil {
					t.Fatal(err)
				}
				if d := math.Abs(float64(got[i] - want)); d > 1e-5*(1+math.Abs(float64(want))) {
					t.Errorf("causal=%v, %d documents: document %d (%d tokens): batch %v, alone %v", causal, len(docs), i, len(c), got[i], want)
				}
			}
		}
	}
}

// TestZeroCrossScoresAsDense: with its cross block's output projections at
// zero, an untrained reranker scores a pair as the dual encoder it was
// built from, cos(query, code)/τ, to float32 rounding; with the block's
// random initial weights it does not.
func TestZeroCrossScoresAsDense(t *testing.T) {
	ps := pairs(6)
	d := tinyDense(t, ps)
	r, err := FromDense(d, 12, 24, 1, false, 0.1, 2)
	if err != nil {
		t.Fatal(err)
	}
	D := d.Dim()
	q, c := make([]float32, D), make([]float32, D)
	worst := func() float64 {
		w := 0.0
		for _, p := range ps {
			for _, o := range ps[:3] {
				d.EmbedQuery(q, p.Query)
				d.EmbedCode(c, o.Code)
				var cos float64
				for i := range q {
					cos += float64(q[i]) * float64(c[i])
				}
				want := cos / d.Settings.Tau
				w = max(w, math.Abs(float64(r.Score(p.Query, o.Code))-want))
			}
		}
		return w
	}
	if e := worst(); e < 1e-2 {
		t.Errorf("random cross block: scores within %.2g of the dual encoder's: the test cannot tell", e)
	}
	r.ZeroCross()
	if e := worst(); e > 1e-3 {
		t.Errorf("zeroed cross block: scores %.2g from the dual encoder's cos/τ, want ≤ 1e-3", e)
	}
}

// TestLoadRefusesNonFiniteHead: a NaN in the score head (or an infinity in
// the encoder's weights, which model.Load reads) is refused at load, the
// error naming the file, the tensor and the element.
func TestLoadRefusesNonFiniteHead(t *testing.T) {
	ps := pairs(8)
	m := tinyReranker(t, ps)
	good := filepath.Join(t.TempDir(), "rr")
	if err := m.Save(good); err != nil {
		t.Fatal(err)
	}
	edit := func(file, tensor string, i int, v float32) (string, string) {
		dir := filepath.Join(t.TempDir(), "bad")
		os.CopyFS(dir, os.DirFS(good))
		path := filepath.Join(dir, file)
		f, err := safetensors.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		x, shape, err := f.Float32(tensor)
		if err != nil {
			t.Fatal(err)
		}
		x[i] = v
		f.SetF32(tensor, shape, x)
		if err := safetensors.WriteFile(path, f); err != nil {
			t.Fatal(err)
		}
		return dir, path
	}
	for _, tc := range []struct {
		file, tensor string
		v            float32
		want         string
	}{
		{HeadFile, headTensor, float32(math.NaN()), `: tensor "score.weight": element 1 is NaN`},
		{model.WeightsFile, "model.norm.weight", float32(math.Inf(1)), `: tensor "model.norm.weight": element 1 is +Inf`},
	} {
		dir, path := edit(tc.file, tc.tensor, 1, tc.v)
		_, err := Load(dir)
		if err == nil || !strings.Contains(err.Error(), path+tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want one line containing %q", tc.tensor, err, path+tc.want)
		}
	}
}

// TestNewTrainerRefusesNoNegatives: training data without a single hard
// negative (each group would be its positive alone, loss 0, accuracy 1) is
// refused with the count of pairs; one pair with a negative is enough.
func TestNewTrainerRefusesNoNegatives(t *testing.T) {
	ps := pairs(8)
	m := tinyReranker(t, ps)
	_, err := NewTrainer(m, NewData(m, ps, nil), options(4, 3, 4))
	want := "rerank: none of the 8 training pairs has a hard negative"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("no negatives: got %v, want %q", err, want)
	}
	negs := make([][]int, len(ps))
	negs[5] = []int{2}
	if _, err := NewTrainer(m, NewData(m, ps, negs), options(4, 3, 4)); err != nil {
		t.Errorf("one pair with a negative: %v", err)
	}
}
