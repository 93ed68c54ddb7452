package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/attnlab/attnlab/internal/atomicfile"
	"github.com/attnlab/attnlab/internal/plots"
	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/tokenizer"
	"github.com/attnlab/attnlab/train"
)

var trainCmd = register(&command{
	name:  "train",
	usage: "[-src DIR] [-out DIR] [-steps N] [-resume] [model and optimiser flags]",
	short: "train the Llama-style model from scratch on Go source",
	long: `Train trains a small Llama-style model from scratch on Go source code: by
default the non-test .go files of the local Go installation ($GOROOT/src),
with whole packages held out for validation. It trains a byte-level BPE
tokenizer on the training files (or loads -tokenizer), packs documents into
windows with segment ids so that they never attend to each other, and runs
AdamW with warmup and cosine decay, gradient clipping and accumulation.

It shows a progress bar (step, loss, tokens/s, ETA), writes OUT/curves.csv
and OUT/loss.png, and checkpoints OUT/checkpoint every -ckpt-every steps
(atomically: a checkpoint is complete or absent). -resume continues exactly
where the checkpoint left off. A NaN or infinite loss stops the run and keeps
the last good checkpoint; Ctrl-C stops after the current step and saves.

At the end it reports validation bits per byte on the held-out bytes, beside
xz -9e and gzip -9 on the same bytes when those tools exist.

Example: attnlab train -out run1`,
})

var (
	trSrc       = trainCmd.flags.String("src", "", "folder of Go source (default: $GOROOT/src)")
	trOut       = trainCmd.flags.String("out", "attnlab-run", "output folder: checkpoint, tokenizer, curves")
	trCorpusMB  = trainCmd.flags.Float64("corpus-mb", 24, "use at most this many MB of source files (a seeded sample of files)")
	trValFrac   = trainCmd.flags.Float64("val-frac", 0.05, "fraction of directories held out for validation")
	trValKB     = trainCmd.flags.Int("val-kb", 256, "validate on at most this many KB of held-out source")
	trTokenizer = trainCmd.flags.String("tokenizer", "", "tokenizer.json to use instead of training one")
	trVocab     = trainCmd.flags.Int("vocab", 2048, "tokenizer vocabulary size")
	trDim       = trainCmd.flags.Int("dim", 128, "model width (hidden_size)")
	trLayers    = trainCmd.flags.Int("layers", 4, "blocks")
	trHeads     = trainCmd.flags.Int("heads", 4, "query heads")
	trKVHeads   = trainCmd.flags.Int("kv-heads", 2, "key/value heads")
	trFFN       = trainCmd.flags.Int("ffn", 352, "SwiGLU hidden width (intermediate_size)")
	trWindow    = trainCmd.flags.Int("window", 128, "tokens per training window")
	trBatch     = trainCmd.flags.Int("batch", 16, "windows per micro-batch")
	trAccum     = trainCmd.flags.Int("accum", 1, "micro-batches per optimiser step")
	trSteps     = trainCmd.flags.Int("steps", 1000, "optimiser steps")
	trLR        = trainCmd.flags.Float64("lr", 3e-3, "peak learning rate")
	trMinLR     = trainCmd.flags.Float64("min-lr", 3e-4, "final learning rate")
	trWarmup    = trainCmd.flags.Int("warmup", 50, "warmup steps")
	trWD        = trainCmd.flags.Float64("wd", 0.1, "weight decay (not on norms and embeddings)")
	trClip      = trainCmd.flags.Float64("clip", 1, "global gradient-norm clip (0: none)")
	trNoPack    = trainCmd.flags.Bool("no-pack", false, "one document per window (truncated) instead of packing")
	trEvalEvery = trainCmd.flags.Int("eval-every", 100, "validate every N steps")
	trCkptEvery = trainCmd.flags.Int("ckpt-every", 250, "checkpoint every N steps")
	trResume    = trainCmd.flags.Bool("resume", false, "continue from OUT/checkpoint")
	trSeed      = trainCmd.flags.Uint64("seed", 1, "seed for initialisation, data order and sampling of files")
	trQuiet     = trainCmd.flags.Bool("quiet", false, "no progress bar")
	trRecompute = trainCmd.flags.Bool("checkpoint-activations", false, "recompute each block's activations in the backward (less memory, same gradients)")
)

func init() { trainCmd.run = runTrain }

// curve is one row of curves.csv.
type curve struct {
	step               int
	lr, loss, gradNorm float64
	tokPerSec          float64
	valLoss, valBPB    float64 // NaN between evaluations
}

func runTrain(ctx context.Context, args []string, stdout io.Writer) error {
	if err := noArgs(args); err != nil {
		return err
	}
	o := train.Options{BatchSize: *trBatch, Accum: *trAccum, Steps: *trSteps,
		Schedule: train.Schedule{Peak: *trLR, Min: *trMinLR, Warmup: *trWarmup, Total: *trSteps},
		Beta1:    0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: *trWD, Clip: *trClip, Seed: *trSeed}
	if *trSteps < 1 || *trBatch < 1 || *trAccum < 1 || *trWindow < 2 || *trEvalEvery < 1 || *trCkptEvery < 1 {
		return usageError{"-steps, -batch, -accum, -eval-every and -ckpt-every must be positive, -window at least 2"}
	}
	src := *trSrc
	if src == "" {
		src = filepath.Join(runtime.GOROOT(), "src")
	}
	ckpt := filepath.Join(*trOut, "checkpoint")
	if err := os.MkdirAll(*trOut, 0o755); err != nil {
		return err
	}

	// The corpus: a seeded sample of files up to -corpus-mb, split by directory.
	docs, err := train.GoSource(src)
	if err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(*trSeed, 0xc0de))
	r.Shuffle(len(docs), func(i, j int) { docs[i], docs[j] = docs[j], docs[i] })
	var size int
	for i, d := range docs {
		if size += len(d.Text); float64(size) > *trCorpusMB*1e6 {
			docs = docs[:i]
			break
		}
	}
	trainDocs, valDocs := train.Split(docs, *trValFrac)
	if len(trainDocs) == 0 || len(valDocs) == 0 {
		return fmt.Errorf("corpus %s: %d training and %d validation files: both must be non-empty (more files, or another -val-frac)", src, len(trainDocs), len(valDocs))
	}
	valDocs = limitBytes(valDocs, *trValKB*1024)

	// The tokenizer: from the checkpoint when resuming, else loaded or trained.
	var tok *tokenizer.Tokenizer
	switch {
	case *trResume:
		tok, err = tokenizer.Load(filepath.Join(ckpt, "tokenizer.json"))
	case *trTokenizer != "":
		tok, err = tokenizer.Load(*trTokenizer)
	default:
		texts := make([][]byte, len(trainDocs))
		for i, d := range trainDocs {
			texts[i] = d.Text
		}
		tok, err = tokenizer.Train(texts, *trVocab, tokenizer.Options{})
	}
	if err != nil {
		return err
	}
	eos := tok.Special(tokenizer.EndOfText)
	if eos < 0 {
		return fmt.Errorf("tokenizer has no %s token", tokenizer.EndOfText)
	}
	var tokJSON bytes.Buffer
	if err := tok.WriteJSON(&tokJSON); err != nil {
		return err
	}

	cfg := model.Config{HiddenSize: *trDim, IntermediateSize: *trFFN, NumHiddenLayers: *trLayers,
		NumAttentionHeads: *trHeads, NumKeyValueHeads: *trKVHeads, RMSNormEps: 1e-5, RopeTheta: 10000,
		VocabSize: tok.VocabSize(), MaxPositionEmbeddings: max(*trWindow, 256), TieWordEmbeddings: true, EOSTokenID: &eos}
	if err := cfg.Validate(); err != nil {
		return usageError{err.Error()}
	}
	if *trWindow > cfg.MaxPositionEmbeddings {
		return usageError{fmt.Sprintf("-window %d is longer than max_position_embeddings %d", *trWindow, cfg.MaxPositionEmbeddings)}
	}
	trainData := train.Pack(trainDocs, tok, eos, *trWindow, !*trNoPack)
	valData := train.Pack(valDocs, tok, eos, *trWindow, !*trNoPack)

	var m *model.Model[float32]
	var p *model.Params[float32]
	if *trResume {
		if m, p, err = model.Load[float32](ckpt); err != nil {
			return err
		}
		if m.Config.HiddenSize != cfg.HiddenSize || m.Config.NumHiddenLayers != cfg.NumHiddenLayers || m.Config.VocabSize != cfg.VocabSize ||
			m.Config.NumAttentionHeads != cfg.NumAttentionHeads || m.Config.NumKeyValueHeads != cfg.NumKeyValueHeads || m.Config.IntermediateSize != cfg.IntermediateSize {
			return fmt.Errorf("resume: %s holds a model of another config (%+v) than the flags ask for", ckpt, m.Config)
		}
	} else {
		if m, err = model.New[float32](cfg); err != nil {
			return err
		}
		p = m.NewParams()
		m.Init(p, 0.02, *trSeed)
	}
	tr, err := train.NewTrainer(m, p, trainData, o)
	if err != nil {
		return err
	}
	var curves []curve
	if *trResume {
		if err := tr.Resume(ckpt); err != nil {
			return err
		}
		curves = readCurves(filepath.Join(*trOut, "curves.csv"), tr.Step)
	}
	nparams := 0
	for _, t := range m.Tensors(p) {
		nparams += len(t.Data)
	}
	fmt.Fprintf(stdout, "corpus: %d training files (%.1f MB, %d windows of %d tokens), %d held-out files (%.0f KB, %d windows); vocabulary %d\n",
		len(trainDocs), float64(trainData.Bytes)/1e6, len(trainData.Tokens), *trWindow, len(valDocs), float64(valData.Bytes)/1e3, len(valData.Tokens), tok.VocabSize())
	fmt.Fprintf(stdout, "model: %d parameters (dim %d, %d layers, %d/%d heads, ffn %d); %d steps of %d tokens from step %d\n",
		nparams, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.IntermediateSize,
		o.Steps, o.BatchSize*o.Accum*(*trWindow), tr.Step)

	save := func() error {
		files, err := tr.Files()
		if err != nil {
			return err
		}
		files["tokenizer.json"] = tokJSON.Bytes()
		if err := m.Save(ckpt, p, files); err != nil {
			return err
		}
		return writeCurves(filepath.Join(*trOut, "curves.csv"), filepath.Join(*trOut, "loss.png"), curves)
	}
	evaluate := func() (loss, bpb float64, err error) {
		mean, total, _, err := train.Evaluate(m, p, valData, o.BatchSize)
		if err != nil {
			return 0, 0, err
		}
		return mean, total / math.Ln2 / float64(valData.Bytes), nil
	}

	var bar *progressbar.ProgressBar
	if !*trQuiet {
		bar = progressbar.NewOptions(o.Steps, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetWidth(24),
			progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(200*time.Millisecond))
		bar.Set(tr.Step)
	}
	start, startStep := time.Now(), tr.Step
	var stopErr error
	for tr.Step < o.Steps {
		if ctx.Err() != nil {
			stopErr = errors.New("interrupted")
			break
		}
		t0 := time.Now()
		res, err := tr.TrainStep()
		if err != nil {
			if errors.Is(err, train.ErrNonFinite) {
				fmt.Fprintf(stdout, "\nstopped: %v; the last good checkpoint (%s) is kept\n", err, ckpt)
				return errFailed
			}
			return err
		}
		row := curve{step: res.Step, lr: res.LR, loss: res.Loss, gradNorm: res.GradNorm,
			tokPerSec: float64(o.BatchSize*o.Accum*(*trWindow)) / time.Since(t0).Seconds(), valLoss: math.NaN(), valBPB: math.NaN()}
		if res.Step%*trEvalEvery == 0 || res.Step == o.Steps {
			if row.valLoss, row.valBPB, err = evaluate(); err != nil {
				return err
			}
		}
		curves = append(curves, row)
		if bar != nil {
			bar.Describe(fmt.Sprintf("loss %.3f  %5.0f tok/s", res.Loss, row.tokPerSec))
			bar.Set(res.Step)
		}
		if res.Step%*trCkptEvery == 0 || res.Step == o.Steps {
			if err := save(); err != nil {
				return err
			}
		}
	}
	if bar != nil {
		bar.Finish()
		fmt.Fprintln(os.Stderr)
	}
	if stopErr != nil {
		if err := save(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%v at step %d: checkpoint saved; continue with -resume\n", stopErr, tr.Step)
		return errFailed
	}
	elapsed := time.Since(start).Seconds()
	if len(curves) == 0 {
		return nil
	}
	last := curves[len(curves)-1]
	first := curves[0]
	fmt.Fprintf(stdout, "trained %d steps in %.0f s (%.0f tokens/s); train loss %.3f → %.3f; validation loss %.3f nats/token\n",
		tr.Step-startStep, elapsed, float64((tr.Step-startStep)*o.BatchSize*o.Accum*(*trWindow))/elapsed, first.loss, last.loss, last.valLoss)
	fmt.Fprintf(stdout, "held-out %d bytes: attnlab %.3f bits/byte", valData.Bytes, last.valBPB)
	var held []byte
	for _, d := range valDocs {
		held = append(held, d.Text...)
	}
	for _, c := range [][]string{{"xz", "-9e", "-c"}, {"gzip", "-9", "-c"}} {
		if n, err := compressedSize(held, c[0], c[1:]...); err == nil {
			fmt.Fprintf(stdout, ", %s %.3f", strings.Join(c[:2], " "), float64(8*n)/float64(len(held)))
		}
	}
	fmt.Fprintf(stdout, "\ncheckpoint: %s; curves: %s\n", ckpt, filepath.Join(*trOut, "curves.csv"))
	return nil
}

// limitBytes keeps the first documents up to n bytes (at least one).
func limitBytes(docs []train.Document, n int) []train.Document {
	size := 0
	for i, d := range docs {
		if size += len(d.Text); size > n && i > 0 {
			return docs[:i]
		}
	}
	return docs
}

// compressedSize runs a compressor on data and returns its output's size.
func compressedSize(data []byte, name string, args ...string) (int, error) {
	if _, err := exec.LookPath(name); err != nil {
		return 0, err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.Output()
	return len(out), err
}

func writeCurves(csvPath, pngPath string, curves []curve) error {
	var b strings.Builder
	b.WriteString("step,lr,loss,grad_norm,tokens_per_s,val_loss,val_bits_per_byte\n")
	var trainS, valS plots.Series
	trainS.Name, valS.Name = "train", "validation"
	for _, c := range curves {
		fmt.Fprintf(&b, "%d,%.6g,%.6f,%.6g,%.1f,%s,%s\n", c.step, c.lr, c.loss, c.gradNorm, c.tokPerSec, csvFloat(c.valLoss), csvFloat(c.valBPB))
		trainS.X, trainS.Y = append(trainS.X, float64(c.step)), append(trainS.Y, c.loss)
		if !math.IsNaN(c.valLoss) {
			valS.X, valS.Y = append(valS.X, float64(c.step)), append(valS.Y, c.valLoss)
		}
	}
	if err := atomicfile.WriteFile(csvPath, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return plots.CurvesPNG(pngPath, "attnlab train", "step", "loss (nats/token)", []plots.Series{trainS, valS})
}

func csvFloat(x float64) string {
	if math.IsNaN(x) {
		return ""
	}
	return fmt.Sprintf("%.6f", x)
}

// readCurves reads the rows of an earlier run's curves.csv up to step.
func readCurves(path string, step int) []curve {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []curve
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n")[1:] {
		var c curve
		f := strings.Split(line, ",")
		if len(f) != 7 {
			continue
		}
		fmt.Sscan(f[0], &c.step)
		fmt.Sscan(f[1], &c.lr)
		fmt.Sscan(f[2], &c.loss)
		fmt.Sscan(f[3], &c.gradNorm)
		fmt.Sscan(f[4], &c.tokPerSec)
		c.valLoss, c.valBPB = math.NaN(), math.NaN()
		if f[5] != "" {
			fmt.Sscan(f[5], &c.valLoss)
			fmt.Sscan(f[6], &c.valBPB)
		}
		if c.step <= step {
			out = append(out, c)
		}
	}
	return out
}
