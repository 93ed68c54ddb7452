package tokenizer

import (
	"flag"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The benchmarks train on Go source from the local Go installation.
// The defaults keep `go test -bench .` short; the figures quoted in the
// package documentation come from
//
//	go test -run '^$' -bench 'Train|Encode' -benchtime 1x -corpus-mb 20 -vocab 4096
var (
	corpusMB = flag.Float64("corpus-mb", 2, "benchmarks: MB of GOROOT/src Go files to train on")
	heldMB   = flag.Float64("held-mb", 2, "benchmarks: MB of other GOROOT/src Go files to encode")
	vocab    = flag.Int("vocab", 4096, "benchmarks: vocabulary size to train")
)

var (
	corpusOnce    sync.Once
	corpusTrain   [][]byte
	corpusHeld    [][]byte
	corpusErr     string
	corpusTokOnce sync.Once
	corpusTok     *Tokenizer
)

// goSource returns the training and held-out documents: the .go files
// under $(go env GOROOT)/src in a fixed pseudo-random order, the first
// *corpusMB megabytes for training and the next *heldMB for encoding.
// It skips tb when the Go source is not installed.
func goSource(tb testing.TB) (train, held [][]byte) {
	tb.Helper()
	corpusOnce.Do(func() {
		out, err := exec.Command("go", "env", "GOROOT").Output()
		if err != nil {
			corpusErr = "go env GOROOT: " + err.Error()
			return
		}
		src := filepath.Join(strings.TrimSpace(string(out)), "src")
		var paths []string
		filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() && strings.HasSuffix(path, ".go") {
				paths = append(paths, path)
			}
			return nil
		})
		if len(paths) == 0 {
			corpusErr = "no Go files under " + src
			return
		}
		slices.Sort(paths)
		rand.New(rand.NewPCG(1, 2)).Shuffle(len(paths), func(i, j int) {
			paths[i], paths[j] = paths[j], paths[i]
		})
		size := 0
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			switch {
			case size < int(*corpusMB*1e6):
				corpusTrain = append(corpusTrain, data)
			case size < int((*corpusMB+*heldMB)*1e6):
				corpusHeld = append(corpusHeld, data)
			default:
				return
			}
			size += len(data)
		}
	})
	if corpusErr != "" {
		tb.Skip(corpusErr)
	}
	return corpusTrain, corpusHeld
}

func totalLen(docs [][]byte) int {
	n := 0
	for _, d := range docs {
		n += len(d)
	}
	return n
}

// goTokenizer returns a tokenizer trained once on goSource.
func goTokenizer(tb testing.TB) *Tokenizer {
	tb.Helper()
	train, _ := goSource(tb)
	corpusTokOnce.Do(func() {
		tok, err := Train(train, *vocab, Options{})
		if err != nil {
			tb.Fatal(err)
		}
		corpusTok = tok
	})
	return corpusTok
}

// BenchmarkTrain trains a -vocab tokenizer on -corpus-mb of Go source and
// reports the held-out compression in bytes per token.
func BenchmarkTrain(b *testing.B) {
	train, held := goSource(b)
	b.SetBytes(int64(totalLen(train)))
	var tok *Tokenizer
	for b.Loop() {
		var err error
		tok, err = Train(train, *vocab, Options{})
		if err != nil {
			b.Fatal(err)
		}
	}
	ntok := 0
	for _, d := range held {
		ntok += len(tok.Encode(d))
	}
	b.ReportMetric(float64(totalLen(held))/float64(ntok), "bytes/token")
	b.ReportMetric(float64(tok.NumMerges()), "merges")
}

// BenchmarkEncode encodes the held-out files, one Encode call per file.
// The chunk caches stay warm from one iteration to the next, as in a long
// encoding job.
func BenchmarkEncode(b *testing.B) {
	_, held := goSource(b)
	tok := goTokenizer(b)
	b.SetBytes(int64(totalLen(held)))
	ntok := 0
	for b.Loop() {
		ntok = 0
		for _, d := range held {
			ntok += len(tok.Encode(d))
		}
	}
	b.ReportMetric(float64(totalLen(held))/float64(ntok), "bytes/token")
}

// BenchmarkEncodeParallel measures Encode from GOMAXPROCS goroutines
// sharing one Tokenizer.
func BenchmarkEncodeParallel(b *testing.B) {
	_, held := goSource(b)
	tok := goTokenizer(b)
	b.SetBytes(int64(totalLen(held)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			for _, d := range held {
				tok.Encode(d)
			}
		}
	})
}

// BenchmarkPreTokenize measures the splitter alone.
func BenchmarkPreTokenize(b *testing.B) {
	train, _ := goSource(b)
	b.SetBytes(int64(totalLen(train)))
	for b.Loop() {
		for _, d := range train {
			for i := 0; i < len(d); {
				i = nextChunk(d, i)
			}
		}
	}
}
