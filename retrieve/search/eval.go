package search

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/attnlab/attnlab/internal/fsprobe"
	"github.com/attnlab/attnlab/internal/output"
	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/retrieve/dense"
	"github.com/attnlab/attnlab/retrieve/rerank"
	"github.com/attnlab/attnlab/train"
)

// EvalOptions describe an evaluation of retrieval systems on a JSONL file.
type EvalOptions struct {
	Data     string   // JSONL file of pairs
	Systems  []string // names of retrieve.SystemNames; nil: every system the models allow
	Model    string   // dual-encoder checkpoint or index folder ("" none)
	Reranker string   // reranker checkpoint ("" none)
	Depth    int      // candidates the reranker re-scores
	Hybrid   retrieve.Hybrid
	// FuseWeight: the fused reranked systems fuse scores, the first
	// stage's weighed FuseWeight (rerank.Ranker.FuseWeight); 0: ranks
	FuseWeight float64

	WriteIndex string // save the dense index of the file's code here ("" none)
	Force      bool   // replace an existing WriteIndex folder

	retrieve.EvalOptions
}

// Row is one system's measures.
type Row struct {
	System string `json:"system"`
	retrieve.Metrics
	BuildSeconds float64 `json:"index_seconds"`
	// OverBM25 is MRR10 over the bm25 row's (nil: no bm25 row, or its
	// MRR@10 is 0).
	OverBM25 *float64 `json:"mrr10_over_bm25,omitempty"`
}

// EvalResult is an evaluation's outcome.
type EvalResult struct {
	Data     string   `json:"data"`
	Queries  int      `json:"queries"`
	Packages int      `json:"packages"`
	Warnings []string `json:"warnings,omitempty"`
	Hybrid   string   `json:"hybrid,omitempty"` // how the hybrid systems combine BM25 and the encoder (Hybrid.String), with a model
	Rows     []Row    `json:"rows"`
	Index    string   `json:"index,omitempty"` // the folder written with WriteIndex
}

// MinDocs is the fewest documents for which top-10 measures mean anything:
// with 10 or fewer, every gold is in the top 10 by construction.
const MinDocs = 11

// Systems returns the default systems for the given models: bm25 (and
// bm25-translated, which needs a translation table), then the dense ones
// with a model, then the reranked ones (unfused and fused) with a
// reranker.
func Systems(model, reranker bool) []string {
	var out []string
	for _, n := range retrieve.SystemNames() {
		if retrieve.CheckSystem(n, model, reranker) == nil {
			out = append(out, n)
		}
	}
	return out
}

// Evaluate runs the evaluation o describes. Everything is checked before
// any work; the index is written only after every system was measured.
// Pairs whose code repeats an earlier pair's (retrieve.UniqueCode) are
// dropped with a warning that counts them: the gold of a query would tie
// with its copy, and a repeated pair would count twice.
func Evaluate(ctx context.Context, o EvalOptions, ev train.Events) (*EvalResult, error) {
	if o.Data == "" {
		return nil, errors.New("search: no data file")
	}
	if o.Systems == nil {
		o.Systems = Systems(o.Model != "", o.Reranker != "")
		if o.Hybrid.Translation == nil || o.Hybrid.TranslateAlpha == 0 {
			o.Systems = slices.DeleteFunc(o.Systems, func(s string) bool { return s == retrieve.BM25Translated })
		}
	}
	for _, s := range o.Systems {
		if err := retrieve.CheckSystem(s, o.Model != "", o.Reranker != ""); err != nil {
			return nil, err
		}
	}
	if o.Depth < 1 {
		return nil, fmt.Errorf("search: rerank depth %d: want >= 1", o.Depth)
	}
	if err := o.Hybrid.Validate(); err != nil {
		return nil, err
	}
	if !(o.FuseWeight >= 0 && o.FuseWeight < 1) {
		return nil, fmt.Errorf("search: fuse weight %v: want 0 (ranks) or a value in (0, 1)", o.FuseWeight)
	}
	if o.WriteIndex != "" {
		if o.Model == "" {
			return nil, errors.New("search: writing an index needs a dense model")
		}
		claim, err := output.Target{Path: o.WriteIndex, Flag: "-write-index", Replace: o.Force, Inputs: []string{o.Data, o.Model, o.Reranker}}.ClaimDir()
		if err != nil {
			return nil, err
		}
		defer claim.Release()
		if err := fsprobe.Dir(o.WriteIndex); err != nil { // before the work, not after it
			return nil, fmt.Errorf("search: write-index: %w", err)
		}
	}
	pairs, err := retrieve.ReadJSONL(o.Data)
	if err != nil {
		return nil, err
	}
	if len(pairs) == 0 {
		return nil, fmt.Errorf("search: %s holds no pairs", o.Data)
	}
	// duplicates: warned about, and the unique documents measured
	unique, dups := retrieve.UniqueCode(pairs)
	res := &EvalResult{Data: o.Data}
	if dups > 0 {
		w := fmt.Sprintf("%s: %d of %d pairs repeat the code of an earlier pair (up to white space); measuring the %d unique documents, the first pair of each",
			o.Data, dups, len(pairs), len(unique))
		res.Warnings = append(res.Warnings, w)
		ev.Warn(w)
	}
	pairs = unique
	res.Queries = len(pairs)
	pkgs := map[string]bool{}
	for _, p := range pairs {
		pkgs[p.Package] = true
	}
	res.Packages = len(pkgs)
	if len(pairs) < MinDocs {
		w := fmt.Sprintf("%s holds %d pairs: with %d or fewer documents every gold is in the top 10, so R@10 is 1 and MRR@10 says little", o.Data, len(pairs), MinDocs-1)
		res.Warnings = append(res.Warnings, w)
		ev.Warn(w)
	}

	sys := retrieve.NewSystems(pairs)
	sys.Hybrid = o.Hybrid
	if o.Model != "" {
		res.Hybrid = o.Hybrid.String()
	}
	var dm *dense.Model
	var index *dense.Index
	if o.Model != "" {
		if dm, err = dense.LoadFolder(o.Model); err != nil {
			return nil, err
		}
		sys.Dense = func(ctx context.Context) (retrieve.Ranker, error) {
			x, err := dense.NewIndex(ctx, dm, pairs, ev.Count("embedding the code", len(pairs)))
			if err != nil {
				return nil, err
			}
			index = x
			return x.Ranker(), nil
		}
	}
	if o.Reranker != "" {
		rm, err := rerank.Load(o.Reranker)
		if err != nil {
			return nil, err
		}
		sys.Rerank = func(first retrieve.Ranker, fused bool) retrieve.Ranker {
			r := rerank.NewRanker(rm, first, sys.Codes, o.Depth)
			r.Fuse, r.FuseWeight = fused, o.FuseWeight
			return r
		}
	}
	for _, name := range o.Systems {
		s, err := sys.Get(ctx, name)
		if err != nil {
			return res, err
		}
		eo := o.EvalOptions
		eo.Progress = ev.Count("evaluating "+name, len(sys.Queries))
		m, err := retrieve.Evaluate(ctx, s.Ranker, sys.Queries, len(sys.Codes), eo)
		if err != nil {
			return res, err
		}
		res.Rows = append(res.Rows, Row{System: name, Metrics: m, BuildSeconds: s.Build.Seconds()})
	}
	for _, b := range res.Rows {
		if b.System == "bm25" && b.MRR10 > 0 {
			for i := range res.Rows {
				x := res.Rows[i].MRR10 / b.MRR10
				res.Rows[i].OverBM25 = &x
			}
		}
	}
	if o.WriteIndex != "" {
		if index == nil {
			if _, err := sys.Get(ctx, "dense"); err != nil {
				return res, err
			}
		}
		if err := index.Save(o.WriteIndex); err != nil {
			return res, err
		}
		res.Index = o.WriteIndex
	}
	return res, nil
}

// Has reports whether the result has a row for system.
func (r *EvalResult) Has(system string) bool {
	return slices.ContainsFunc(r.Rows, func(x Row) bool { return x.System == system })
}
