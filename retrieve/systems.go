package retrieve

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// A System is a named retrieval system over one corpus, with the time its
// indexes took to build.
type System struct {
	Name   string
	Ranker Ranker
	Build  time.Duration
}

// Systems builds the named systems over one set of pairs, each index once
// (hybrid reuses bm25's and dense's). The names are:
//
//	bm25, dense, hybrid                  first stages (hybrid: the other two combined, as Hybrid says)
//	bm25-translated                      BM25 with its queries expanded by Hybrid's Translation (the hybrid's lexical part)
//	FIRST+rerank                         the reranker re-scores FIRST's top candidates
//	FIRST+rerank+fused                   ... ordered by fusing FIRST's and the reranker's ranks
//
// Dense and Rerank supply the model-based parts; without them, the systems
// that need them are refused by name.
type Systems struct {
	Pairs          []Pair
	Queries, Codes []string
	Hybrid         Hybrid // how hybrid combines bm25 and dense

	// Dense builds the dense first stage over Codes (nil: no dense model).
	Dense func(ctx context.Context) (Ranker, error)
	// Rerank wraps a first stage with the reranker (nil: no reranker);
	// fused orders the re-scored candidates by rank fusion.
	Rerank func(first Ranker, fused bool) Ranker

	built map[string]System
}

// NewSystems returns the systems over pairs: each pair's query searches all
// the pairs' code, its own being the gold.
func NewSystems(pairs []Pair) *Systems {
	s := &Systems{Pairs: pairs, Queries: make([]string, len(pairs)), Codes: make([]string, len(pairs)), built: map[string]System{}}
	for i, p := range pairs {
		s.Queries[i], s.Codes[i] = p.Query, p.Code
	}
	return s
}

// SystemNames lists every system name, first stages first.
func SystemNames() []string {
	names := []string{"bm25", BM25Translated, "dense", "hybrid"}
	for _, f := range []string{"bm25", "dense", "hybrid"} {
		names = append(names, f+"+rerank", f+"+rerank+fused")
	}
	return names
}

// BM25Translated is the name of the system that is BM25 with its queries
// expanded by a term translation table: what the hybrid ranks with in
// place of BM25 when Hybrid has a Translation.
const BM25Translated = "bm25-translated"

// CheckSystem returns an error for an unknown name, or for one that needs
// a dense model or a reranker that is not there.
func CheckSystem(name string, haveDense, haveReranker bool) error {
	known := false
	for _, n := range SystemNames() {
		known = known || n == name
	}
	first, _, reranked := strings.Cut(name, "+")
	switch {
	case !known:
		names := SystemNames()
		sort.Strings(names)
		return fmt.Errorf("unknown system %q (known: %s)", name, strings.Join(names, ", "))
	case (first == "dense" || first == "hybrid") && !haveDense:
		return fmt.Errorf("system %s needs a dense model", name)
	case reranked && !haveReranker:
		return fmt.Errorf("system %s needs a reranker", name)
	}
	return nil
}

// Get builds (once) and returns the system called name.
func (s *Systems) Get(ctx context.Context, name string) (System, error) {
	if sys, ok := s.built[name]; ok {
		return sys, nil
	}
	if err := CheckSystem(name, s.Dense != nil, s.Rerank != nil); err != nil {
		return System{}, err
	}
	sys := System{Name: name}
	first, rest, reranked := strings.Cut(name, "+")
	switch {
	case reranked:
		f, err := s.Get(ctx, first)
		if err != nil {
			return sys, err
		}
		sys.Ranker, sys.Build = s.Rerank(f.Ranker, rest == "rerank+fused"), f.Build
	case name == BM25Translated:
		if s.Hybrid.Translation == nil || s.Hybrid.TranslateAlpha == 0 {
			return sys, fmt.Errorf("system %s needs a term translation table and a weight above 0", name)
		}
		bm, err := s.Get(ctx, "bm25")
		if err != nil {
			return sys, err
		}
		sys.Ranker, sys.Build = s.Hybrid.Lexical(bm.Ranker.(*BM25)), bm.Build
	case name == "bm25":
		start := time.Now()
		sys.Ranker = NewBM25(s.Codes)
		sys.Build = time.Since(start)
	case name == "dense":
		start := time.Now()
		r, err := s.Dense(ctx)
		if err != nil {
			return sys, err
		}
		sys.Ranker, sys.Build = r, time.Since(start)
	case name == "hybrid":
		bm, err := s.Get(ctx, "bm25")
		if err != nil {
			return sys, err
		}
		dn, err := s.Get(ctx, "dense")
		if err != nil {
			return sys, err
		}
		sys.Ranker, sys.Build = s.Hybrid.Ranker(bm.Ranker, dn.Ranker), bm.Build+dn.Build
	}
	s.built[name] = sys
	return sys, nil
}
