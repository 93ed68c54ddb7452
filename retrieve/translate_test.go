package retrieve

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// translationPairs: queries that say "sorts" go with code that calls
// sort; "closes" with Close; "widget" is in every query and every code.
func translationPairs() []Pair {
	var ps []Pair
	for i := range 12 {
		ps = append(ps,
			Pair{Query: fmt.Sprintf("sorts the widget list %d", i), Code: fmt.Sprintf("func S%d(w []Widget) { sort.Sort(w) }", i)},
			Pair{Query: fmt.Sprintf("closes the widget file %d", i), Code: fmt.Sprintf("func C%d(w *Widget) { w.f.Close() }", i)},
			Pair{Query: fmt.Sprintf("counts widget rows %d", i), Code: fmt.Sprintf("func N%d(w []Widget) int { return len(w) }", i)},
		)
	}
	ps = append(ps, Pair{Query: "rare words once", Code: "func R() { sort.Strings(nil) }"}) // sort without "sorts": a lift below 12
	return ps
}

func TestMineTranslation(t *testing.T) {
	ps := translationPairs()
	tab, err := MineTranslation(context.Background(), ps, TranslationOptions{})
	if err != nil {
		t.Fatal(err)
	}
	top := func(q string) string {
		if len(tab.To[q]) == 0 {
			return ""
		}
		return tab.To[q][0].Term
	}
	if top("sorts") != "sort" || top("closes") != "close" {
		t.Errorf("sorts → %v, closes → %v; want sort and close first", tab.To["sorts"], tab.To["closes"])
	}
	for q, ws := range tab.To {
		if len(ws) > 3 {
			t.Errorf("%s: %d translations, want at most PerTerm 3", q, len(ws))
		}
		for i, w := range ws {
			if w.Term == q || !(w.Weight > 0) || i > 0 && w.Weight > ws[i-1].Weight {
				t.Errorf("%s: %v: itself, a weight <= 0 or not heaviest first", q, ws)
			}
		}
	}
	// "widget" is in every code: no lift; "rare" is in one query: below MinQuery
	for _, q := range []string{"rare", "once"} {
		if _, ok := tab.To[q]; ok {
			t.Errorf("%s, in one query, is translated: %v", q, tab.To[q])
		}
	}
	if slices.ContainsFunc(tab.To["sorts"], func(w WeightedTerm) bool { return w.Term == "widget" }) {
		t.Errorf("sorts → widget, a term of every code")
	}
	if again, _ := MineTranslation(context.Background(), ps, TranslationOptions{}); fmt.Sprint(again) != fmt.Sprint(tab) {
		t.Error("mining twice gave two tables")
	}
	if one, _ := MineTranslation(context.Background(), ps, TranslationOptions{PerTerm: 1}); len(one.To["sorts"]) != 1 {
		t.Errorf("PerTerm 1: %v", one.To["sorts"])
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if tab, err := MineTranslation(ctx, ps, TranslationOptions{}); tab != nil || err != context.Canceled {
		t.Errorf("a canceled mining returned %v, %v; want no table and context.Canceled", tab, err)
	}
}

func TestExpand(t *testing.T) {
	tab := &Translation{To: map[string][]WeightedTerm{
		"sorts": {{"sort", 2}, {"slice", 0.5}},
		"list":  {{"slice", 1}},
	}}
	got := tab.Expand([]string{"sorts", "list", "sorts"}, 0.1)
	want := []WeightedTerm{{"sorts", 2}, {"list", 1}, {"sort", 0.4}, {"slice", 0.05 + 0.1 + 0.05}}
	if len(got) != len(want) {
		t.Fatalf("Expand = %v, want %v", got, want)
	}
	for i := range want {
		if got[i].Term != want[i].Term || math.Abs(got[i].Weight-want[i].Weight) > 1e-12 {
			t.Errorf("Expand = %v, want %v", got, want)
			break
		}
	}
	if got := tab.Expand([]string{"sorts"}, 0); len(got) != 1 {
		t.Errorf("alpha 0: %v, want the query alone", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("a negative alpha did not panic")
		}
	}()
	tab.Expand(nil, -1)
}

// TestTranslated: with alpha 0 it scores as BM25, bit for bit; with the
// table, a document that holds only a translation of a query word is
// found.
func TestTranslated(t *testing.T) {
	docs := []string{"func A() { sort.Ints(x) }", "func B() { io.Copy(w, r) }", "func C(list []int) {}"}
	bm := NewBM25(docs)
	tab := &Translation{To: map[string][]WeightedTerm{"sorts": {{"sort", 1}}}}
	for _, q := range []string{"sorts the list", "copy copy list", "nothing known"} {
		if got, want := (Translated{bm, tab, 0}).ScoreAll(q), bm.Scores(q); !slices.Equal(got, want) {
			t.Errorf("%q, alpha 0: %v, want BM25's %v", q, got, want)
		}
	}
	x := Translated{bm, tab, 0.5}
	if got := x.Rank("sorts numbers", 3); !slices.Equal(got, []int{0}) {
		t.Errorf("Rank(sorts numbers) = %v, want [0] (sort, translated)", got)
	}
	if got := bm.Rank("sorts numbers", 3); len(got) != 0 {
		t.Errorf("plain BM25 found %v for a query none of whose terms is indexed", got)
	}
	s := make([]float64, 2)
	x.Score("sorts numbers", []int{2, 0}, s)
	if s[0] != 0 || !(s[1] > 0) {
		t.Errorf("Score = %v, want [0, > 0]", s)
	}
	// BM25F takes weighted terms as BM25 does
	f := NewBM25F([][]string{{docs[0]}, {docs[1]}, {docs[2]}}, []float64{1})
	if got, want := (Translated{f, tab, 0.5}).ScoreAll("sorts list"), x.ScoreAll("sorts list"); !slices.Equal(got, want) {
		t.Errorf("BM25F of one field: %v, want BM25's %v", got, want)
	}
	h := Hybrid{Translation: tab, TranslateAlpha: 0.5}
	if b, ok := h.Ranker(bm, bm).(Blend); !ok || b.Systems[0] != Ranker(x) || !strings.Contains(h.String(), "translation table of 1 terms, weighed 0.5") {
		t.Errorf("hybrid with a table: %#v, %q", h.Ranker(bm, bm), h.String())
	}
	if err := (Hybrid{TranslateAlpha: math.Inf(1)}).Validate(); err == nil {
		t.Error("an infinite alpha was accepted")
	}
}

func TestTranslationFile(t *testing.T) {
	tab, err := MineTranslation(context.Background(), translationPairs(), TranslationOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), TranslationFile)
	if err := SaveTranslation(path, tab); err != nil {
		t.Fatal(err)
	}
	back, err := LoadTranslation(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.Len() != tab.Len() {
		t.Fatalf("read back %d terms, wrote %d", back.Len(), tab.Len())
	}
	for q, ws := range tab.To {
		for i, w := range ws {
			if b := back.To[q][i]; b.Term != w.Term || math.Abs(b.Weight-w.Weight) > 1e-3*w.Weight {
				t.Errorf("%s: read %v, wrote %v", q, back.To[q], ws)
			}
		}
	}
	var buf bytes.Buffer
	if _, err := back.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(buf.Bytes(), again) {
		t.Error("writing what was read gives another file")
	}
	for _, c := range []struct{ text, want string }{
		{"", "empty"},
		{"term\tcode 1\n", ":1: not a term translation table"},
		{TranslationHeader + "\nsorts\tsort 1\nsorts\tslice 1\n", ":3: query term \"sorts\" listed twice"},
		{TranslationHeader + "\nsorts\tsort NaN\n", `:2: "sort NaN": want a code term and a finite weight > 0`},
		{TranslationHeader + "\nsorts\tsort -1\n", `:2: "sort -1"`},
		{TranslationHeader + "\nsorts\tsort\n", `:2: "sort"`},
		{TranslationHeader + "\n\tsort 1\n", `:2: query term ""`},
	} {
		_, err := ReadTranslation(strings.NewReader(c.text), "t.tsv")
		if err == nil || !strings.HasPrefix(err.Error(), "t.tsv") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error naming t.tsv with %q", c.text, err, c.want)
		}
	}
	big := filepath.Join(t.TempDir(), "big.tsv")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, MaxTranslationBytes+1); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTranslation(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a file beyond the limit: %v", err)
	}
}
