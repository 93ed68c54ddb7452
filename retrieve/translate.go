package retrieve

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/attnlab/attnlab/internal/atomicfile"
	"github.com/attnlab/attnlab/internal/readlimit"
)

// A WeightedTerm is a query term with a weight: how many times it counts.
type WeightedTerm struct {
	Term   string
	Weight float64
}

// Translation maps a term of a query to the terms of code that the code a
// query with that term describes tends to hold, each with a weight: a term
// translation table in the sense of Berger and Lafferty ("Information
// retrieval as statistical translation", SIGIR 1999), mined from training
// pairs. A query's words ("reports whether", "sorts", "closes") and its
// code's identifiers (bool, sort, Close) are two vocabularies; BM25 over
// the code matches only the words the two share, and the table bridges
// some of the rest.
type Translation struct {
	To map[string][]WeightedTerm // query term → code terms, heaviest first
}

// TranslationOptions says which associations MineTranslation keeps.
type TranslationOptions struct {
	MinQuery int     // a query term must occur in at least this many training queries (default 5)
	MinPair  int     // and with the code term in at least this many pairs (default 3)
	MinLift  float64 // P(code term | query term) / P(code term) must be at least this (default 2)
	PerTerm  int     // code terms kept per query term (default 3)
}

func (o TranslationOptions) withDefaults() TranslationOptions {
	if o.MinQuery == 0 {
		o.MinQuery = 5
	}
	if o.MinPair == 0 {
		o.MinPair = 3
	}
	if o.MinLift == 0 {
		o.MinLift = 2
	}
	if o.PerTerm == 0 {
		o.PerTerm = 3
	}
	return o
}

// MineTranslation counts, over the pairs, the queries holding each query
// term q, the codes holding each code term c and the pairs holding both
// (each term once per pair), and keeps for q the PerTerm code terms c ≠ q
// with the largest
//
//	P(c|q) · log(P(c|q) / P(c))
//
// (q's share of the mutual information of the two vocabularies), among
// those with enough pairs and lift. Terms are Terms', so a code term is an
// identifier or a part of one. The result is the same for the same pairs.
// When ctx is done it stops, between pairs, and returns ctx's error.
func MineTranslation(ctx context.Context, pairs []Pair, opt TranslationOptions) (*Translation, error) {
	opt = opt.withDefaults()
	ids := map[string]int32{}
	id := func(t string) int32 {
		i, ok := ids[t]
		if !ok {
			i = int32(len(ids))
			ids[t] = i
		}
		return i
	}
	var nq, nc []int32
	grow := func(s []int32) []int32 {
		for len(s) < len(ids) {
			s = append(s, 0)
		}
		return s
	}
	both := map[[2]int32]int32{}
	var qs, cs []int32
	for i, p := range pairs {
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		qs, cs = uniqueIDs(qs[:0], Terms(p.Query), id), uniqueIDs(cs[:0], Terms(p.Code), id)
		nq, nc = grow(nq), grow(nc)
		for _, q := range qs {
			nq[q]++
		}
		for _, c := range cs {
			nc[c]++
		}
		for _, q := range qs {
			for _, c := range cs {
				both[[2]int32{q, c}]++
			}
		}
	}
	names := make([]string, len(ids))
	for t, i := range ids {
		names[i] = t
	}
	n := float64(len(pairs))
	cand := map[int32][]WeightedTerm{}
	for k, m := range both {
		q, c := k[0], k[1]
		if q == c || int(nq[q]) < opt.MinQuery || int(m) < opt.MinPair {
			continue
		}
		pcq := float64(m) / float64(nq[q])
		lift := pcq / (float64(nc[c]) / n)
		if lift < opt.MinLift {
			continue
		}
		cand[q] = append(cand[q], WeightedTerm{names[c], pcq * math.Log(lift)})
	}
	t := &Translation{To: make(map[string][]WeightedTerm, len(cand))}
	for q, ws := range cand {
		slices.SortFunc(ws, func(a, b WeightedTerm) int {
			if c := cmp.Compare(b.Weight, a.Weight); c != 0 {
				return c
			}
			return cmp.Compare(a.Term, b.Term)
		})
		t.To[names[q]] = slices.Clip(ws[:min(len(ws), opt.PerTerm)])
	}
	return t, nil
}

// uniqueIDs appends the ids of terms to dst, each once, in the order of
// first occurrence.
func uniqueIDs(dst []int32, terms []string, id func(string) int32) []int32 {
	for _, t := range terms {
		i := id(t)
		if !slices.Contains(dst, i) {
			dst = append(dst, i)
		}
	}
	return dst
}

// Expand returns the query terms, each with its count as weight, followed
// by the code terms the table gives them, weighed alpha times their weight
// in the table (summed where several query terms give the same one, or
// added to a query term's own weight). Terms are listed in the order of
// their first appearance, so the scores summed from them are the same on
// every run. It panics if alpha is negative or not finite.
func (t *Translation) Expand(terms []string, alpha float64) []WeightedTerm {
	if !(alpha >= 0) || math.IsInf(alpha, 0) {
		panic(fmt.Sprintf("retrieve: Translation.Expand: alpha %v", alpha))
	}
	var out []WeightedTerm
	at := map[string]int{}
	add := func(term string, w float64) {
		if i, ok := at[term]; ok {
			out[i].Weight += w
			return
		}
		at[term] = len(out)
		out = append(out, WeightedTerm{term, w})
	}
	for _, q := range terms {
		add(q, 1)
	}
	if alpha == 0 || t == nil {
		return out
	}
	for _, q := range terms[:len(terms):len(terms)] {
		for _, c := range t.To[q] {
			add(c.Term, alpha*c.Weight)
		}
	}
	return out
}

// Len returns the number of query terms the table translates.
func (t *Translation) Len() int { return len(t.To) }

// TermScorer is a lexical index that scores weighted terms: BM25, BM25F.
type TermScorer interface {
	Exhaustive
	Analyze(query string) []string             // a query's terms, as the index splits text
	ScoreTerms(terms []WeightedTerm) []float64 // every document's score for weighted terms
}

// Translated is a lexical index whose queries are expanded by a
// Translation (Expand, with Alpha) before they are scored: an Exhaustive
// Ranker over the index's documents. With Alpha 0 it ranks as the index
// does.
type Translated struct {
	Index TermScorer
	Table *Translation
	Alpha float64
}

// ScoreAll returns the score of every document for the expanded query.
func (x Translated) ScoreAll(query string) []float64 {
	return x.Index.ScoreTerms(x.Table.Expand(x.Index.Analyze(query), x.Alpha))
}

// Top returns the documents with a positive score, at most k, best first.
func (x Translated) Top(scores []float64, k int) []int { return topK(scores, k, true) }

// Rank returns the best k documents for the expanded query.
func (x Translated) Rank(query string, k int) []int { return x.Top(x.ScoreAll(query), k) }

// Score writes the score of document docs[i] for the expanded query into
// scores[i].
func (x Translated) Score(query string, docs []int, scores []float64) {
	all := x.ScoreAll(query)
	for i, d := range docs {
		scores[i] = all[d]
	}
}

// TranslationFile is the name of a saved Translation in a model folder.
const TranslationFile = "translation.tsv"

// TranslationHeader is the first line of a saved Translation.
const TranslationHeader = "# attnlab term translation v1: a query term, then each code term with its weight, tab-separated"

// MaxTranslationBytes bounds a Translation file LoadTranslation reads.
const MaxTranslationBytes = 64 << 20

// WriteTo writes the table as text: TranslationHeader, then one line per
// query term in byte order, the term followed by its code terms and
// weights ("term<TAB>code weight<TAB>code weight…"), the weights to four
// significant digits.
func (t *Translation) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriter(w)
	var n int64
	put := func(s string) {
		k, _ := bw.WriteString(s)
		n += int64(k)
	}
	put(TranslationHeader + "\n")
	for _, q := range slices.Sorted(maps.Keys(t.To)) {
		put(q)
		for _, c := range t.To[q] {
			put("\t" + c.Term + " " + strconv.FormatFloat(c.Weight, 'g', 4, 64))
		}
		put("\n")
	}
	return n, bw.Flush()
}

// ReadTranslation reads a table WriteTo wrote; name (the file's path)
// prefixes each error, with the line at fault.
func ReadTranslation(r io.Reader, name string) (*Translation, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	t := &Translation{To: map[string][]WeightedTerm{}}
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if line == 1 {
			if text != TranslationHeader {
				return nil, fmt.Errorf("%s:1: not a term translation table (want the line %q)", name, TranslationHeader)
			}
			continue
		}
		fields := strings.Split(text, "\t")
		q := fields[0]
		if q == "" || strings.ContainsAny(q, " ") {
			return nil, fmt.Errorf("%s:%d: query term %q: want one word", name, line, q)
		}
		if _, dup := t.To[q]; dup {
			return nil, fmt.Errorf("%s:%d: query term %q listed twice", name, line, q)
		}
		ws := make([]WeightedTerm, 0, len(fields)-1)
		for _, f := range fields[1:] {
			c, v, ok := strings.Cut(f, " ")
			w, err := strconv.ParseFloat(v, 64)
			if !ok || c == "" || err != nil || !(w > 0) || math.IsInf(w, 0) {
				return nil, fmt.Errorf("%s:%d: %q: want a code term and a finite weight > 0", name, line, f)
			}
			ws = append(ws, WeightedTerm{c, w})
		}
		t.To[q] = ws
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	if line == 0 {
		return nil, fmt.Errorf("%s: empty: not a term translation table", name)
	}
	return t, nil
}

// LoadTranslation reads the table saved at path (at most
// MaxTranslationBytes).
func LoadTranslation(path string) (*Translation, error) {
	data, err := readlimit.File(path, MaxTranslationBytes)
	if err != nil {
		return nil, err
	}
	return ReadTranslation(bytes.NewReader(data), path)
}

// SaveTranslation writes the table to path atomically: path holds the
// whole new table or what it held before.
func SaveTranslation(path string, t *Translation) error {
	return atomicfile.Write(path, 0o644, func(w io.Writer) error {
		_, err := t.WriteTo(w)
		return err
	})
}
