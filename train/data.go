package train

import (
	"context"
	"fmt"
	"hash/fnv"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/attnlab/attnlab/corpus"
	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/nn"
	"github.com/attnlab/attnlab/safetensors"

	"github.com/attnlab/attnlab/internal/readlimit"
)

// Document is one source file of a corpus.
type Document struct {
	Path string // relative to the corpus root, slash-separated
	Dir  string // its directory: the unit of the train/validation split
	Text []byte
}

// GoSource reads the non-test .go files under root (skipping testdata and
// vendor folders and hidden ones, and generated files: tables and stubs that
// a program wrote are not the code a model should learn, and they would
// distort the held-out measure), in lexical order. It returns an error
// naming root when there is no usable file.
func GoSource(root string) ([]Document, error) {
	var docs []Document
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		text, err := readlimit.File(path, readlimit.SourceFileBytes)
		if err != nil {
			return err
		}
		if len(text) == 0 || corpus.Generated(text) {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		docs = append(docs, Document{Path: rel, Dir: pathDir(rel), Text: text})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("train: corpus %s: %w", root, err)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("train: corpus %s holds no non-test .go file", root)
	}
	return docs, nil
}

func pathDir(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return "."
}

// Split divides docs by directory: a directory goes to validation when a
// hash of its path falls in the first frac of the range, so whole packages
// are held out and the split does not depend on the file order or on the
// other directories present.
func Split(docs []Document, frac float64) (trainDocs, valDocs []Document) {
	for _, d := range docs {
		h := fnv.New64a()
		h.Write([]byte(d.Dir))
		if float64(h.Sum64()%10000) < frac*10000 {
			valDocs = append(valDocs, d)
		} else {
			trainDocs = append(trainDocs, d)
		}
	}
	return trainDocs, valDocs
}

// Encoder turns text into token ids.
type Encoder interface {
	Encode(text []byte) []int
}

// Windows is a tokenized corpus cut into windows of T tokens for training.
type Windows struct {
	T      int
	Tokens [][]int // each window's tokens (T)
	Seg    [][]int // each window's segment ids (T), nil when not packed
	Valid  [][]bool
	Bytes  int // bytes of source text the windows hold
}

// Pack tokenizes docs, appends eos to each, and cuts the stream into windows
// of T tokens. With pack, documents follow each other inside a window, each
// with its own segment id, so that no document attends to another and every
// document starts at position 0; a document longer than what is left of a
// window continues in the next one as a new segment. Without pack, each
// document starts a window of its own, truncated to T tokens or padded.
func Pack(docs []Document, enc Encoder, eos, T int, pack bool) *Windows {
	w, _ := PackContext(context.Background(), docs, enc, eos, T, pack)
	return w
}

// PackContext is [Pack] that stops, with ctx's error, soon after ctx is
// done.
func PackContext(ctx context.Context, docs []Document, enc Encoder, eos, T int, pack bool) (*Windows, error) {
	w := &Windows{T: T}
	var toks, seg []int
	var valid []bool
	id := 0
	flush := func() {
		for len(toks) < T { // pad the last window, in the last document's segment
			toks, seg, valid = append(toks, 0), append(seg, seg[len(seg)-1]), append(valid, false)
		}
		w.Tokens, w.Seg, w.Valid = append(w.Tokens, toks), append(w.Seg, seg), append(w.Valid, valid)
		toks, seg, valid = nil, nil, nil
	}
	for k, d := range docs {
		if k%64 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		ids := append(enc.Encode(d.Text), eos)
		w.Bytes += len(d.Text)
		if !pack {
			if len(ids) > T {
				ids = ids[:T]
			}
			toks, seg, valid = ids, make([]int, len(ids)), make([]bool, len(ids))
			for i := range valid {
				valid[i] = true
			}
			flush()
			continue
		}
		for len(ids) > 0 {
			n := min(len(ids), T-len(toks))
			for _, t := range ids[:n] {
				toks, seg, valid = append(toks, t), append(seg, id), append(valid, true)
			}
			ids = ids[n:]
			id++ // a continuation is a new segment: positions restart
			if len(toks) == T {
				flush()
			}
		}
	}
	if len(toks) > 0 {
		flush()
	}
	if !pack {
		w.Seg = nil
	}
	return w, nil
}

// Order returns the window order of an epoch: a permutation drawn from a
// generator seeded by (seed, epoch), so it is the same on every run and
// after a resume.
func Order(n int, seed uint64, epoch int) []int {
	r := rand.New(rand.NewPCG(seed, uint64(epoch)))
	return r.Perm(n)
}

// Batch assembles windows idx into a model batch with shifted targets.
func (w *Windows) Batch(idx []int) *model.Batch {
	b := &model.Batch{B: len(idx), T: w.T}
	for _, i := range idx {
		b.Tokens = append(b.Tokens, w.Tokens[i]...)
		b.Valid = append(b.Valid, w.Valid[i]...)
		if w.Seg != nil {
			b.Seg = append(b.Seg, w.Seg[i]...)
		}
	}
	b.Targets = b.ShiftedTargets()
	return b
}

// Cursor walks the windows in epoch order, B at a time, remembering where it
// is so that a resumed run continues exactly.
type Cursor struct {
	Seed  uint64
	Epoch int
	Next  int // index into the epoch's order
	order []int
	n     int
}

// NewCursor starts at epoch 0.
func NewCursor(n int, seed uint64) *Cursor { return &Cursor{Seed: seed, n: n} }

// Take returns the indices of the next B windows, moving to the next epoch
// (a new permutation) when the current one is used up.
func (c *Cursor) Take(B int) []int {
	out := make([]int, 0, B)
	for len(out) < B {
		if c.order == nil {
			c.order = Order(c.n, c.Seed, c.Epoch)
		}
		if c.Next >= len(c.order) {
			c.Epoch, c.Next, c.order = c.Epoch+1, 0, nil
			continue
		}
		out = append(out, c.order[c.Next])
		c.Next++
	}
	return out
}

// Restore sets the cursor to a saved place.
func (c *Cursor) Restore(epoch, next int) {
	c.Epoch, c.Next, c.order = epoch, next, nil
}

// DecayFor reports whether weight decay applies to the parameter name: not
// to norms and embeddings (the usual choice), to every other weight matrix.
func DecayFor(name string) bool {
	return !strings.HasSuffix(name, "norm.weight") && !strings.Contains(name, "embed_tokens")
}

// Params pairs a model's parameters with their gradients for the optimiser.
func Params[T nn.Float](m *model.Model[T], p, g *model.Params[T], decayAll bool) []Param[T] {
	pt, gt := m.Tensors(p), m.Tensors(g)
	out := make([]Param[T], len(pt))
	for i := range pt {
		out[i] = Param[T]{Name: pt[i].Name, X: pt[i].Data, Grad: gt[i].Data, Decay: decayAll || DecayFor(pt[i].Name)}
	}
	return out
}

// DataFile is the file of a run's training windows that the PyTorch trainer
// reads (python/torch_train.py ddp).
const DataFile = "data.safetensors"

// WriteFile writes the windows and their order in the first epochs (the
// permutations of Order, which a trainer in another language cannot draw)
// to a safetensors file: I64 tensors tokens, valid and, when packed, seg
// [W, T], and order [epochs, W]; metadata window and seed.
func (w *Windows) WriteFile(path string, seed uint64, epochs int) error {
	W, T := len(w.Tokens), w.T
	f := safetensors.New()
	f.Metadata = map[string]string{"window": strconv.Itoa(T), "seed": strconv.FormatUint(seed, 10), "bytes": strconv.Itoa(w.Bytes)}
	flat := func(rows [][]int) []int64 {
		out := make([]int64, 0, W*T)
		for _, r := range rows {
			for _, v := range r {
				out = append(out, int64(v))
			}
		}
		return out
	}
	f.SetI64("tokens", []int{W, T}, flat(w.Tokens))
	valid := make([]int64, 0, W*T)
	for _, r := range w.Valid {
		for _, v := range r {
			valid = append(valid, b2i(v))
		}
	}
	f.SetI64("valid", []int{W, T}, valid)
	if w.Seg != nil {
		f.SetI64("seg", []int{W, T}, flat(w.Seg))
	}
	order := make([]int64, 0, epochs*W)
	for e := range epochs {
		for _, i := range Order(W, seed, e) {
			order = append(order, int64(i))
		}
	}
	f.SetI64("order", []int{epochs, W}, order)
	return safetensors.WriteFile(path, f)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// ReadWindows reads a file written by Windows.WriteFile: the windows, and
// the seed of their order.
func ReadWindows(path string) (*Windows, uint64, error) {
	f, err := safetensors.ReadFile(path)
	if err != nil {
		return nil, 0, fmt.Errorf("train: %w", err)
	}
	tokens, shape, err := f.Int64("tokens")
	if err != nil {
		return nil, 0, fmt.Errorf("train: %s: %w", path, err)
	}
	if len(shape) != 2 {
		return nil, 0, fmt.Errorf("train: %s: tokens has shape %v, want [windows, T]", path, shape)
	}
	W, T := shape[0], shape[1]
	valid, vs, err := f.Int64("valid")
	if err != nil || !slices.Equal(vs, shape) {
		return nil, 0, fmt.Errorf("train: %s: valid: want I64 %v (%v)", path, shape, err)
	}
	var seg []int64
	if f.Has("seg") {
		var ss []int
		if seg, ss, err = f.Int64("seg"); err != nil || !slices.Equal(ss, shape) {
			return nil, 0, fmt.Errorf("train: %s: seg: want I64 %v (%v)", path, shape, err)
		}
	}
	seed, err := strconv.ParseUint(f.Metadata["seed"], 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("train: %s: metadata seed: %v", path, err)
	}
	w := &Windows{T: T}
	w.Bytes, _ = strconv.Atoi(f.Metadata["bytes"])
	for i := range W {
		toks, ok := make([]int, T), make([]bool, T)
		for t := range T {
			toks[t], ok[t] = int(tokens[i*T+t]), valid[i*T+t] != 0
		}
		w.Tokens, w.Valid = append(w.Tokens, toks), append(w.Valid, ok)
		if seg != nil {
			s := make([]int, T)
			for t := range T {
				s[t] = int(seg[i*T+t])
			}
			w.Seg = append(w.Seg, s)
		}
	}
	return w, seed, nil
}
