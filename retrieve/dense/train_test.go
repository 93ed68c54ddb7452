package dense

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/train"
)

// chunkPairs are a few query–code pairs of varied lengths, so that a step's
// sequences fall into several padded lengths. Two share a query's text.
var chunkPairs = []retrieve.Pair{
	{Query: "reports whether s begins with prefix", Code: "func HasPrefix(s, prefix string) bool { return len(s) >= len(prefix) && s[:len(prefix)] == prefix }"},
	{Query: "reports whether s ends with suffix", Code: "func HasSuffix(s, suffix string) bool { return len(s) >= len(suffix) && s[len(s)-len(suffix):] == suffix }"},
	{Query: "returns the larger of x and y", Code: "func Max(x, y int) int { if x > y { return x }; return y }"},
	{Query: "returns the smaller of x and y", Code: "func Min(x, y int) int { if x < y { return x }; return y }"},
	{Query: "counts the words of a text", Code: "func Count(text string) int { n := 0; for _, f := range strings.Fields(text) { if f != \"\" { n++ } }; return n }"},
	{Query: "reverses a slice in place", Code: "func Reverse(s []int) { for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 { s[i], s[j] = s[j], s[i] } }"},
	{Query: "sum", Code: "func Sum(xs []float64) (s float64) { for _, x := range xs { s += x }; return }"},
	{Query: "returns the absolute value of x", Code: "func Abs(x float64) float64 { if x < 0 { return -x }; return x }"},
	{Query: "joins the elements with a separator between them", Code: "func Join(elems []string, sep string) string { var b strings.Builder; for i, e := range elems { if i > 0 { b.WriteString(sep) }; b.WriteString(e) }; return b.String() }"},
	{Query: "splits a line into its fields", Code: "func Split(line string) []string { return strings.Fields(line) }"},
	{Query: "reports whether x is even", Code: "func Even(x int) bool { return x%2 == 0 }"},
	{Query: "returns the larger of x and y", Code: "func MaxF(x, y float64) float64 { return math.Max(x, y) }"},
	{Query: "clamps x to the range lo to hi", Code: "func Clamp(x, lo, hi int) int { return max(lo, min(x, hi)) }"},
}

// chunkData returns a tiny encoder (width 16, 2 blocks) initialised with
// seed, and chunkPairs tokenised for it, each with one hard negative.
func chunkData(t testing.TB, seed uint64) (*Encoder[float32], *Data) {
	t.Helper()
	s := Settings{Text: TextRaw, MaxQuery: 24, MaxCode: 40, Tau: 0.1}
	tok, err := TrainTokenizer(chunkPairs, 300, s)
	if err != nil {
		t.Fatal(err)
	}
	cfg := model.Config{HiddenSize: 16, IntermediateSize: 32, NumHiddenLayers: 2, NumAttentionHeads: 2, NumKeyValueHeads: 1,
		RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: tok.VocabSize(), MaxPositionEmbeddings: 48}
	m, err := New(cfg, tok, s, 0.2, seed)
	if err != nil {
		t.Fatal(err)
	}
	negs := make([][]int, len(chunkPairs))
	for i := range negs {
		negs[i] = []int{(i + 5) % len(chunkPairs)}
	}
	return m.Enc, NewData(m, chunkPairs, negs)
}

// chunkTrainer returns a trainer with options o on chunkData(seed).
func chunkTrainer(t testing.TB, seed uint64, o Options) *Trainer {
	t.Helper()
	enc, data := chunkData(t, seed)
	tr, err := NewTrainer(enc, data, o)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func chunkOptions(chunk int) Options {
	return Options{Batch: 4, HardNegatives: 1, Tau: 0.1, LearnTau: true, Symmetric: true, Chunk: chunk,
		Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WD: 0.01, Clip: 1, Seed: 1,
		Schedule: train.Schedule{Peak: 1e-2, Min: 1e-3, Warmup: 1, Total: 4}}
}

// sameBits returns a description of the first element where the weights
// (log τ included) or the gradients of a and b differ in any bit, or "".
func sameBits(a, b *Trainer) string {
	if len(a.params) != len(b.params) {
		return fmt.Sprintf("%d tensors, %d tensors", len(a.params), len(b.params))
	}
	for i, p := range a.params {
		q := b.params[i]
		for _, v := range []struct {
			what string
			x, y []float32
		}{{"weight", p.X, q.X}, {"gradient", p.Grad, q.Grad}} {
			for j := range v.x {
				if math.Float32bits(v.x[j]) != math.Float32bits(v.y[j]) {
					return fmt.Sprintf("%s %s[%d]: %v and %v", p.Name, v.what, j, v.x[j], v.y[j])
				}
			}
		}
	}
	if a.Tau != b.Tau {
		return fmt.Sprintf("τ: %v and %v", a.Tau, b.Tau)
	}
	return ""
}

// TestChunkedStepIsExact trains the same model with and without chunking
// and expects the same weights, gradients and temperature, bit for bit.
func TestChunkedStepIsExact(t *testing.T) {
	ref := chunkTrainer(t, 7, chunkOptions(0))
	var refRes []StepResult
	for range 2 {
		r, err := ref.TrainStep()
		if err != nil {
			t.Fatal(err)
		}
		refRes = append(refRes, r)
	}
	n := ref.Opt.Batch + refRes[0].Docs // sequences of a step
	for _, chunk := range []int{1, 3, n - 1, n, n + 5} {
		t.Run(fmt.Sprintf("chunk=%d", chunk), func(t *testing.T) {
			tr := chunkTrainer(t, 7, chunkOptions(chunk))
			for s := range 2 {
				r, err := tr.TrainStep()
				if err != nil {
					t.Fatal(err)
				}
				want := refRes[s]
				if r.Forwards != 2*want.Forwards {
					t.Errorf("step %d: %d forward passes, want %d (twice the unchunked %d)", s+1, r.Forwards, 2*want.Forwards, want.Forwards)
				}
				r.Forwards = want.Forwards
				if r != want {
					t.Errorf("step %d: %+v, unchunked %+v", s+1, r, want)
				}
			}
			if d := sameBits(ref, tr); d != "" {
				t.Errorf("after 2 steps, chunk %d and no chunking differ: %s", chunk, d)
			}
		})
	}

	// The comparison can fail: another batch order gives other weights.
	other := chunkOptions(3)
	other.Seed = 2
	tr := chunkTrainer(t, 7, other)
	for range 2 {
		if _, err := tr.TrainStep(); err != nil {
			t.Fatal(err)
		}
	}
	if sameBits(ref, tr) == "" {
		t.Error("another data order gives the same weights: the comparison cannot fail")
	}
}

// TestChunkBoundsActs counts the activations alive at once in a step and
// those kept for the next: all of the step's without chunking, at most
// Chunk with it.
func TestChunkBoundsActs(t *testing.T) {
	for _, chunk := range []int{0, 1, 3, 5} {
		t.Run(fmt.Sprintf("chunk=%d", chunk), func(t *testing.T) {
			tr := chunkTrainer(t, 7, chunkOptions(chunk))
			for s := range 3 {
				r, err := tr.TrainStep()
				if err != nil {
					t.Fatal(err)
				}
				n := tr.Opt.Batch + r.Docs // sequences of the step
				kept, lengths := 0, 0
				for _, as := range tr.spare {
					kept += len(as)
					if len(as) > 0 {
						lengths++
					}
				}
				want, forwards, maxKept := n, n, n
				if chunk > 0 {
					want, forwards, maxKept = min(chunk, n), 2*n, min(chunk*lengths, n)
				}
				if tr.peak != want {
					t.Errorf("step %d: %d of %d sequences' activations alive at once, want %d", s+1, tr.peak, n, want)
				}
				if r.Forwards != forwards {
					t.Errorf("step %d: %d forward passes, want %d", s+1, r.Forwards, forwards)
				}
				if kept > maxKept || chunk == 0 && kept != n {
					t.Errorf("step %d: %d activations kept for the next step (%d padded lengths), want at most %d", s+1, kept, lengths, maxKept)
				}
				if chunk > 0 && chunk < n && kept >= n {
					t.Errorf("step %d: all %d sequences' activations kept with chunk %d", s+1, kept, chunk)
				}
				if s == 0 {
					t.Logf("%d sequences, %d padded lengths: %d alive at once, %d kept", n, lengths, tr.peak, kept)
				}
			}
		})
	}
}

// TestChunkOption: a negative chunk is an error that names it.
func TestChunkOption(t *testing.T) {
	enc, data := chunkData(t, 1)
	_, err := NewTrainer(enc, data, chunkOptions(-1))
	if err == nil || !strings.Contains(err.Error(), "chunk") {
		t.Errorf("chunk -1: error %v, want one naming the chunk", err)
	}
}

// TestNewTrainerRefusesAllNegativesMasked: a training set in which every
// negative of every pair is a false negative (one code document under many
// queries, or one query over many documents, with no hard negative of
// another code) is refused with the counts, instead of training at loss 0
// and accuracy 1; a single pair that can be contrasted is enough.
func TestNewTrainerRefusesAllNegativesMasked(t *testing.T) {
	enc, data := chunkData(t, 1)
	o := chunkOptions(0)
	n := len(data.Keys)
	oneCode, oneQuery := *data, *data
	oneCode.Keys, oneQuery.QueryText = make([]string, n), make([]string, n)
	oneQuery.Negatives = make([][]int, n) // a hard negative is another document: unmasked
	for i := range n {
		oneCode.Keys[i], oneQuery.QueryText[i] = "func F() {}", "does it"
	}
	for _, tc := range []struct {
		name string
		d    *Data
		want string
	}{
		{"one-code", &oneCode, fmt.Sprintf("dense: every negative of the %d training pairs is masked (distinct code documents: 1, distinct queries: %d)", n, distinct(data.QueryText))},
		{"one-query", &oneQuery, fmt.Sprintf("dense: every negative of the %d training pairs is masked (distinct code documents: %d, distinct queries: 1)", n, distinct(data.Keys))},
	} {
		if got := tc.d.Unmasked(o.HardNegatives); got != 0 {
			t.Errorf("%s: %d pairs unmasked, want 0", tc.name, got)
		}
		_, err := NewTrainer(enc, tc.d, o)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
	// one pair of another code: it and every other pair have a negative
	oneCode.Keys = append([]string(nil), oneCode.Keys...)
	oneCode.Keys[3] = "func G() {}"
	if got := oneCode.Unmasked(o.HardNegatives); got != n {
		t.Errorf("one other code: %d pairs unmasked, want %d", got, n)
	}
	if _, err := NewTrainer(enc, &oneCode, o); err != nil {
		t.Errorf("one other code: %v", err)
	}
	if got := data.Unmasked(o.HardNegatives); got != n {
		t.Errorf("distinct pairs: %d unmasked, want %d", got, n)
	}
}
