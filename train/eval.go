package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"unsafe"

	"github.com/attnlab/attnlab/corpus"
	"github.com/attnlab/attnlab/internal/memlimit"
	"github.com/attnlab/attnlab/internal/readlimit"
	"github.com/attnlab/attnlab/internal/vec"
	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/nn"
	"github.com/attnlab/attnlab/tokenizer"
	"github.com/attnlab/attnlab/train/internal/compress"
)

// TextFile is a file to evaluate a language model on.
type TextFile struct {
	Path string
	Text []byte
}

// FileScore is the model's measure on one file.
type FileScore struct {
	Path   string  `json:"path"`
	Bytes  int     `json:"bytes"`
	Tokens int     `json:"tokens"`
	Nats   float64 `json:"nats"` // −ln p of the file's tokens
}

// Score is a model's measure on a set of files: the cross-entropy of every
// token of every file, each file read on its own.
type Score struct {
	Files        []FileScore `json:"files,omitempty"`
	Bytes        int         `json:"bytes"`
	Tokens       int         `json:"tokens"`
	Nats         float64     `json:"nats"`
	BitsPerByte  float64     `json:"bits_per_byte"`
	NatsPerToken float64     `json:"nats_per_token"`
	Window       int         `json:"window"` // tokens the model sees at once
	Stride       int         `json:"stride"` // tokens scored per window after a file's first
}

// ScoreOptions set how files are read.
type ScoreOptions struct {
	Window int // tokens per forward pass (at most max_position_embeddings); 0: the model's maximum
	// Stride is how many new tokens each window after a file's first
	// scores: every token is predicted with at least Window−Stride tokens
	// of context (all of them, up to the file's start, near its start).
	// 0: Window/2.
	Stride   int
	Batch    int               // windows per forward pass, at most MaxBatch; 0: 8
	Progress func(done, n int) // windows scored of all
}

// ScoreFiles measures the language model m on files: each file is encoded
// alone, preceded by the end-of-text token eos (the context every document
// starts from in training), and each of its tokens is predicted from the
// tokens before it in the same file, through windows of opts.Window tokens
// that advance by opts.Stride. Bits per byte count every byte of every
// file once. It stops with ctx's error when ctx is done, and with an error
// wrapping model.ErrNonFinite, naming the file and the token, when a logit
// it would score is not finite.
//
// Options that do not suit m (a window beyond its positions, a batch whose
// activations do not fit in memory) are an *OptionError.
func ScoreFiles[T nn.Float](ctx context.Context, m *model.Model[T], p *model.Params[T], enc Encoder, eos int, files []TextFile, o ScoreOptions) (*Score, error) {
	var z T
	W, stride, B, err := o.resolve(m.Config, int(unsafe.Sizeof(z)))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, errors.New("train: score: no files")
	}

	// Every window: its tokens and from which position on it scores.
	type window struct {
		file, from int
		start      int // the position in the file's ids of tokens[0]
		tokens     []int
	}
	var wins []window
	res := &Score{Files: make([]FileScore, len(files)), Window: W, Stride: stride}
	for i, f := range files {
		if i%64 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		ids := append([]int{eos}, enc.Encode(f.Text)...)
		res.Files[i] = FileScore{Path: f.Path, Bytes: len(f.Text), Tokens: len(ids) - 1}
		// the first window scores positions 1…W−1 (position 0 is eos);
		// each next one starts stride tokens later and scores its last
		// stride positions
		for start, scored := 0, 1; scored < len(ids); start += stride {
			if start > 0 {
				start = min(start, len(ids)-W)
			}
			end := min(start+W, len(ids))
			wins = append(wins, window{file: i, from: scored - start, start: start, tokens: ids[start:end]})
			scored = end
		}
	}

	a := m.NewActs(B, W)
	for lo := 0; lo < len(wins); lo += B {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hi := min(lo+B, len(wins))
		b := &model.Batch{B: B, T: W, Tokens: make([]int, B*W), Valid: make([]bool, B*W), Targets: make([]int, B*W)}
		for i := range b.Targets {
			b.Targets[i] = nn.DefaultIgnoreIndex
		}
		for r := range B {
			if lo+r >= hi {
				continue // a padding row: no valid token, no target
			}
			w := wins[lo+r]
			for t, id := range w.tokens {
				b.Tokens[r*W+t], b.Valid[r*W+t] = id, true
				// position t predicts token t+1
				if t+1 >= w.from && t+1 < len(w.tokens) {
					b.Targets[r*W+t] = w.tokens[t+1]
				}
			}
		}
		if _, _, err := m.Forward(a, p, b); err != nil {
			return nil, err
		}
		// −log softmax of each target from the logits, in float64: a
		// float32 probability can underflow to 0 where the log does not
		V := m.Config.VocabSize
		for r := range hi - lo {
			f := &res.Files[wins[lo+r].file]
			for t := range W {
				if tg := b.Targets[r*W+t]; tg != nn.DefaultIgnoreIndex {
					row := a.Logits[(r*W+t)*V : (r*W+t+1)*V]
					if i := vec.NonFinite(row); i >= 0 {
						return nil, fmt.Errorf("train: score: %s: token %d: the logit of token id %d is %v: %w",
							f.Path, wins[lo+r].start+t+1, i, row[i], model.ErrNonFinite)
					}
					f.Nats += nll(row, tg)
				}
			}
		}
		if o.Progress != nil {
			o.Progress(hi, len(wins))
		}
	}
	for _, f := range res.Files {
		res.Bytes += f.Bytes
		res.Tokens += f.Tokens
		res.Nats += f.Nats
	}
	if res.Bytes == 0 {
		return nil, errors.New("train: score: the files hold no bytes")
	}
	res.BitsPerByte = res.Nats / math.Ln2 / float64(res.Bytes)
	res.NatsPerToken = res.Nats / float64(res.Tokens)
	return res, nil
}

// checkDistinct returns an error naming a file listed twice in files, by
// another name too (a symbolic or hard link, "./a" and "a"): bits per byte
// would count its bytes and its tokens twice.
func checkDistinct(files []string) error {
	infos := make([]os.FileInfo, len(files))
	bySize := map[int64][]int{} // one file has one size: compare only within a size
	for i, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			return fmt.Errorf("train: lm-eval: %w", err)
		}
		for _, j := range bySize[fi.Size()] {
			if os.SameFile(fi, infos[j]) {
				if filepath.Clean(f) == filepath.Clean(files[j]) {
					return fmt.Errorf("train: lm-eval: %s is listed twice (entries %d and %d of %d): each file is scored once", f, j+1, i+1, len(files))
				}
				return fmt.Errorf("train: lm-eval: %s is the file %s, listed before (entries %d and %d of %d): each file is scored once", f, files[j], j+1, i+1, len(files))
			}
		}
		infos[i] = fi
		bySize[fi.Size()] = append(bySize[fi.Size()], i)
	}
	return nil
}

// nll is −log softmax(logits)[target], computed as logsumexp − logit.
func nll[T nn.Float](logits []T, target int) float64 {
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = max(mx, float64(v))
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - mx)
	}
	return mx + math.Log(sum) - float64(logits[target])
}

// An OptionError is an option that does not suit the model it is used
// with: a window beyond its positions, a stride not below the window, a
// batch whose activations do not fit in memory. It is the caller's
// mistake, not a failure of the model.
type OptionError struct{ Err error }

func (e *OptionError) Error() string { return e.Err.Error() }
func (e *OptionError) Unwrap() error { return e.Err }

// resolve returns the window, stride and batch of o for a model of c whose
// values take elem bytes, after checking them and the memory of their
// activations.
func (o ScoreOptions) resolve(c model.Config, elem int) (W, stride, B int, err error) {
	W = o.Window
	if W == 0 {
		W = c.MaxPositionEmbeddings
	}
	switch {
	case W < 2 || W > c.MaxPositionEmbeddings:
		return 0, 0, 0, &OptionError{fmt.Errorf("train: score: window %d, want in [2, max_position_embeddings = %d]", W, c.MaxPositionEmbeddings)}
	case o.Stride < 0 || o.Stride >= W:
		return 0, 0, 0, &OptionError{fmt.Errorf("train: score: stride %d, want in [1, window %d)", o.Stride, W)}
	}
	stride = o.Stride
	if stride == 0 {
		stride = W / 2
	}
	B = o.Batch
	if B < 1 {
		B = 8
	}
	if B > MaxBatch {
		return 0, 0, 0, &OptionError{fmt.Errorf("train: score: batch %d, want at most %d", B, MaxBatch)}
	}
	// the activations of a batch and its tokens, targets and mask
	need := memlimit.Add(memlimit.Mul(c.ActsSize(B, W, false), elem), memlimit.Mul(B, W, 4*8))
	if err := memlimit.Check(fmt.Sprintf("train: score: batch %d × window %d", B, W), need, "activations"); err != nil {
		return 0, 0, 0, &OptionError{err}
	}
	return W, stride, B, nil
}

// LMEvalOptions describe an evaluation of a language-model checkpoint on
// Go files.
type LMEvalOptions struct {
	Model string   // checkpoint folder (a language model)
	Src   string   // a folder: its non-test, non-generated .go files (as the corpus reads them)
	Files []string // or these files, each of at most MaxTextFileBytes
	ScoreOptions
	Compressors bool // also measure gzip, zstd and xz on the same bytes
}

// LMReport is an evaluation's outcome. The compressors run on exactly the
// bytes the model scored: the files concatenated (the strong bound: xz
// finds repeats across files) and each file alone.
type LMReport struct {
	Model string `json:"model"`
	Files int    `json:"files"`
	Score
	XZBitsPerByte        float64           `json:"xz_bits_per_byte,omitempty"`
	XZPerFileBitsPerByte float64           `json:"xz_per_file_bits_per_byte,omitempty"`
	Compressors          []compress.Result `json:"compressors,omitempty"`
}

// MaxTextFileBytes bounds a file lm-eval scores (-files): a larger one, or
// a stream that does not end (/dev/zero), is refused naming it.
const MaxTextFileBytes = 256 << 20

// EvaluateLM scores the checkpoint o.Model on o.Src or o.Files. Options
// that do not suit the model are an *OptionError, returned before any file
// is read; a file given twice in o.Files (under any name) is an error
// naming it, returned before the model is loaded.
func EvaluateLM(ctx context.Context, o LMEvalOptions) (*LMReport, error) {
	if (o.Src == "") == (len(o.Files) == 0) {
		return nil, errors.New("train: lm-eval: give a folder or a list of files, not both")
	}
	if err := checkDistinct(o.Files); err != nil {
		return nil, err
	}
	lm, err := model.LoadLM[float32](o.Model)
	if err != nil {
		return nil, err
	}
	m, p, tok := lm.Model, lm.Params, lm.Tok
	eos := tok.Special(tokenizer.EndOfText)
	if eos < 0 {
		return nil, fmt.Errorf("train: lm-eval: %s: the tokenizer has no %s token", o.Model, tokenizer.EndOfText)
	}
	if _, _, _, err := o.resolve(m.Config, 4); err != nil { // before any file is read
		return nil, err
	}
	var files []TextFile
	if o.Src != "" {
		docs, _, err := corpus.Read(ctx, []corpus.Source{{Name: "src", Dir: o.Src}}, corpus.Options{})
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			files = append(files, TextFile{Path: d.File, Text: d.Text})
		}
	}
	for _, f := range o.Files {
		text, err := readlimit.File(f, MaxTextFileBytes)
		if err != nil {
			return nil, fmt.Errorf("train: lm-eval: %w", err)
		}
		files = append(files, TextFile{Path: f, Text: text})
	}
	s, err := ScoreFiles(ctx, m, p, tok, eos, files, o.ScoreOptions)
	if errors.Is(err, model.ErrNonFinite) {
		return nil, fmt.Errorf("%s: %w", o.Model, err)
	}
	if err != nil {
		return nil, err
	}
	r := &LMReport{Model: o.Model, Files: len(files), Score: *s}
	if o.Compressors {
		texts := make([][]byte, len(files))
		for i, f := range files {
			texts[i] = f.Text
		}
		if r.Compressors, err = compress.MeasureAll(ctx, texts); err != nil {
			return r, err
		}
		for _, c := range r.Compressors {
			if c.Tool == "xz -9e" {
				r.XZBitsPerByte, r.XZPerFileBitsPerByte = c.BitsPerByte, c.PerFileBitsPerByte
			}
		}
	}
	return r, nil
}
