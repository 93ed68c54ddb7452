package retrieve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/attnlab/attnlab/internal/atomicfile"
)

// WriteJSONL writes pairs to path, one JSON object a line, atomically: the
// file is written under a temporary name in the same folder and renamed when
// complete, so path holds either the whole dataset or what it held before.
func WriteJSONL(path string, pairs []Pair) error {
	if err := atomicfile.Write(path, 0o644, encodePairs(pairs)); err != nil {
		return fmt.Errorf("retrieve: writing %s: %w", path, err)
	}
	return nil
}

func encodePairs(pairs []Pair) func(w io.Writer) error {
	return func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false) // code is full of <, > and &
		for _, p := range pairs {
			if err := enc.Encode(p); err != nil {
				return err
			}
		}
		return nil
	}
}

// WriteSplits writes the folder dir of a dataset's splits (train.jsonl,
// val.jsonl, test.jsonl, as SplitNames) as one result: built whole and
// swapped in (atomicfile.ReplaceDir), so a failure, a full disk or a kill
// never leaves new splits beside old ones. It returns the files' paths.
func WriteSplits(dir string, splits ...[]Pair) ([]string, error) {
	if len(splits) != len(SplitNames) {
		panic(fmt.Sprintf("retrieve: WriteSplits of %d splits, want %d", len(splits), len(SplitNames)))
	}
	var paths []string
	err := atomicfile.ReplaceDir(dir, func(tmp string) error {
		for i, ps := range splits {
			if err := atomicfile.Write(SplitFile(tmp, SplitNames[i]), 0o644, encodePairs(ps)); err != nil {
				return err
			}
			paths = append(paths, SplitFile(dir, SplitNames[i]))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("retrieve: writing %s: %w", dir, err)
	}
	return paths, nil
}

// A FormatError reports a malformed line of a JSONL dataset.
type FormatError struct {
	Path string
	Line int // 1-based
	Err  error
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("retrieve: %s:%d: %v", e.Path, e.Line, e.Err)
}

func (e *FormatError) Unwrap() error { return e.Err }

// ReadJSONL reads a dataset written by WriteJSONL, or any JSONL file whose
// lines are objects with at least non-empty "id", "query" and "code" strings
// ("package", "file" and "line" are optional; other fields are ignored).
// Blank lines are skipped. A line that is not such an object, or that
// repeats an earlier id, gives a *FormatError naming the line.
func ReadJSONL(path string) ([]Pair, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("retrieve: %w", err)
	}
	defer f.Close()
	return readJSONL(f, path)
}

// The sizes ReadJSONL reads at most: a line (one pair, its code a whole
// function) and a file. A longer line, a larger file or a stream that does
// not end (/dev/zero) is an error naming the file and the limit.
const (
	MaxLineBytes  = 16 << 20
	MaxJSONLBytes = 1 << 30
)

func readJSONL(r io.Reader, path string) ([]Pair, error) {
	return readJSONLWithin(r, path, MaxLineBytes, MaxJSONLBytes)
}

// readJSONLWithin is readJSONL reading lines of at most maxLine bytes and
// at most maxFile bytes in all.
func readJSONLWithin(r io.Reader, path string, maxLine int, maxFile int64) ([]Pair, error) {
	lr := &io.LimitedReader{R: r, N: maxFile + 1}
	br := bufio.NewReaderSize(lr, 1<<20)
	var pairs []Pair
	firstLine := map[string]int{}
	for n := 1; ; n++ {
		line, err := readLine(br, maxLine)
		if lr.N == 0 {
			return nil, fmt.Errorf("retrieve: %s: larger than %d bytes", path, maxFile)
		}
		if errors.Is(err, errLongLine) {
			return nil, &FormatError{Path: path, Line: n, Err: fmt.Errorf("line longer than %d bytes", maxLine)}
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("retrieve: reading %s: %w", path, err)
		}
		if trimmed := bytes.TrimSpace(line); len(trimmed) > 0 {
			p, perr := parsePair(trimmed)
			if perr != nil {
				return nil, &FormatError{Path: path, Line: n, Err: perr}
			}
			if first, dup := firstLine[p.ID]; dup {
				return nil, &FormatError{Path: path, Line: n, Err: fmt.Errorf("id %q repeats line %d", p.ID, first)}
			}
			firstLine[p.ID] = n
			pairs = append(pairs, p)
		}
		if err != nil { // io.EOF
			return pairs, nil
		}
	}
}

var errLongLine = errors.New("line too long")

// readLine returns the next line of br, its '\n' included, like
// br.ReadBytes('\n'), or errLongLine once it holds more than max bytes.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > max+1 || (len(line)+len(frag) == max+1 && frag[len(frag)-1] != '\n') {
			return nil, errLongLine
		}
		line = append(line, frag...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

func parsePair(line []byte) (Pair, error) {
	var raw struct {
		ID, Query, Code *string
		Package, File   string
		Line            int
	}
	if err := json.Unmarshal(line, &raw); err != nil {
		return Pair{}, err
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"id", raw.ID}, {"query", raw.Query}, {"code", raw.Code}} {
		if f.v == nil {
			return Pair{}, fmt.Errorf("missing field %q", f.name)
		}
		if *f.v == "" {
			return Pair{}, fmt.Errorf("empty field %q", f.name)
		}
	}
	return Pair{ID: *raw.ID, Query: *raw.Query, Code: *raw.Code, Package: raw.Package, File: raw.File, Line: raw.Line}, nil
}

// SplitFile returns the file of split (one of SplitNames) in the folder
// dir of a dataset's splits: DIR/train.jsonl.
func SplitFile(dir, split string) string { return filepath.Join(dir, split+".jsonl") }
