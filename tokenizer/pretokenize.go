package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// PreTokenizerName names the pre-tokenizer implemented by [PreTokenize].
// It is recorded in tokenizer files so that a file is never used with a
// splitter it was not trained with.
const PreTokenizerName = "gocode-v1"

// maxDigits is the longest run of digits in one chunk, as in the
// \p{N}{1,3} alternative of the tiktoken cl100k and Llama 3 patterns:
// numbers are split into groups of three from the left, so the vocabulary
// never spends entries on long numbers.
const maxDigits = 3

// Character classes of the pre-tokenizer. A unit is one UTF-8 encoded rune
// or, where the input is not valid UTF-8, one byte.
const (
	classOther  = iota // punctuation, symbols, invalid bytes
	classLetter        // Unicode letters and marks, and '_'
	classDigit         // Unicode numbers
	classSpace         // ' '
	classLayout        // '\t', '\n', '\v', '\f', '\r'
)

// classNonASCII marks the bytes from 0x80 up in byteClass: the unit they
// start is classified by classRune.
const classNonASCII = 0xff

// byteClass is the class of each ASCII byte, and classNonASCII for the
// others.
var byteClass = func() (c [256]uint8) {
	for b := range 256 {
		switch {
		case b >= utf8.RuneSelf:
			c[b] = classNonASCII
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', b == '_':
			c[b] = classLetter
		case '0' <= b && b <= '9':
			c[b] = classDigit
		case b == ' ':
			c[b] = classSpace
		case b == '\t', b == '\n', b == '\v', b == '\f', b == '\r':
			c[b] = classLayout
		default:
			c[b] = classOther
		}
	}
	return c
}()

// classAt returns the class of the unit starting at text[i] and its length
// in bytes.
func classAt(text []byte, i int) (class uint8, size int) {
	if c := byteClass[text[i]]; c != classNonASCII {
		return c, 1
	}
	return classRune(text[i:])
}

// classRune returns the class and length of the unit at the start of p,
// a rune that is not ASCII or an invalid byte.
func classRune(p []byte) (class uint8, size int) {
	r, size := utf8.DecodeRune(p)
	switch {
	case r == utf8.RuneError && size == 1:
		return classOther, 1 // an invalid byte is a unit of its own
	case unicode.IsLetter(r) || unicode.IsMark(r):
		return classLetter, size
	case unicode.IsNumber(r):
		return classDigit, size
	}
	return classOther, size
}

// isSpace reports whether c is one of the bytes of classSpace and
// classLayout. All whitespace the pre-tokenizer knows is ASCII.
func isSpace(c byte) bool {
	return byteClass[c] == classSpace || byteClass[c] == classLayout
}

// PreTokenize splits text into the chunks that the tokenizer encodes
// independently: merges never cross a chunk boundary. The chunks are
// subslices of text and their concatenation is text.
//
// See the package documentation for the rules.
func PreTokenize(text []byte) [][]byte {
	var chunks [][]byte
	for i := 0; i < len(text); {
		j := nextChunk(text, i)
		chunks = append(chunks, text[i:j:j])
		i = j
	}
	return chunks
}

// nextChunk returns the end of the chunk that starts at text[i].
// It requires i < len(text).
//
// The scan depends only on text[i:], never on what precedes i, so the
// input can be cut at any point where a chunk boundary is certain (see
// safeCut) and the parts pre-tokenized separately.
func nextChunk(text []byte, i int) int {
	class, size := classAt(text, i)
	switch class {
	case classSpace, classLayout:
		j := spaceRun(text, i)
		if j > i {
			return j
		}
		// text[i] is a single space before a non-space unit: it
		// starts the chunk of that unit.
		class, size = classAt(text, i+1)
		return runEnd(text, i+1, class, size)
	case classOther:
		if j := i + size; j < len(text) {
			if c, m := classAt(text, j); c == classLetter {
				// One punctuation unit is the prefix of a word.
				return runEnd(text, j, c, m)
			}
		}
	}
	return runEnd(text, i, class, size)
}

// spaceRun returns the end of the whitespace run at text[i], less its
// last byte if that is a space followed by a non-space unit. As in GPT-2's
// \s+(?!\S), that space is left to start the next chunk.
func spaceRun(text []byte, i int) int {
	j := i + 1
	for j < len(text) && isSpace(text[j]) {
		j++
	}
	if j < len(text) && text[j-1] == ' ' {
		j--
	}
	return j
}

// runEnd returns the end of the run of class that starts with the unit
// text[i:i+size]: letters up to the last letter, at most maxDigits digits,
// and punctuation up to the last punctuation unit, followed by the
// whitespace run after it if that starts with a newline.
func runEnd(text []byte, i int, class uint8, size int) int {
	j := i + size
	if class == classDigit {
		for n := 1; n < maxDigits && j < len(text); n++ {
			c, m := classAt(text, j)
			if c != classDigit {
				break
			}
			j += m
		}
		return j
	}
	for j < len(text) {
		// classAt, inlined by hand for the ASCII case.
		if c := byteClass[text[j]]; c != classNonASCII {
			if c != class {
				break
			}
			j++
			continue
		}
		c, m := classRune(text[j:])
		if c != class {
			break
		}
		j += m
	}
	if class == classOther && j < len(text) && (text[j] == '\n' || text[j] == '\r') {
		j = spaceRun(text, j)
	}
	return j
}

// safeCut reports whether a chunk boundary is certain at text[i] whatever
// text holds before i-1, so that text[:i] and text[i:] can be
// pre-tokenized separately with the same result as text. It is true after
// a newline that is followed by a non-whitespace byte: the newline ends a
// whitespace run, which is a chunk of its own because its last byte is not
// a space.
func safeCut(text []byte, i int) bool {
	return 0 < i && i < len(text) && text[i-1] == '\n' && !isSpace(text[i])
}
