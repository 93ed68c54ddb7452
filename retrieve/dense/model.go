package dense

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/attnlab/attnlab/internal/jsonerr"
	"github.com/attnlab/attnlab/internal/readlimit"
	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/nn"
	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/tokenizer"
)

// Checkpoint file names beside model.Save's config.json and
// model.safetensors and the tokenizer (model.TokenizerFile).
const (
	SettingsFile = "dense.json"

	// MaxSettingsBytes bounds the settings file, which holds a few
	// hundred bytes: a larger one (or /dev/zero) is refused naming it.
	MaxSettingsBytes = 1 << 20
)

// Text preparations: what the tokenizer reads of a query or a piece of code.
const (
	// TextRaw is the text as written.
	TextRaw = "raw"
	// TextTerms is the text's code-aware terms (retrieve.Terms) joined by
	// spaces: identifiers split at case changes and lower-cased, punctuation
	// and stop words dropped, so that "HasPrefix(s, prefix string)" and
	// "reports whether s begins with prefix" share the units "prefix" and
	// "has": the words a query and its code have in common become the same
	// tokens, as BM25 sees them.
	TextTerms = "terms"
)

// Settings are what a checkpoint records beyond the transformer.
type Settings struct {
	Text      string  `json:"text"` // TextRaw or TextTerms ("" reads as TextRaw)
	MaxQuery  int     `json:"max_query_tokens"`
	MaxCode   int     `json:"max_code_tokens"`
	Pooling   string  `json:"pooling"`   // "mean" over real tokens
	Normalize bool    `json:"normalize"` // unit-length embeddings
	Causal    bool    `json:"causal"`    // true: each token attends to the tokens before it only (Encoder.Causal)
	Tau       float64 `json:"temperature"`
	// QueryPrefix is written before every query, as the prefixes of
	// asymmetric retrieval models ("query: "); "// " makes a query read as
	// the doc comment a language model saw before code.
	QueryPrefix string `json:"query_prefix,omitempty"`
}

// Model is a trained dual encoder: the encoder, its tokenizer and settings.
// Its embedding methods are safe for concurrent use.
type Model struct {
	Enc      *Encoder[float32]
	Tok      *tokenizer.Tokenizer
	Settings Settings

	acts ActsCache[float32]
}

// Dim returns the width of the embeddings.
func (m *Model) Dim() int { return m.Enc.Model.Config.HiddenSize }

// Prepare returns the text the tokenizer reads for text (see TextTerms).
func (s Settings) Prepare(text string) string {
	if s.Text == TextTerms {
		return strings.Join(retrieve.Terms(text), " ")
	}
	return text
}

// Tokens returns the ids of the prepared text truncated to max tokens, never
// empty: an empty text becomes the single token of a space.
func (m *Model) Tokens(text string, max int) []int {
	ids := m.Tok.Encode([]byte(m.Settings.Prepare(text)))
	if len(ids) == 0 {
		ids = m.Tok.Encode([]byte(" "))
	}
	return ids[:min(len(ids), max)]
}

// QueryTokens returns the ids of a query: Tokens of the prefixed text,
// truncated to MaxQuery.
func (m *Model) QueryTokens(text string) []int {
	return m.Tokens(m.Settings.QueryPrefix+text, m.Settings.MaxQuery)
}

// ErrNoTerms is returned for a query in which the encoder reads nothing:
// its embedding would be that of an empty text, the same for every such
// query, and its results meaningless.
var ErrNoTerms = errors.New("dense: the query has nothing the encoder reads")

// CheckQuery returns an error wrapping ErrNoTerms when the encoder reads
// nothing of text (with -text terms: no word of two letters or more that is
// not a stop word).
func (m *Model) CheckQuery(text string) error {
	if len(m.Tok.Encode([]byte(m.Settings.Prepare(text)))) == 0 {
		return fmt.Errorf("query %q: %w (it reads %s)", text, ErrNoTerms, m.Settings.Text)
	}
	return nil
}

// EmbedTokens writes the unit embedding of one sequence of ids into
// dst[:Dim()]. It returns the encoder's error for ids it cannot take.
func (m *Model) EmbedTokens(dst []float32, ids []int) error {
	D := m.Dim()
	a := m.acts.Get(m.Enc, len(ids))
	defer m.acts.Put(a)
	if err := m.Enc.Forward(a, [][]int{ids}); err != nil {
		return err
	}
	nn.MeanPool[float32]{D: D}.Forward(dst[:D], a.Out, a.Valid, 1, a.T)
	norm := []float32{0}
	nn.L2Norm[float32]{D: D, Eps: 1e-12}.Forward(dst[:D], norm, dst[:D], 1)
	return nil
}

// EmbedQuery writes the embedding of a query into dst[:Dim()].
func (m *Model) EmbedQuery(dst []float32, text string) {
	if err := m.EmbedTokens(dst, m.QueryTokens(text)); err != nil {
		panic(err.Error()) // the tokenizer and model of one checkpoint agree on ids
	}
}

// EmbedCode writes the embedding of a code document into dst[:Dim()].
func (m *Model) EmbedCode(dst []float32, text string) {
	if err := m.EmbedTokens(dst, m.Tokens(text, m.Settings.MaxCode)); err != nil {
		panic(err.Error())
	}
}

// Query returns m as the retrieve.Encoder of queries.
func (m *Model) Query() retrieve.Encoder { return encoderFunc{m.Dim(), m.EmbedQuery} }

// Code returns m as the retrieve.Encoder of code.
func (m *Model) Code() retrieve.Encoder { return encoderFunc{m.Dim(), m.EmbedCode} }

type encoderFunc struct {
	d int
	f func([]float32, string)
}

func (e encoderFunc) Dim() int                       { return e.d }
func (e encoderFunc) Encode(dst []float32, s string) { e.f(dst, s) }

// EmbedCodes embeds every code document into an (N, D) matrix, calling
// progress (if not nil) with the number done after each batch (see
// EmbedCodesInto).
func (m *Model) EmbedCodes(ctx context.Context, codes []string, progress func(done int)) ([]float32, error) {
	out := make([]float32, len(codes)*m.Dim())
	if err := m.EmbedCodesInto(ctx, out, codes, progress); err != nil {
		return nil, err
	}
	return out, nil
}

// EmbedCodesInto writes the embedding of codes[i] into dst[i·D:(i+1)·D]:
// the sequences sorted by length, encoded in batches of similar lengths
// (little padding, one matrix product for many rows) on GOMAXPROCS
// goroutines. The vectors are those EmbedCode gives one at a time, up to
// float32 rounding. progress (if not nil) is called with the number done
// after each batch, from one goroutine at a time.
func (m *Model) EmbedCodesInto(ctx context.Context, dst []float32, codes []string, progress func(done int)) error {
	seqs := make([][]int, len(codes))
	for i, c := range codes {
		seqs[i] = m.Tokens(c, m.Settings.MaxCode)
	}
	return m.embedBatched(ctx, dst, seqs, progress)
}

// EmbedQueriesInto writes the embedding of the query texts[i] (with the
// query prefix, truncated to MaxQuery tokens) into dst[i·D:(i+1)·D], in
// batches as EmbedCodesInto.
func (m *Model) EmbedQueriesInto(ctx context.Context, dst []float32, texts []string, progress func(done int)) error {
	seqs := make([][]int, len(texts))
	for i, t := range texts {
		seqs[i] = m.QueryTokens(t)
	}
	return m.embedBatched(ctx, dst, seqs, progress)
}

// embedEach is EmbedCodes one document at a time, as it was before
// batching: the benchmark's baseline.
func (m *Model) embedEach(ctx context.Context, codes []string, progress func(done int)) ([]float32, error) {
	D := m.Dim()
	out := make([]float32, len(codes)*D)
	for i, c := range codes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m.EmbedCode(out[i*D:(i+1)*D], c)
		if progress != nil {
			progress(i + 1)
		}
	}
	return out, nil
}

// BatchTokens bounds the tokens, padding included, of one batch of
// embedBatched.
const BatchTokens = 2048

// embedBatched embeds seqs into dst, by length in batches of at most
// BatchTokens padded tokens, on GOMAXPROCS goroutines.
func (m *Model) embedBatched(ctx context.Context, dst []float32, seqs [][]int, progress func(done int)) error {
	D := m.Dim()
	if len(dst) < len(seqs)*D {
		panic(fmt.Sprintf("dense: embedding %d sequences into %d values", len(seqs), len(dst)))
	}
	order := make([]int, len(seqs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(seqs[a]), len(seqs[b])) })
	var batches [][]int // indices into seqs, each batch of one padded length
	for i := 0; i < len(order); {
		T := Padded(len(seqs[order[i]]))
		j := i + 1
		for j < len(order) && Padded(len(seqs[order[j]])) == T && (j-i+1)*T <= BatchTokens {
			j++
		}
		batches = append(batches, order[i:j])
		i = j
	}
	var (
		mu    sync.Mutex
		done  int
		first error
		wg    sync.WaitGroup
	)
	next := make(chan []int)
	for range min(max(1, runtime.GOMAXPROCS(0)), len(batches)) {
		wg.Go(func() {
			norm := []float32{0}
			for batch := range next {
				B, T := len(batch), Padded(len(seqs[batch[len(batch)-1]]))
				a := m.acts.GetBatch(m.Enc, B, T)
				in := make([][]int, B)
				for b, i := range batch {
					in[b] = seqs[i]
				}
				err := m.Enc.Forward(a, in)
				if err == nil {
					for b, i := range batch {
						v := dst[i*D : (i+1)*D]
						nn.MeanPool[float32]{D: D}.Forward(v, a.Out[b*T*D:(b+1)*T*D], a.Valid[b*T:(b+1)*T], 1, T)
						nn.L2Norm[float32]{D: D, Eps: 1e-12}.Forward(v, norm, v, 1)
					}
				}
				m.acts.Put(a)
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				done += B
				if progress != nil && first == nil {
					progress(done)
				}
				mu.Unlock()
			}
		})
	}
	var err error
	for _, b := range batches {
		if err = ctx.Err(); err != nil {
			break
		}
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed {
			break
		}
		next <- b
	}
	close(next)
	wg.Wait()
	if first != nil {
		panic(first.Error()) // the tokenizer and model of one checkpoint agree on ids
	}
	return err
}

// Fingerprint returns the SHA-256, in hex, of what decides the model's
// embeddings: the tensors (names, shapes and float32 bits, in checkpoint
// order), the tokenizer and the settings. An index records it, so that
// embeddings are never searched with another encoder's queries.
func (m *Model) Fingerprint() (string, error) {
	h := sha256.New()
	for _, t := range m.Enc.Model.Tensors(m.Enc.Params) {
		fmt.Fprintf(h, "%s %v\n", t.Name, t.Shape)
		buf := make([]byte, 4*len(t.Data))
		for i, v := range t.Data {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
		}
		h.Write(buf)
	}
	if err := m.Tok.WriteJSON(h); err != nil {
		return "", fmt.Errorf("dense: %w", err)
	}
	set, err := json.Marshal(m.Settings)
	if err != nil {
		return "", fmt.Errorf("dense: %w", err)
	}
	h.Write(set)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Save writes the checkpoint directory dir atomically (see model.Save).
func (m *Model) Save(dir string) error { return m.SaveWith(dir, nil) }

// SaveWith is Save with more files written into dir beside the model's (a
// training run's optimiser and state).
func (m *Model) SaveWith(dir string, extra map[string][]byte) error {
	var tok bytes.Buffer
	if err := m.Tok.WriteJSON(&tok); err != nil {
		return fmt.Errorf("dense: %w", err)
	}
	set, err := json.MarshalIndent(m.Settings, "", "  ")
	if err != nil {
		return fmt.Errorf("dense: %w", err)
	}
	files := map[string][]byte{model.TokenizerFile: tok.Bytes(), SettingsFile: append(set, '\n')}
	for name, data := range extra {
		files[name] = data
	}
	return m.Enc.Model.Save(dir, m.Enc.Params, files)
}

// Load reads a checkpoint directory written by Save.
func Load(dir string) (*Model, error) {
	mod, p, err := model.LoadKind[float32](dir, model.KindDualEncoder)
	if err != nil {
		return nil, err
	}
	if !mod.Config.TieWordEmbeddings {
		return nil, fmt.Errorf("dense: %s: tie_word_embeddings is false: not a dense encoder checkpoint", dir)
	}
	tok, err := model.LoadTokenizer(dir, mod.Config)
	if err != nil {
		return nil, fmt.Errorf("dense: %w", err)
	}
	data, err := readlimit.File(filepath.Join(dir, SettingsFile), MaxSettingsBytes)
	if err != nil {
		return nil, fmt.Errorf("dense: %w", err)
	}
	var s Settings
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("dense: %s: %w", filepath.Join(dir, SettingsFile), jsonerr.Describe(err))
	}
	switch {
	case s.MaxQuery < 1 || s.MaxCode < 1 || Padded(max(s.MaxQuery, s.MaxCode)) > mod.Config.MaxPositionEmbeddings:
		return nil, fmt.Errorf("dense: %s: max_query_tokens %d, max_code_tokens %d: want >= 1 and, rounded up to 16, at most max_position_embeddings = %d",
			SettingsFile, s.MaxQuery, s.MaxCode, mod.Config.MaxPositionEmbeddings)
	case s.Text != "" && s.Text != TextRaw && s.Text != TextTerms:
		return nil, fmt.Errorf("dense: %s: text %q, want %q or %q", SettingsFile, s.Text, TextRaw, TextTerms)
	case s.Pooling != "mean" || !s.Normalize:
		return nil, fmt.Errorf("dense: %s: pooling %q, normalize %v: only mean pooling of unit length is implemented",
			SettingsFile, s.Pooling, s.Normalize)
	}
	return &Model{Enc: &Encoder[float32]{Model: mod, Params: p, Causal: s.Causal}, Tok: tok, Settings: s}, nil
}

// New returns a model with the architecture of cfg (tied embeddings are
// forced: the LM head is never used), weights drawn as model.Init does with
// standard deviation std, the tokenizer tok and settings s (s.Causal
// chooses the attention).
func New(cfg model.Config, tok *tokenizer.Tokenizer, s Settings, std float64, seed uint64) (*Model, error) {
	cfg.TieWordEmbeddings = true
	cfg.Kind = model.KindDualEncoder
	if tok.VocabSize() > cfg.VocabSize {
		return nil, fmt.Errorf("dense: the tokenizer has %d ids, the model %d", tok.VocabSize(), cfg.VocabSize)
	}
	if need := Padded(max(s.MaxQuery, s.MaxCode)); need > cfg.MaxPositionEmbeddings {
		return nil, fmt.Errorf("dense: sequences of up to %d tokens (padded), beyond max_position_embeddings = %d", need, cfg.MaxPositionEmbeddings)
	}
	m, err := model.New[float32](cfg)
	if err != nil {
		return nil, err
	}
	p := m.NewParams()
	m.Init(p, std, seed)
	s.Pooling, s.Normalize = "mean", true
	if s.Text == "" {
		s.Text = TextRaw
	}
	return &Model{Enc: &Encoder[float32]{Model: m, Params: p, Causal: s.Causal}, Tok: tok, Settings: s}, nil
}

// TrainTokenizer learns a byte-level BPE tokenizer of vocab ids on the code
// and the queries of pairs, prepared as s says: the text both sides of the
// encoder will read.
func TrainTokenizer(pairs []retrieve.Pair, vocab int, s Settings) (*tokenizer.Tokenizer, error) {
	docs := make([][]byte, 0, 2*len(pairs))
	for _, p := range pairs {
		docs = append(docs, []byte(s.Prepare(p.Code)), []byte(s.Prepare(p.Query)))
	}
	return tokenizer.Train(docs, vocab, tokenizer.Options{})
}

// LoadFolder reads a dual-encoder checkpoint folder, or the encoder of an
// index folder (Index.Save).
func LoadFolder(dir string) (*Model, error) {
	if _, err := os.Stat(filepath.Join(dir, EncoderDir, SettingsFile)); err == nil {
		dir = filepath.Join(dir, EncoderDir)
	}
	return Load(dir)
}

// FromLM starts a dual encoder from a language model's checkpoint (a
// folder that model.LoadLM reads, with its tokenizer.json): the encoder is
// the language model's transformer — embedding, blocks and final norm —
// read bidirectionally, through its own tokenizer, on the raw text (the
// language model learned Go, comments included, as written). The lengths
// and temperature come from s. With 0 < layers < the model's, the encoder
// keeps the first layers blocks alone (and the final norm): a shallower,
// faster encoder, whose lower blocks carry the more lexical features.
func FromLM(dir string, s Settings, layers int) (*Model, error) {
	lm, err := model.LoadLM[float32](dir)
	if err != nil {
		return nil, err
	}
	cfg := lm.Config
	if !cfg.TieWordEmbeddings {
		return nil, fmt.Errorf("dense: %s: the language model's head is not tied to its embedding; a dual encoder keeps the embedding alone", dir)
	}
	cfg.Kind = ""
	if layers < 0 {
		return nil, fmt.Errorf("dense: %d layers of %s, want 0 (all) or more", layers, dir)
	}
	if layers > cfg.NumHiddenLayers {
		return nil, fmt.Errorf("dense: %d layers of %s, which has %d", layers, dir, cfg.NumHiddenLayers)
	}
	if layers > 0 {
		cfg.NumHiddenLayers = layers
	}
	s.Text = TextRaw
	m, err := New(cfg, lm.Tok, s, 0.02, 1)
	if err != nil {
		return nil, err
	}
	from := map[string][]float32{}
	for _, t := range lm.Tensors(lm.Params) {
		from[t.Name] = t.Data
	}
	for _, t := range m.Enc.Model.Tensors(m.Enc.Params) {
		src, ok := from[t.Name]
		if !ok || len(src) != len(t.Data) {
			return nil, fmt.Errorf("dense: %s: no tensor %q of %d values to start from", dir, t.Name, len(t.Data))
		}
		copy(t.Data, src)
	}
	return m, nil
}
