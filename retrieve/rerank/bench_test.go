package rerank

import (
	"fmt"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/models"
)

// BenchmarkScoreBatch times the shipped reranker scoring one query against
// depth candidates of full length (max_code_tokens each): the work of one
// reranked search.
func BenchmarkScoreBatch(b *testing.B) {
	dir, err := models.Dir(models.Reranker)
	if err != nil {
		b.Skip(err)
	}
	m, err := Load(dir)
	if err != nil {
		b.Fatal(err)
	}
	q := m.QueryTokens("reports whether the path names a directory that exists")
	var code strings.Builder
	for i := 0; code.Len() < 4000; i++ {
		fmt.Fprintf(&code, "\tif x%d := f(y, %d); x%d != nil {\n\t\treturn x%d\n\t}\n", i, i, i, i)
	}
	c := m.Tokens("func Check(y []string) error {\n"+code.String()+"}", m.Settings.MaxCode)
	for _, depth := range []int{5, 10, 20} {
		b.Run(fmt.Sprintf("depth=%d/code=%d", depth, len(c)), func(b *testing.B) {
			codes := make([][]int, depth)
			for i := range codes {
				codes[i] = c
			}
			for b.Loop() {
				if _, err := m.ScoreBatch(q, codes); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
