package corpus

import (
	"fmt"
	"hash/fnv"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/attnlab/attnlab/internal/atomicfile"
)

// HeldOut reports whether the unit goes to the held-out set: a hash of it
// (FNV-1a, 64 bits) modulo 10000 is below frac·10000. It is the rule of
// train.Split, so both hold out the same standard-library packages.
func HeldOut(unit string, frac float64) bool {
	h := fnv.New64a()
	h.Write([]byte(unit))
	return float64(h.Sum64()%10000) < frac*10000
}

// Split divides docs by unit with HeldOut, keeping their order.
func Split(docs []Document, frac float64) (train, held []Document) {
	for _, d := range docs {
		if HeldOut(d.Unit, frac) {
			held = append(held, d)
		} else {
			train = append(train, d)
		}
	}
	return train, held
}

// Units returns the distinct units of docs, sorted.
func Units(docs []Document) []string {
	var units []string
	for _, d := range docs {
		units = append(units, d.Unit)
	}
	slices.Sort(units)
	return slices.Compact(units)
}

// CommonDir returns the deepest folder that holds every file of docs.
func CommonDir(docs []Document) string {
	if len(docs) == 0 {
		return ""
	}
	dir := filepath.Dir(docs[0].File)
	for _, d := range docs[1:] {
		for !within(dir, d.File) {
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return dir
}

func within(dir, file string) bool {
	rel, err := filepath.Rel(dir, file)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// WriteFileList writes the files of docs to path, one a line, relative to
// root and slash-separated (the -files list of attnlab lm-eval), replacing
// path whole. It is an error when a file is not under root.
func WriteFileList(path string, docs []Document, root string) error {
	lines := make([]string, len(docs))
	for i, d := range docs {
		rel, err := filepath.Rel(root, d.File)
		if err != nil || !within(root, d.File) {
			return fmt.Errorf("corpus: %s is not under %s", d.File, root)
		}
		lines[i] = filepath.ToSlash(rel)
	}
	err := atomicfile.Write(path, 0o644, func(w io.Writer) error {
		for _, l := range lines {
			if _, err := io.WriteString(w, l+"\n"); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("corpus: %w", err)
	}
	return nil
}

// Tally counts documents: files, bytes and distinct units, and of them
// those from the standard library. The zero Tally is ready to use.
type Tally struct {
	Files, StdFiles int
	Bytes, StdBytes int64
	units           map[string]bool
}

// Add counts d.
func (t *Tally) Add(d Document) {
	if t.units == nil {
		t.units = map[string]bool{}
	}
	t.units[d.Unit] = true
	t.Files++
	t.Bytes += int64(len(d.Text))
	if strings.HasPrefix(d.Path, "std/") {
		t.StdFiles++
		t.StdBytes += int64(len(d.Text))
	}
}

// Units is the number of distinct units counted.
func (t *Tally) Units() int { return len(t.units) }
