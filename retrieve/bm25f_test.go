package retrieve

import (
	"math"
	"strings"
	"testing"
)

var bm25fDocs = [][]string{
	{"Parse reads the config file.", "func Parse(path string) (*Config, error)", "{ f, err := os.Open(path); return decode(f) }"},
	{"", "func Close()", "{ close(done) }"},
	{"Encode writes the config as JSON.", "func (c *Config) Encode(w io.Writer) error", "{ return json.NewEncoder(w).Encode(c) }"},
	{"Open opens the named file for reading.", "func Open(name string) (*File, error)", "{ return openFile(name, O_RDONLY, 0) }"},
}

// TestBM25FOneFieldIsBM25: one field of weight 1 scores as BM25 exactly.
func TestBM25FOneFieldIsBM25(t *testing.T) {
	var docs [][]string
	var flat []string
	for _, d := range bm25fDocs {
		text := strings.Join(d, "\n")
		docs, flat = append(docs, []string{text}), append(flat, text)
	}
	f, b := NewBM25F(docs, []float64{1}), NewBM25(flat)
	for _, q := range []string{"open the config file", "close", "encode json config config", "nothing here"} {
		got, want := f.ScoreAll(q), b.Scores(q)
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-12*(1+want[i]) {
				t.Errorf("%q doc %d: BM25F %g, BM25 %g", q, i, got[i], want[i])
			}
		}
	}
}

// TestBM25FWeightIsRepetition: without length normalisation, a field
// weighed 2 scores as the document with that field written twice, and
// fields weighed 1 as their concatenation: the counts are combined before
// saturation, not scored field by field.
func TestBM25FWeightIsRepetition(t *testing.T) {
	var docs [][]string
	var twice []string
	for _, d := range bm25fDocs {
		docs = append(docs, d)
		twice = append(twice, d[0]+"\n"+d[0]+"\n"+d[1]+"\n"+d[2])
	}
	f, b := NewBM25F(docs, []float64{2, 1, 1}), NewBM25(twice)
	f.B = []float64{0, 0, 0}
	b.B = 0
	for _, q := range []string{"open the config file", "config", "reading named file", "json"} {
		got, want := f.ScoreAll(q), b.Scores(q)
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-12*(1+want[i]) {
				t.Errorf("%q doc %d: BM25F %g, BM25 of the doc written twice %g", q, i, got[i], want[i])
			}
		}
	}
	// per-field scores added would count "config" in two fields twice over
	if f.DocFreq("config") != 2 || f.DocFreq("json") != 1 || f.DocFreq("absent") != 0 {
		t.Errorf("document frequencies: config %d, json %d, absent %d; want 2, 1, 0", f.DocFreq("config"), f.DocFreq("json"), f.DocFreq("absent"))
	}
}

// TestBM25FRank: the ranking follows the fields' weights: with the doc
// field weighed high a query worded as the doc finds it; weighed 0 the doc
// is not searched at all.
func TestBM25FRank(t *testing.T) {
	q := "reads the config"
	if got := NewBM25F(bm25fDocs, []float64{3, 1, 1}).Rank(q, 2); len(got) == 0 || got[0] != 0 {
		t.Errorf("doc weighed 3: %v, want document 0 first", got)
	}
	zero := NewBM25F(bm25fDocs, []float64{0, 1, 1})
	s := zero.ScoreAll("reads")
	for i, v := range s {
		if v != 0 {
			t.Errorf("doc weighed 0: document %d scores %g for a word only its doc holds", i, v)
		}
	}
	scores := make([]float64, 2)
	zero.Score("config", []int{2, 1}, scores)
	if !(scores[0] > 0) || scores[1] != 0 {
		t.Errorf("Score: %v, want document 2 > 0 and document 1 = 0", scores)
	}
}
