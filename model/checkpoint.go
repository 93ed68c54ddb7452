package model

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/attnlab/attnlab/internal/atomicfile"
	"github.com/attnlab/attnlab/internal/jsonerr"
	"github.com/attnlab/attnlab/internal/vec"
	"github.com/attnlab/attnlab/nn"
	"github.com/attnlab/attnlab/safetensors"
	"github.com/attnlab/attnlab/tokenizer"
)

// Checkpoint file names inside a checkpoint directory, as Hugging Face
// writes them.
const (
	ConfigFile  = "config.json"
	WeightsFile = "model.safetensors"
	// TokenizerFile is the tokenizer beside them (package tokenizer's
	// format, Hugging Face's tokenizer.json).
	TokenizerFile = "tokenizer.json"
)

// Save writes a Hugging Face style checkpoint directory: config.json and
// model.safetensors (F32 for a float32 model, F64 for float64) with the
// tensor names of LlamaForCausalLM. Extra files (a tokenizer, say) may be
// given by name and content.
//
// The directory is written whole under a temporary name beside dir and
// renamed into place; an existing checkpoint at dir is replaced only after
// the new one is complete, so a failed or interrupted Save never leaves a
// half-written checkpoint.
func (m *Model[T]) Save(dir string, p *Params[T], extra map[string][]byte) error {
	cfg, err := json.MarshalIndent(m.Config, "", "  ")
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	f := safetensors.New()
	f.Metadata = map[string]string{"format": "pt"}
	for _, t := range m.Tensors(p) {
		safetensors.Set(f, t.Name, t.Shape, t.Data)
	}
	weights, err := f.MarshalBinary()
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	files := map[string][]byte{ConfigFile: append(cfg, '\n'), WeightsFile: weights}
	for name, data := range extra {
		files[name] = data
	}
	err = atomicfile.ReplaceDir(dir, func(tmp string) error {
		for name, data := range files {
			if err := writeSynced(filepath.Join(tmp, name), data); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("model: save %s: %w", dir, err)
	}
	return nil
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadKind returns what the checkpoint at dir was trained as: its config's
// attnlab_kind or, in a checkpoint written before kinds were recorded,
// what its files say (the dual encoder's dense.json, the reranker's
// rerank.json; neither: a language model).
func ReadKind(dir string) (string, error) {
	data, err := readConfigFile(dir)
	if err != nil {
		return "", fmt.Errorf("model: %w", err)
	}
	return kindOf(dir, data)
}

// kindOf is ReadKind of dir, whose config.json holds data.
func kindOf(dir string, data []byte) (string, error) {
	var c struct {
		Kind string `json:"attnlab_kind"`
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return "", fmt.Errorf("model: %s: %w", filepath.Join(dir, ConfigFile), jsonerr.Describe(err))
	}
	if c.Kind != "" {
		return c.Kind, nil
	}
	for file, kind := range map[string]string{"dense.json": KindDualEncoder, "rerank.json": KindReranker} {
		if _, err := os.Stat(filepath.Join(dir, file)); err == nil {
			return kind, nil
		}
	}
	return KindLM, nil
}

// CheckKind returns an error naming dir and both kinds unless dir holds a
// checkpoint of kind want.
func CheckKind(dir, want string) error {
	got, err := ReadKind(dir)
	if err != nil {
		return err
	}
	return wantKind(dir, got, want)
}

func wantKind(dir, got, want string) error {
	if got != want {
		return fmt.Errorf("model: %s holds a %s checkpoint, not a %s", dir, got, want)
	}
	return nil
}

// LM is a language model's checkpoint loaded whole: the model, its
// weights, and its tokenizer, whose ids are exactly the model's
// vocabulary.
type LM[T nn.Float] struct {
	*Model[T]
	Params *Params[T]
	Tok    *tokenizer.Tokenizer
}

// LoadLM reads a language model's checkpoint folder with its tokenizer
// (TokenizerFile). It refuses a checkpoint of another kind (a dual
// encoder's weights would "generate" gibberish) and a tokenizer whose ids
// are not the model's vocabulary, with an error naming the folder.
func LoadLM[T nn.Float](dir string) (*LM[T], error) {
	m, p, err := LoadKind[T](dir, KindLM)
	if err != nil {
		return nil, err
	}
	tok, err := LoadTokenizer(dir, m.Config)
	if err != nil {
		return nil, err
	}
	if tok.VocabSize() != m.Config.VocabSize {
		return nil, fmt.Errorf("model: %s: the tokenizer has %d tokens, the model %d", dir, tok.VocabSize(), m.Config.VocabSize)
	}
	return &LM[T]{Model: m, Params: p, Tok: tok}, nil
}

// LoadTokenizer reads the tokenizer of the checkpoint folder dir, whose
// model cfg must read every id it writes: one with more ids than
// cfg.VocabSize is refused naming dir.
func LoadTokenizer(dir string, cfg Config) (*tokenizer.Tokenizer, error) {
	tok, err := tokenizer.Load(filepath.Join(dir, TokenizerFile))
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if tok.VocabSize() > cfg.VocabSize {
		return nil, fmt.Errorf("model: %s: the tokenizer has %d tokens, the model %d", dir, tok.VocabSize(), cfg.VocabSize)
	}
	return tok, nil
}

// LoadKind is Load for a checkpoint of kind (KindLM, KindDualEncoder,
// KindReranker; "" any): it refuses one of another kind, naming both,
// reading config.json once.
func LoadKind[T nn.Float](dir, kind string) (*Model[T], *Params[T], error) {
	data, err := readConfigFile(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("model: %w", err)
	}
	if kind != "" {
		got, err := kindOf(dir, data)
		if err != nil {
			return nil, nil, err
		}
		if err := wantKind(dir, got, kind); err != nil {
			return nil, nil, err
		}
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", filepath.Join(dir, ConfigFile), err)
	}
	m, err := New[T](cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", filepath.Join(dir, ConfigFile), err)
	}
	path := filepath.Join(dir, WeightsFile)
	f, err := safetensors.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("model: %w", err)
	}
	p := m.NewParams()
	if err := m.assign(p, f); err != nil {
		return nil, nil, fmt.Errorf("model: %s: %w", path, err)
	}
	return m, p, nil
}

// Load reads a checkpoint directory written by Save, Convert or Hugging
// Face (config.json and model.safetensors, F32, F64, BF16 or F16; the
// half-precision values convert exactly). Every expected tensor
// must be present with its shape, and no other tensor may be; every value
// must be finite in T (a NaN, an infinity, or an F64 value beyond float32 is
// refused). Errors name the file and the tensor or field, and the first
// element that is not finite.
func Load[T nn.Float](dir string) (*Model[T], *Params[T], error) {
	return LoadKind[T](dir, "")
}

// assign copies the tensors of f into p, checking names and shapes.
func (m *Model[T]) assign(p *Params[T], f *safetensors.File) error {
	want := map[string]bool{}
	for _, t := range m.Tensors(p) {
		want[t.Name] = true
		if !f.Has(t.Name) {
			if t.Name == "lm_head.weight" {
				return fmt.Errorf("tensor %q missing (config has tie_word_embeddings = false)", t.Name)
			}
			return fmt.Errorf("tensor %q missing", t.Name)
		}
		x, shape, err := f.Float64(t.Name)
		if err != nil {
			return err
		}
		if !slices.Equal(shape, t.Shape) {
			return fmt.Errorf("tensor %q has shape %v, the config implies %v", t.Name, shape, t.Shape)
		}
		copy(t.Data, vec.Convert[T](x))
		if i := vec.NonFinite(t.Data); i >= 0 {
			return nonFinite(t.Name, t.Shape, i, float64(t.Data[i]), x[i])
		}
	}
	// A tied checkpoint may also store the head, as transformers does when
	// it saves without deduplicating: it must then be the embedding.
	if m.Config.TieWordEmbeddings && f.Has("lm_head.weight") {
		if err := sameTensor(f, "lm_head.weight", "model.embed_tokens.weight"); err != nil {
			return fmt.Errorf("%w, though config has tie_word_embeddings = true", err)
		}
		want["lm_head.weight"] = true
	}
	var extra []string
	for _, name := range f.Names() {
		if !want[name] {
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		hint := ""
		if slices.Contains(extra, "lm_head.weight") {
			hint = " (config has tie_word_embeddings = true)"
		}
		return fmt.Errorf("unexpected tensor %q%s%s", extra[0], more(len(extra)-1), hint)
	}
	return nil
}

// nonFinite is the error for element i of a tensor that is not finite: got
// is the value in the model's precision, stored the value in the file (a
// finite float64 beyond the range of float32 becomes an infinity).
func nonFinite(name string, shape []int, i int, got, stored float64) error {
	at := ""
	if len(shape) > 1 {
		at = fmt.Sprintf(" (index %v)", unravel(i, shape))
	}
	if !math.IsNaN(stored) && !math.IsInf(stored, 0) {
		return fmt.Errorf("tensor %q: element %d%s is %g, beyond the model's precision (%v); the weights must be finite", name, i, at, stored, got)
	}
	return fmt.Errorf("tensor %q: element %d%s is %v; the weights must be finite", name, i, at, got)
}

// unravel returns the row-major index of element i in a tensor of shape.
func unravel(i int, shape []int) []int {
	idx := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		idx[d] = i % shape[d]
		i /= shape[d]
	}
	return idx
}

// sameTensor reports, as an error, how tensor a of f differs from b.
func sameTensor(f *safetensors.File, a, b string) error {
	x, xs, err := f.Float64(a)
	if err != nil {
		return err
	}
	y, ys, err := f.Float64(b)
	if err != nil {
		return err
	}
	if !slices.Equal(xs, ys) {
		return fmt.Errorf("tensor %q has shape %v, %q %v", a, xs, b, ys)
	}
	for i := range x {
		if x[i] != y[i] {
			return fmt.Errorf("tensor %q differs from %q (element %d: %g against %g)", a, b, i, x[i], y[i])
		}
	}
	return nil
}

func more(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" and %d more", n)
}
