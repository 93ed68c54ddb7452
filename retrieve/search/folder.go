package search

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/attnlab/attnlab/internal/atomicfile"
	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/retrieve/dense"
	"github.com/attnlab/attnlab/retrieve/rerank"
	"github.com/attnlab/attnlab/safetensors"

	"github.com/attnlab/attnlab/internal/readlimit"
)

// Folder is the search index of a folder of Go code: every function and
// method with a body, indexed by three fields (its doc comment, its
// signature and its body) for BM25F, its code and its doc embedded by a
// dual encoder, and optionally a reranker over the fused candidates.
// Build-tag twins (the same package, receiver and name in several files)
// are indexed once.
type Folder struct {
	Root  string
	Funcs []retrieve.Func // the functions indexed; document i is Funcs[i]
	// Variants[i] are the build-tag twins of Funcs[i] in other files,
	// not indexed (nil for most).
	Variants [][]retrieve.Func
	Model    *dense.Model
	Reranker *rerank.Model   // nil: no reranking
	Depth    int             // candidates the reranker re-scores
	Fuse     bool            // order them by the fusion of first-stage and reranker scores (rerank.Ranker.Fuse)
	Hybrid   retrieve.Hybrid // how the first stage combines BM25F and the encoder
	// FuseWeight: with Fuse, fuse scores, the first stage's weighed
	// FuseWeight (rerank.Ranker.FuseWeight); 0: ranks
	FuseWeight float64
	// RerankDoc gives the reranker each function as its source reads:
	// the first paragraph of its doc comment as a comment, then its
	// code (false: the code alone, as the reranker was trained).
	RerankDoc bool

	fields   Fields
	bm25     *retrieve.BM25F
	codeVecs *retrieve.Flat // the code's embeddings
	docVecs  *retrieve.Flat // the doc's (query tower), a function without a doc its code's
	codes    []string       // Funcs' code
	withDocs []string       // Funcs' code after the first paragraph of their doc (RerankDoc), made on first use
	Stats    FolderStats
}

// Fields weigh the fields of a function in the first stage.
type Fields struct {
	// Doc, Sig and Body are BM25F's weights of the doc comment, the
	// signature and the body.
	Doc, Sig, Body float64
	// DocDense is the weight of the cosine of the query with the doc's
	// embedding in the encoder's score, beside the cosine with the code's
	// (weight 1); a function without a doc counts its code's cosine in
	// its place. 0: the code alone.
	DocDense float64
	// Stem folds plurals onto singulars (retrieve.Stem) in BM25F's
	// terms, of the functions and the queries alike.
	Stem bool
	// K1 and DocB are BM25F's saturation and the doc field's length
	// normalisation (0: 1.2 and 0.75, BM25's usual values).
	K1, DocB float64
}

// DefaultFields are the weights chosen on the validation queries of
// retrieve/testdata/devqueries (std-val.jsonl and debian-val.jsonl, 98
// queries; docs/retrieval.md's table of the choice): the doc weighs most, as
// the text that best answers a question in words; the encoder's cosine
// with the doc four times that with the code.
var DefaultFields = Fields{Doc: 8, Sig: 1, Body: 1, DocDense: 4}

// DefaultBM25Weight is the weight of BM25F in the first stage of a folder
// search (the encoder gets the rest), chosen with DefaultFields; over
// pairs, where the doc is the query and not indexed, retrieve's own
// default holds.
const DefaultBM25Weight = 0.4

// DefaultTranslateAlpha is the weight of the translated terms in BM25F's
// queries in a folder search (retrieve.Hybrid.TranslateAlpha), chosen with
// DefaultFields on the same validation queries: the best of 0.05, 0.1, 0.2
// and 0.4.
const DefaultTranslateAlpha = 0.1

// Validate returns an error for a negative or non-finite weight, or BM25F
// weights all 0.
func (f Fields) Validate() error {
	if !(f.DocB <= 1) {
		return fmt.Errorf("search: field weights %+v: doc-b above 1", f)
	}
	for _, w := range []float64{f.Doc, f.Sig, f.Body, f.DocDense, f.K1, f.DocB} {
		if !(w >= 0) || math.IsInf(w, 0) {
			return fmt.Errorf("search: field weights %+v: want finite weights >= 0", f)
		}
	}
	if f.Doc+f.Sig+f.Body == 0 {
		return fmt.Errorf("search: field weights %+v: BM25F needs a field of weight > 0", f)
	}
	return nil
}

// FolderStats say what indexing a folder did.
type FolderStats struct {
	Files      int           // .go files read
	Unreadable int           // skipped: could not be read or parsed (counted, not fatal)
	Generated  int           // generated files: skipped, or with FolderOptions.Generated indexed
	Funcs      int           // functions and methods indexed
	Twins      int           // build-tag twins of an indexed function, not indexed again
	Documented int           // of Funcs, with a doc comment
	Cached     int           // of the files, found in the cache (not embedded again)
	Embedded   int           // of the functions, embedded by this call
	Time       time.Duration // to index
}

// FolderOptions set how a folder is indexed.
type FolderOptions struct {
	// Cache is a folder of embeddings by file content: a file whose bytes
	// were embedded before by the same encoder is not embedded again. Each
	// encoder (by its fingerprint) has a folder of its own, so a cache is
	// never mixed across models. "" for none.
	Cache string
	// Generated indexes generated files ("Code generated … DO NOT EDIT.")
	// too; they are skipped otherwise.
	Generated bool
	// Fields weigh the fields (zero value: DefaultFields).
	Fields   Fields
	Progress func(done, total int) // functions embedded of those to embed
}

// cacheVersion is written into every cache entry; an entry of another
// version (or none: those before doc comments were indexed) is embedded
// again and rewritten, never read as this one.
const cacheVersion = "2"

// IndexFolder indexes the Go code under root (non-test .go files; vendor,
// testdata, hidden folders and, unless o.Generated, generated files
// skipped). A file that cannot be read or parsed is skipped and counted.
// An interrupted call (ctx done) leaves only whole entries in the cache.
func IndexFolder(ctx context.Context, root string, m *dense.Model, o FolderOptions) (*Folder, error) {
	start := time.Now()
	if o.Fields == (Fields{}) {
		o.Fields = DefaultFields
	}
	if err := o.Fields.Validate(); err != nil {
		return nil, err
	}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r // a linked folder is walked, not taken for a file
	}
	files, err := retrieve.GoFiles(root)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("search: %s holds no Go file", root)
	}
	cache := ""
	if o.Cache != "" {
		fp, err := m.Fingerprint()
		if err != nil {
			return nil, err
		}
		cache = filepath.Join(o.Cache, fp[:16])
		if err := os.MkdirAll(cache, 0o755); err != nil {
			return nil, fmt.Errorf("search: cache: %w", err)
		}
		if _, err := atomicfile.RecoverIn(cache); err != nil {
			return nil, err
		}
	}
	f := &Folder{Root: root, Model: m}
	f.Stats.Files = len(files)

	// each file: from the cache when its bytes were seen, else parsed
	entries := make([]entry, 0, len(files))
	for _, rel := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		src, err := readlimit.File(filepath.Join(root, filepath.FromSlash(rel)), readlimit.SourceFileBytes)
		if err != nil {
			f.Stats.Unreadable++
			continue
		}
		sum := sha256.Sum256(src)
		e := entry{key: hex.EncodeToString(sum[:])}
		if cache != "" {
			if c, err := readEntry(filepath.Join(cache, e.key+".safetensors"), m.Dim()); err == nil {
				if c.generated && !o.Generated {
					f.Stats.Generated++
					continue
				}
				for i := range c.funcs { // the same bytes may sit elsewhere now
					fn := &c.funcs[i]
					name := fn.Name()
					fn.File, fn.Package = rel, retrieve.PackageOf(rel)
					fn.ID = fn.Package + "." + name
				}
				c.key = e.key
				if c.generated {
					f.Stats.Generated++
				}
				f.Stats.Cached++
				entries = append(entries, c)
				continue
			}
		}
		funcs, err := retrieve.FileFunctions(rel, src, o.Generated)
		switch {
		case errors.Is(err, retrieve.ErrGenerated):
			f.Stats.Generated++
			continue
		case err != nil:
			f.Stats.Unreadable++
			continue
		}
		e.funcs = funcs
		e.generated = len(funcs) > 0 && funcs[0].Generated
		if e.generated {
			f.Stats.Generated++
		}
		entries = append(entries, e)
	}
	if err := embedEntries(ctx, m, entries, cache, o.Progress, &f.Stats); err != nil {
		return nil, err
	}

	// build-tag twins: the first by path is indexed, the others listed
	first := map[string]int{} // ID → index in f.Funcs
	var codeVecs, docVecs []float32
	D := m.Dim()
	for _, e := range entries {
		at := 0 // the entry's next doc vector
		for i, fn := range e.funcs {
			doc := e.vecs[i*D : (i+1)*D]
			if fn.Query != "" {
				doc = e.docs[at*D : (at+1)*D]
				at++
			}
			if j, ok := first[fn.ID]; ok {
				for len(f.Variants) <= j {
					f.Variants = append(f.Variants, nil)
				}
				f.Variants[j] = append(f.Variants[j], fn)
				f.Stats.Twins++
				continue
			}
			first[fn.ID] = len(f.Funcs)
			f.Funcs = append(f.Funcs, fn)
			codeVecs = append(codeVecs, e.vecs[i*D:(i+1)*D]...)
			docVecs = append(docVecs, doc...)
		}
	}
	for len(f.Variants) < len(f.Funcs) {
		f.Variants = append(f.Variants, nil)
	}
	f.Stats.Funcs = len(f.Funcs)
	if len(f.Funcs) == 0 {
		return nil, fmt.Errorf("search: %s: no function with a body in %d .go files (%d generated, %d unreadable)", root, f.Stats.Files, f.Stats.Generated, f.Stats.Unreadable)
	}
	f.codeVecs = &retrieve.Flat{D: D, Vecs: codeVecs}
	f.docVecs = &retrieve.Flat{D: D, Vecs: docVecs}
	f.index(o.Fields)
	f.Stats.Time = time.Since(start)
	return f, nil
}

// index builds what a search reads beside the embeddings.
func (f *Folder) index(fields Fields) {
	f.codes = make([]string, len(f.Funcs))
	docs := make([][]string, len(f.Funcs))
	for i, fn := range f.Funcs {
		f.codes[i] = fn.Code
		docs[i] = []string{fn.Doc, fn.Signature(), fn.BodyText()}
		if fn.Doc != "" {
			f.Stats.Documented++
		}
	}
	analyze := retrieve.Terms
	if fields.Stem {
		analyze = retrieve.StemTerms
	}
	f.bm25 = retrieve.NewBM25FWith(docs, []float64{fields.Doc, fields.Sig, fields.Body}, analyze)
	f.fields = fields
	f.setBM25F()
}

// setBM25F sets BM25F's weights and parameters from f.fields.
func (f *Folder) setBM25F() {
	fields := f.fields
	f.bm25.Weights = []float64{fields.Doc, fields.Sig, fields.Body}
	f.bm25.K1, f.bm25.B[0] = 1.2, 0.75
	if fields.K1 > 0 {
		f.bm25.K1 = fields.K1
	}
	if fields.DocB > 0 {
		f.bm25.B[0] = fields.DocB
	}
}

// SetFields changes the fields' weights of a built index.
func (f *Folder) SetFields(fields Fields) error {
	if err := fields.Validate(); err != nil {
		return err
	}
	if fields.Stem != f.fields.Stem {
		f.Stats.Documented = 0
		f.index(fields)
		return nil
	}
	f.fields = fields
	f.setBM25F()
	return nil
}

// Fields returns the fields' weights of the index.
func (f *Folder) Fields() Fields { return f.fields }

// entry is one file's functions and their embeddings.
type entry struct {
	funcs     []retrieve.Func
	vecs      []float32 // (len(funcs), D) code embeddings; nil: to embed
	docs      []float32 // (functions with a query, D) doc embeddings
	generated bool
	key       string
}

// embedChunk is how many functions embedEntries embeds between saving
// the entries they complete: an interrupted build keeps those.
var embedChunk = 512

// embedEntries embeds the code and docs of the entries the cache did not
// have, in batches across files (a chunk of files at a time), and writes
// each file's entry once it is whole.
func embedEntries(ctx context.Context, m *dense.Model, entries []entry, cache string, progress func(done, total int), st *FolderStats) error {
	var todo []int // entries to embed
	total := 0
	for i, e := range entries {
		if e.vecs == nil {
			todo = append(todo, i)
			total += len(e.funcs)
		}
	}
	D := m.Dim()
	for len(todo) > 0 {
		n := 0 // entries in this chunk
		var codes, docs []string
		for n < len(todo) && (n == 0 || len(codes)+len(entries[todo[n]].funcs) <= embedChunk) {
			for _, fn := range entries[todo[n]].funcs {
				codes = append(codes, fn.Code)
				if fn.Query != "" {
					docs = append(docs, fn.Query)
				}
			}
			n++
		}
		codeVecs := make([]float32, len(codes)*D)
		docVecs := make([]float32, len(docs)*D)
		if err := m.EmbedCodesInto(ctx, codeVecs, codes, nil); err != nil {
			return err
		}
		if err := m.EmbedQueriesInto(ctx, docVecs, docs, nil); err != nil {
			return err
		}
		ci, di := 0, 0
		for _, x := range todo[:n] {
			e := &entries[x]
			nd := 0
			for _, fn := range e.funcs {
				if fn.Query != "" {
					nd++
				}
			}
			e.vecs = codeVecs[ci*D : (ci+len(e.funcs))*D : (ci+len(e.funcs))*D]
			e.docs = docVecs[di*D : (di+nd)*D : (di+nd)*D]
			ci, di = ci+len(e.funcs), di+nd
			if err := (&retrieve.Flat{D: D, Vecs: e.vecs}).CheckUnit(dense.UnitTol); err != nil {
				return fmt.Errorf("search: embedding %s: %w", e.funcs[0].File, err)
			}
			if err := (&retrieve.Flat{D: D, Vecs: e.docs}).CheckUnit(dense.UnitTol); err != nil {
				return fmt.Errorf("search: embedding the doc comments of %s: %w", e.funcs[0].File, err)
			}
			st.Embedded += len(e.funcs)
			if cache != "" {
				if err := writeEntry(filepath.Join(cache, e.key+".safetensors"), *e, D); err != nil {
					return err
				}
			}
		}
		todo = todo[n:]
		if progress != nil {
			progress(st.Embedded, total)
		}
	}
	return nil
}

// Find returns the index of the function called name in the file path
// (relative to the folder), or of the function indexed in its place when
// it is a build-tag twin; -1 when the folder has none.
func (f *Folder) Find(path, name string) int {
	for i, fn := range f.Funcs {
		if fn.Name() != name {
			continue
		}
		if fn.File == path {
			return i
		}
		for _, v := range f.Variants[i] {
			if v.File == path {
				return i
			}
		}
	}
	return -1
}

// Hit is one result of a search.
type Hit struct {
	retrieve.Func
	// Score is the score that ordered the hit: the first stage's blend of
	// BM25F's and the encoder's scores, each rescaled to [0, 1] over the
	// candidates; for the candidates the reranker re-scored, its score
	// (or, with Fuse, the fusion of both), after the first stage's own.
	Score  float64
	Scores Scores
	// Variants are the function's build-tag twins in other files.
	Variants []retrieve.Func
}

// Scores are a hit's scores by each system, as each scored it.
type Scores struct {
	BM25   float64  `json:"bm25"`             // BM25F over doc, signature and body (the query expanded by Hybrid.Translation, with one)
	Dense  float64  `json:"dense"`            // the encoder: cosine with the code, plus Fields.DocDense times the cosine with the doc
	First  float64  `json:"first"`            // the first stage's blend of both
	Rerank *float64 `json:"rerank,omitempty"` // the reranker's score, for the candidates it re-scored
}

// Search returns the k functions that best answer query: BM25F and the
// dual encoder combined as f.Hybrid says, re-scored by the reranker when
// there is one. A query in which the encoder reads nothing is an error.
func (f *Folder) Search(query string, k int) ([]Hit, error) {
	if err := f.Model.CheckQuery(query); err != nil {
		return nil, err
	}
	first := f.firstStage()
	n := min(k, len(f.Funcs))
	if f.Reranker != nil {
		n = min(max(k, f.Depth), len(f.Funcs))
	}
	docs, scores, parts := first.RankParts(query, n)
	hits := make([]Hit, len(docs))
	for i, d := range docs {
		hits[i] = Hit{Func: f.Funcs[d], Score: scores[i], Variants: f.Variants[d],
			Scores: Scores{BM25: parts[0][i], Dense: parts[1][i], First: scores[i]}}
	}
	if f.Reranker != nil {
		r := rerank.NewRanker(f.Reranker, first, f.rerankTexts(), f.Depth)
		r.Fuse, r.FuseWeight = f.Fuse, f.FuseWeight
		at := make(map[int]Hit, len(docs))
		for i, d := range docs {
			at[d] = hits[i]
		}
		firstScores := slices.Clone(scores)
		nr, final, ce := r.Rerank(query, docs, firstScores)
		for i := range nr {
			h := at[docs[i]]
			h.Score = final[i]
			h.Scores.Rerank = &ce[i]
			hits[i] = h
		}
	}
	return hits[:min(k, len(hits))], nil
}

// rerankTexts returns the texts the reranker reads: the code, or with
// RerankDoc the code after its doc's first paragraph as a comment.
func (f *Folder) rerankTexts() []string {
	if !f.RerankDoc {
		return f.codes
	}
	if f.withDocs == nil {
		f.withDocs = make([]string, len(f.Funcs))
		for i, fn := range f.Funcs {
			f.withDocs[i] = fn.Code
			if fn.Query != "" {
				f.withDocs[i] = "// " + fn.Query + "\n" + fn.Code
			}
		}
	}
	return f.withDocs
}

// firstStage returns the hybrid first stage over the folder: a Blend of
// BM25F and the encoder, or with Hybrid.RRF their reciprocal rank fusion.
func (f *Folder) firstStage() partsRanker {
	sys := []retrieve.Ranker{f.Hybrid.Lexical(f.bm25), f.denseRanker(f.fields.DocDense)}
	if f.Hybrid.RRF {
		return fusionParts{retrieve.Fusion{Systems: sys}}
	}
	w := f.Hybrid.BM25Weight
	if w == 0 {
		w = DefaultBM25Weight
	}
	return retrieve.Blend{Systems: sys, Weights: []float64{w, 1 - w}}
}

// partsRanker is a first stage that returns, with its hits, each of its
// systems' own scores of them (retrieve.Blend.RankParts).
type partsRanker interface {
	retrieve.ScoredRanker
	RankParts(query string, k int) (docs []int, scores []float64, parts [][]float64)
}

// fusionParts is a retrieve.Fusion with RankParts.
type fusionParts struct{ retrieve.Fusion }

func (r fusionParts) RankParts(query string, k int) ([]int, []float64, [][]float64) {
	docs, scores := r.RankScored(query, k)
	parts := make([][]float64, len(r.Systems))
	for i, s := range r.Systems {
		parts[i] = make([]float64, len(docs))
		s.Score(query, docs, parts[i])
	}
	return docs, scores, parts
}

// denseRanker returns the encoder's ranker over the folder: the cosine
// with the code plus docWeight times the cosine with the doc.
func (f *Folder) denseRanker(docWeight float64) retrieve.Ranker {
	return &denseFields{m: f.Model, code: f.codeVecs, doc: f.docVecs, w: docWeight}
}

// denseFields scores a function by the cosine of the query's embedding
// with its code's, plus w times the cosine with its doc's.
type denseFields struct {
	m         *dense.Model
	code, doc *retrieve.Flat
	w         float64
}

func (d *denseFields) query(q string) []float32 {
	v := make([]float32, d.m.Dim())
	d.m.EmbedQuery(v, q)
	return v
}

func (d *denseFields) ScoreAll(query string) []float64 {
	q := d.query(query)
	s := d.code.DotsAll(q)
	if d.w != 0 {
		for i, v := range d.doc.DotsAll(q) {
			s[i] += d.w * v
		}
	}
	return s
}

func (d *denseFields) Top(scores []float64, k int) []int { return retrieve.TopK(scores, k) }

func (d *denseFields) Rank(query string, k int) []int { return d.Top(d.ScoreAll(query), k) }

func (d *denseFields) Score(query string, docs []int, scores []float64) {
	q := d.query(query)
	d.code.Dots(scores, q, docs)
	if d.w != 0 {
		s := make([]float64, len(docs))
		d.doc.Dots(s, q, docs)
		for i, v := range s {
			scores[i] += d.w * v
		}
	}
}

// readEntry reads a cache entry: the functions of a file and their
// embeddings. Any problem is an error, and the file is then embedded again
// (and the entry rewritten): a truncated file, an entry of another cache
// version, a shape that is not the encoder's, or embeddings that are not
// finite unit vectors.
func readEntry(path string, D int) (entry, error) {
	file, err := safetensors.ReadFile(path)
	if err != nil {
		return entry{}, err
	}
	return entryOf(path, file, D)
}

// entryOf returns the functions and embeddings of the cache entry file,
// read from path.
func entryOf(path string, file *safetensors.File, D int) (entry, error) {
	if v := file.Metadata["version"]; v != cacheVersion {
		return entry{}, fmt.Errorf("search: cache entry %s: version %q, want %q", path, v, cacheVersion)
	}
	var e entry
	if err := json.Unmarshal([]byte(file.Metadata["functions"]), &e.funcs); err != nil {
		return entry{}, fmt.Errorf("search: cache entry %s: metadata functions: %w", path, err)
	}
	e.generated = file.Metadata["generated"] == "true"
	if len(e.funcs) == 0 {
		e.funcs, e.vecs = []retrieve.Func{}, []float32{}
		return e, nil
	}
	nd := 0
	for _, fn := range e.funcs {
		if fn.Query != "" {
			nd++
		}
		if fn.Body < 0 || fn.Body > len(fn.Code) {
			return entry{}, fmt.Errorf("search: cache entry %s: %s: body at %d of %d bytes", path, fn.ID, fn.Body, len(fn.Code))
		}
	}
	for _, t := range []struct {
		name string
		n    int
		dst  *[]float32
	}{{"vecs", len(e.funcs), &e.vecs}, {"docvecs", nd, &e.docs}} {
		if t.n == 0 {
			*t.dst = []float32{}
			continue
		}
		vecs, shape, err := file.Float32(t.name)
		if err != nil {
			return entry{}, fmt.Errorf("search: cache entry %s: %w", path, err)
		}
		if !slices.Equal(shape, []int{t.n, D}) {
			return entry{}, fmt.Errorf("search: cache entry %s: %s %v, want [%d %d]", path, t.name, shape, t.n, D)
		}
		if err := (&retrieve.Flat{D: D, Vecs: vecs}).CheckUnit(dense.UnitTol); err != nil {
			return entry{}, fmt.Errorf("search: cache entry %s: %s: %w", path, t.name, err)
		}
		*t.dst = vecs
	}
	return e, nil
}

// writeEntry writes a cache entry whole (a temporary file, renamed).
func writeEntry(path string, e entry, D int) error {
	meta, err := json.Marshal(e.funcs)
	if err != nil {
		return err
	}
	file := safetensors.New()
	file.Metadata = map[string]string{"version": cacheVersion, "functions": string(meta)}
	if e.generated {
		file.Metadata["generated"] = "true"
	}
	if len(e.funcs) > 0 {
		file.SetF32("vecs", []int{len(e.funcs), D}, e.vecs)
	}
	if nd := len(e.docs) / D; nd > 0 {
		file.SetF32("docvecs", []int{nd, D}, e.docs)
	}
	if err := safetensors.WriteFile(path, file); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("search: cache: %w", err)
	}
	return nil
}

// FromIndex returns the search of a saved dense index x (retriever train's
// OUT/index): its documents as functions, their query as the doc comment,
// their code embeddings as saved and their docs embedded now; progress,
// if not nil, counts the docs embedded.
func FromIndex(ctx context.Context, x *dense.Index, fields Fields, progress func(done, total int)) (*Folder, error) {
	if fields == (Fields{}) {
		fields = DefaultFields
	}
	if err := fields.Validate(); err != nil {
		return nil, err
	}
	f := &Folder{Model: x.Model, codeVecs: x.Flat}
	D := x.Model.Dim()
	var docs []string
	for _, p := range x.Docs {
		if p.Query != "" {
			docs = append(docs, p.Query)
		}
	}
	dv := make([]float32, len(docs)*D)
	if err := x.Model.EmbedQueriesInto(ctx, dv, docs, func(n int) {
		if progress != nil {
			progress(n, len(docs))
		}
	}); err != nil {
		return nil, err
	}
	docVecs := make([]float32, 0, len(x.Docs)*D)
	at := 0
	for i, p := range x.Docs {
		f.Funcs = append(f.Funcs, retrieve.Func{Pair: p, Doc: p.Query, Body: retrieve.SplitSignature(p.Code)})
		if p.Query != "" {
			docVecs = append(docVecs, dv[at*D:(at+1)*D]...)
			at++
		} else {
			docVecs = append(docVecs, x.Flat.Vecs[i*D:(i+1)*D]...)
		}
	}
	f.Variants = make([][]retrieve.Func, len(f.Funcs))
	f.docVecs = &retrieve.Flat{D: D, Vecs: docVecs}
	f.Stats.Funcs = len(f.Funcs)
	f.index(fields)
	return f, nil
}
