package search

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/safetensors"
)

// FuzzReadEntry: reading a search cache entry never panics; an error is
// one line naming the entry; an entry that reads holds a D-wide embedding
// for each of its functions and writes back (writeEntry) to an entry that
// reads the same.
func FuzzReadEntry(f *testing.F) {
	const D = 4
	dir := f.TempDir()
	funcs := []retrieve.Pair{
		{ID: "p.F", Query: "returns x", Code: "func F() int { return x < 1 }", Package: "p", File: "p/f.go", Line: 3},
		{ID: "p.G", Query: "héllo", Code: "func G() {}", Package: "p", File: "p/g.go", Line: 9},
	}
	seeds := []struct {
		funcs []retrieve.Pair
		vecs  []float32
	}{{funcs, []float32{1, 0, 0, 0, 0.5, -0.5, 0.25, 0}}, {funcs[:1], []float32{0, 0, 1, 0}}, {nil, nil}}
	for i, s := range seeds {
		path := filepath.Join(dir, "seed"+string(rune('0'+i))+".safetensors")
		if err := writeEntry(path, s.funcs, s.vecs, D); err != nil {
			f.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	// a D-wide vecs with no functions, functions that are not JSON, vecs
	// of another width
	for _, file := range []*safetensors.File{
		func() *safetensors.File {
			x := safetensors.New()
			x.Metadata["functions"] = "[]"
			x.SetF32("vecs", []int{1, D}, make([]float32, D))
			return x
		}(),
		func() *safetensors.File {
			x := safetensors.New()
			x.Metadata["functions"] = "{not json"
			return x
		}(),
		func() *safetensors.File {
			x := safetensors.New()
			x.Metadata["functions"] = `[{"id":"a"}]`
			x.SetF32("vecs", []int{1, D + 1}, make([]float32, D+1))
			return x
		}(),
	} {
		data, err := file.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	again := filepath.Join(dir, "again.safetensors")
	f.Fuzz(func(t *testing.T, data []byte) {
		// readEntry is safetensors.ReadFile (fuzzed in its package, as
		// FuzzReadFile) and entryOf; the bytes are not written to a file,
		// which makes an exec slow enough that the fuzzer spends its time
		// minimizing
		file, err := safetensors.Parse(data)
		if err != nil {
			return
		}
		const path = "CACHE/entry.safetensors"
		funcs, vecs, err := entryOf(path, file, D)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "search: cache entry "+path+": ") || strings.Contains(msg, "\n") {
				t.Fatalf("error %q is not one line naming the entry", msg)
			}
			return
		}
		if len(vecs) != len(funcs)*D {
			t.Fatalf("entry of %d functions holds %d values, want %d", len(funcs), len(vecs), len(funcs)*D)
		}
		// an entry that reads is written back (rarely: the fuzzer's inputs
		// seldom are entries) and read through the file
		os.Remove(again)
		if err := writeEntry(again, funcs, vecs, D); err != nil {
			t.Fatalf("writing back an entry that read: %v", err)
		}
		funcs2, vecs2, err := readEntry(again, D)
		if err != nil {
			t.Fatalf("reading back an entry that read: %v", err)
		}
		if !reflect.DeepEqual(funcs2, funcs) && (len(funcs) > 0 || len(funcs2) > 0) {
			t.Fatalf("write and read changed the functions: %+v, then %+v", funcs, funcs2)
		}
		if !slices.EqualFunc(vecs, vecs2, func(a, b float32) bool { return a == b || a != a && b != b }) {
			t.Fatal("write and read changed the embeddings")
		}
	})
}
