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
	funcs := []retrieve.Func{
		{Pair: retrieve.Pair{ID: "p.F", Query: "returns x", Code: "func F() int { return x < 1 }", Package: "p", File: "p/f.go", Line: 3}, Doc: "F returns x.", Body: 13},
		{Pair: retrieve.Pair{ID: "p.G", Query: "", Code: "func G() {}", Package: "p", File: "p/g.go", Line: 9}, Body: 9},
	}
	seeds := []entry{
		{funcs: funcs, vecs: []float32{1, 0, 0, 0, 0.5, -0.5, 0.5, 0.5}, docs: []float32{0, 1, 0, 0}},
		{funcs: funcs[:1], vecs: []float32{0, 0, 1, 0}, docs: []float32{0, 0, 0, 1}, generated: true},
		{funcs: funcs[1:], vecs: []float32{0, 0, 1, 0}}, // another version
		{},
	}
	for i, s := range seeds {
		path := filepath.Join(dir, "seed"+string(rune('0'+i))+".safetensors")
		if err := writeEntry(path, s, D); err != nil {
			f.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	// a D-wide vecs with no functions, functions that are not JSON, vecs
	// of another width, an entry of the version before doc comments
	for _, file := range []*safetensors.File{
		func() *safetensors.File {
			x := safetensors.New()
			x.Metadata["functions"] = `[{"id":"a"}]`
			x.SetF32("vecs", []int{1, D}, []float32{1, 0, 0, 0})
			return x
		}(),
		func() *safetensors.File {
			x := safetensors.New()
			x.Metadata["version"] = cacheVersion
			x.Metadata["functions"] = "[]"
			x.SetF32("vecs", []int{1, D}, make([]float32, D))
			return x
		}(),
		func() *safetensors.File {
			x := safetensors.New()
			x.Metadata["version"] = cacheVersion
			x.Metadata["functions"] = "{not json"
			return x
		}(),
		func() *safetensors.File {
			x := safetensors.New()
			x.Metadata["version"] = cacheVersion
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
		e, err := entryOf(path, file, D)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "search: cache entry "+path+": ") || strings.Contains(msg, "\n") {
				t.Fatalf("error %q is not one line naming the entry", msg)
			}
			return
		}
		nd := 0
		for _, fn := range e.funcs {
			if fn.Query != "" {
				nd++
			}
		}
		if len(e.vecs) != len(e.funcs)*D || len(e.docs) != nd*D {
			t.Fatalf("entry of %d functions (%d with a doc) holds %d and %d values, want %d and %d", len(e.funcs), nd, len(e.vecs), len(e.docs), len(e.funcs)*D, nd*D)
		}
		// an entry that reads is written back (rarely: the fuzzer's inputs
		// seldom are entries) and read through the file
		os.Remove(again)
		if err := writeEntry(again, e, D); err != nil {
			t.Fatalf("writing back an entry that read: %v", err)
		}
		e2, err := readEntry(again, D)
		if err != nil {
			t.Fatalf("reading back an entry that read: %v", err)
		}
		if !reflect.DeepEqual(e2.funcs, e.funcs) && (len(e.funcs) > 0 || len(e2.funcs) > 0) || e2.generated != e.generated {
			t.Fatalf("write and read changed the functions: %+v, then %+v", e, e2)
		}
		same := func(a, b float32) bool { return a == b || a != a && b != b }
		if !slices.EqualFunc(e.vecs, e2.vecs, same) || !slices.EqualFunc(e.docs, e2.docs, same) {
			t.Fatal("write and read changed the embeddings")
		}
	})
}
