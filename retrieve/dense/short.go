package dense

import (
	"math/rand/v2"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/attnlab/attnlab/retrieve"
)

// ShortQuery returns the doc-comment query q cut as a developer types a
// search: its first sentence, then its first clause (where that keeps two
// words or more), lower case, without the punctuation around words, URLs,
// one-letter parameter names or a leading "returns" or "reports whether",
// and with at most words content words (words that are not in
// shortStop) and 1.5·words words in all, the function words between
// them kept and those at either end dropped. "returns the cube root of x." becomes "cube root";
// "reports whether sp is a valid sparse map. It does not matter …"
// becomes "sp is a valid sparse map" (with words 6). It returns "" when
// nothing is left (a doc that is only a link).
func ShortQuery(q string, words int) string {
	if words < 1 {
		panic("dense: ShortQuery: words < 1")
	}
	s := firstSentence(q)
	if c := firstClause(s); len(strings.Fields(c)) >= 2 {
		s = c
	}
	var ws []string
	for _, f := range strings.Fields(s) {
		if strings.Contains(f, "://") {
			continue
		}
		w := strings.ToLower(strings.TrimFunc(f, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' }))
		if r, n := utf8.DecodeRuneInString(w); w == "" || n == len(w) && unicode.IsLetter(r) && w != "a" {
			continue // nothing left, or a parameter's name (x, w)
		}
		ws = append(ws, w)
	}
	for _, lead := range shortLeads {
		if len(ws) > len(lead) && slices.Equal(ws[:len(lead)], lead) {
			ws = ws[len(lead):]
			break
		}
	}
	content := 0
	for i, w := range ws {
		if i == words+words/2 {
			ws = ws[:i]
			break
		}
		if !shortStop[w] {
			if content++; content > words {
				ws = ws[:i]
				break
			}
		}
	}
	for len(ws) > 0 && shortStop[ws[0]] {
		ws = ws[1:]
	}
	for len(ws) > 0 && shortStop[ws[len(ws)-1]] {
		ws = ws[:len(ws)-1]
	}
	return strings.Join(ws, " ")
}

// firstSentence returns s up to the end of its first sentence: a '.', '?'
// or '!' followed by white space (a '.' closing "e.g.", "i.e.", "etc." or
// "vs." does not end it, nor does one inside a word: "v1.2", "go.mod"),
// or the end of s.
func firstSentence(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '.' && c != '?' && c != '!' {
			continue
		}
		if i+1 < len(s) && !unicode.IsSpace(rune(s[i+1])) {
			continue
		}
		word := strings.ToLower(s[strings.LastIndexFunc(s[:i], unicode.IsSpace)+1 : i])
		if s[i] == '.' && (word == "e.g" || word == "i.e" || word == "etc" || word == "vs") {
			continue
		}
		return s[:i]
	}
	return s
}

// firstClause returns s up to its first ',', ';', ": ", " (" or dash (a
// ':' inside a word, as in a URL, does not end it).
func firstClause(s string) string {
	cut := len(s)
	for _, sep := range []string{",", ";", ": ", " (", " - ", " — ", " – "} {
		if i := strings.Index(s, sep); i >= 0 && i < cut {
			cut = i
		}
	}
	return s[:cut]
}

// shortLeads are the openings of a Go doc comment (its name stripped) that
// a developer does not type; the first that matches is dropped.
var shortLeads = [][]string{
	{"returns", "true", "if"}, {"returns", "true", "when"}, {"reports", "whether"}, {"reports", "if"},
	{"returns", "whether"}, {"returns"}, {"return"},
}

// shortStop are the function words ShortQuery does not count and drops at
// either end.
var shortStop = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an the of to in into on onto for from with without by at as and or nor but
		is are was were be been being it its this that these those there if whether when while than then so
		which who whose what all any each some such over about through via up out can could may might must shall should will would do does done
		has have had not no only also given`) {
		shortStop[w] = true
	}
}

// ShortenQueries returns a copy of pairs in which the query of each pair
// is, with probability p, replaced by ShortQuery(query, words) (where
// that leaves a query other than the original), and how many were. The
// draws are those of seed alone, one per pair in order: the same pairs,
// p, words and seed give the same queries.
func ShortenQueries(pairs []retrieve.Pair, p float64, words int, seed uint64) ([]retrieve.Pair, int) {
	out := append([]retrieve.Pair(nil), pairs...)
	if p <= 0 {
		return out, 0
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed5407))
	n := 0
	for i := range out {
		if rng.Float64() >= p {
			continue
		}
		if s := ShortQuery(out[i].Query, words); s != "" && s != out[i].Query {
			out[i].Query = s
			n++
		}
	}
	return out, n
}
