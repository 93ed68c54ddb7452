package rerank

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/attnlab/attnlab/internal/jsonerr"
	"github.com/attnlab/attnlab/internal/readlimit"
	"github.com/attnlab/attnlab/internal/vec"
	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/nn"
	"github.com/attnlab/attnlab/retrieve/dense"
	"github.com/attnlab/attnlab/safetensors"
	"github.com/attnlab/attnlab/tokenizer"
)

// Checkpoint file names beside model.Save's config.json and
// model.safetensors and the tokenizer (model.TokenizerFile).
const (
	SettingsFile = "rerank.json"

	// MaxSettingsBytes bounds the settings file, which holds a few
	// hundred bytes: a larger one (or /dev/zero) is refused naming it.
	MaxSettingsBytes = 1 << 20
	HeadFile         = "score.safetensors"

	headTensor = "score.weight"
	idfTensor  = "lexical.idf"
)

// PairProduct names the pooling of nn.PairPool in the settings.
const PairProduct = "pair-product"

// Settings are what a checkpoint records beyond the transformer and the
// score head.
type Settings struct {
	Text      string `json:"text"` // dense.TextRaw or dense.TextTerms
	MaxQuery  int    `json:"max_query_tokens"`
	MaxCode   int    `json:"max_code_tokens"`
	Separator string `json:"separator"`       // the special token between query and code
	Pooling   string `json:"pooling"`         // "pair-product": nn.PairPool
	Causal    bool   `json:"causal"`          // true: each token attends to the tokens before it only (the dual encoder's)
	Isolated  int    `json:"isolated_layers"` // blocks in which query and code do not attend to each other
	Lexical   bool   `json:"lexical"`         // the head also weighs the NumLexical exact-match features
	// QueryPrefix is written before every query (the dual encoder's).
	QueryPrefix string `json:"query_prefix,omitempty"`
}

// NumLexical is the number of exact-match features a lexical head adds to
// the pooled vector: the share of the query's distinct tokens found in the
// code, weighted by their inverse document frequency, and unweighted.
const NumLexical = 2

// Model is a cross-encoder: the sequence "query SEP code" goes through a
// transformer encoder (dense.Encoder: bidirectional attention), its token
// vectors are pooled into the product of the query side's and the code
// side's means (nn.PairPool), and the score head w turns that into
// one number, the pair's relevance. Score is safe for concurrent use.
type Model struct {
	Enc      *dense.Encoder[float32]
	W        []float32 // the score head (Features())
	IDF      []float32 // with Settings.Lexical: inverse document frequency of each token id (vocab_size)
	Tok      *tokenizer.Tokenizer
	Settings Settings

	sep  int
	acts dense.ActsCache[float32]
}

// Dim returns the width of the encoder.
func (m *Model) Dim() int { return m.Enc.Model.Config.HiddenSize }

// Features returns the width of the vector the score head weighs: the
// pooled pair, then the exact-match features of a lexical head.
func (m *Model) Features() int {
	if m.Settings.Lexical {
		return m.Dim() + NumLexical
	}
	return m.Dim()
}

// SetIDF sets the inverse document frequency of every token id from a
// corpus of tokenised documents, as BM25 weighs a term:
// log(1 + (N − df + 0.5)/(df + 0.5)).
func (m *Model) SetIDF(docs [][]int) {
	df := make([]int, m.Enc.Model.Config.VocabSize)
	seen := make([]int, len(df)) // last document that counted each id, plus 1
	for i, d := range docs {
		for _, id := range d {
			if seen[id] != i+1 {
				seen[id] = i + 1
				df[id]++
			}
		}
	}
	m.IDF = make([]float32, len(df))
	n := float64(len(docs))
	for id, f := range df {
		m.IDF[id] = float32(math.Log(1 + (n-float64(f)+0.5)/(float64(f)+0.5)))
	}
}

// lexical writes the exact-match features of a pair into dst[:NumLexical]:
// over the distinct tokens of the query, the IDF-weighted share found in
// the code, and the plain share. They are inputs, not learned: the head
// learns how much to trust them.
func (m *Model) lexical(dst []float32, query, code []int) {
	in := make(map[int]bool, len(code))
	for _, id := range code {
		in[id] = true
	}
	seen := make(map[int]bool, len(query))
	var w, wm float32
	var n, nm int
	for _, id := range query {
		if seen[id] {
			continue
		}
		seen[id] = true
		n++
		w += m.IDF[id]
		if in[id] {
			nm++
			wm += m.IDF[id]
		}
	}
	dst[0], dst[1] = 0, float32(nm)/float32(n)
	if w > 0 {
		dst[0] = wm / w
	}
}

// features writes the vector the head weighs for a pair encoded in a
// (dim D, then the lexical features).
func (m *Model) features(f []float32, pa *nn.PairPoolActs[float32], a *dense.Acts[float32], query, code []int) {
	D := m.Dim()
	nn.PairPool[float32]{D: D}.Forward(f[:D], pa, a.Out, []int{len(query)}, a.Valid, 1, a.T)
	if m.Settings.Lexical {
		m.lexical(f[D:], query, code)
	}
}

// MaxLen returns the longest pair sequence: query, separator and code.
func (m *Model) MaxLen() int { return m.Settings.MaxQuery + 1 + m.Settings.MaxCode }

// Tokens returns the ids of text prepared as the settings say, truncated to
// max and never empty (as dense.Model.Tokens).
func (m *Model) Tokens(text string, max int) []int {
	ids := m.Tok.Encode([]byte(dense.Settings{Text: m.Settings.Text}.Prepare(text)))
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

// Pair returns the sequence the encoder reads for a query and a code
// document, both already tokenised and truncated: query, separator, code.
func (m *Model) Pair(query, code []int) []int {
	s := make([]int, 0, len(query)+1+len(code))
	s = append(s, query...)
	s = append(s, m.sep)
	return append(s, code...)
}

// segments returns the parts of a pair sequence of n tokens whose query has
// nq: 0 for the query, 2 for the separator, 1 for the code. In the isolated
// blocks each part is encoded alone, the query and code as the dual
// encoder encoded them.
func (m *Model) segments(nq, n int) []int {
	s := make([]int, n)
	s[nq] = 2
	for t := nq + 1; t < n; t++ {
		s[t] = 1
	}
	return s
}

// ScoreTokens returns the relevance of a code document to a query, both
// already tokenised and truncated.
func (m *Model) ScoreTokens(query, code []int) (float32, error) {
	D := m.Dim()
	seq := m.Pair(query, code)
	a := m.acts.Get(m.Enc, len(seq))
	defer m.acts.Put(a)
	if err := m.Enc.ForwardSegments(a, [][]int{seq}, [][]int{m.segments(len(query), len(seq))}); err != nil {
		return 0, err
	}
	f := make([]float32, m.Features())
	m.features(f, nn.PairPool[float32]{D: D}.NewActs(1), a, query, code)
	s := []float32{0}
	nn.Listwise[float32]{G: 1, K: 1, D: len(f)}.Score(s, f, m.W, 1)
	return s[0], nil
}

// ScoreBatch returns the relevance of each code document to one query, all
// already tokenised and truncated: the same scores as ScoreTokens one by
// one, computed several pairs to a forward pass, whose products are taller
// and use the cores better. Pairs are grouped by padded length, so a short
// document is not padded to the longest; each group is cut into even
// batches of at most 8 pairs (two when it is the only group), so that the
// activations reused from call to call come in a bounded set of shapes,
// and the batches run two at a time (GOMAXPROCS at a time).
func (m *Model) ScoreBatch(query []int, codes [][]int) ([]float32, error) {
	out := make([]float32, len(codes))
	groups := map[int][]int{} // padded pair length → indices into codes
	var lens []int
	for i, c := range codes {
		n := dense.Padded(len(query) + 1 + len(c))
		if groups[n] == nil {
			lens = append(lens, n)
		}
		groups[n] = append(groups[n], i)
	}
	slices.Sort(lens)
	var batches [][]int // indices into codes, one forward pass each
	for _, n := range lens {
		idx := groups[n]
		parts := (len(idx) + 7) / 8
		if len(lens) == 1 && parts == 1 && len(idx) > 1 {
			parts = 2
		}
		for p := range parts {
			b := (len(idx) + parts - p - 1) / (parts - p)
			batches = append(batches, idx[:b])
			idx = idx[b:]
		}
	}
	// Two passes at once keep the cores busy through the serial parts of a
	// block (norms, activations, rotations) that a lone pass leaves idle.
	errs := make([]error, len(batches))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(len(batches), runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for {
				x := int(next.Add(1)) - 1
				if x >= len(batches) {
					return
				}
				batch := make([][]int, len(batches[x]))
				for j, i := range batches[x] {
					batch[j] = codes[i]
				}
				s, err := m.scoreSameLength(query, batch)
				if err != nil {
					errs[x] = err
					continue
				}
				for j, i := range batches[x] {
					out[i] = s[j]
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// scoreSameLength is ScoreBatch in one forward pass.
func (m *Model) scoreSameLength(query []int, codes [][]int) ([]float32, error) {
	B := len(codes)
	seqs, segs := make([][]int, B), make([][]int, B)
	n := 0
	for i, c := range codes {
		seqs[i] = m.Pair(query, c)
		segs[i] = m.segments(len(query), len(seqs[i]))
		n = max(n, len(seqs[i]))
	}
	a := m.acts.GetBatch(m.Enc, B, n)
	defer m.acts.Put(a)
	if err := m.Enc.ForwardSegments(a, seqs, segs); err != nil {
		return nil, err
	}
	D, F := m.Dim(), m.Features()
	f := make([]float32, B*F)
	pooled := make([]float32, B*D)
	nq := make([]int, B)
	for i := range nq {
		nq[i] = len(query)
	}
	nn.PairPool[float32]{D: D}.Forward(pooled, nn.PairPool[float32]{D: D}.NewActs(B), a.Out, nq, a.Valid, B, a.T)
	for i, c := range codes {
		copy(f[i*F:i*F+D], pooled[i*D:(i+1)*D])
		if m.Settings.Lexical {
			m.lexical(f[i*F+D:(i+1)*F], query, c)
		}
	}
	s := make([]float32, B)
	nn.Listwise[float32]{G: 1, K: 1, D: F}.Score(s, f, m.W, B)
	return s, nil
}

// Score returns the relevance of code to query.
func (m *Model) Score(query, code string) float32 {
	s, err := m.ScoreTokens(m.QueryTokens(query), m.Tokens(code, m.Settings.MaxCode))
	if err != nil {
		panic(err.Error()) // the tokenizer and model of one checkpoint agree on ids
	}
	return s
}

// FromDense returns a reranker built on a trained dual encoder: its blocks,
// in which the query and the code are encoded apart (as the dual encoder
// did), then cross new blocks, initialised with standard deviation std
// from seed, in which they attend to each other (a modular cross-encoder:
// representation blocks, then interaction blocks). The tokenizer and text
// preparation are the dual encoder's; the position limit is raised to hold
// a pair. The score head is 1/τ of the dual encoder in every element, so
// that before training, up to the new blocks' small perturbation, the
// score is the dual encoder's: the cosine of the query side's and the code
// side's mean token vectors over τ (nn.PairPool). With cross = 0
// query and code attend to each other in every block from the start.
//
// With lexical, the head also weighs NumLexical exact-match features,
// starting at weight 0; call SetIDF before training.
func FromDense(d *dense.Model, maxQuery, maxCode, cross int, lexical bool, std float64, seed uint64) (*Model, error) {
	if cross < 0 {
		return nil, fmt.Errorf("rerank: %d cross blocks", cross)
	}
	src := d.Enc.Model.Config
	cfg := src
	cfg.Kind = model.KindReranker
	cfg.NumHiddenLayers += cross
	cfg.MaxPositionEmbeddings = max(cfg.MaxPositionEmbeddings, dense.Padded(maxQuery+1+maxCode))
	mod, err := model.New[float32](cfg)
	if err != nil {
		return nil, err
	}
	p := mod.NewParams()
	mod.Init(p, std, seed)
	// the dual encoder's tensors by name; the final norm moves above the new blocks
	have := map[string][]float32{}
	for _, t := range d.Enc.Model.Tensors(d.Enc.Params) {
		have[t.Name] = t.Data
	}
	for _, t := range mod.Tensors(p) {
		if v, ok := have[t.Name]; ok {
			copy(t.Data, v)
		}
	}
	isolated := src.NumHiddenLayers
	if cross == 0 {
		isolated = 0
	}
	s := Settings{Text: d.Settings.Text, MaxQuery: maxQuery, MaxCode: maxCode, Separator: tokenizer.EndOfText, Pooling: PairProduct,
		Isolated: isolated, Lexical: lexical, Causal: d.Enc.Causal, QueryPrefix: d.Settings.QueryPrefix}
	w := make([]float32, cfg.HiddenSize, cfg.HiddenSize+NumLexical)
	for i := range w {
		w[i] = float32(1 / d.Settings.Tau)
	}
	if lexical {
		w = append(w, make([]float32, NumLexical)...)
	}
	return newModel(&dense.Encoder[float32]{Model: mod, Params: p, Isolated: isolated, Causal: s.Causal}, w, d.Tok, s)
}

// ZeroCross sets the output projections of the cross blocks (attention's
// o_proj and the MLP's down_proj) to zero: each cross block then adds
// nothing to its input, and the reranker scores exactly as the dual
// encoder it was built from (FromDense), lexical features aside (their
// weights start at 0). Training moves the projections away from zero as
// the loss asks, so the cross blocks start as the identity rather than as
// a random perturbation of the dual encoder's token vectors (as residual
// branches added to a trained network usually are).
func (m *Model) ZeroCross() {
	for l := m.Enc.Isolated; l < len(m.Enc.Params.Layers); l++ {
		if m.Enc.Isolated == 0 {
			break // cross = 0: every block is the dual encoder's
		}
		w := &m.Enc.Params.Layers[l]
		clear(w.Attn.Wo)
		clear(w.Down)
	}
}

func newModel(enc *dense.Encoder[float32], w []float32, tok *tokenizer.Tokenizer, s Settings) (*Model, error) {
	c := enc.Model.Config
	sep := tok.Special(s.Separator)
	switch {
	case sep < 0:
		return nil, fmt.Errorf("rerank: the tokenizer has no special token %q to separate query and code", s.Separator)
	case tok.VocabSize() > c.VocabSize:
		return nil, fmt.Errorf("rerank: the tokenizer has %d ids, the model %d", tok.VocabSize(), c.VocabSize)
	case s.MaxQuery < 1 || s.MaxCode < 1 || dense.Padded(s.MaxQuery+1+s.MaxCode) > c.MaxPositionEmbeddings:
		return nil, fmt.Errorf("rerank: max_query_tokens %d, max_code_tokens %d: want >= 1 and pairs (rounded up to 16) within max_position_embeddings = %d",
			s.MaxQuery, s.MaxCode, c.MaxPositionEmbeddings)
	case s.Text != dense.TextRaw && s.Text != dense.TextTerms:
		return nil, fmt.Errorf("rerank: text %q, want %q or %q", s.Text, dense.TextRaw, dense.TextTerms)
	case s.Pooling != PairProduct:
		return nil, fmt.Errorf("rerank: pooling %q: only %q pooling is implemented", s.Pooling, PairProduct)
	case s.Isolated < 0 || s.Isolated > c.NumHiddenLayers:
		return nil, fmt.Errorf("rerank: isolated_layers %d, want 0..%d", s.Isolated, c.NumHiddenLayers)
	case s.Lexical && len(w) != c.HiddenSize+NumLexical || !s.Lexical && len(w) != c.HiddenSize:
		return nil, fmt.Errorf("rerank: score head of %d values, want hidden_size = %d (+ %d lexical features: %v)", len(w), c.HiddenSize, NumLexical, s.Lexical)
	}
	return &Model{Enc: enc, W: w, Tok: tok, Settings: s, sep: sep}, nil
}

// Save writes the checkpoint directory dir atomically (see model.Save): a
// Hugging Face Llama directory (tied embeddings) with tokenizer.json,
// rerank.json and score.safetensors, the (D) tensor "score.weight".
func (m *Model) Save(dir string) error { return m.SaveWith(dir, nil) }

// SaveWith is Save with more files written into dir beside the model's (a
// training run's optimisers and state).
func (m *Model) SaveWith(dir string, extra map[string][]byte) error {
	var tok bytes.Buffer
	if err := m.Tok.WriteJSON(&tok); err != nil {
		return fmt.Errorf("rerank: %w", err)
	}
	set, err := json.MarshalIndent(m.Settings, "", "  ")
	if err != nil {
		return fmt.Errorf("rerank: %w", err)
	}
	f := safetensors.New()
	f.Metadata["format"] = "pt"
	f.SetF32(headTensor, []int{len(m.W)}, m.W)
	if m.Settings.Lexical {
		if len(m.IDF) != m.Enc.Model.Config.VocabSize {
			return fmt.Errorf("rerank: a lexical head needs the IDF of every token id (SetIDF)")
		}
		f.SetF32(idfTensor, []int{len(m.IDF)}, m.IDF)
	}
	head, err := f.MarshalBinary()
	if err != nil {
		return fmt.Errorf("rerank: %w", err)
	}
	files := map[string][]byte{model.TokenizerFile: tok.Bytes(), SettingsFile: append(set, '\n'), HeadFile: head}
	for name, data := range extra {
		files[name] = data
	}
	return m.Enc.Model.Save(dir, m.Enc.Params, files)
}

// Load reads a checkpoint directory written by Save.
func Load(dir string) (*Model, error) {
	data, err := readlimit.File(filepath.Join(dir, SettingsFile), MaxSettingsBytes)
	if err != nil {
		return nil, fmt.Errorf("rerank: %s is not a reranker checkpoint: %w", dir, err)
	}
	var s Settings
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("rerank: %s: %w", filepath.Join(dir, SettingsFile), jsonerr.Describe(err))
	}
	mod, p, err := model.LoadKind[float32](dir, model.KindReranker)
	if err != nil {
		return nil, err
	}
	tok, err := model.LoadTokenizer(dir, mod.Config)
	if err != nil {
		return nil, fmt.Errorf("rerank: %w", err)
	}
	hf, err := safetensors.ReadFile(filepath.Join(dir, HeadFile))
	if err != nil {
		return nil, fmt.Errorf("rerank: %w", err)
	}
	w, shape, err := hf.Float32(headTensor)
	if err != nil {
		return nil, fmt.Errorf("rerank: %s: %w", filepath.Join(dir, HeadFile), err)
	}
	if len(shape) != 1 {
		return nil, fmt.Errorf("rerank: %s: %s has shape %v, want one dimension", filepath.Join(dir, HeadFile), headTensor, shape)
	}
	if i := vec.NonFinite(w); i >= 0 {
		return nil, fmt.Errorf("rerank: %s: tensor %q: element %d is %v; the weights must be finite", filepath.Join(dir, HeadFile), headTensor, i, w[i])
	}
	m, err := newModel(&dense.Encoder[float32]{Model: mod, Params: p, Isolated: s.Isolated, Causal: s.Causal}, w, tok, s)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, dir)
	}
	if s.Lexical {
		idf, shape, err := hf.Float32(idfTensor)
		if err != nil {
			return nil, fmt.Errorf("rerank: %s: %w", filepath.Join(dir, HeadFile), err)
		}
		if !slices.Equal(shape, []int{mod.Config.VocabSize}) {
			return nil, fmt.Errorf("rerank: %s: %s has shape %v, want [%d]", filepath.Join(dir, HeadFile), idfTensor, shape, mod.Config.VocabSize)
		}
		if i := vec.NonFinite(idf); i >= 0 {
			return nil, fmt.Errorf("rerank: %s: tensor %q: element %d is %v; the weights must be finite", filepath.Join(dir, HeadFile), idfTensor, i, idf[i])
		}
		m.IDF = idf
	}
	return m, nil
}
