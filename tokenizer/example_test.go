package tokenizer_test

import (
	"fmt"
	"strings"

	"github.com/attnlab/attnlab/tokenizer"
)

// Train a small vocabulary on a few lines of Go, then encode a line it has
// not seen. Training stops before the requested 300 ids because every
// chunk of the corpus is a single token after 19 merges.
func Example() {
	corpus := strings.Repeat("if err != nil {\n\treturn err\n}\n", 20) +
		strings.Repeat("if x != nil {\n\treturn x\n}\n", 5)
	tok, err := tokenizer.Train([][]byte{[]byte(corpus)}, 300, tokenizer.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	text := []byte("if err != nil {\n\treturn nil\n}\n")
	ids := tok.Encode(text)
	var shown []string
	for _, id := range ids {
		shown = append(shown, fmt.Sprintf("%q", tok.Token(id)))
	}
	fmt.Println(strings.Join(shown, " "))
	fmt.Println(len(text), "bytes,", len(ids), "tokens")
	fmt.Println(string(tok.Decode(ids)) == string(text))
	fmt.Println(tok.NumMerges(), "merges,", tok.VocabSize(), "ids, <|endoftext|> =", tok.Special(tokenizer.EndOfText))
	// Output:
	// "if" " err" " !=" " nil" " {\n\t" "return" " nil" "\n" "}\n"
	// 30 bytes, 9 tokens
	// true
	// 19 merges, 276 ids, <|endoftext|> = 275
}

// Special tokens come only from EncodeWithSpecial; Encode treats their
// names as text.
func ExampleTokenizer_EncodeWithSpecial() {
	tok, err := tokenizer.Train([][]byte{[]byte("hello world")}, 300, tokenizer.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	text := []byte("hello" + tokenizer.EndOfText)
	fmt.Println(tok.EncodeWithSpecial(text))
	fmt.Println(len(tok.Encode(text)), "tokens without specials")
	// Output:
	// [263 265]
	// 14 tokens without specials
}
