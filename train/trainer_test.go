package train

import (
	"errors"
	"math"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/attnlab/attnlab/model"
)

// byteEncoder is the simplest tokenizer: one token per byte.
type byteEncoder struct{}

func (byteEncoder) Encode(text []byte) []int {
	ids := make([]int, len(text))
	for i, b := range text {
		ids[i] = int(b)
	}
	return ids
}

func smallModel(t *testing.T) *model.Model[float32] {
	m, err := model.New[float32](model.Config{HiddenSize: 32, IntermediateSize: 64, NumHiddenLayers: 2,
		NumAttentionHeads: 4, NumKeyValueHeads: 2, RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: 257, MaxPositionEmbeddings: 64})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func thisRepo(t *testing.T) []Document {
	_, file, _, _ := runtime.Caller(0)
	docs, err := GoSource(filepath.Dir(file))
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

// TestTrainingLearns: a few dozen steps on this package's own source lower
// the loss from log(257) ≈ 5.55.
func TestTrainingLearns(t *testing.T) {
	m := smallModel(t)
	p := m.NewParams()
	m.Init(p, 0.02, 1)
	data := Pack(thisRepo(t), byteEncoder{}, 256, 32, true)
	tr, err := NewTrainer(m, p, data, Options{BatchSize: 8, Accum: 1, Steps: 40,
		Schedule: Schedule{Peak: 3e-3, Min: 3e-4, Warmup: 5, Total: 40}, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Clip: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var first, last float64
	for i := range 40 {
		r, err := tr.TrainStep()
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = r.Loss
		}
		last = r.Loss
	}
	t.Logf("loss %.3f → %.3f", first, last)
	if !(last < first-1) {
		t.Errorf("loss went from %.3f to %.3f: not learning", first, last)
	}
}

func TestPackKeepsDocumentsApart(t *testing.T) {
	docs := []Document{{Text: []byte("abc")}, {Text: []byte("defgh")}}
	w := Pack(docs, byteEncoder{}, 256, 4, true)
	// a b c EOS | d e f g | h EOS pad pad
	if len(w.Tokens) != 3 {
		t.Fatalf("%d windows, want 3", len(w.Tokens))
	}
	wantSeg := [][]int{{0, 0, 0, 0}, {1, 1, 1, 1}, {2, 2, 2, 2}}
	for i := range wantSeg {
		for j := range wantSeg[i] {
			if w.Seg[i][j] != wantSeg[i][j] {
				t.Fatalf("segments %v, want %v", w.Seg, wantSeg)
			}
		}
	}
	if w.Valid[2][2] || !w.Valid[2][1] {
		t.Errorf("validity of the last window %v", w.Valid[2])
	}
	b := w.Batch([]int{0})
	if b.Targets[2] != 256 || b.Targets[3] != -100 {
		t.Errorf("targets %v: c predicts EOS, EOS predicts nothing", b.Targets)
	}
}

func TestCursorResumes(t *testing.T) {
	a := NewCursor(10, 3)
	var seq []int
	for range 7 {
		seq = append(seq, a.Take(3)...)
	}
	b := NewCursor(10, 3)
	for range 4 {
		b.Take(3)
	}
	c := NewCursor(10, 3)
	c.Restore(b.Epoch, b.Next)
	var rest []int
	for range 3 {
		rest = append(rest, c.Take(3)...)
	}
	for i := range rest {
		if rest[i] != seq[12+i] {
			t.Fatalf("resumed cursor gave %v, want %v", rest, seq[12:])
		}
	}
}

// TestNonFiniteLossStops: a NaN in the weights stops the step with
// ErrNonFinite and leaves the parameters as they were.
func TestNonFiniteLossStops(t *testing.T) {
	m := smallModel(t)
	p := m.NewParams()
	m.Init(p, 0.02, 1)
	p.Norm[0] = float32(math.NaN())
	data := Pack(thisRepo(t), byteEncoder{}, 256, 32, true)
	tr, _ := NewTrainer(m, p, data, Options{BatchSize: 2, Accum: 1, Steps: 1, Schedule: Schedule{Peak: 1e-3, Warmup: 1, Total: 1},
		Beta1: 0.9, Beta2: 0.95, Eps: 1e-8})
	before := append([]float32(nil), p.Embed...)
	if _, err := tr.TrainStep(); !errors.Is(err, ErrNonFinite) {
		t.Fatalf("got %v, want ErrNonFinite", err)
	}
	for i := range before {
		if p.Embed[i] != before[i] {
			t.Fatal("parameters changed by a failed step")
		}
	}
}

// TestCheckpointedTrainingIsIdentical: recomputing activations changes
// nothing in the trajectory.
func TestCheckpointedTrainingIsIdentical(t *testing.T) {
	data := Pack(thisRepo(t), byteEncoder{}, 256, 32, true)
	run := func(recompute bool) []float64 {
		m := smallModel(t)
		p := m.NewParams()
		m.Init(p, 0.02, 1)
		tr, _ := NewTrainer(m, p, data, Options{BatchSize: 2, Accum: 1, Steps: 3, Schedule: Schedule{Peak: 1e-3, Warmup: 1, Total: 3},
			Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, CheckpointActivations: recompute})
		var losses []float64
		for range 3 {
			r, err := tr.TrainStep()
			if err != nil {
				t.Fatal(err)
			}
			losses = append(losses, r.Loss)
		}
		return append(losses, float64(p.Embed[5]), float64(p.Layers[1].Down[7]))
	}
	a, b := run(false), run(true)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("with recomputed activations %v, without %v", b, a)
		}
	}
}

// TestShardsAgree: splitting a micro-batch into shards that run at once
// gives the gradient of the whole batch's mean loss (up to the order of the
// sums), the same bits on every run, and the unsharded bits with one shard.
func TestShardsAgree(t *testing.T) {
	data := Pack(thisRepo(t), byteEncoder{}, 256, 32, true)
	// windows with few targets next to full ones: the shards' weights differ
	for i := range 3 {
		for j := 10; j < 32; j++ {
			data.Valid[i][j] = false
		}
	}
	step := func(shards int) ([]float64, float64) {
		m, err := model.New[float64](model.Config{HiddenSize: 16, IntermediateSize: 24, NumHiddenLayers: 2,
			NumAttentionHeads: 2, NumKeyValueHeads: 1, RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: 257, MaxPositionEmbeddings: 64})
		if err != nil {
			t.Fatal(err)
		}
		p := m.NewParams()
		m.Init(p, 0.1, 3)
		tr, err := NewTrainer(m, p, data, Options{BatchSize: 4, Accum: 2, Steps: 1, Schedule: Schedule{Peak: 1e-3, Total: 1},
			Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, Seed: 1, Shards: shards})
		if err != nil {
			t.Fatal(err)
		}
		tr.Cursor.Restore(0, 0)
		r, err := tr.TrainStep()
		if err != nil {
			t.Fatal(err)
		}
		var g []float64
		for _, x := range m.Tensors(tr.Grads) {
			g = append(g, x.Data...)
		}
		return g, r.Loss
	}
	g1, l1 := step(1)
	for _, shards := range []int{2, 4} {
		g, l := step(shards)
		if math.Abs(l-l1) > 1e-13*math.Abs(l1) {
			t.Errorf("shards %d: loss %.17g, one shard %.17g", shards, l, l1)
		}
		var worst float64
		for i := range g {
			worst = max(worst, math.Abs(g[i]-g1[i])/(1e-8+math.Abs(g1[i])))
		}
		if worst > 1e-9 {
			t.Errorf("shards %d: gradients differ from one shard's by %.3g relative", shards, worst)
		}
		again, _ := step(shards)
		for i := range g {
			if g[i] != again[i] {
				t.Fatalf("shards %d: two runs differ at gradient %d", shards, i)
			}
		}
	}
	if _, err := NewTrainer(smallModel(t), smallModel(t).NewParams(), data, Options{BatchSize: 3, Accum: 1, Shards: 2}); err == nil {
		t.Error("a batch of 3 in 2 shards: no error")
	}
}
