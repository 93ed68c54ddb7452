package train_test

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/train"
)

// torchrun is Debian's launcher of torch.distributed (python3-torch).
const torchrun = "/usr/bin/torchrun"

// ddpRun runs python/torch_train.py ddp under torchrun with nproc
// processes on the prepared run, in float64, and returns its per-step log
// and the folder of its checkpoint.
func ddpRun(t *testing.T, run string, nproc int) ([]map[string]float64, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "torch")
	log := filepath.Join(t.TempDir(), "log.jsonl")
	// --redirects and --tee spelled out: torchrun 1.13's defaults break on
	// Python 3.11 (an enum flag of value 0 is no longer iterated)
	cmd := exec.Command(torchrun, "--standalone", "--nproc_per_node="+strconv.Itoa(nproc), "--redirects", "2", "--tee", "2",
		torchScript(t), "ddp", "--run", run, "--dtype", "float64", "--out", out, "--log", log)
	cmd.Dir = t.TempDir()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("torchrun with %d processes: %v\n%s", nproc, err, b)
	}
	f, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var steps []map[string]float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]float64
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, m)
	}
	return steps, filepath.Join(out, "checkpoint")
}

func weightsOf(t *testing.T, dir string) map[string][]float64 {
	t.Helper()
	m, p, err := model.Load[float64](dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]float64{}
	for _, x := range m.Tensors(p) {
		out[x.Name] = x.Data
	}
	return out
}

func worstRel(a, b map[string][]float64) (float64, string) {
	var worst float64
	at := ""
	for name, x := range a {
		for i := range x {
			if e := math.Abs(x[i]-b[name][i]) / (1e-6 + math.Abs(b[name][i])); e > worst || math.IsNaN(e) {
				worst, at = e, name
			}
		}
	}
	return worst, at
}

// TestDDPMatchesOneProcessAndAttnlab: the PyTorch trainer under torchrun
// with DistributedDataParallel (gloo, CPU) reads attnlab's prepared run;
// two processes give the losses and weights of one, to float64 rounding,
// and both give attnlab's own trainer's; attnlab loads the result back.
func TestDDPMatchesOneProcessAndAttnlab(t *testing.T) {
	needTorch(t)
	if _, err := os.Stat(torchrun); err != nil {
		t.Skipf("%s not found (python3-torch): the data-parallel trainer is not checked", torchrun)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(t.TempDir(), "run")
	o := train.RunOptions{Src: root, CorpusMB: 0.3, ValFrac: 0.2, ValKB: 4, Vocab: 300, Window: 32, InitStd: 0.1, EvalEvery: 100, SaveEvery: 100,
		Out: run, Prepare: true,
		Model: model.Config{HiddenSize: 16, NumHiddenLayers: 2, NumAttentionHeads: 2, NumKeyValueHeads: 1, IntermediateSize: 24,
			RMSNormEps: 1e-5, RopeTheta: 10000, TieWordEmbeddings: true, MaxPositionEmbeddings: 32},
		Options: train.Options{BatchSize: 4, Accum: 2, Steps: 5, Schedule: train.Schedule{Peak: 3e-3, Min: 3e-4, Warmup: 2, Total: 5},
			Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Clip: 0.5, Seed: 3}}
	if _, err := train.Run(context.Background(), o, train.Events{}); err != nil {
		t.Fatal(err)
	}
	one, ckpt1 := ddpRun(t, run, 1)
	two, ckpt2 := ddpRun(t, run, 2)

	// attnlab's trainer in float64 on the same windows, order and start
	ckpt := filepath.Join(run, "checkpoint")
	m, p, err := model.Load[float64](ckpt)
	if err != nil {
		t.Fatal(err)
	}
	w, _, err := train.ReadWindows(filepath.Join(run, train.DataFile))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := train.NewTrainer(m, p, w, o.Options)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Resume(ckpt); err != nil {
		t.Fatal(err)
	}
	if len(one) != 5 || len(two) != 5 {
		t.Fatalf("%d and %d steps logged, want 5", len(one), len(two))
	}
	for s := range 5 {
		res, err := tr.TrainStep()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			what string
			got  float64
		}{{"2 processes", two[s]["loss"]}, {"attnlab", res.Loss}} {
			if d := math.Abs(c.got-one[s]["loss"]) / one[s]["loss"]; d > 1e-12 {
				t.Errorf("step %d: loss %.15g with %s, %.15g with 1 process", s+1, c.got, c.what, one[s]["loss"])
			}
		}
		if int(one[s]["tokens"]) != res.Tokens || one[s]["lr"] != res.LR {
			t.Errorf("step %d: tokens %v and lr %v, attnlab %d and %v", s+1, one[s]["tokens"], one[s]["lr"], res.Tokens, res.LR)
		}
	}
	w1, w2 := weightsOf(t, ckpt1), weightsOf(t, ckpt2)
	mine := map[string][]float64{}
	for _, x := range m.Tensors(p) {
		mine[x.Name] = x.Data
	}
	if e, at := worstRel(w2, w1); e > 1e-10 {
		t.Errorf("2 processes against 1: weights differ by %.2g relative (%s)", e, at)
	}
	if e, at := worstRel(mine, w1); e > 1e-9 {
		t.Errorf("attnlab against PyTorch: weights differ by %.2g relative (%s)", e, at)
	}
	// attnlab reads the PyTorch checkpoint as the language model it is
	if _, err := model.LoadLM[float32](ckpt2); err != nil {
		t.Errorf("attnlab cannot load the data-parallel checkpoint: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ckpt2, model.TokenizerFile)); err != nil {
		t.Errorf("the data-parallel checkpoint has no tokenizer: %v", err)
	}
}
