package corpus_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/corpus"
	"github.com/attnlab/attnlab/train"
)

// docsOf makes n units of 3 files each, under root.
func docsOf(root string, n int) []corpus.Document {
	var docs []corpus.Document
	for u := range n {
		unit := fmt.Sprintf("example.com/p%d", u)
		for f := range 3 {
			rel := fmt.Sprintf("%s/f%d.go", unit, f)
			docs = append(docs, corpus.Document{Path: "debian/golang-p-dev/" + rel, Unit: unit, File: filepath.Join(root, rel)})
		}
	}
	return docs
}

func TestSplitByWholeUnit(t *testing.T) {
	docs := docsOf("/src", 1000)
	trainDocs, held := corpus.Split(docs, 0.1)
	if len(trainDocs)+len(held) != len(docs) {
		t.Fatalf("split lost documents: %d + %d of %d", len(trainDocs), len(held), len(docs))
	}
	heldUnits := corpus.Units(held)
	// 1000 units at 10%: 100 expected, binomial sd 9.5
	if n := len(heldUnits); n < 70 || n > 130 {
		t.Errorf("%d of 1000 units held out at frac 0.1", n)
	}
	if len(held) != 3*len(heldUnits) {
		t.Errorf("%d held-out files in %d units: units are split", len(held), len(heldUnits))
	}
	for _, d := range trainDocs {
		if corpus.HeldOut(d.Unit, 0.1) {
			t.Fatalf("%s is in training but its unit is held out", d.Path)
		}
	}
	// The same units are held out whatever the other documents and order.
	rev := make([]corpus.Document, 0, len(docs)/2)
	for i := len(docs) - 1; i >= 0; i -= 2 {
		rev = append(rev, docs[i])
	}
	_, held2 := corpus.Split(rev, 0.1)
	for _, d := range held2 {
		if !corpus.HeldOut(d.Unit, 0.1) {
			t.Fatalf("%s held out in one split and not the other", d.Path)
		}
	}
	if _, h := corpus.Split(docs, 0); len(h) != 0 {
		t.Errorf("frac 0 holds out %d files", len(h))
	}
	if _, h := corpus.Split(docs, 1); len(h) != len(docs) {
		t.Errorf("frac 1 holds out %d of %d files", len(h), len(docs))
	}
}

// TestSplitAgreesWithTrain: the corpus holds out the packages that
// train.Split holds out, so a model trained on the standard library alone
// and one trained on the whole corpus are measured on the same packages.
func TestSplitAgreesWithTrain(t *testing.T) {
	docs := docsOf("/src", 300)
	var tdocs []train.Document
	for _, d := range docs {
		tdocs = append(tdocs, train.Document{Path: d.Path, Dir: d.Unit})
	}
	_, held := corpus.Split(docs, 0.2)
	_, theld := train.Split(tdocs, 0.2)
	if len(held) != len(theld) || len(held) == 0 {
		t.Fatalf("corpus holds out %d files, train %d", len(held), len(theld))
	}
	for i := range held {
		if held[i].Path != theld[i].Path {
			t.Fatalf("held out: corpus %s, train %s", held[i].Path, theld[i].Path)
		}
	}
}

func TestWriteFileList(t *testing.T) {
	tmp := t.TempDir()
	docs := []corpus.Document{
		{File: filepath.Join(tmp, "go", "src", "net", "http", "server.go")},
		{File: filepath.Join(tmp, "corpus", "pkgs", "golang-a-dev", "usr", "a.go")},
	}
	root := corpus.CommonDir(docs)
	if root != tmp {
		t.Errorf("CommonDir = %s, want %s", root, tmp)
	}
	if got := corpus.CommonDir(docs[:1]); got != filepath.Dir(docs[0].File) {
		t.Errorf("CommonDir of one file = %s", got)
	}
	list := filepath.Join(tmp, "heldout.txt")
	if err := corpus.WriteFileList(list, docs, root); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(list)
	if want := "go/src/net/http/server.go\ncorpus/pkgs/golang-a-dev/usr/a.go\n"; string(b) != want {
		t.Errorf("list holds\n%s\nwant\n%s", b, want)
	}
	err := corpus.WriteFileList(list, docs, filepath.Join(tmp, "go"))
	if err == nil || !strings.Contains(err.Error(), "a.go is not under") {
		t.Errorf("a file outside the root: error %v", err)
	}
	if b2, _ := os.ReadFile(list); string(b2) != string(b) {
		t.Errorf("a failed write changed the list")
	}
}
