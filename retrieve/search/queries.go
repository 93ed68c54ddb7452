package search

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/attnlab/attnlab/internal/readlimit"
	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/retrieve/dense"
	"github.com/attnlab/attnlab/retrieve/rerank"
	"github.com/attnlab/attnlab/train"
)

// A Query is one question of a search evaluation, as a developer types it,
// with the function that answers it.
type Query struct {
	Query string `json:"query"`
	// Root is the folder searched, relative to the evaluation's source
	// folder ("" or ".": all of it): the repository the developer is in.
	Root string `json:"root,omitempty"`
	Path string `json:"path"` // the gold function's file, relative to Root, slash-separated
	Func string `json:"func"` // its name: Name, or Recv.Name for a method
	Note string `json:"note,omitempty"`

	at string // file:line it was read from
}

// MaxQueryFileBytes bounds a file of queries: far more queries than anyone
// writes by hand, and /dev/zero is refused after reading that much.
const MaxQueryFileBytes = 16 << 20

// ReadQueries reads a JSONL file of queries. A line that is not a query
// (missing text, path or function) is an error naming the line.
func ReadQueries(path string) ([]Query, error) {
	data, err := readlimit.File(path, MaxQueryFileBytes)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	var out []Query
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, retrieve.MaxLineBytes)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var q Query
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&q); err != nil {
			return nil, fmt.Errorf("search: %s:%d: %w", path, line, err)
		}
		if strings.TrimSpace(q.Query) == "" || q.Path == "" || q.Func == "" {
			return nil, fmt.Errorf("search: %s:%d: want a query, a path and a func", path, line)
		}
		q.at = fmt.Sprintf("%s:%d", path, line)
		out = append(out, q)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("search: %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("search: %s holds no query", path)
	}
	return out, nil
}

// QuerySystems names the systems a query evaluation measures, in order:
// BM25 over the code alone and over the doc comment and the code as one
// text (the baselines), BM25F over the three fields, the encoder on the
// code alone and on code and doc, their hybrid (the first stage of
// search), and the hybrid re-scored by the reranker, unfused and fused.
func QuerySystems() []string {
	return []string{"bm25-code", "bm25-doc+code", "bm25f", "dense-code", "dense", "hybrid", "hybrid+rerank", "hybrid+rerank+fused"}
}

// System returns the folder's ranker called name (QuerySystems); the
// reranked ones need f.Reranker and re-score its top f.Depth.
func (f *Folder) System(name string) (retrieve.Ranker, error) {
	switch name {
	case "bm25-code":
		return retrieve.NewBM25(f.codes), nil
	case "bm25-doc+code":
		docs := make([]string, len(f.Funcs))
		for i, fn := range f.Funcs {
			docs[i] = fn.Doc + "\n" + fn.Code
		}
		return retrieve.NewBM25(docs), nil
	case "bm25f":
		return f.bm25, nil
	case "dense-code":
		return f.denseRanker(0), nil
	case "dense":
		return f.denseRanker(f.fields.DocDense), nil
	case "hybrid":
		return f.firstStage(), nil
	case "hybrid+rerank", "hybrid+rerank+fused":
		if f.Reranker == nil {
			return nil, fmt.Errorf("search: system %s needs a reranker", name)
		}
		r := rerank.NewRanker(f.Reranker, f.firstStage(), f.rerankTexts(), f.Depth)
		r.Fuse, r.FuseWeight = name == "hybrid+rerank+fused", f.FuseWeight
		return r, nil
	}
	return nil, fmt.Errorf("search: unknown system %q (known: %s)", name, strings.Join(QuerySystems(), ", "))
}

// QueryEvalOptions describe an evaluation of search on developer queries.
type QueryEvalOptions struct {
	Queries    string   // JSONL file of Query (several: separated by commas)
	Src        string   // the folder the queries' roots are in
	Systems    []string // names of QuerySystems; nil: all the models allow
	Model      string   // the dual encoder
	Reranker   string   // "" none
	Depth      int
	Hybrid     retrieve.Hybrid
	FuseWeight float64
	Fields     Fields
	Cache      string // embeddings cache, as search's
	Generated  bool
	RerankDoc  bool // the reranker reads each function's doc before its code (Folder.RerankDoc)
}

// QueryRow is one system's measures on the queries.
type QueryRow struct {
	System  string  `json:"system"`
	Queries int     `json:"queries"`
	Hit1    float64 `json:"hit1"`
	Hit3    float64 `json:"hit3"`
	Hit10   float64 `json:"hit10"`
	MRR10   float64 `json:"mrr10"`
	// OverBaseline is MRR10 over that of bm25-doc+code (nil: no such
	// row, or its MRR@10 is 0).
	OverBaseline *float64      `json:"mrr10_over_baseline,omitempty"`
	P50          time.Duration `json:"query_p50_ns"`
	Ranks        []int         `json:"ranks"` // per query: the gold's rank in the top 10, 0 when absent
}

// RootStats describe one searched folder.
type RootStats struct {
	Root    string `json:"root"`
	Queries int    `json:"queries"`
	Funcs   int    `json:"funcs"`
	Files   int    `json:"files"`
}

// QueryEvalResult is a query evaluation's outcome.
type QueryEvalResult struct {
	Queries string      `json:"queries"`
	N       int         `json:"n"`
	Roots   []RootStats `json:"roots"`
	Fields  Fields      `json:"fields"`
	Hybrid  string      `json:"hybrid"` // how the hybrid combines BM25F and the encoder (retrieve.Hybrid.String)
	Rows    []QueryRow  `json:"rows"`
}

// EvaluateQueries searches every query's root (indexed once per root, with
// the cache) with every system, and measures where each puts the gold.
// A gold function the root does not hold is an error naming the query.
func EvaluateQueries(ctx context.Context, o QueryEvalOptions, ev train.Events) (*QueryEvalResult, error) {
	var qs []Query
	for file := range strings.SplitSeq(o.Queries, ",") {
		q, err := ReadQueries(file)
		if err != nil {
			return nil, err
		}
		qs = append(qs, q...)
	}
	if o.Systems == nil {
		for _, s := range QuerySystems() {
			if o.Reranker != "" || !strings.Contains(s, "rerank") {
				o.Systems = append(o.Systems, s)
			}
		}
	}
	for _, s := range o.Systems {
		if !slices.Contains(QuerySystems(), s) {
			return nil, fmt.Errorf("search: unknown system %q (known: %s)", s, strings.Join(QuerySystems(), ", "))
		}
		if strings.Contains(s, "rerank") && o.Reranker == "" {
			return nil, fmt.Errorf("search: system %s needs a reranker", s)
		}
	}
	if o.Fields == (Fields{}) {
		o.Fields = DefaultFields
	}
	if err := o.Fields.Validate(); err != nil {
		return nil, err
	}
	if o.Depth < 1 {
		return nil, fmt.Errorf("search: rerank depth %d: want >= 1", o.Depth)
	}
	m, err := dense.LoadFolder(o.Model)
	if err != nil {
		return nil, err
	}
	var rr *rerank.Model
	if o.Reranker != "" {
		if rr, err = rerank.Load(o.Reranker); err != nil {
			return nil, err
		}
	}
	for _, q := range qs {
		if err := m.CheckQuery(q.Query); err != nil {
			return nil, fmt.Errorf("search: %s: %w", q.at, err)
		}
	}
	byRoot := map[string][]int{}
	var roots []string
	for i, q := range qs {
		r := filepath.ToSlash(filepath.Clean(q.Root))
		if _, ok := byRoot[r]; !ok {
			roots = append(roots, r)
		}
		byRoot[r] = append(byRoot[r], i)
	}
	sort.Strings(roots)
	if o.Hybrid.BM25Weight == 0 {
		o.Hybrid.BM25Weight = DefaultBM25Weight // the folder's, which Folder takes for 0
	}
	res := &QueryEvalResult{Queries: o.Queries, N: len(qs), Fields: o.Fields, Hybrid: o.Hybrid.String()}
	ranks := make([][]int, len(o.Systems)) // by system, by query
	times := make([][]time.Duration, len(o.Systems))
	for s := range ranks {
		ranks[s] = make([]int, len(qs))
	}
	for _, root := range roots {
		dir := filepath.Join(o.Src, filepath.FromSlash(root))
		f, err := IndexFolder(ctx, dir, m, FolderOptions{Cache: o.Cache, Generated: o.Generated, Fields: o.Fields,
			Progress: progressOf(ev, "embedding "+root)})
		if err != nil {
			return nil, err
		}
		f.Hybrid, f.Reranker, f.Depth, f.Fuse, f.FuseWeight, f.RerankDoc = o.Hybrid, rr, o.Depth, true, o.FuseWeight, o.RerankDoc
		res.Roots = append(res.Roots, RootStats{Root: root, Queries: len(byRoot[root]), Funcs: f.Stats.Funcs, Files: f.Stats.Files})
		gold := make([]int, len(byRoot[root]))
		for j, qi := range byRoot[root] {
			q := qs[qi]
			if gold[j] = f.Find(q.Path, q.Func); gold[j] < 0 {
				return nil, fmt.Errorf("search: %s (%q): %s holds no function %s in %s", q.at, q.Query, dir, q.Func, q.Path)
			}
		}
		for s, name := range o.Systems {
			r, err := f.System(name)
			if err != nil {
				return nil, err
			}
			for j, qi := range byRoot[root] {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				start := time.Now()
				top := r.Rank(qs[qi].Query, 10)
				times[s] = append(times[s], time.Since(start))
				if at := slices.Index(top, gold[j]); at >= 0 {
					ranks[s][qi] = at + 1
				}
			}
		}
	}
	for s, name := range o.Systems {
		row := QueryRow{System: name, Queries: len(qs), Ranks: ranks[s]}
		for _, r := range ranks[s] {
			if r == 0 {
				continue
			}
			row.MRR10 += 1 / float64(r)
			if r <= 1 {
				row.Hit1++
			}
			if r <= 3 {
				row.Hit3++
			}
			row.Hit10++
		}
		n := float64(len(qs))
		row.MRR10, row.Hit1, row.Hit3, row.Hit10 = row.MRR10/n, row.Hit1/n, row.Hit3/n, row.Hit10/n
		slices.Sort(times[s])
		row.P50 = times[s][len(times[s])/2]
		res.Rows = append(res.Rows, row)
	}
	if base, ok := res.Row("bm25-doc+code"); ok && base.MRR10 > 0 {
		for i := range res.Rows {
			x := res.Rows[i].MRR10 / base.MRR10
			res.Rows[i].OverBaseline = &x
		}
	}
	return res, nil
}

// Row returns the result's row of system, and whether there is one.
func (r *QueryEvalResult) Row(system string) (QueryRow, bool) {
	i := slices.IndexFunc(r.Rows, func(x QueryRow) bool { return x.System == system })
	if i < 0 {
		return QueryRow{}, false
	}
	return r.Rows[i], true
}

// progressOf returns a FolderOptions.Progress that reports to ev's task
// what, started at its first call.
func progressOf(ev train.Events, what string) func(done, total int) {
	var count func(int)
	return func(done, total int) {
		if count == nil {
			if count = ev.Count(what, total); count == nil {
				count = func(int) {}
			}
		}
		count(done)
	}
}
