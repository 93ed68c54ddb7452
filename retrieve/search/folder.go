package search

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
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
// method with a body, BM25 over their code-aware terms, their embeddings
// by a dual encoder, and optionally a reranker over the fused candidates.
type Folder struct {
	Root     string
	Funcs    []retrieve.Pair
	Model    *dense.Model
	Reranker *rerank.Model   // nil: no reranking
	Depth    int             // candidates the reranker re-scores
	Fuse     bool            // order them by the fusion of first-stage and reranker ranks (rerank.Ranker.Fuse)
	Hybrid   retrieve.Hybrid // how the first stage combines BM25 and the encoder
	// FuseWeight: with Fuse, fuse scores, the first stage's weighed
	// FuseWeight (rerank.Ranker.FuseWeight); 0: ranks
	FuseWeight float64

	bm25  *retrieve.BM25
	dense *dense.Index
	codes []string // Funcs' code, as the reranker reads it
	Stats FolderStats
}

// FolderStats say what indexing a folder did.
type FolderStats struct {
	Files      int           // .go files read
	Unreadable int           // skipped: could not be read or parsed (counted, not fatal)
	Generated  int           // skipped: generated
	Funcs      int           // functions and methods indexed
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
	Cache    string
	Progress func(done, total int) // functions embedded of those to embed
}

// IndexFolder indexes the Go code under root (non-test .go files; vendor,
// testdata, hidden folders and generated files skipped). A file that cannot
// be read or parsed is skipped and counted. An interrupted call (ctx done)
// leaves only whole entries in the cache.
func IndexFolder(ctx context.Context, root string, m *dense.Model, o FolderOptions) (*Folder, error) {
	start := time.Now()
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
	type entry struct {
		funcs []retrieve.Pair
		vecs  []float32 // nil: to embed
		key   string
	}
	entries := make([]entry, 0, len(files))
	toEmbed := 0
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
			if funcs, vecs, err := readEntry(filepath.Join(cache, e.key+".safetensors"), m.Dim()); err == nil {
				for i := range funcs {
					funcs[i].File = rel // the same bytes may sit elsewhere now
					funcs[i].Package = filepath.ToSlash(filepath.Dir(rel))
				}
				e.funcs, e.vecs = funcs, vecs
				f.Stats.Cached++
				entries = append(entries, e)
				continue
			}
		}
		funcs, err := retrieve.FileFunctions(rel, src)
		switch {
		case errors.Is(err, retrieve.ErrGenerated):
			f.Stats.Generated++
			continue
		case err != nil:
			f.Stats.Unreadable++
			continue
		}
		e.funcs = funcs
		toEmbed += len(funcs)
		entries = append(entries, e)
	}

	// embed what the cache did not have, a file at a time, saving each
	done := 0
	for i := range entries {
		e := &entries[i]
		if e.vecs != nil {
			continue
		}
		codes := make([]string, len(e.funcs))
		for j, p := range e.funcs {
			codes[j] = p.Code
		}
		vecs, err := m.EmbedCodes(ctx, codes, nil)
		if err != nil {
			return nil, err
		}
		if err := (&retrieve.Flat{D: m.Dim(), Vecs: vecs}).CheckUnit(dense.UnitTol); err != nil {
			return nil, fmt.Errorf("search: embedding %s: %w", e.funcs[0].File, err)
		}
		e.vecs = vecs
		done += len(codes)
		f.Stats.Embedded += len(codes)
		if o.Progress != nil {
			o.Progress(done, toEmbed)
		}
		if cache != "" {
			if err := writeEntry(filepath.Join(cache, e.key+".safetensors"), e.funcs, vecs, m.Dim()); err != nil {
				return nil, err
			}
		}
	}
	var vecs []float32
	for _, e := range entries {
		f.Funcs = append(f.Funcs, e.funcs...)
		vecs = append(vecs, e.vecs...)
	}
	f.Stats.Funcs = len(f.Funcs)
	if len(f.Funcs) == 0 {
		return nil, fmt.Errorf("search: %s: no function with a body in %d .go files (%d generated, %d unreadable)", root, f.Stats.Files, f.Stats.Generated, f.Stats.Unreadable)
	}
	f.codes = make([]string, len(f.Funcs))
	for i, p := range f.Funcs {
		f.codes[i] = p.Code
	}
	f.bm25 = retrieve.NewBM25(f.codes)
	f.dense = &dense.Index{Model: m, Docs: f.Funcs, Flat: &retrieve.Flat{D: m.Dim(), Vecs: vecs}}
	f.Stats.Time = time.Since(start)
	return f, nil
}

// Hit is one result of a search.
type Hit struct {
	retrieve.Pair
	Score float64 // the last stage's score: the reranker's, else the fusion's
}

// Search returns the k functions that best answer query: BM25 and the dual
// encoder combined as f.Hybrid says, re-scored by the reranker when there
// is one. A query in which the encoder reads nothing is an error.
func (f *Folder) Search(query string, k int) ([]Hit, error) {
	if err := f.Model.CheckQuery(query); err != nil {
		return nil, err
	}
	fusion := f.Hybrid.Ranker(f.bm25, f.dense.Ranker())
	var top []int
	var scores []float64
	if f.Reranker != nil {
		r := rerank.NewRanker(f.Reranker, fusion, f.codes, f.Depth) // below the top Depth: the first stage's order
		r.Fuse, r.FuseWeight = f.Fuse, f.FuseWeight
		top, scores = r.RankScored(query, min(k, len(f.Funcs)))
	} else {
		// the fused scores that ordered the hits, not a fusion of their
		// ranks among themselves
		top, scores = fusion.RankScored(query, min(k, len(f.Funcs)))
	}
	hits := make([]Hit, len(top))
	for i, d := range top {
		hits[i] = Hit{Pair: f.Funcs[d], Score: scores[i]}
	}
	return hits, nil
}

// readEntry reads a cache entry: the functions of a file and their
// embeddings. Any problem is an error, and the file is then embedded again
// (and the entry rewritten): a truncated file, a shape that is not the
// encoder's, or embeddings that are not finite unit vectors.
func readEntry(path string, D int) ([]retrieve.Pair, []float32, error) {
	file, err := safetensors.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return entryOf(path, file, D)
}

// entryOf returns the functions and embeddings of the cache entry file,
// read from path.
func entryOf(path string, file *safetensors.File, D int) ([]retrieve.Pair, []float32, error) {
	var funcs []retrieve.Pair
	if err := json.Unmarshal([]byte(file.Metadata["functions"]), &funcs); err != nil {
		return nil, nil, fmt.Errorf("search: cache entry %s: metadata functions: %w", path, err)
	}
	if len(funcs) == 0 {
		return funcs, []float32{}, nil
	}
	vecs, shape, err := file.Float32("vecs")
	if err != nil {
		return nil, nil, fmt.Errorf("search: cache entry %s: %w", path, err)
	}
	if !slices.Equal(shape, []int{len(funcs), D}) {
		return nil, nil, fmt.Errorf("search: cache entry %s: vecs %v, want [%d %d]", path, shape, len(funcs), D)
	}
	if err := (&retrieve.Flat{D: D, Vecs: vecs}).CheckUnit(dense.UnitTol); err != nil {
		return nil, nil, fmt.Errorf("search: cache entry %s: vecs: %w", path, err)
	}
	return funcs, vecs, nil
}

// writeEntry writes a cache entry whole (a temporary file, renamed).
func writeEntry(path string, funcs []retrieve.Pair, vecs []float32, D int) error {
	meta, err := json.Marshal(funcs)
	if err != nil {
		return err
	}
	file := safetensors.New()
	file.Metadata = map[string]string{"functions": string(meta)}
	if len(funcs) > 0 {
		file.SetF32("vecs", []int{len(funcs), D}, vecs)
	}
	if err := safetensors.WriteFile(path, file); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("search: cache: %w", err)
	}
	return nil
}

// SearchIndex returns the k documents of a saved dense index x that best
// answer query, by the cosine of the embeddings alone, with the time taken
// to embed the query and to scan the index. A query in which the encoder
// reads nothing is an error.
func SearchIndex(x *dense.Index, query string, k int) (hits []Hit, embed, scan time.Duration, err error) {
	if err := x.Model.CheckQuery(query); err != nil {
		return nil, 0, 0, err
	}
	q := make([]float32, x.Flat.D)
	start := time.Now()
	x.Model.EmbedQuery(q, query)
	embed = time.Since(start)
	start = time.Now()
	docs := x.Flat.Search(q, k)
	scan = time.Since(start)
	scores := make([]float64, len(docs))
	x.Flat.Dots(scores, q, docs)
	hits = make([]Hit, len(docs))
	for i, d := range docs {
		hits[i] = Hit{Pair: x.Docs[d], Score: scores[i]}
	}
	return hits, embed, scan, nil
}
