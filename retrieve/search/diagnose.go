package search

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/retrieve/dense"
	"github.com/attnlab/attnlab/retrieve/rerank"
)

// DiagnoseOptions describe a diagnosis of a training set and the models
// trained on it: the warnings of the design notes about dense retrievers,
// measured.
type DiagnoseOptions struct {
	Train    []retrieve.Pair // the training pairs
	Eval     []retrieve.Pair // pairs the contrast sets and the length bias are built from (a validation split)
	Model    *dense.Model    // nil: no dense numbers
	Reranker *rerank.Model   // nil: no reranker numbers
	// Deprecated are (replacement, deprecated) pairs of functions, found in
	// the sources by retrieve.Deprecations.
	Deprecated [][2]retrieve.Pair

	Batch      int     // in-batch negatives: the training batch size
	Sample     int     // training pairs examined (a seeded sample), 0: all
	Near       float64 // Jaccard of terms from which two texts are near-duplicates
	MineDepth  int     // hard-negative mining as training does it
	MineMargin float64
	Seed       uint64
}

// Share is a measured fraction, with what it cannot show.
type Share struct {
	Name   string  `json:"name"`
	Count  int     `json:"count"` // of Of
	Of     int     `json:"of"`
	Value  float64 `json:"value"`
	Cannot string  `json:"cannot"`
}

func share(name string, n, of int, cannot string) Share {
	s := Share{Name: name, Count: n, Of: of, Cannot: cannot}
	if of > 0 {
		s.Value = float64(n) / float64(of)
	}
	return s
}

// Contrast is the accuracy of each system on a contrast set: how often it
// scores the right code above the wrong one.
type Contrast struct {
	Name     string             `json:"name"`
	Items    int                `json:"items"`
	Accuracy map[string]float64 `json:"accuracy"` // by system; ties count as wrong
	Ties     map[string]float64 `json:"ties"`
	Example  string             `json:"example,omitempty"`
	Cannot   string             `json:"cannot"`
}

// Diagnosis is the outcome of Diagnose.
type Diagnosis struct {
	Pairs      int        `json:"pairs"` // training pairs examined
	InBatch    []Share    `json:"in_batch"`
	Hard       []Share    `json:"hard_negatives"`
	LengthBias *Share     `json:"length_bias,omitempty"` // Value: mean Spearman ρ of score and code length
	Contrasts  []Contrast `json:"contrasts"`
}

// Diagnose measures, on a training set and the models trained on it: the
// share of in-batch negatives that are duplicates or near-duplicates of the
// positive (by code, by query); the share of mined hard negatives that look
// like label errors; the reranker's length bias; and the accuracy of each
// system on three contrast sets (sibling APIs with near-identical docs,
// negated descriptions, deprecated functions against their replacements).
func Diagnose(ctx context.Context, o DiagnoseOptions) (*Diagnosis, error) {
	if o.Batch < 2 || o.Near <= 0 || o.Near > 1 {
		return nil, fmt.Errorf("search: diagnose: batch %d, near %g: want a batch >= 2 and near in (0, 1]", o.Batch, o.Near)
	}
	if len(o.Train) < o.Batch {
		return nil, fmt.Errorf("search: diagnose: %d training pairs, fewer than a batch of %d", len(o.Train), o.Batch)
	}
	r := rand.New(rand.NewPCG(o.Seed, 0xd1a6))
	train := slices.Clone(o.Train)
	r.Shuffle(len(train), func(i, j int) { train[i], train[j] = train[j], train[i] })
	if o.Sample > 0 && o.Sample < len(train) {
		train = train[:o.Sample]
	}
	d := &Diagnosis{Pairs: len(train)}
	codeT, queryT := termSets(train, true), termSets(train, false)
	codeK := make([]string, len(train))
	queryK := make([]string, len(train))
	for i, p := range train {
		codeK[i], queryK[i] = retrieve.CodeKey(p.Code), normQuery(p.Query)
	}

	// in-batch negatives: consecutive batches of the shuffled set
	var n, dupC, nearC, dupQ, nearQ int
	for lo := 0; lo+o.Batch <= len(train); lo += o.Batch {
		for i := lo; i < lo+o.Batch; i++ {
			for j := lo; j < lo+o.Batch; j++ {
				if i == j {
					continue
				}
				n++
				switch {
				case codeK[i] == codeK[j]:
					dupC++
				case jaccard(codeT[i], codeT[j]) >= o.Near:
					nearC++
				}
				switch {
				case queryK[i] == queryK[j]:
					dupQ++
				case jaccard(queryT[i], queryT[j]) >= o.Near:
					nearQ++
				}
			}
		}
	}
	const inBatchCannot = "counts surface copies only: a paraphrase, or another function that does the same, is a false negative these shares do not see"
	d.InBatch = []Share{
		share("code identical up to white space", dupC, n, inBatchCannot+" (training masks these, so they do no harm)"),
		share(fmt.Sprintf("code near-identical (term Jaccard ≥ %.2g)", o.Near), nearC, n, inBatchCannot),
		share("query identical", dupQ, n, inBatchCannot+" (training masks these)"),
		share(fmt.Sprintf("query near-identical (term Jaccard ≥ %.2g)", o.Near), nearQ, n, inBatchCannot),
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	// hard negatives, mined as training mines them
	const hardCannot = "a surface test of label errors: a negative with another body or another wording can still answer the query"
	mined := map[string][][]int{}
	bm, _ := retrieve.MineHardNegatives(train, retrieve.MineOptions{K: 8, Depth: o.MineDepth, Margin: o.MineMargin})
	mined["bm25"] = bm
	if o.Model != nil {
		x, err := dense.NewIndex(ctx, o.Model, train, nil)
		if err != nil {
			return nil, err
		}
		if mined["dense"], err = retrieve.MineRanked(ctx, x.Ranker(), train, 8, o.MineDepth); err != nil {
			return nil, err
		}
	}
	for _, name := range []string{"bm25", "dense"} {
		negs, ok := mined[name]
		if !ok {
			continue
		}
		var total, same, near int
		for i, l := range negs {
			for _, j := range l {
				total++
				switch {
				case codeK[i] == codeK[j]:
					same++
				case queryK[i] == queryK[j] || jaccard(queryT[i], queryT[j]) >= o.Near:
					near++
				}
			}
		}
		d.Hard = append(d.Hard,
			share(name+" negatives with the positive's body", same, total, hardCannot+" (training drops these)"),
			share(fmt.Sprintf("%s negatives whose doc comment is near-identical to the positive's (Jaccard ≥ %.2g)", name, o.Near), near, total, hardCannot))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	// the systems scored on the contrast sets: over the evaluation pairs'
	// code and the contrasts' own
	eval := o.Eval
	if len(eval) == 0 {
		eval = train
	}
	if o.Reranker != nil && len(eval) > 0 {
		bias, err := lengthBias(ctx, eval, o.Model, o.Reranker, r)
		if err != nil {
			return nil, err
		}
		d.LengthBias = bias
	}
	sets := []struct {
		name, cannot string
		items        []item
	}{
		{fmt.Sprintf("sibling APIs: a function against its namesake in another package with a similar doc (term Jaccard ≥ %.1f; bytes.Contains and strings.Contains, say)", SiblingNear),
			"the sibling may be training code, learned with its own similar doc, and some siblings no reader could tell apart from the doc either; the package is often all that differs",
			siblings(eval, append(slices.Clip(o.Train), eval...))},
		{"negated descriptions: the doc against the same doc negated (\"is\" → \"is not\")", "synthetic negations of one form; a system may prefer the true doc for reasons other than the negation",
			negations(eval)},
		{"deprecated functions against their documented replacements, for the replacement's doc", "only the deprecations whose comment names the replacement in the same package",
			deprecations(o.Deprecated)},
	}
	for _, s := range sets {
		if len(s.items) == 0 {
			d.Contrasts = append(d.Contrasts, Contrast{Name: s.name, Cannot: s.cannot + "; none found"})
			continue
		}
		c, err := contrast(ctx, s.items, o.Model, o.Reranker)
		if err != nil {
			return nil, err
		}
		c.Name, c.Cannot = s.name, s.cannot
		d.Contrasts = append(d.Contrasts, c)
	}
	return d, nil
}

// item is one question of a contrast set: the system is right when it
// scores code c1 for query q1 above code c2 for query q2. d1 and d2 are
// the codes' doc comments (their first paragraphs, as the pairs hold
// them), which the systems that index docs read beside the code.
type item struct{ q1, c1, q2, c2, d1, d2 string }

// contrast scores each item with every available system: BM25 (over the
// contrast's code), the dual encoder's cosine similarity, the reranker's
// score, and as search indexes a folder, with each code's doc comment
// beside it: BM25F over doc, signature and body (bm25f+doc) and the
// encoder's cosine with the code plus DefaultFields.DocDense times that
// with the doc (dense+doc).
func contrast(ctx context.Context, items []item, m *dense.Model, rr *rerank.Model) (Contrast, error) {
	c := Contrast{Items: len(items), Accuracy: map[string]float64{}, Ties: map[string]float64{},
		Example: fmt.Sprintf("%q → %s | %q → %s", items[0].q1, firstOf(items[0].c1), items[0].q2, firstOf(items[0].c2))}
	at := map[string]int{}
	var codes []string
	for _, it := range items {
		for _, code := range []string{it.c1, it.c2} {
			if _, ok := at[code]; !ok {
				at[code] = len(codes)
				codes = append(codes, code)
			}
		}
	}
	bm := retrieve.NewBM25(codes)
	scorers := map[string]func(q, code, doc string) float64{
		"bm25": func(q, code, _ string) float64 {
			s := []float64{0}
			bm.Score(q, []int{at[code]}, s)
			return s[0]
		},
	}
	// the documented codes: each (code, doc) once
	type docCode struct{ code, doc string }
	atDoc := map[docCode]int{}
	var fieldDocs [][]string
	var docs []string
	for _, it := range items {
		for _, dc := range []docCode{{it.c1, it.d1}, {it.c2, it.d2}} {
			if _, ok := atDoc[dc]; !ok {
				atDoc[dc] = len(fieldDocs)
				body := retrieve.SplitSignature(dc.code)
				fieldDocs = append(fieldDocs, []string{dc.doc, dc.code[:body], dc.code[body:]})
				docs = append(docs, dc.doc)
			}
		}
	}
	fw := DefaultFields
	bmf := retrieve.NewBM25F(fieldDocs, []float64{fw.Doc, fw.Sig, fw.Body})
	scorers["bm25f+doc"] = func(q, code, doc string) float64 {
		s := []float64{0}
		bmf.Score(q, []int{atDoc[docCode{code, doc}]}, s)
		return s[0]
	}
	if m != nil {
		vecs, err := m.EmbedCodes(ctx, codes, nil)
		if err != nil {
			return c, err
		}
		D := m.Dim()
		qv := make([]float32, D)
		dot := func(a, b []float32) float64 {
			var s float64
			for i := range a {
				s += float64(a[i]) * float64(b[i])
			}
			return s
		}
		scorers["dense"] = func(q, code, _ string) float64 {
			m.EmbedQuery(qv, q)
			return dot(qv, vecs[at[code]*D:(at[code]+1)*D])
		}
		docVecs := make([]float32, len(docs)*D)
		if err := m.EmbedQueriesInto(ctx, docVecs, docs, nil); err != nil {
			return c, err
		}
		scorers["dense+doc"] = func(q, code, doc string) float64 {
			m.EmbedQuery(qv, q)
			j := atDoc[docCode{code, doc}]
			return dot(qv, vecs[at[code]*D:(at[code]+1)*D]) + fw.DocDense*dot(qv, docVecs[j*D:(j+1)*D])
		}
	}
	if rr != nil {
		scorers["rerank"] = func(q, code, _ string) float64 { return float64(rr.Score(q, code)) }
	}
	for name, score := range scorers {
		right, ties := 0, 0
		for _, it := range items {
			if err := ctx.Err(); err != nil {
				return c, err
			}
			a, b := score(it.q1, it.c1, it.d1), score(it.q2, it.c2, it.d2)
			switch {
			case a > b:
				right++
			case a == b:
				ties++
			}
		}
		c.Accuracy[name] = float64(right) / float64(len(items))
		c.Ties[name] = float64(ties) / float64(len(items))
	}
	return c, nil
}

func pairsOf(codes []string) []retrieve.Pair {
	out := make([]retrieve.Pair, len(codes))
	for i, c := range codes {
		out[i] = retrieve.Pair{Code: c}
	}
	return out
}

// SiblingNear is the term Jaccard from which the docs of two functions of
// the same name in different packages count as siblings' docs: bytes.Contains
// ("reports whether subslice is within b") and strings.Contains ("reports
// whether substr is within s") share three of five terms.
const SiblingNear = 0.5

// siblings are the sibling APIs of the evaluation pairs: for each one, the
// function of the same name in another package (among pool: the training
// and evaluation pairs) whose doc is most like its own (term Jaccard ≥
// SiblingNear, not the same text) and whose code differs. The item asks
// whether a system scores the function's own code above its sibling's for
// its own doc.
func siblings(eval, pool []retrieve.Pair) []item {
	byName := map[string][]int{}
	for j, p := range pool {
		byName[funcName(p.ID)] = append(byName[funcName(p.ID)], j)
	}
	et, pt := termSets(eval, false), termSets(pool, false)
	var out []item
	for i, a := range eval {
		if len(et[i]) < 3 {
			continue
		}
		best, bestJ := -1, 0.0
		for _, j := range byName[funcName(a.ID)] {
			b := pool[j]
			if b.Package == a.Package || b.Query == a.Query || retrieve.CodeKey(a.Code) == retrieve.CodeKey(b.Code) {
				continue
			}
			if jc := jaccard(et[i], pt[j]); jc >= SiblingNear && jc > bestJ {
				best, bestJ = j, jc
			}
		}
		if best >= 0 {
			out = append(out, item{a.Query, a.Code, a.Query, pool[best].Code, a.Query, pool[best].Query})
		}
	}
	return out
}

// funcName is the function's or method's name: the last element of a
// pair's id (package.Func or package.Type.Method).
func funcName(id string) string {
	return id[strings.LastIndexByte(id, '.')+1:]
}

var negatable = []struct{ from, to string }{{" is ", " is not "}, {" are ", " are not "}, {" has ", " does not have "}, {" can ", " cannot "}}

// negations pairs each doc that has a negatable verb with its negation:
// the item asks whether the system scores the function's code higher for
// its true description than for the negated one.
func negations(pairs []retrieve.Pair) []item {
	var out []item
	for _, p := range pairs {
		q := " " + p.Query + " "
		if strings.Contains(q, " not ") || strings.Contains(q, "n't ") {
			continue
		}
		for _, n := range negatable {
			if strings.Contains(q, n.from) {
				neg := strings.TrimSpace(strings.Replace(q, n.from, n.to, 1))
				out = append(out, item{p.Query, p.Code, neg, p.Code, p.Query, p.Query})
				break
			}
		}
	}
	return out
}

// deprecations turns (replacement, deprecated) pairs into items: the
// replacement's query, its code against the deprecated function's.
func deprecations(pairs [][2]retrieve.Pair) []item {
	var out []item
	for _, p := range pairs {
		if p[0].Query != "" {
			out = append(out, item{p[0].Query, p[0].Code, p[0].Query, p[1].Code, p[0].Query, p[1].Query})
		}
	}
	return out
}

// lengthBias is the mean Spearman correlation, over queries, of the
// reranker's score with the code's length among the non-relevant
// candidates of the hybrid first stage.
func lengthBias(ctx context.Context, pairs []retrieve.Pair, m *dense.Model, rr *rerank.Model, r *rand.Rand) (*Share, error) {
	if len(pairs) > 500 {
		pairs = slices.Clone(pairs)
		r.Shuffle(len(pairs), func(i, j int) { pairs[i], pairs[j] = pairs[j], pairs[i] })
		pairs = pairs[:500]
	}
	codes := make([]string, len(pairs))
	for i, p := range pairs {
		codes[i] = p.Code
	}
	var first retrieve.Ranker = retrieve.NewBM25(codes)
	if m != nil {
		x, err := dense.NewIndex(ctx, m, pairs, nil)
		if err != nil {
			return nil, err
		}
		first = retrieve.Hybrid{}.Ranker(first, x.Ranker())
	}
	ranker := rerank.NewRanker(rr, first, codes, 20)
	var sum float64
	n := 0
	for i, p := range pairs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cands := slices.DeleteFunc(first.Rank(p.Query, 20), func(j int) bool { return j == i })
		if len(cands) < 5 {
			continue
		}
		scores := make([]float64, len(cands))
		ranker.Score(p.Query, cands, scores)
		lengths := make([]float64, len(cands))
		for k, j := range cands {
			lengths[k] = float64(len(codes[j]))
		}
		if rho := spearman(scores, lengths); !math.IsNaN(rho) {
			sum += rho
			n++
		}
	}
	if n == 0 {
		return nil, nil
	}
	return &Share{Name: "reranker length bias: mean Spearman ρ of score and code length among non-relevant candidates", Of: n, Value: sum / float64(n),
		Cannot: "a correlation over the candidates the first stage brings: longer code may also be more relevant to the query; it is a bias only where it ranks non-relevant code"}, nil
}

// spearman is the rank correlation of x and y (ties get their mean rank).
func spearman(x, y []float64) float64 {
	rx, ry := ranks(x), ranks(y)
	var mx, my float64
	for i := range rx {
		mx += rx[i]
		my += ry[i]
	}
	mx /= float64(len(rx))
	my /= float64(len(ry))
	var sxy, sxx, syy float64
	for i := range rx {
		sxy += (rx[i] - mx) * (ry[i] - my)
		sxx += (rx[i] - mx) * (rx[i] - mx)
		syy += (ry[i] - my) * (ry[i] - my)
	}
	return sxy / math.Sqrt(sxx*syy)
}

func ranks(x []float64) []float64 {
	idx := make([]int, len(x))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return x[idx[a]] < x[idx[b]] })
	out := make([]float64, len(x))
	for i := 0; i < len(idx); {
		j := i
		for j < len(idx) && x[idx[j]] == x[idx[i]] {
			j++
		}
		for k := i; k < j; k++ {
			out[idx[k]] = float64(i+j-1) / 2
		}
		i = j
	}
	return out
}

func termSets(pairs []retrieve.Pair, code bool) []map[string]bool {
	out := make([]map[string]bool, len(pairs))
	for i, p := range pairs {
		text := p.Query
		if code {
			text = p.Code
		}
		m := map[string]bool{}
		for _, t := range retrieve.Terms(text) {
			m[t] = true
		}
		out[i] = m
	}
	return out
}

func jaccard(a, b map[string]bool) float64 {
	if len(a) == 0 && len(b) == 0 {
		return 1
	}
	inter := 0
	for t := range a {
		if b[t] {
			inter++
		}
	}
	return float64(inter) / float64(len(a)+len(b)-inter)
}

func normQuery(q string) string { return strings.Join(strings.Fields(strings.ToLower(q)), " ") }

func firstOf(code string) string {
	if i := strings.IndexByte(code, '\n'); i >= 0 {
		return code[:i]
	}
	return code
}
