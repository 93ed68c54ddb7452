package retrieve

import (
	"context"
	"go/build"
	"path/filepath"
	"sync"
	"testing"
)

// The GOROOT-scale measurements are benchmarks, so that go test stays fast:
//
//	go test -run '^$' -bench . ./retrieve/

var goroot struct {
	once             sync.Once
	train, val, test []Pair
	stats            Stats
	err              error
}

func gorootDataset(b *testing.B) ([]Pair, Stats) {
	b.Helper()
	goroot.once.Do(func() {
		src := filepath.Join(build.Default.GOROOT, "src")
		goroot.train, goroot.val, goroot.test, goroot.stats, goroot.err = BuildDataset(context.Background(), src, DefaultOptions())
	})
	if goroot.err != nil {
		b.Skipf("no GOROOT source: %v", goroot.err)
	}
	return goroot.test, goroot.stats
}

func BenchmarkBuildDatasetGOROOT(b *testing.B) {
	src := filepath.Join(build.Default.GOROOT, "src")
	var st Stats
	for b.Loop() {
		var err error
		if _, _, _, st, err = BuildDataset(context.Background(), src, DefaultOptions()); err != nil {
			b.Skipf("no GOROOT source: %v", err)
		}
	}
	b.ReportMetric(float64(st.Kept), "pairs")
	b.ReportMetric(float64(st.Files), "files")
}

func splitTexts(ps []Pair) (queries, codes []string) {
	for _, p := range ps {
		queries = append(queries, p.Query)
		codes = append(codes, p.Code)
	}
	return queries, codes
}

// BenchmarkBM25RankGOROOT times one top-10 query on the GOROOT test split
// and reports the split's BM25 metrics.
func BenchmarkBM25RankGOROOT(b *testing.B) {
	test, _ := gorootDataset(b)
	queries, codes := splitTexts(test)
	x := NewBM25(codes)
	m := evaluate(x, queries, len(codes), EvalOptions{})
	i := 0
	for b.Loop() {
		x.Rank(queries[i%len(queries)], 10)
		i++
	}
	b.ReportMetric(m.MRR10, "MRR@10")
	b.ReportMetric(m.Recall1, "R@1")
	b.ReportMetric(m.Recall10, "R@10")
	b.ReportMetric(m.NDCG10, "nDCG@10")
	b.ReportMetric(m.CSNMRR, "CSN-MRR")
}

func BenchmarkBM25IndexGOROOT(b *testing.B) {
	test, _ := gorootDataset(b)
	_, codes := splitTexts(test)
	for b.Loop() {
		NewBM25(codes)
	}
	b.ReportMetric(float64(len(codes)), "docs")
}

func BenchmarkTerms(b *testing.B) {
	test, _ := gorootDataset(b)
	var bytes int64
	for _, p := range test[:min(200, len(test))] {
		bytes += int64(len(p.Code))
	}
	b.SetBytes(bytes)
	for b.Loop() {
		for _, p := range test[:min(200, len(test))] {
			Terms(p.Code)
		}
	}
}
