package search

import (
	"context"
	"fmt"

	"github.com/attnlab/attnlab/internal/output"
	"github.com/attnlab/attnlab/retrieve"
)

// TranslateOptions describe the mining of a term translation table.
type TranslateOptions struct {
	Data  string // folder of retriever data: its training split, DATA/train.jsonl, is mined
	Out   string // the table's file
	Force bool   // replace an existing Out
	Mine  retrieve.TranslationOptions
}

// TranslateResult says what Translate mined.
type TranslateResult struct {
	Pairs   int // training pairs read
	Terms   int // query terms translated
	Entries int // (query term, code term) entries kept
}

// Translate mines the term translation table of DATA/train.jsonl
// (retrieve.MineTranslation) and writes it to o.Out, which is claimed
// before any work: an existing file is refused unless o.Force, and the
// data is never written over. A table that translates no term is refused
// as degenerate, and nothing is written.
func Translate(ctx context.Context, o TranslateOptions) (*TranslateResult, error) {
	for _, v := range []struct {
		name string
		n    int
	}{{"min-query", o.Mine.MinQuery}, {"min-pair", o.Mine.MinPair}, {"per-term", o.Mine.PerTerm}} {
		if v.n < 0 {
			return nil, fmt.Errorf("search: %s %d: want >= 0 (0: the default)", v.name, v.n)
		}
	}
	if !(o.Mine.MinLift >= 0) {
		return nil, fmt.Errorf("search: min-lift %v: want >= 0 (0: the default)", o.Mine.MinLift)
	}
	train := retrieve.SplitFile(o.Data, retrieve.SplitTrain)
	claim, err := output.Target{Path: o.Out, Flag: "-out", Replace: o.Force, Inputs: []string{o.Data}}.ClaimFile()
	if err != nil {
		return nil, err
	}
	defer claim.Release()
	pairs, err := retrieve.ReadJSONL(train)
	if err != nil {
		return nil, err
	}
	if len(pairs) == 0 {
		return nil, fmt.Errorf("search: %s holds no pairs: nothing to mine", train)
	}
	t, err := retrieve.MineTranslation(ctx, pairs, o.Mine)
	if err != nil {
		return nil, err
	}
	res := &TranslateResult{Pairs: len(pairs), Terms: t.Len()}
	for _, ws := range t.To {
		res.Entries += len(ws)
	}
	if res.Entries == 0 {
		return res, fmt.Errorf("search: no query term of the %d pairs of %s meets the thresholds: the table would be empty, and nothing was written", len(pairs), train)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return res, retrieve.SaveTranslation(o.Out, t)
}
