package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/attnlab/attnlab/internal/atomicfile"
	"github.com/attnlab/attnlab/internal/readlimit"
)

// FileFormat and FileVersion identify the tokenizer file format described
// in the package documentation.
const (
	FileFormat  = "attnlab-bpe"
	FileVersion = 1
)

// MaxFileBytes bounds the size of a tokenizer file: room for the merges
// of the largest vocabulary (2^24 ids, a merge of two 8-digit ids about
// 20 bytes) and its special tokens. ReadJSON reads no more.
const MaxFileBytes = 512 << 20

// A FormatError reports that a tokenizer file is not valid. Field and
// Index locate the problem; the message names them too.
type FormatError struct {
	Field  string // JSON field of the top-level object, or "" for the whole file
	Index  int    // element of Field, or -1
	Offset int64  // byte offset of a JSON syntax error, or -1
	Msg    string // description of the problem, naming Field and Index
}

// Error returns the message prefixed with "tokenizer: ".
func (e *FormatError) Error() string { return "tokenizer: " + e.Msg }

// formatErrorf returns a *FormatError about element index of field, or
// about the whole field if index is negative. The message starts with
// "merge 17" or "special token 2" for an element, and with the field
// name otherwise.
func formatErrorf(field string, index int, format string, args ...any) *FormatError {
	var what string
	switch {
	case field == "":
		what = "file"
	case index < 0:
		what = strconv.Quote(field)
	default:
		name := map[string]string{"merges": "merge", "special_tokens": "special token"}[field]
		what = name + " " + strconv.Itoa(index)
	}
	return &FormatError{Field: field, Index: index, Offset: -1, Msg: what + " " + fmt.Sprintf(format, args...)}
}

// fileJSON is the top-level object of a tokenizer file, filled by
// decodeFile. Merges and specials are decoded element by element so that
// errors name the index.
type fileJSON struct {
	Format        string
	Version       int
	PreTokenizer  string
	VocabSize     int
	Merges        []json.RawMessage
	SpecialTokens []json.RawMessage
}

type specialJSON struct {
	ID      *int    `json:"id"`
	Content *string `json:"content"`
}

// WriteJSON writes t to w in the tokenizer file format, one merge per
// line. The output depends only on t.
func (t *Tokenizer) WriteJSON(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "{\n  \"format\": %q,\n  \"version\": %d,\n  \"pretokenizer\": %q,\n  \"vocab_size\": %d,\n  \"merges\": [",
		FileFormat, FileVersion, PreTokenizerName, t.VocabSize())
	for i, m := range t.merges {
		if i > 0 {
			bw.WriteByte(',')
		}
		fmt.Fprintf(bw, "\n    [%d, %d]", m.Left, m.Right)
	}
	if len(t.merges) > 0 {
		bw.WriteString("\n  ")
	}
	bw.WriteString("],\n  \"special_tokens\": [")
	for i, s := range t.specials {
		if i > 0 {
			bw.WriteByte(',')
		}
		// An Encoder that leaves '<' and '>' alone: "<|endoftext|>"
		// stays readable.
		var content bytes.Buffer
		enc := json.NewEncoder(&content)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			return fmt.Errorf("tokenizer: special token %d: %w", i, err)
		}
		fmt.Fprintf(bw, "\n    {\"id\": %d, \"content\": %s}", NumBytes+len(t.merges)+i, bytes.TrimSuffix(content.Bytes(), []byte("\n")))
	}
	if len(t.specials) > 0 {
		bw.WriteString("\n  ")
	}
	bw.WriteString("]\n}\n")
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	return nil
}

// Save writes t to the file path, replacing it atomically: the data goes
// to a temporary file in the same directory, which is synced and then
// renamed to path. On error, path is left as it was.
func (t *Tokenizer) Save(path string) error {
	var werr error
	err := atomicfile.Write(path, 0o644, func(w io.Writer) error {
		werr = t.WriteJSON(w)
		return werr
	})
	if werr != nil {
		return werr
	}
	if err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	return nil
}

// A fileError wraps an error with the name of the file it concerns.
type fileError struct {
	path string
	err  error
}

func (e *fileError) Error() string {
	return "tokenizer: " + e.path + ": " + strings.TrimPrefix(e.err.Error(), "tokenizer: ")
}

func (e *fileError) Unwrap() error { return e.err }

// Load reads the tokenizer file at path. Errors name the path and wrap
// the underlying error, so that errors.As can retrieve a [*FormatError].
func Load(path string) (*Tokenizer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &fileError{path, err}
	}
	defer f.Close()
	t, err := ReadJSON(f)
	if err != nil {
		return nil, &fileError{path, err}
	}
	return t, nil
}

// ReadJSON reads a tokenizer in the tokenizer file format from r and
// validates all of it. A file that is not valid is reported as a
// [*FormatError] naming the field, and the element, at fault.
//
// It reads at most MaxFileBytes: a larger file, or a stream that does
// not end, is a *FormatError.
func ReadJSON(r io.Reader) (*Tokenizer, error) { return readJSON(r, MaxFileBytes) }

// readJSON is ReadJSON reading at most limit bytes.
func readJSON(r io.Reader, limit int64) (*Tokenizer, error) {
	data, err := readlimit.All(r, "file", limit)
	if tl := (*readlimit.TooLargeError)(nil); errors.As(err, &tl) {
		return nil, formatErrorf("", -1, "is larger than %d bytes", tl.Limit)
	}
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	fj, err := decodeFile(data)
	if err != nil {
		return nil, err
	}
	switch {
	case fj.Format != FileFormat:
		return nil, formatErrorf("format", -1, "is %q, want %q", fj.Format, FileFormat)
	case fj.Version != FileVersion:
		return nil, formatErrorf("version", -1, "is %d; this package reads version %d", fj.Version, FileVersion)
	case fj.PreTokenizer != PreTokenizerName:
		return nil, formatErrorf("pretokenizer", -1, "is %q; this package implements only %q", fj.PreTokenizer, PreTokenizerName)
	case fj.Merges == nil:
		return nil, formatErrorf("merges", -1, "is missing")
	case fj.SpecialTokens == nil:
		return nil, formatErrorf("special_tokens", -1, "is missing")
	case len(fj.Merges)+len(fj.SpecialTokens) > maxVocab-NumBytes:
		return nil, formatErrorf("merges", -1, "and special_tokens hold %d entries, more than the %d a vocabulary of %d allows",
			len(fj.Merges)+len(fj.SpecialTokens), maxVocab-NumBytes, maxVocab)
	}

	merges := make([]Pair, len(fj.Merges))
	rank := make(map[Pair]int, len(fj.Merges))
	for i, raw := range fj.Merges {
		var ids []int64
		if err := decodeStrict(raw, &ids); err != nil {
			return nil, jsonError("merges", i, err)
		}
		if len(ids) != 2 {
			return nil, formatErrorf("merges", i, "has %d ids, want a pair", len(ids))
		}
		for _, id := range ids {
			if id < 0 || id >= int64(NumBytes+i) {
				return nil, formatErrorf("merges", i, "refers to id %d beyond the vocabulary: ids [0, %d) exist before it",
					id, NumBytes+i)
			}
		}
		m := Pair{int(ids[0]), int(ids[1])}
		if j, ok := rank[m]; ok {
			return nil, formatErrorf("merges", i, "repeats merge %d, [%d, %d]", j, m.Left, m.Right)
		}
		rank[m] = i
		merges[i] = m
	}

	if i := tokenBytesOverflow(merges); i >= 0 {
		return nil, formatErrorf("merges", i, "makes the tokens longer than %d bytes in all", maxTokenBytes)
	}

	specials := make([]string, len(fj.SpecialTokens))
	seen := make(map[string]int, len(fj.SpecialTokens))
	for i, raw := range fj.SpecialTokens {
		var sj specialJSON
		if err := decodeStrict(raw, &sj); err != nil {
			return nil, jsonError("special_tokens", i, err)
		}
		want := NumBytes + len(merges) + i
		switch {
		case sj.ID == nil:
			return nil, formatErrorf("special_tokens", i, "has no \"id\"")
		case sj.Content == nil:
			return nil, formatErrorf("special_tokens", i, "has no \"content\"")
		case *sj.ID != want:
			return nil, formatErrorf("special_tokens", i, "has id %d, want %d (256 bytes + %d merges + %d)",
				*sj.ID, want, len(merges), i)
		case *sj.Content == "":
			return nil, formatErrorf("special_tokens", i, "has empty content")
		}
		if j, ok := seen[*sj.Content]; ok {
			return nil, formatErrorf("special_tokens", i, "repeats special token %d, %q", j, *sj.Content)
		}
		seen[*sj.Content] = i
		specials[i] = *sj.Content
	}

	if n := NumBytes + len(merges) + len(specials); fj.VocabSize != n {
		return nil, formatErrorf("vocab_size", -1, "is %d, but 256 bytes + %d merges + %d special tokens make %d",
			fj.VocabSize, len(merges), len(specials), n)
	}
	return newTokenizer(merges, specials), nil
}

// decodeFile decodes the top-level object of a tokenizer file. Unlike
// encoding/json, it rejects unknown and repeated keys and matches keys
// case-sensitively.
func decodeFile(data []byte) (*fileJSON, error) {
	var fj fileJSON
	fields := map[string]any{
		"format": &fj.Format, "version": &fj.Version, "pretokenizer": &fj.PreTokenizer,
		"vocab_size": &fj.VocabSize, "merges": &fj.Merges, "special_tokens": &fj.SpecialTokens,
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonError("", -1, err)
	}
	if tok != json.Delim('{') {
		return nil, formatErrorf("", -1, "is not a JSON object")
	}
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, jsonError("", -1, err)
		}
		key, _ := tok.(string) // the decoder allows only strings here
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, jsonError("", -1, err)
		}
		v, ok := fields[key]
		switch {
		case !ok:
			return nil, formatErrorf("", -1, "has the unknown field %q", key)
		case seen[key]:
			return nil, formatErrorf(key, -1, "appears twice")
		}
		seen[key] = true
		if err := decodeStrict(raw, v); err != nil {
			return nil, jsonError(key, -1, err)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, jsonError("", -1, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, formatErrorf("", -1, "has data after the JSON object")
	}
	return &fj, nil
}

// decodeStrict decodes the single JSON value in data into v, rejecting
// unknown object keys and trailing data.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the JSON value")
	}
	return nil
}

// jsonError turns an error of decodeStrict into a *FormatError, keeping
// the offset of a syntax error in the file as a whole.
func jsonError(field string, index int, err error) *FormatError {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	fe := formatErrorf(field, index, "is not valid: %v", err)
	var se *json.SyntaxError
	if field == "" && errors.As(err, &se) {
		fe.Offset = se.Offset
		fe.Msg = fmt.Sprintf("file is not valid JSON at offset %d: %v", se.Offset, err)
	}
	return fe
}
