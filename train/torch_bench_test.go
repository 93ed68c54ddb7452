package train_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/train"
)

// torchBenchThreads is the number of threads PyTorch may use: the machine's
// two cores, as attnlab's goroutines do.
const torchBenchThreads = 2

// torchBenchReady is the first line torch_train.py bench prints.
type torchBenchReady struct {
	Ready   bool     `json:"ready"`
	Threads int      `json:"threads"`
	Torch   string   `json:"torch"`
	BLAS    []string `json:"blas"`
	Check   float64  `json:"check"`
	Tokens  int      `json:"tokens_per_step"`
}

// torchBenchStep is the line it prints for each step.
type torchBenchStep struct {
	Seconds float64 `json:"seconds"`
	Loss    float64 `json:"loss"`
}

// BenchmarkTrainStepPyTorch measures, side by side, the training throughput
// of BenchmarkTrainStep's configuration (dim 128, 4 layers, 4/2 heads, ffn
// 352, vocabulary 2048, tied embeddings, batches of 8 windows of 128 tokens,
// each holding documents of 50 tokens, AdamW, clipping) in attnlab and of
// the same model in PyTorch, float32, with torch.set_num_threads(2)
// (python/torch_train.py bench: nn.Modules written as Hugging Face's Llama
// eager code, torch.optim.AdamW, clip_grad_norm_).
//
// The steps alternate, one of attnlab then one of PyTorch (a process that
// steps on request), so that both see the same load on a shared machine;
// only attnlab's count in ns/op. It reports tokens/s from the median step
// time of each (tokens/s for attnlab, torch-tokens/s for PyTorch) and their
// ratio attnlab/torch, and logs the means and the BLAS library PyTorch
// loaded, which decides its matrix products: Debian's python3-torch uses
// whatever libblas.so.3 is installed, the reference BLAS unless, say,
// libopenblas0-pthread is. Run it with -benchtime=20x or so: the default
// second gives a handful of steps. The sub-benchmarks train attnlab with 1
// and 2 data-parallel shards (train.Options.Shards; PyTorch's side is the
// same).
func BenchmarkTrainStepPyTorch(b *testing.B) {
	for _, shards := range []int{1, 2} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) { benchTrainStepPyTorch(b, shards) })
	}
}

func benchTrainStepPyTorch(b *testing.B, shards int) {
	needTorch(b)
	script := torchScript(b)
	cfg := model.Config{HiddenSize: 128, IntermediateSize: 352, NumHiddenLayers: 4,
		NumAttentionHeads: 4, NumKeyValueHeads: 2, RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: 2048,
		MaxPositionEmbeddings: 256, TieWordEmbeddings: true}
	const B, T, segLen, nWindows, warmup = 8, 128, 50, 64, 2
	opts := train.Options{BatchSize: B, Accum: 1, Steps: 1 << 30,
		Schedule: train.Schedule{Peak: 1e-3, Min: 1e-4, Warmup: 10, Total: 1000}, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Clip: 1, Seed: 1, Shards: shards}

	// attnlab, as BenchmarkTrainStep
	m, err := model.New[float32](cfg)
	if err != nil {
		b.Fatal(err)
	}
	p := m.NewParams()
	m.Init(p, 0.02, 1)
	w := &train.Windows{T: T}
	for i := range nWindows {
		toks, seg, valid := make([]int, T), make([]int, T), make([]bool, T)
		for j := range toks {
			toks[j], seg[j], valid[j] = (i*131+j*17)%cfg.VocabSize, j/segLen, true
		}
		w.Tokens, w.Seg, w.Valid = append(w.Tokens, toks), append(w.Seg, seg), append(w.Valid, valid)
	}
	tr, err := train.NewTrainer(m, p, w, opts)
	if err != nil {
		b.Fatal(err)
	}
	for range warmup {
		if _, err := tr.TrainStep(); err != nil {
			b.Fatal(err)
		}
	}

	// PyTorch: the same model, data shapes and optimiser settings
	s := opts.Schedule
	conf, err := json.Marshal(map[string]any{
		"config": cfg, "batch_size": B, "seq_len": T, "segment_length": segLen, "windows": nWindows,
		"threads": torchBenchThreads, "warmup_steps": warmup, "seed": 1, "init_std": 0.02,
		"lr_peak": s.Peak, "lr_min": s.Min, "warmup": s.Warmup, "total": s.Total,
		"beta1": opts.Beta1, "beta2": opts.Beta2, "eps": opts.Eps, "weight_decay": opts.WeightDecay, "clip": opts.Clip,
	})
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "bench.json")
	if err := os.WriteFile(path, conf, 0o644); err != nil {
		b.Fatal(err)
	}
	py := startTorchBench(b, script, path)
	defer py.stop(b)
	var ready torchBenchReady
	py.read(b, &ready)
	if !ready.Ready || ready.Tokens != B*T {
		b.Fatalf("torch_train.py bench: first line %+v, want ready with %d tokens per step", ready, B*T)
	}
	if ready.Check > 1e-9 {
		b.Fatalf("torch_train.py bench: its nn.Module model differs from torch_oracle.py's decoder by %.3g", ready.Check)
	}
	if ready.Threads != torchBenchThreads {
		b.Errorf("PyTorch runs with %d threads, want %d", ready.Threads, torchBenchThreads)
	}

	var ours, theirs []float64 // seconds per step
	var loss float64
	for b.Loop() {
		t0 := time.Now()
		if _, err := tr.TrainStep(); err != nil {
			b.Fatal(err)
		}
		ours = append(ours, time.Since(t0).Seconds())
		b.StopTimer()
		py.send(b, "step")
		var st torchBenchStep
		py.read(b, &st)
		theirs, loss = append(theirs, st.Seconds), st.Loss
		b.StartTimer()
	}

	tok := float64(B * T)
	oursMed, theirsMed := tok/median(ours), tok/median(theirs)
	blas := "none loaded"
	if len(ready.BLAS) > 0 {
		blas = strings.Join(ready.BLAS, ", ")
	}
	b.Logf("%d steps each, alternating. attnlab: median %.0f tokens/s, mean %.0f. PyTorch %s float32, %d threads: median %.0f tokens/s, mean %.0f (loss %.3f; its model agrees with torch_oracle.py's to %.1e). BLAS: %s",
		len(ours), oursMed, tok/mean(ours), ready.Torch, ready.Threads, theirsMed, tok/mean(theirs), loss, ready.Check, blas)
	b.ReportMetric(oursMed, "tokens/s")
	b.ReportMetric(theirsMed, "torch-tokens/s")
	b.ReportMetric(oursMed/theirsMed, "attnlab/torch")
}

// torchBench is a running torch_train.py bench.
type torchBench struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr bytes.Buffer
}

// startTorchBench starts torch_train.py bench with PyTorch's thread pools
// (OpenMP and, when it is the BLAS, OpenBLAS's) set to torchBenchThreads.
func startTorchBench(b *testing.B, script, config string) *torchBench {
	b.Helper()
	n := strconv.Itoa(torchBenchThreads)
	pb := &torchBench{cmd: exec.Command(torchPython, script, "bench", config)}
	pb.cmd.Env = append(os.Environ(), "OMP_NUM_THREADS="+n, "OPENBLAS_NUM_THREADS="+n, "MKL_NUM_THREADS="+n)
	pb.cmd.Stderr = &pb.stderr
	in, err := pb.cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := pb.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := pb.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	pb.in, pb.out = in, bufio.NewReader(out)
	return pb
}

func (pb *torchBench) send(b *testing.B, line string) {
	b.Helper()
	if _, err := io.WriteString(pb.in, line+"\n"); err != nil {
		pb.fail(b, err)
	}
}

// read decodes the next line of the script's output into v.
func (pb *torchBench) read(b *testing.B, v any) {
	b.Helper()
	line, err := pb.out.ReadBytes('\n')
	if err != nil {
		pb.fail(b, err)
	}
	if err := json.Unmarshal(line, v); err != nil {
		pb.fail(b, fmt.Errorf("line %q: %w", line, err))
	}
}

// fail reports err with what the script wrote on stderr.
func (pb *torchBench) fail(b *testing.B, err error) {
	b.Helper()
	pb.in.Close()
	pb.cmd.Wait()
	b.Fatalf("torch_train.py bench: %v\n%s", err, pb.stderr.String())
}

// stop ends the script's input and waits for it to exit.
func (pb *torchBench) stop(b *testing.B) {
	b.Helper()
	pb.in.Close()
	if err := pb.cmd.Wait(); err != nil && !b.Failed() {
		b.Errorf("torch_train.py bench: %v\n%s", err, pb.stderr.String())
	}
}

func median(x []float64) float64 {
	y := slices.Sorted(slices.Values(x))
	n := len(y)
	if n%2 == 1 {
		return y[n/2]
	}
	return (y[n/2-1] + y[n/2]) / 2
}

func mean(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}
