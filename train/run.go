package train

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/attnlab/attnlab/corpus"
	"github.com/attnlab/attnlab/internal/atomicfile"
	"github.com/attnlab/attnlab/internal/memlimit"
	"github.com/attnlab/attnlab/internal/readlimit"
	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/tokenizer"
	"github.com/attnlab/attnlab/train/internal/compress"
)

// Files of a run folder beside its checkpoint.
const (
	CheckpointDir = "checkpoint"
	CurvesFile    = "curves.csv"
	PlotFile      = "loss.png"
	HeldOutFile   = "heldout.txt" // the held-out files, one a line, relative to /, for attnlab lm-eval -files
	RecordFile    = "result.json" // what the finished run measured: a RunRecord
)

// RunOptions describe a whole training run of the language model: the
// corpus, the tokenizer, the model, the optimiser and the output folder.
type RunOptions struct {
	Src      string  // folder of Go source (the standard library: $GOROOT/src)
	Corpus   string  // folder of Debian packages (attnlab corpus fetch), read after Src; "" none
	CorpusMB float64 // a seeded sample of files up to this size; 0: every file
	ValFrac  float64 // share of packages held out (by a hash of the import path)
	ValKB    int     // validate on at most this many KB of the held-out files

	Tokenizer   string  // tokenizer.json to load; "" trains one of Vocab ids
	Vocab       int     //
	TokenizerMB float64 // train the tokenizer on a seeded sample of this size; 0: every training file

	Model  model.Config // sizes; the vocabulary and special ids are filled in
	Window int          // tokens per training window
	NoPack bool         // one document per window instead of packing

	Options
	InitStd   float64 // standard deviation of the initial weights
	EvalEvery int
	SaveEvery int

	Out    string // the run folder: checkpoint, curves, plot
	Resume bool   // continue the run in Out
	Force  bool   // start over in an Out that holds a run
	// Prepare writes the run's step-0 checkpoint and its training windows
	// (DataFile, in the order the trainer takes them) and stops: the input
	// of the PyTorch trainer, python/torch_train.py ddp.
	Prepare bool
}

// Validate checks the options before any work: a one-line error naming
// the flag-like field.
func (o RunOptions) Validate() error {
	switch {
	case o.Steps < 1 || o.BatchSize < 1 || o.Accum < 1:
		return fmt.Errorf("steps %d, batch %d, accum %d: want all >= 1", o.Steps, o.BatchSize, o.Accum)
	case o.Shards < 0 || o.BatchSize%max(o.Shards, 1) != 0:
		return fmt.Errorf("shards %d: want >= 1, dividing batch %d", o.Shards, o.BatchSize)
	case o.Window < 2:
		return fmt.Errorf("window %d: want >= 2", o.Window)
	case o.EvalEvery < 1 || o.SaveEvery < 1:
		return fmt.Errorf("eval-every %d, save-every %d: want >= 1", o.EvalEvery, o.SaveEvery)
	case !(o.CorpusMB >= 0) || !(o.TokenizerMB >= 0):
		return fmt.Errorf("corpus-mb %v, tokenizer-mb %v: want >= 0 (0: all)", o.CorpusMB, o.TokenizerMB)
	case !(o.ValFrac > 0 && o.ValFrac < 1):
		return fmt.Errorf("val-frac %v: want in (0, 1)", o.ValFrac)
	case o.ValKB < 1:
		return fmt.Errorf("val-kb %d: want >= 1", o.ValKB)
	case o.Resume && o.Force:
		return errors.New("resume and force: choose one")
	case o.Prepare && o.Resume:
		return errors.New("prepare and resume: choose one")
	case !(o.InitStd > 0) || math.IsInf(o.InitStd, 0):
		return fmt.Errorf("init-std %v: want a finite value > 0", o.InitStd)
	}
	if err := o.Options.Validate(); err != nil {
		return err
	}
	if o.Tokenizer == "" && o.Vocab < tokenizer.NumBytes+1 {
		return fmt.Errorf("vocab %d: want > %d (the byte tokens and end-of-text)", o.Vocab, tokenizer.NumBytes)
	}
	if err := o.checkSizes(); err != nil {
		return err
	}
	cfg := o.Model
	cfg.VocabSize = max(o.Vocab, tokenizer.NumBytes+1)
	cfg.MaxPositionEmbeddings = max(cfg.MaxPositionEmbeddings, o.Window)
	if err := cfg.Validate(); err != nil {
		return err
	}
	return o.checkMemory(cfg)
}

// MaxBatch bounds the windows of a batch, in training (BatchSize) and in
// scoring (ScoreOptions.Batch); the memory their activations need is
// checked besides.
const MaxBatch = 1 << 20

// checkSizes bounds each size by the limits of model.Config and MaxBatch,
// naming the flag-like field.
func (o RunOptions) checkSizes() error {
	for _, f := range []struct {
		name   string
		v, max int
	}{
		{"vocab", o.Vocab, model.MaxDim}, {"dim", o.Model.HiddenSize, model.MaxDim}, {"ffn", o.Model.IntermediateSize, model.MaxDim},
		{"heads", o.Model.NumAttentionHeads, model.MaxDim}, {"kv-heads", o.Model.NumKeyValueHeads, model.MaxDim},
		{"layers", o.Model.NumHiddenLayers, model.MaxLayers}, {"window", o.Window, model.MaxPositions},
		{"val-kb", o.ValKB, math.MaxInt / 1024}, {"batch", o.BatchSize, MaxBatch},
	} {
		if f.v > f.max {
			return fmt.Errorf("%s %d: want at most %d", f.name, f.v, f.max)
		}
	}
	return nil
}

// checkMemory holds what training cfg needs at its peak against the
// memory available: the weights, a gradient per shard and AdamW's two
// moments (float32), each shard's activations, and the activations of a
// validation batch, allocated while the training ones are kept.
func (o RunOptions) checkMemory(cfg model.Config) error {
	S, B, W := o.shards(), o.BatchSize, o.Window
	state := memlimit.Mul(cfg.NumParams(), 4, 3+S)
	acts := memlimit.Add(memlimit.Mul(S, cfg.ActsSize(B/S, W, o.CheckpointActivations), 4), memlimit.Mul(cfg.ActsSize(B, W, false), 4))
	if acts >= state {
		return memlimit.Check(fmt.Sprintf("batch %d × window %d", B, W), memlimit.Add(acts, state), "activations, weights and optimiser state")
	}
	return memlimit.Check(fmt.Sprintf("a model of %d parameters (dim %d, layers %d, ffn %d, vocab %d)", cfg.NumParams(), cfg.HiddenSize, cfg.NumHiddenLayers, cfg.IntermediateSize, cfg.VocabSize),
		memlimit.Add(acts, state), "weights, gradients, optimiser state and activations")
}

// Validate checks the optimiser's hyper-parameters: a learning rate above
// 0 (a negative one trains uphill), betas in [0, 1), finite decay and clip.
func (o Options) Validate() error {
	s := o.Schedule
	switch {
	case !(s.Peak > 0) || math.IsInf(s.Peak, 0):
		return fmt.Errorf("lr %v: want a finite value > 0", s.Peak)
	case !(s.Min >= 0) || s.Min > s.Peak:
		return fmt.Errorf("min-lr %v: want in [0, lr = %v]", s.Min, s.Peak)
	case s.Warmup < 0:
		return fmt.Errorf("warmup %d: want >= 0", s.Warmup)
	case !(o.WeightDecay >= 0) || math.IsInf(o.WeightDecay, 0):
		return fmt.Errorf("wd %v: want a finite value >= 0", o.WeightDecay)
	case !(o.Clip >= 0) || math.IsInf(o.Clip, 0):
		return fmt.Errorf("clip %v: want a finite value >= 0 (0: none)", o.Clip)
	case !(o.Beta1 >= 0 && o.Beta1 < 1) || !(o.Beta2 >= 0 && o.Beta2 < 1):
		return fmt.Errorf("betas %v, %v: want in [0, 1)", o.Beta1, o.Beta2)
	case !(o.Eps > 0):
		return fmt.Errorf("adam eps %v: want > 0", o.Eps)
	}
	return nil
}

// Events are how a long-running job reports while it works; any may be
// nil. The library never prints: the command decides where each goes.
type Events struct {
	Log      func(msg string) // a line of news: the corpus, the model, a resume
	Warning  func(msg string) // something degenerate the user must know: an empty split
	Progress func(Progress)   // after each training step
	// Task returns the progress callback of a counted task (embedding n
	// documents), or nil.
	Task func(what string, n int) func(done int)
}

// Logf sends a line of news to Log.
func (e Events) Logf(format string, args ...any) {
	if e.Log != nil {
		e.Log(fmt.Sprintf(format, args...))
	}
}

// Warn sends msg to Warning.
func (e Events) Warn(msg string) {
	if e.Warning != nil {
		e.Warning(msg)
	}
}

// Count returns the progress callback of a task of n steps, or nil.
func (e Events) Count(what string, n int) func(done int) {
	if e.Task == nil {
		return nil
	}
	return e.Task(what, n)
}

// RunResult is what a run did.
type RunResult struct {
	Loop       LoopResult
	Checkpoint string
	Params     int
	ValBytes   int     // held-out bytes
	ValLoss    float64 // nats per token after the last step
	ValBPB     float64 // bits per byte after the last step
	// Compressors on exactly the held-out bytes, for comparison.
	Compressors []compress.Result
}

// RunRecord is what a finished run of the language model measured, kept
// in its folder (RecordFile) for scripts and the documentation. The
// curves hold the rest: the loss of every step, the validation loss and
// bits per byte of every evaluation, the seconds since training began.
type RunRecord struct {
	Options RunOptions `json:"options"` // as the run was given them, derived
	Params  int        `json:"params"`
	// FromStep is the step this call of Run began at: 0, or the step of
	// the checkpoint it resumed.
	FromStep int `json:"from_step"`
	// Seconds is the wall time of this call of Run, from reading the
	// corpus to the last compressor's end: a measure on the machine of
	// the run, not a property of the code.
	Seconds        float64 `json:"seconds"`
	ValBytes       int     `json:"val_bytes"`         // held-out bytes
	ValLoss        float64 `json:"val_loss"`          // nats per token after the last step
	ValBitsPerByte float64 `json:"val_bits_per_byte"` // after the last step
	// Compressors on exactly the held-out bytes, for comparison: those
	// installed.
	Compressors []compress.Result `json:"compressors"`
}

// ReadRecord reads the RunRecord of the finished run in the folder dir.
func ReadRecord(dir string) (*RunRecord, error) {
	path := filepath.Join(dir, RecordFile)
	data, err := readlimit.File(path, MaxStateBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("train: %s holds no finished run (no %s)", dir, RecordFile)
	}
	if err != nil {
		return nil, err
	}
	var r RunRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("train: %s: %w", path, err)
	}
	return &r, nil
}

// Run trains the language model as o describes, in the folder o.Out.
//
// Nothing is written before the inputs are read and checked, and an Out
// that holds a run is refused unless o.Resume (continue it) or o.Force
// (start over): the folder is a Session's. An interrupt (ctx cancelled)
// during data preparation writes nothing; during training it saves the
// run, then returns ctx's error. A non-finite step keeps the last good
// checkpoint and returns an error wrapping ErrNonFinite. A run that
// finishes writes its RunRecord into o.Out (RecordFile); one that does not
// leaves none, and a finished run resumed keeps its own.
func Run(ctx context.Context, o RunOptions, ev Events) (*RunResult, error) {
	start := time.Now()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	s, err := OpenSession(SessionOptions{Layout: o.Layout(), Resume: o.Resume, Force: o.Force, Kind: model.KindLM,
		Inputs: []string{o.Src, o.Corpus, o.Tokenizer}}, ev)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	c, err := o.readCorpus(ctx)
	if err != nil {
		return nil, err
	}
	tok, err := o.tokenizer(ctx, s.Checkpoint, c.train)
	if err != nil {
		return nil, err
	}
	r, err := o.prepare(ctx, s, tok, c)
	if err != nil {
		return nil, err
	}
	res := &RunResult{Checkpoint: s.Checkpoint, ValBytes: r.val.Bytes, Params: numParams(r.m, r.p)}
	ev.Logf("corpus: %d training files (%.1f MB, %d windows of %d tokens), %d held-out files (%.0f KB, %d windows); vocabulary %d",
		len(c.trainDocs), float64(r.tr.Data.Bytes)/1e6, len(r.tr.Data.Tokens), o.Window, len(c.valDocs), float64(r.val.Bytes)/1e3, len(r.val.Tokens), tok.VocabSize())
	cfg := r.m.Config
	ev.Logf("model: %d parameters (dim %d, %d layers, %d/%d heads, ffn %d); %d steps of %d tokens from step %d",
		res.Params, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.IntermediateSize,
		o.Steps, o.BatchSize*o.Accum*o.Window, r.tr.Step)
	if err := ctx.Err(); err != nil {
		return nil, err // nothing trained yet: nothing written
	}

	if err := s.MakeDir(); err != nil {
		return nil, err
	}
	record := filepath.Join(o.Out, RecordFile)
	if r.tr.StepsDone() < o.Steps {
		// the folder's run is not finished: a record there is an earlier run's
		if err := os.Remove(record); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	held := filepath.Join(o.Out, HeldOutFile)
	if err := corpus.WriteFileList(held, absolute(c.held), "/"); err != nil {
		return nil, err
	}
	s.Keep(held) // nothing of the run is kept: nor is its list of held-out files
	if o.Prepare {
		epochs := (o.Steps*o.BatchSize*o.Accum)/len(r.tr.Data.Tokens) + 1
		if err := r.tr.Data.WriteFile(filepath.Join(o.Out, DataFile), o.Seed, epochs); err != nil {
			return nil, err
		}
		return res, s.Save(r.tr, r.save, nil)
	}
	if res.Loop, err = s.Train(ctx, r.loop, r.tr, r.save); err != nil {
		return res, err
	}
	if last := r.loop.Rows; len(last) > 0 {
		res.ValLoss = Mean(last, "val_loss", -1)
		res.ValBPB = Mean(last, "val_bits_per_byte", -1)
	}
	texts := make([][]byte, len(c.valDocs))
	for i, d := range c.valDocs {
		texts[i] = d.Text
	}
	if res.Compressors, err = compress.MeasureAll(ctx, texts); err != nil {
		return res, err
	}
	return res, o.writeRecord(record, res, time.Since(start))
}

// writeRecord writes the RunRecord of the run that res finished in took,
// unless it finished an earlier call, whose record stays.
func (o RunOptions) writeRecord(path string, res *RunResult, took time.Duration) error {
	if res.Loop.Steps() == 0 && fileExists(path) {
		return nil
	}
	data, err := json.MarshalIndent(RunRecord{Options: o, Params: res.Params, FromStep: res.Loop.From, Seconds: took.Seconds(),
		ValBytes: res.ValBytes, ValLoss: res.ValLoss, ValBitsPerByte: res.ValBPB, Compressors: res.Compressors}, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(data, '\n'), 0o644)
}

// numParams counts the parameters of m.
func numParams(m *model.Model[float32], p *model.Params[float32]) int {
	n := 0
	for _, t := range m.Tensors(p) {
		n += len(t.Data)
	}
	return n
}

// Layout is where a run of o keeps its files.
func (o RunOptions) Layout() Layout {
	return Layout{Out: o.Out, Checkpoint: filepath.Join(o.Out, CheckpointDir), Curves: filepath.Join(o.Out, CurvesFile),
		Plot: filepath.Join(o.Out, PlotFile), Title: "attnlab train"}
}

// runCorpus is a run's corpus, split by package.
type runCorpus struct {
	train, held        []corpus.Document
	trainDocs, valDocs []Document // valDocs: the first ValKB of held
}

// readCorpus reads o's sources and keeps a seeded sample of files up to
// CorpusMB, split by package.
func (o RunOptions) readCorpus(ctx context.Context) (*runCorpus, error) {
	srcs := []corpus.Source{{Name: srcName(o.Src), Dir: o.Src}}
	if o.Corpus != "" {
		deb, err := corpus.Debian(o.Corpus)
		if err != nil {
			return nil, err
		}
		srcs = append(srcs, deb...)
	}
	read, _, err := corpus.Read(ctx, srcs, corpus.Options{})
	if err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(o.Seed, 0xc0de))
	r.Shuffle(len(read), func(i, j int) { read[i], read[j] = read[j], read[i] })
	read = sample(read, o.CorpusMB)
	c := &runCorpus{}
	c.train, c.held = corpus.Split(read, o.ValFrac)
	if len(c.train) == 0 || len(c.held) == 0 {
		return nil, fmt.Errorf("train: corpus %s: %d training and %d held-out files: both must be non-empty (more files, or another -val-frac)", o.Src, len(c.train), len(c.held))
	}
	c.trainDocs, c.valDocs = documents(c.train), LimitBytes(documents(c.held), o.ValKB*1024)
	return c, ctx.Err()
}

// tokenizer returns the run's tokenizer: the checkpoint's in ckpt when
// resuming, else o.Tokenizer's or one trained on a sample of docs.
func (o RunOptions) tokenizer(ctx context.Context, ckpt string, docs []corpus.Document) (*tokenizer.Tokenizer, error) {
	var tok *tokenizer.Tokenizer
	var err error
	switch {
	case o.Resume:
		tok, err = tokenizer.Load(filepath.Join(ckpt, model.TokenizerFile))
	case o.Tokenizer != "":
		tok, err = tokenizer.Load(o.Tokenizer)
	default:
		var texts [][]byte
		for _, d := range sample(docs, o.TokenizerMB) {
			texts = append(texts, d.Text)
		}
		tok, err = tokenizer.TrainContext(ctx, texts, o.Vocab, tokenizer.Options{})
	}
	if err != nil {
		return nil, err
	}
	if tok.Special(tokenizer.EndOfText) < 0 {
		return nil, fmt.Errorf("train: the tokenizer has no %s token", tokenizer.EndOfText)
	}
	return tok, nil
}

// lmRun is a prepared run of the language model.
type lmRun struct {
	m    *model.Model[float32]
	p    *model.Params[float32]
	tr   *Trainer[float32]
	val  *Windows
	loop *Loop
	save Saver
}

// prepare packs the corpus into windows and makes the run's model (the
// checkpoint's when resuming, else freshly initialised), trainer and loop.
func (o RunOptions) prepare(ctx context.Context, s *Session, tok *tokenizer.Tokenizer, c *runCorpus) (*lmRun, error) {
	eos := tok.Special(tokenizer.EndOfText)
	var tokJSON bytes.Buffer
	if err := tok.WriteJSON(&tokJSON); err != nil {
		return nil, err
	}
	cfg := o.Model
	cfg.VocabSize, cfg.EOSTokenID, cfg.Kind = tok.VocabSize(), &eos, model.KindLM
	cfg.MaxPositionEmbeddings = max(cfg.MaxPositionEmbeddings, o.Window)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	trainData, err := PackContext(ctx, c.trainDocs, tok, eos, o.Window, !o.NoPack)
	if err != nil {
		return nil, err
	}
	valData, err := PackContext(ctx, c.valDocs, tok, eos, o.Window, !o.NoPack)
	if err != nil {
		return nil, err
	}
	var m *model.Model[float32]
	var p *model.Params[float32]
	if o.Resume {
		if m, p, err = model.Load[float32](s.Checkpoint); err != nil {
			return nil, err
		}
		if diffs := configDiffs(m.Config, cfg); len(diffs) > 0 {
			return nil, fmt.Errorf("train: resume: %s holds a model of other sizes (%s): resume with the run's own flags, or -force starts over", s.Checkpoint, strings.Join(diffs, "; "))
		}
	} else {
		if m, err = model.New[float32](cfg); err != nil {
			return nil, err
		}
		p = m.NewParams()
		m.Init(p, o.InitStd, o.Seed)
	}
	tr, err := NewTrainer(m, p, trainData, o.Options)
	if err != nil {
		return nil, err
	}
	loop := &Loop{Steps: o.Steps, EvalEvery: o.EvalEvery, SaveEvery: o.SaveEvery, Progress: s.ev.Progress,
		Columns: []string{"step", "lr", "loss", "grad_norm", "tokens", "seconds", "val_loss", "val_bits_per_byte"}}
	if err := s.Restore(tr, loop); err != nil {
		return nil, err
	}
	loop.Step = func() (Record, error) {
		st, err := tr.TrainStep()
		if err != nil {
			return nil, err
		}
		return Record{"step": float64(st.Step), "lr": st.LR, "loss": st.Loss, "grad_norm": st.GradNorm, "tokens": float64(st.Tokens)}, nil
	}
	loop.Eval = func() (Record, error) {
		mean, total, _, err := Evaluate(m, p, valData, o.BatchSize)
		if err != nil {
			return nil, err
		}
		return Record{"val_loss": mean, "val_bits_per_byte": total / math.Ln2 / float64(valData.Bytes)}, nil
	}
	offset := Mean(loop.Rows, "seconds", -1) // a resumed run's clock goes on
	if math.IsNaN(offset) {
		offset = 0
	}
	progress := loop.Progress
	loop.Progress = func(pr Progress) {
		pr.Record["seconds"] = offset + pr.Elapsed.Seconds()
		if progress != nil {
			progress(pr)
		}
	}
	save := func(dir string, files map[string][]byte) error {
		files[model.TokenizerFile] = tokJSON.Bytes()
		return m.Save(dir, p, files)
	}
	return &lmRun{m: m, p: p, tr: tr, val: valData, loop: loop, save: save}, nil
}

// configDiffs lists the sizes in which a saved model differs from the one
// the flags ask for, as "-dim 64 (now 128)".
func configDiffs(saved, now model.Config) []string {
	var diffs []string
	for _, f := range []struct {
		flag string
		a, b int
	}{
		{"-dim", saved.HiddenSize, now.HiddenSize},
		{"-layers", saved.NumHiddenLayers, now.NumHiddenLayers},
		{"-heads", saved.NumAttentionHeads, now.NumAttentionHeads},
		{"-kv-heads", saved.NumKeyValueHeads, now.NumKeyValueHeads},
		{"-ffn", saved.IntermediateSize, now.IntermediateSize},
		{"vocabulary", saved.VocabSize, now.VocabSize},
	} {
		if f.a != f.b {
			diffs = append(diffs, fmt.Sprintf("%s %d (now %d)", f.flag, f.a, f.b))
		}
	}
	return diffs
}

// LimitBytes keeps the first documents up to n bytes (at least one).
func LimitBytes(docs []Document, n int) []Document {
	size := 0
	for i, d := range docs {
		if size += len(d.Text); size > n && i > 0 {
			return docs[:i]
		}
	}
	return docs
}

// srcName names the source of folder dir: "std" for the standard library.
func srcName(dir string) string {
	if filepath.Base(dir) == "src" && fileExists(filepath.Join(dir, "runtime", "runtime.go")) {
		return "std"
	}
	return "src"
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// sample keeps the first documents up to mb megabytes (all for 0).
func sample(docs []corpus.Document, mb float64) []corpus.Document {
	if mb == 0 {
		return docs
	}
	size := 0
	for i, d := range docs {
		if size += len(d.Text); float64(size) > mb*1e6 && i > 0 {
			return docs[:i]
		}
	}
	return docs
}

// documents converts corpus documents to training documents.
func documents(docs []corpus.Document) []Document {
	out := make([]Document, len(docs))
	for i, d := range docs {
		out[i] = Document{Path: d.Path, Dir: d.Unit, Text: d.Text}
	}
	return out
}

// absolute returns docs with their files as absolute paths, for a list
// that any working directory can read.
func absolute(docs []corpus.Document) []corpus.Document {
	out := make([]corpus.Document, len(docs))
	for i, d := range docs {
		out[i] = d
		if abs, err := filepath.Abs(d.File); err == nil {
			out[i].File = abs
		}
	}
	slices.SortFunc(out, func(a, b corpus.Document) int { return strings.Compare(a.Path, b.Path) })
	return out
}
