package train_test

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/safetensors"
	"github.com/attnlab/attnlab/train"
)

// torchPython is the interpreter that has PyTorch (Debian's python3-torch).
const torchPython = "/usr/bin/python3"

// trainTol bounds the relative disagreement between a training run of
// attnlab and the same run in PyTorch, both in float64: per step, the loss,
// the gradient norm and the learning rate; after the last step, every
// weight tensor (see compareRuns).
const trainTol = 1e-9

// needTorch skips tb unless torchPython can import torch.
func needTorch(tb testing.TB) {
	tb.Helper()
	if err := exec.Command(torchPython, "-c", "import torch").Run(); err != nil {
		tb.Skipf("PyTorch comparison skipped: %s cannot import torch (apt-get install python3-torch): %v", torchPython, err)
	}
}

// torchScript returns the path of python/torch_train.py. It reads the
// scripts it runs, so that the go command's test cache, which tracks the
// files a test opens, notices an edit to them.
func torchScript(tb testing.TB) string {
	tb.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "python"))
	if err != nil {
		tb.Fatal(err)
	}
	for _, name := range []string{"torch_train.py", "torch_oracle.py"} {
		if _, err := os.ReadFile(filepath.Join(dir, name)); err != nil {
			tb.Fatal(err)
		}
	}
	return filepath.Join(dir, "torch_train.py")
}

// runPython runs torchPython with args and returns its stdout; a failure
// is fatal, with its stderr.
func runPython(tb testing.TB, env []string, args ...string) []byte {
	tb.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(torchPython, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Run(); err != nil {
		tb.Fatalf("%s %s: %v\n%s", filepath.Base(torchPython), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// idEncoder reads each byte of a document's text as a token id.
type idEncoder struct{}

func (idEncoder) Encode(text []byte) []int {
	ids := make([]int, len(text))
	for i, b := range text {
		ids[i] = int(b)
	}
	return ids
}

// Token ids of the comparison's data: 0 is never a document token (the
// model embeds padding as 0), 1 ends a document.
const cmpEOS = 1

// cmpWindows returns the comparison's windows of T tokens over a vocabulary
// of V: packed documents, several per window, each in its own segment (a long
// one continued in the next window as a new segment), the last window padded
// at the end; documents alone in a window padded at the end; documents after
// left padding. Padding holds random ids, which the model must ignore.
func cmpWindows(V, T int, seed uint64) *train.Windows {
	r := rand.New(rand.NewPCG(seed, 5))
	doc := func(n int) train.Document {
		text := make([]byte, n)
		for i := range text {
			text[i] = byte(2 + r.IntN(V-2))
		}
		return train.Document{Text: text}
	}
	var docs []train.Document
	for range 14 {
		docs = append(docs, doc(2+r.IntN(40)))
	}
	w := train.Pack(docs, idEncoder{}, cmpEOS, T, true)
	var alone []train.Document
	for range 3 {
		alone = append(alone, doc(4+r.IntN(T-10)))
	}
	u := train.Pack(alone, idEncoder{}, cmpEOS, T, false)
	for i := range u.Tokens {
		w.Tokens, w.Valid, w.Seg = append(w.Tokens, u.Tokens[i]), append(w.Valid, u.Valid[i]), append(w.Seg, make([]int, T))
	}
	for range 2 {
		pad := 3 + r.IntN(T/2)
		d := doc(T - pad - 1)
		toks := append(make([]int, pad), append(idEncoder{}.Encode(d.Text), cmpEOS)...)
		valid := make([]bool, T)
		for j := pad; j < T; j++ {
			valid[j] = true
		}
		w.Tokens, w.Valid, w.Seg = append(w.Tokens, toks), append(w.Valid, valid), append(w.Seg, make([]int, T))
	}
	for i := range w.Tokens {
		for j, ok := range w.Valid[i] {
			if !ok {
				w.Tokens[i][j] = r.IntN(V)
			}
		}
	}
	return w
}

// trainRun is what the comparison looks at in a training run.
type trainRun struct {
	Loss, GradNorm, LR []float64 // per step
	Tokens             []int64   // counted targets per step
	Names              []string  // the parameters, in model.Tensors order
	Weights            map[string][]float64
}

// runAttnlab trains the model of the checkpoint ckpt (loaded with
// model.Load, float64) on data for o.Steps steps. With batches non-nil, it
// records there, as torch_train.py reads them, the micro-batches the trainer
// consumes (by replaying its data order: the same cursor from the same seed,
// which must be at the trainer's place after every step) and the
// hyper-parameters.
func runAttnlab(t *testing.T, ckpt string, data *train.Windows, o train.Options, batches *safetensors.File) trainRun {
	t.Helper()
	m, p, err := model.Load[float64](ckpt)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := train.NewTrainer(m, p, data, o)
	if err != nil {
		t.Fatal(err)
	}
	var run trainRun
	replay := train.NewCursor(len(data.Tokens), o.Seed)
	for s := range o.Steps {
		if batches != nil {
			for k := range o.Accum {
				b := data.Batch(replay.Take(o.BatchSize))
				pre := fmt.Sprintf("step.%d.micro.%d.", s, k)
				shape := []int{b.B, b.T}
				batches.SetI64(pre+"tokens", shape, int64s(b.Tokens))
				batches.SetI64(pre+"targets", shape, int64s(b.ShiftedTargets()))
				batches.SetI64(pre+"seg", shape, int64s(b.Seg))
				valid := make([]int64, len(b.Valid))
				for i, ok := range b.Valid {
					if ok {
						valid[i] = 1
					}
				}
				batches.SetI64(pre+"valid", shape, valid)
			}
		}
		res, err := tr.TrainStep()
		if err != nil {
			t.Fatalf("step %d: %v", s+1, err)
		}
		if batches != nil && (tr.Cursor.Epoch != replay.Epoch || tr.Cursor.Next != replay.Next) {
			t.Fatalf("step %d: the trainer's cursor is at epoch %d, window %d; the replay at epoch %d, window %d",
				s+1, tr.Cursor.Epoch, tr.Cursor.Next, replay.Epoch, replay.Next)
		}
		run.Loss, run.GradNorm, run.LR = append(run.Loss, res.Loss), append(run.GradNorm, res.GradNorm), append(run.LR, res.LR)
		run.Tokens = append(run.Tokens, int64(res.Tokens))
	}
	if batches != nil {
		s := o.Schedule
		g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
		batches.Metadata = map[string]string{
			"steps": strconv.Itoa(o.Steps), "accum": strconv.Itoa(o.Accum),
			"lr_peak": g(s.Peak), "lr_min": g(s.Min), "warmup": strconv.Itoa(s.Warmup), "total": strconv.Itoa(s.Total),
			"beta1": g(o.Beta1), "beta2": g(o.Beta2), "eps": g(o.Eps), "weight_decay": g(o.WeightDecay), "clip": g(o.Clip),
		}
	}
	run.Weights = map[string][]float64{}
	for _, ts := range m.Tensors(p) {
		run.Names = append(run.Names, ts.Name)
		run.Weights[ts.Name] = slices.Clone(ts.Data)
	}
	return run
}

func int64s(x []int) []int64 {
	y := make([]int64, len(x))
	for i, v := range x {
		y[i] = int64(v)
	}
	return y
}

// readTorchRun reads torch_train.py's output for a model with the
// parameters names, checking that it holds exactly what it should.
func readTorchRun(t *testing.T, path string, names []string, steps int) trainRun {
	t.Helper()
	f, err := safetensors.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"grad_norm", "loss", "lr", "tokens"}
	for _, n := range names {
		want = append(want, "weight."+n)
	}
	slices.Sort(want)
	if got := f.Names(); !slices.Equal(got, want) {
		t.Fatalf("%s holds %v, want %v", path, got, want)
	}
	perStep := func(name string) []float64 {
		x, shape, err := f.Float64(name)
		if err != nil || !slices.Equal(shape, []int{steps}) {
			t.Fatalf("%s: %s: %v, shape %v, want [%d]", path, name, err, shape, steps)
		}
		return x
	}
	run := trainRun{Loss: perStep("loss"), GradNorm: perStep("grad_norm"), LR: perStep("lr"), Names: names, Weights: map[string][]float64{}}
	tok, shape, err := f.Int64("tokens")
	if err != nil || !slices.Equal(shape, []int{steps}) {
		t.Fatalf("%s: tokens: %v, shape %v, want I64 [%d]", path, err, shape, steps)
	}
	run.Tokens = tok
	for _, n := range names {
		x, _, err := f.Float64("weight." + n)
		if err != nil {
			t.Fatal(err)
		}
		run.Weights[n] = x
	}
	return run
}

// disagreement is one compared quantity and how far apart the two runs are.
type disagreement struct {
	What     string  // "step 3 loss", "weight model.norm.weight", ...
	Err      float64 // relative error (see compareRuns)
	At       int     // the element, for a weight
	Got, Ref float64 // attnlab's and PyTorch's values there
}

func (d disagreement) String() string {
	at := ""
	if strings.HasPrefix(d.What, "weight ") {
		at = fmt.Sprintf(" at element %d", d.At)
	}
	return fmt.Sprintf("%s: relative error %.3g%s (attnlab %.17g, PyTorch %.17g)", d.What, d.Err, at, d.Got, d.Ref)
}

// compareRuns measures how far the attnlab run a is from the PyTorch run b.
// Per step, the loss, the gradient norm and the learning rate are compared by
// |a−b|/|b|, and the counted tokens must be equal (else the error is +Inf).
// Each final weight tensor is compared by max|a−b| / max|b| over its
// elements: the error relative to the tensor's scale, which does not blow up
// at the elements that happen to be near zero. It returns every compared
// quantity, worst first.
func compareRuns(a, b trainRun) []disagreement {
	rel := func(x, y float64) float64 {
		switch {
		case x == y:
			return 0
		case math.IsNaN(x) || math.IsNaN(y) || y == 0:
			return math.Inf(1)
		}
		return math.Abs(x-y) / math.Abs(y)
	}
	var ds []disagreement
	for s := range max(len(a.Loss), len(b.Loss)) {
		if s >= len(a.Loss) || s >= len(b.Loss) {
			ds = append(ds, disagreement{What: fmt.Sprintf("step %d: one run stopped", s+1), Err: math.Inf(1)})
			continue
		}
		for _, q := range []struct {
			name string
			x, y float64
		}{{"loss", a.Loss[s], b.Loss[s]}, {"gradient norm", a.GradNorm[s], b.GradNorm[s]}, {"learning rate", a.LR[s], b.LR[s]},
			{"counted tokens", float64(a.Tokens[s]), float64(b.Tokens[s])}} {
			e := rel(q.x, q.y)
			if q.name == "counted tokens" && e != 0 {
				e = math.Inf(1)
			}
			ds = append(ds, disagreement{What: fmt.Sprintf("step %d %s", s+1, q.name), Err: e, Got: q.x, Ref: q.y})
		}
	}
	for _, n := range b.Names {
		x, y := a.Weights[n], b.Weights[n]
		if len(x) != len(y) {
			ds = append(ds, disagreement{What: "weight " + n + " (missing or another size)", Err: math.Inf(1)})
			continue
		}
		var scale, worst float64
		at := 0
		for i := range y {
			scale = max(scale, math.Abs(y[i]))
			if d := math.Abs(x[i] - y[i]); d > worst || math.IsNaN(d) {
				worst, at = d, i
			}
		}
		e := worst / scale
		if math.IsNaN(worst) || scale == 0 && worst != 0 {
			e = math.Inf(1)
		} else if worst == 0 {
			e = 0
		}
		ds = append(ds, disagreement{What: "weight " + n, Err: e, At: at, Got: x[at], Ref: y[at]})
	}
	slices.SortStableFunc(ds, func(p, q disagreement) int {
		switch {
		case p.Err > q.Err:
			return -1
		case p.Err < q.Err:
			return 1
		}
		return 0
	})
	return ds
}

// beyond returns the disagreements above tol.
func beyond(ds []disagreement, tol float64) []disagreement {
	var out []disagreement
	for _, d := range ds {
		if !(d.Err <= tol) {
			out = append(out, d)
		}
	}
	return out
}

// TestTrainingMatchesPyTorch trains a small model for 20 steps in attnlab and
// in PyTorch (python/torch_train.py: the decoder of python/torch_oracle.py,
// torch.optim.AdamW, clip_grad_norm_), both in float64, from the same
// checkpoint on the same micro-batches with the same hyper-parameters, and
// compares the losses, gradient norms and learning rates of every step and
// every weight at the end. Runs of attnlab with a setting changed must be
// told apart from PyTorch's by the same comparison.
func TestTrainingMatchesPyTorch(t *testing.T) {
	needTorch(t)
	start := time.Now()
	script := torchScript(t)
	const V, T = 50, 24
	opts := train.Options{BatchSize: 2, Accum: 2, Steps: 20, Schedule: train.Schedule{Peak: 3e-2, Min: 3e-3, Warmup: 3, Total: 20},
		Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Clip: 1, Seed: 11}
	data := cmpWindows(V, T, 3)

	type variant struct {
		name          string
		tied          bool
		ckpt, in, out string
		batches       *safetensors.File
		attnlab, ref  trainRun
	}
	variants := []*variant{{name: "tied", tied: true}, {name: "untied"}}
	dir := t.TempDir()
	args := []string{script}
	for i, v := range variants {
		m, err := model.New[float64](model.Config{HiddenSize: 16, IntermediateSize: 32, NumHiddenLayers: 2,
			NumAttentionHeads: 4, NumKeyValueHeads: 2, RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: V,
			MaxPositionEmbeddings: 32, TieWordEmbeddings: v.tied})
		if err != nil {
			t.Fatal(err)
		}
		p := m.NewParams()
		m.Init(p, 0.02, uint64(100+i))
		v.ckpt = filepath.Join(dir, v.name+"-init")
		if err := m.Save(v.ckpt, p, nil); err != nil {
			t.Fatal(err)
		}
		v.batches = safetensors.New()
		v.attnlab = runAttnlab(t, v.ckpt, data, opts, v.batches)
		v.in, v.out = filepath.Join(dir, v.name+".batches.safetensors"), filepath.Join(dir, v.name+".torch.safetensors")
		if err := safetensors.WriteFile(v.in, v.batches); err != nil {
			t.Fatal(err)
		}
		args = append(args, v.ckpt, v.in, v.out)
	}
	pyStart := time.Now()
	runPython(t, nil, args...)
	pyTime := time.Since(pyStart)

	var windows, padded, packed int
	for i := range data.Tokens {
		windows++
		if slices.Contains(data.Valid[i], false) {
			padded++
		}
		if data.Seg[i][0] != data.Seg[i][T-1] {
			packed++
		}
	}
	t.Logf("data: %d windows of %d tokens (%d with padding, %d with two segments or more); %d steps of %d micro-batches of %d windows",
		windows, T, padded, packed, opts.Steps, opts.Accum, opts.BatchSize)

	var worst float64 // docs/lab.md's measure over both variants' losses and weights
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			v.ref = readTorchRun(t, v.out, v.attnlab.Names, opts.Steps)
			ds := compareRuns(v.attnlab, v.ref)
			for _, d := range beyond(ds, trainTol) {
				t.Errorf("%v > %.0e", d, trainTol)
			}
			t.Logf("worst of %d compared quantities: %v", len(ds), ds[0])
			worstStep, worstWeight := worstOf(ds, "step "), worstOf(ds, "weight ")
			t.Logf("worst per-step: %v", worstStep)
			t.Logf("worst weight:   %v", worstWeight)
			var elem float64 // package oracle's measure, max |a−b|/(1+|b|), for comparison
			for _, n := range v.ref.Names {
				for i, y := range v.ref.Weights[n] {
					elem = max(elem, math.Abs(v.attnlab.Weights[n][i]-y)/(1+math.Abs(y)))
				}
			}
			t.Logf("weights, max over elements of |a−b|/(1+|b|): %.3g", elem)
			worst = max(worst, elem)
			for s, y := range v.ref.Loss {
				worst = max(worst, math.Abs(v.attnlab.Loss[s]-y)/(1+math.Abs(y)))
			}

			// Clipping must be exercised: some steps clipped, some not.
			clipped := 0
			var lines []string
			for s := range opts.Steps {
				mark := ""
				if v.attnlab.GradNorm[s] > opts.Clip {
					clipped++
					mark = " clipped"
				}
				lines = append(lines, fmt.Sprintf("step %2d  lr %.6f  loss %.12f  (|Δ| %.1e)  grad norm %.12f  (|Δ| %.1e)  tokens %d%s",
					s+1, v.attnlab.LR[s], v.attnlab.Loss[s], math.Abs(v.attnlab.Loss[s]-v.ref.Loss[s]),
					v.attnlab.GradNorm[s], math.Abs(v.attnlab.GradNorm[s]-v.ref.GradNorm[s]), v.attnlab.Tokens[s], mark))
			}
			t.Logf("per step (attnlab, |attnlab − PyTorch|):\n%s", strings.Join(lines, "\n"))
			if clipped == 0 || clipped == opts.Steps {
				t.Errorf("%d of %d steps have a gradient norm above the clip %g: clipping is not exercised both ways", clipped, opts.Steps, opts.Clip)
			}
			if !(v.attnlab.Loss[opts.Steps-1] < v.attnlab.Loss[0]-0.2) {
				t.Errorf("loss %.4f → %.4f: the run does not train", v.attnlab.Loss[0], v.attnlab.Loss[opts.Steps-1])
			}
			t.Logf("%d of %d steps clipped; loss %.4f → %.4f", clipped, opts.Steps, v.attnlab.Loss[0], v.attnlab.Loss[opts.Steps-1])
		})
	}

	if !t.Failed() {
		checkTrainingTable(t, opts.Steps, len(variants), worst)
	}

	// The comparison can fail: attnlab runs that differ from PyTorch's in one
	// setting are reported as mismatches.
	t.Run("detects-differences", func(t *testing.T) {
		for _, v := range variants {
			if v.ref.Names == nil {
				t.Fatalf("%s: no PyTorch run to compare with", v.name)
			}
			for _, c := range []struct {
				name string
				edit func(o *train.Options)
			}{
				{"weight decay 0", func(o *train.Options) { o.WeightDecay = 0 }},
				{"decay on norms and embeddings too", func(o *train.Options) { o.DecayAll = true }},
				{"no clipping", func(o *train.Options) { o.Clip = 0 }},
				{"another data order", func(o *train.Options) { o.Seed++ }},
			} {
				o := opts
				c.edit(&o)
				ds := compareRuns(runAttnlab(t, v.ckpt, data, o, nil), v.ref)
				bad := beyond(ds, trainTol)
				if len(bad) == 0 {
					t.Errorf("%s, attnlab with %s: the comparison reports no mismatch (worst %v)", v.name, c.name, ds[0])
					continue
				}
				t.Logf("%s, attnlab with %s: %d of %d quantities beyond %.0e, worst %v", v.name, c.name, len(bad), len(ds), trainTol, bad[0])
			}
		}
	})
	t.Logf("time: %v in all, %v in the PyTorch process", time.Since(start).Round(time.Millisecond), pyTime.Round(time.Millisecond))
}

// worstOf returns the worst disagreement whose description starts with
// prefix (ds is sorted worst first).
func worstOf(ds []disagreement, prefix string) disagreement {
	for _, d := range ds {
		if strings.HasPrefix(d.What, prefix) {
			return d
		}
	}
	return disagreement{What: prefix + "(none)"}
}
