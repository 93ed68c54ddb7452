package tokenizer

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSaveLoad(t *testing.T) {
	tok := ownTokenizer(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(path, []byte("old contents"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tok.Save(path); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "tokenizer.json" {
		t.Errorf("directory after Save holds %v, want only tokenizer.json", entries)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Merges(), tok.Merges()) || !slices.Equal(got.Specials(), tok.Specials()) ||
		got.VocabSize() != tok.VocabSize() {
		t.Fatal("Load(Save(t)) differs from t")
	}
	doc := bytes.Join(ownSource(t), nil)
	if !slices.Equal(got.Encode(doc), tok.Encode(doc)) {
		t.Error("the loaded tokenizer encodes differently")
	}
	// The file is deterministic: saving the loaded tokenizer gives the
	// same bytes.
	var a, b bytes.Buffer
	if err := tok.WriteJSON(&a); err != nil {
		t.Fatal(err)
	}
	if err := got.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	saved, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) || !bytes.Equal(a.Bytes(), saved) {
		t.Error("WriteJSON output differs between a tokenizer, its file and its reload")
	}

	if !bytes.Contains(saved, []byte(`{"id": 999, "content": "<|pad|>"}`)) {
		t.Errorf("the file does not list <|pad|> as id 999 in plain text:\n%s", saved[len(saved)-200:])
	}

	// The example of the package documentation.
	b.Reset()
	if err := newTokenizer([]Pair{{104, 105}, {256, 33}}, []string{EndOfText}).WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	docExample := `{
  "format": "attnlab-bpe",
  "version": 1,
  "pretokenizer": "gocode-v1",
  "vocab_size": 259,
  "merges": [
    [104, 105],
    [256, 33]
  ],
  "special_tokens": [
    {"id": 258, "content": "<|endoftext|>"}
  ]
}
`
	if b.String() != docExample {
		t.Errorf("file of the documentation's example:\n%s\nwant:\n%s", b.String(), docExample)
	}

	// A tokenizer without merges or specials.
	empty := newTokenizer(nil, nil)
	b.Reset()
	if err := empty.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	want := `{
  "format": "attnlab-bpe",
  "version": 1,
  "pretokenizer": "gocode-v1",
  "vocab_size": 256,
  "merges": [],
  "special_tokens": []
}
`
	if b.String() != want {
		t.Errorf("empty tokenizer file:\n%s\nwant:\n%s", b.String(), want)
	}
	if e2, err := ReadJSON(&b); err != nil || e2.VocabSize() != 256 {
		t.Errorf("ReadJSON(empty tokenizer) = %v, %v", e2, err)
	}
}

func TestSaveErrors(t *testing.T) {
	tok := ownTokenizer(t)
	dir := t.TempDir()
	err := tok.Save(filepath.Join(dir, "missing", "tokenizer.json"))
	if err == nil || !strings.HasPrefix(err.Error(), "tokenizer: ") || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Save into a missing directory: %v", err)
	}
	// Renaming onto a directory fails; the temporary file is removed.
	target := filepath.Join(dir, "taken")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tok.Save(target); err == nil {
		t.Error("Save onto a non-empty directory succeeded")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("failed Save left %d entries in the directory, want 1", len(entries))
	}
}

func TestLoadErrors(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.json"))
	if err == nil || !strings.Contains(err.Error(), "nope.json") || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing file) error = %v", err)
	}

	// file builds a tokenizer file from the valid one below, with the
	// replacements applied.
	valid := `{"format": "attnlab-bpe", "version": 1, "pretokenizer": "gocode-v1", "vocab_size": 259,
"merges": [[104, 105], [256, 33]],
"special_tokens": [{"id": 258, "content": "<|endoftext|>"}]}`
	tok, err := ReadJSON(strings.NewReader(valid))
	if err != nil {
		t.Fatalf("valid file: %v", err)
	}
	if got := string(tok.Token(257)); got != "hi!" {
		t.Fatalf("valid file: Token(257) = %q", got)
	}

	// manyMerges lists the n valid merges [i, 10] followed by last.
	manyMerges := func(n int, last string) string {
		var b strings.Builder
		b.WriteString("[")
		for i := range n {
			fmt.Fprintf(&b, "[%d, 10], ", i)
		}
		return b.String() + last + "]"
	}
	// doubling merges each token with itself: token 256+i is 2^(i+1)
	// bytes long, and the total 256 + 2^(i+2) − 2 passes 2^26 at i = 24.
	doubling := func(n int) string {
		var parts []string
		parts = append(parts, "[97, 97]")
		for i := 1; i < n; i++ {
			parts = append(parts, fmt.Sprintf("[%d, %d]", 255+i, 255+i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	file := func(field, value string) string {
		fields := map[string]string{
			"format": `"attnlab-bpe"`, "version": "1", "pretokenizer": `"gocode-v1"`, "vocab_size": "259",
			"merges": `[[104, 105], [256, 33]]`, "special_tokens": `[{"id": 258, "content": "<|endoftext|>"}]`,
		}
		if value == "" {
			delete(fields, field)
		} else {
			fields[field] = value
		}
		var parts []string
		for _, k := range []string{"format", "version", "pretokenizer", "vocab_size", "merges", "special_tokens", "extra"} {
			if v, ok := fields[k]; ok {
				parts = append(parts, `"`+k+`": `+v)
			}
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	tests := []struct {
		name  string
		in    string
		field string
		index int
		want  string
	}{
		{"empty", "", "", -1, "file is not valid: unexpected EOF"},
		{"truncated", valid[:40], "", -1, "file is not valid: unexpected EOF"},
		{"syntax", `{"format" "x"}`, "", -1, "file is not valid JSON at offset 10"},
		{"syntax in merges", `{"merges": [[1, 2] [3]]}`, "", -1, "invalid character '[' after array element"},
		{"not an object", `[1]`, "", -1, "file is not a JSON object"},
		{"trailing data", valid + " {}", "", -1, "file has data after the JSON object"},
		{"unknown field", file("extra", "1"), "", -1, `file has the unknown field "extra"`},
		{"key case", strings.Replace(valid, `"version"`, `"Version"`, 1), "", -1, `file has the unknown field "Version"`},
		{"repeated field", strings.Replace(valid, `"version": 1`, `"version": 1, "version": 1`, 1), "version", -1, `"version" appears twice`},
		{"version type", file("version", `"1"`), "version", -1, `"version" is not valid: json: cannot unmarshal string`},
		{"merges type", file("merges", `{}`), "merges", -1, `"merges" is not valid: json: cannot unmarshal object`},
		{"format", file("format", `"gpt2"`), "format", -1, `"format" is "gpt2", want "attnlab-bpe"`},
		{"no format", file("format", ""), "format", -1, `"format" is "", want "attnlab-bpe"`},
		{"version", file("version", "2"), "version", -1, `"version" is 2; this package reads version 1`},
		{"pretokenizer", file("pretokenizer", `"gpt2"`), "pretokenizer", -1, `"pretokenizer" is "gpt2"; this package implements only "gocode-v1"`},
		{"no merges", file("merges", ""), "merges", -1, `"merges" is missing`},
		{"null merges", file("merges", "null"), "merges", -1, `"merges" is missing`},
		{"no specials", file("special_tokens", ""), "special_tokens", -1, `"special_tokens" is missing`},
		{"merge beyond", file("merges", manyMerges(17, "[900, 1]")), "merges", 17,
			"merge 17 refers to id 900 beyond the vocabulary: ids [0, 273) exist before it"},
		{"merge self", file("merges", "[[256, 1]]"), "merges", 0,
			"merge 0 refers to id 256 beyond the vocabulary: ids [0, 256) exist before it"},
		{"merge negative", file("merges", "[[1, 2], [3, -4]]"), "merges", 1, "merge 1 refers to id -4 beyond the vocabulary"},
		{"merge short", file("merges", "[[1, 2], [3]]"), "merges", 1, "merge 1 has 1 ids, want a pair"},
		{"merge long", file("merges", "[[1, 2, 3]]"), "merges", 0, "merge 0 has 3 ids, want a pair"},
		{"merge not ids", file("merges", `[[1, 2], ["a", "b"]]`), "merges", 1, "merge 1 is not valid: json: cannot unmarshal string"},
		{"merge fraction", file("merges", `[[1.5, 2]]`), "merges", 0, "merge 0 is not valid: json: cannot unmarshal number 1.5"},
		{"merge huge", file("merges", `[[1, 99999999999999999999]]`), "merges", 0, "merge 0 is not valid: json: cannot unmarshal number"},
		{"merge repeated", file("merges", "[[104, 105], [1, 2], [104, 105]]"), "merges", 2, "merge 2 repeats merge 0, [104, 105]"},
		{"merge too long", file("merges", doubling(40)), "merges", 24, "merge 24 makes the tokens longer than 67108864 bytes in all"},
		{"special id", file("special_tokens", `[{"id": 300, "content": "x"}]`), "special_tokens", 0,
			"special token 0 has id 300, want 258 (256 bytes + 2 merges + 0)"},
		{"special no id", file("special_tokens", `[{"content": "x"}]`), "special_tokens", 0, `special token 0 has no "id"`},
		{"special no content", file("special_tokens", `[{"id": 258}]`), "special_tokens", 0, `special token 0 has no "content"`},
		{"special empty", file("special_tokens", `[{"id": 258, "content": ""}]`), "special_tokens", 0, "special token 0 has empty content"},
		{"special repeated", file("special_tokens", `[{"id": 258, "content": "a"}, {"id": 259, "content": "a"}]`), "special_tokens", 1,
			`special token 1 repeats special token 0, "a"`},
		{"special unknown field", file("special_tokens", `[{"id": 258, "content": "a", "x": 1}]`), "special_tokens", 0,
			`special token 0 is not valid: json: unknown field "x"`},
		{"special not object", file("special_tokens", `["a"]`), "special_tokens", 0, "special token 0 is not valid: json: cannot unmarshal string"},
		{"vocab_size", file("vocab_size", "4096"), "vocab_size", -1, `"vocab_size" is 4096, but 256 bytes + 2 merges + 1 special tokens make 259`},
		{"no vocab_size", file("vocab_size", ""), "vocab_size", -1, `"vocab_size" is 0, but`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadJSON(strings.NewReader(tt.in))
			if err == nil {
				t.Fatalf("ReadJSON(%s) succeeded", tt.in)
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %q is not a *FormatError", err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "tokenizer: ") || !strings.Contains(msg, tt.want) {
				t.Errorf("error = %q, want it to contain %q", msg, tt.want)
			}
			if tt.name == "syntax" && fe.Offset != 10 {
				t.Errorf("error %q: Offset %d, want 10", msg, fe.Offset)
			}
			if fe.Field != tt.field || fe.Index != tt.index {
				t.Errorf("error %q: Field %q, Index %d; want %q, %d", msg, fe.Field, fe.Index, tt.field, tt.index)
			}

			// Load names the path and keeps the *FormatError.
			path := filepath.Join(t.TempDir(), "bad.json")
			if err := os.WriteFile(path, []byte(tt.in), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = Load(path)
			if err == nil || !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), "tokenizer: "+path+": ") ||
				!strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load error = %v", err)
			}
		})
	}
}
