package retrieve

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// stopTerms are dropped from queries and code alike. They are English
// function words and the Go keywords that carry no meaning of their own in a
// query ("func", "return", "var"…). Keywords that are also content words in
// a description (map, range, select, case, default, type, interface, struct,
// chan, go, switch, break, continue, defer) are kept, and so are "not" and
// "no": a retriever that ignores negation cannot tell "reports whether x is
// empty" from "reports whether x is not empty".
var stopTerms = map[string]bool{
	// English
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true,
	"be": true, "been": true, "by": true, "for": true, "from": true, "has": true,
	"have": true, "in": true, "into": true, "is": true, "it": true, "its": true,
	"of": true, "on": true, "or": true, "that": true, "the": true, "their": true,
	"then": true, "there": true, "these": true, "this": true, "those": true,
	"to": true, "was": true, "were": true, "which": true, "will": true,
	"with": true,
	// Go keywords without a content sense
	"const": true, "else": true, "fallthrough": true, "func": true,
	"goto": true, "if": true, "import": true, "package": true, "return": true,
	"var": true,
}

// Terms splits text (a query or a piece of code) into lowercase terms:
//
//   - runs of letters and digits are words; everything else, the underscore
//     included, separates words, so snake_case splits at the underscores;
//   - a word splits further at lower→upper case changes, before the last
//     capital of an acronym that starts a new word, and between letters and
//     digits: "HTTPServer" → http, server; "parseURL2" → parse, url, 2;
//   - a word that splits is also kept whole, first: "ReadFile" → readfile,
//     read, file, so an exact identifier in a query still matches exactly;
//   - terms of one character and the stop terms (English function words and
//     keywords like func, return, var; see stopTerms) are dropped.
//
// Terms is the one tokenizer of the package: BM25 indexes and queries with
// it, and dense encoders should read the same terms, so that lexical and
// dense systems see the same units.
func Terms(text string) []string {
	var out, parts []string
	emit := func(t string) {
		if utf8.RuneCountInString(t) > 1 && !stopTerms[t] {
			out = append(out, t)
		}
	}
	for len(text) > 0 {
		// skip separators
		i := strings.IndexFunc(text, isWordRune)
		if i < 0 {
			break
		}
		text = text[i:]
		j := strings.IndexFunc(text, func(r rune) bool { return !isWordRune(r) })
		if j < 0 {
			j = len(text)
		}
		word := text[:j]
		text = text[j:]
		parts = splitWord(parts[:0], word)
		if len(parts) > 1 {
			emit(strings.ToLower(word))
		}
		for _, p := range parts {
			emit(strings.ToLower(p))
		}
	}
	return out
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

type runeClass int

const (
	lower runeClass = iota // lower case, and letters without case
	upper
	digit
)

func classOf(r rune) runeClass {
	switch {
	case 'a' <= r && r <= 'z':
		return lower
	case 'A' <= r && r <= 'Z':
		return upper
	case '0' <= r && r <= '9':
		return digit
	case r < utf8.RuneSelf:
		return lower
	case unicode.IsDigit(r):
		return digit
	case unicode.IsUpper(r):
		return upper
	}
	return lower
}

// splitWord appends to parts the pieces of a run of letters and digits, cut
// at case and digit boundaries. A capital that follows a capital starts a
// new part when a lower-case letter follows it: "HTTPServer" is
// HTTP|Server; a plural s closing an acronym stays with it: "IDs".
func splitWord(parts []string, w string) []string {
	start := 0
	r0, i := utf8.DecodeRuneInString(w)
	prev := classOf(r0)
	for i < len(w) {
		r, size := utf8.DecodeRuneInString(w[i:])
		cur := classOf(r)
		cut := false
		switch {
		case (prev == digit) != (cur == digit):
			cut = true
		case prev == lower && cur == upper:
			cut = true
		case prev == upper && cur == upper && i+size < len(w):
			// the last capital of an acronym begins the next word, unless
			// what follows is a plural "s" closing the acronym ("IDs").
			next, nsize := utf8.DecodeRuneInString(w[i+size:])
			if classOf(next) == lower {
				after, _ := utf8.DecodeRuneInString(w[i+size+nsize:]) // RuneError at the end
				plural := next == 's' && (i+size+nsize == len(w) || classOf(after) != lower)
				cut = !plural
			}
		}
		if cut {
			parts = append(parts, w[start:i])
			start = i
		}
		prev = cur
		i += size
	}
	return append(parts, w[start:])
}

// Stem folds an English plural onto its singular, the light suffix
// stripping of Harman's "S" stemmer ("How effective is suffixing?",
// JASIS 1991) with the sibilant plurals it misses: "entries" → "entry",
// "matches" → "match", "indexes" → "index", "types" → "type", "flags" →
// "flag"; "status", "class" and words of three letters or fewer are kept.
// It leaves verb endings alone ("timing" is not "time").
func Stem(t string) string {
	n := len(t)
	switch {
	case n <= 3:
		return t
	case strings.HasSuffix(t, "ies") && !strings.HasSuffix(t, "eies") && !strings.HasSuffix(t, "aies"):
		return t[:n-3] + "y"
	case strings.HasSuffix(t, "sses") || strings.HasSuffix(t, "ches") || strings.HasSuffix(t, "shes") ||
		strings.HasSuffix(t, "xes") || strings.HasSuffix(t, "zes"):
		return t[:n-2]
	case strings.HasSuffix(t, "es") && !strings.HasSuffix(t, "aes") && !strings.HasSuffix(t, "ees") && !strings.HasSuffix(t, "oes"):
		return t[:n-1]
	case strings.HasSuffix(t, "s") && !strings.HasSuffix(t, "us") && !strings.HasSuffix(t, "ss") && !strings.HasSuffix(t, "is"):
		return t[:n-1]
	}
	return t
}

// StemTerms is Terms with every term stemmed (Stem).
func StemTerms(text string) []string {
	ts := Terms(text)
	for i, t := range ts {
		ts[i] = Stem(t)
	}
	return ts
}
