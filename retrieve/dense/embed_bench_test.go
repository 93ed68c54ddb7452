package dense

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/models"
	"github.com/attnlab/attnlab/retrieve"
)

// benchCodes returns the functions of a package of the Go distribution
// ($ATTNLAB_BENCH_PKG, default strings), as search indexes them.
func benchCodes(tb testing.TB) []string {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		tb.Skip("no Go distribution:", err)
	}
	pkg := os.Getenv("ATTNLAB_BENCH_PKG")
	if pkg == "" {
		pkg = "strings"
	}
	root := filepath.Join(strings.TrimSpace(string(out)), "src", pkg)
	files, err := retrieve.GoFiles(root)
	if err != nil {
		tb.Skip(err)
	}
	var codes []string
	for _, f := range files {
		src, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			tb.Fatal(err)
		}
		fns, err := retrieve.FileFunctions(f, src, false)
		if err != nil {
			continue
		}
		for _, fn := range fns {
			codes = append(codes, fn.Code)
		}
	}
	if len(codes) == 0 {
		tb.Skip("no functions in", root)
	}
	return codes
}

// BenchmarkEmbedCodes times the embedding of a package's functions with
// the shipped encoder (what indexing a folder spends its time on): one
// function at a time, as indexing did before (path=each), and in batches
// of one padded length on GOMAXPROCS goroutines (path=batched). The two
// run in the same process; compare them with -count and benchstat, or
// interleaved (-bench 'EmbedCodes/' runs each sub-benchmark in turn).
func BenchmarkEmbedCodes(b *testing.B) {
	dir, err := models.Dir(models.Encoder)
	if err != nil {
		b.Skip(err)
	}
	m, err := LoadFolder(dir)
	if err != nil {
		b.Fatal(err)
	}
	codes := benchCodes(b)
	for _, c := range []struct {
		name string
		f    func(context.Context, []string, func(int)) ([]float32, error)
	}{{"each", m.embedEach}, {"batched", m.EmbedCodes}} {
		b.Run("path="+c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := c.f(context.Background(), codes, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(codes))/b.Elapsed().Seconds(), "funcs/s")
		})
	}
}

// TestEmbedBatchedIsEach: embedding in batches of one padded length gives
// each function the vector it gets alone, up to float32 rounding, with
// the shipped encoder on real code of many lengths (some truncated).
func TestEmbedBatchedIsEach(t *testing.T) {
	dir, err := models.Dir(models.Encoder)
	if err != nil {
		t.Skip(err)
	}
	m, err := LoadFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	codes := benchCodes(t)
	if len(codes) > 60 {
		codes = codes[:60]
	}
	each, err := m.embedEach(context.Background(), codes, nil)
	if err != nil {
		t.Fatal(err)
	}
	batched, err := m.EmbedCodes(context.Background(), codes, nil)
	if err != nil {
		t.Fatal(err)
	}
	D := m.Dim()
	worst := 0.0
	for i := range codes {
		var dot float64
		for j := range D {
			dot += float64(each[i*D+j]) * float64(batched[i*D+j])
		}
		worst = math.Max(worst, 1-dot)
	}
	if worst > 1e-5 {
		t.Errorf("batched embeddings differ from one-at-a-time ones: worst 1 − cosine %.3g", worst)
	}
	t.Logf("%d functions: worst 1 − cosine %.3g", len(codes), worst)
}
