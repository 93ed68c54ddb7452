package vec

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchGemm times an n×n×n product C = op(A)·op(B) and reports GFLOP/s
// (2n³ flops per product) per wall-clock second and per CPU-second of the
// process. With all cores free, GFLOP/s ≈ GOMAXPROCS × GFLOP/cpu-s for the
// large sizes; when other jobs share the machine, GFLOP/cpu-s still measures
// the code.
func benchGemm[T Float](b *testing.B, gemm gemmFunc[T], transA, transB bool, n int) {
	rng := rand.New(rand.NewPCG(19, 20))
	x := make([]T, n*n)
	y := make([]T, n*n)
	c := make([]T, n*n)
	for i := range x {
		x[i], y[i] = T(rng.Float64()-0.5), T(rng.Float64()-0.5)
	}
	gemm(transA, transB, n, n, n, 1, x, n, y, n, 0, c, n) // warm the workspace pool
	cpu0 := cpuTime()
	for b.Loop() {
		gemm(transA, transB, n, n, n, 1, x, n, y, n, 0, c, n)
	}
	cpu := cpuTime() - cpu0
	flops := 2 * float64(n) * float64(n) * float64(n) * float64(b.N)
	b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	if cpu > 0 {
		b.ReportMetric(flops/cpu.Seconds()/1e9, "GFLOP/cpu-s")
	}
}

var benchSizes = []int{256, 512, 1024, 2048}

func BenchmarkGemm32(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { benchGemm(b, Gemm32, false, false, n) })
	}
}

func BenchmarkGemm64(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { benchGemm(b, Gemm64, false, false, n) })
	}
}

// BenchmarkGemmTrans times the transposed cases the model uses at n = 1024.
func BenchmarkGemmTrans(b *testing.B) {
	for _, tr := range []struct {
		name           string
		transA, transB bool
	}{{"NT", false, true}, {"TN", true, false}, {"TT", true, true}} {
		b.Run("f32/"+tr.name+"/n=1024", func(b *testing.B) { benchGemm(b, Gemm32, tr.transA, tr.transB, 1024) })
		b.Run("f64/"+tr.name+"/n=1024", func(b *testing.B) { benchGemm(b, Gemm64, tr.transA, tr.transB, 1024) })
	}
}

// BenchmarkGemmPaths times every implementation this machine can run
// (AVX-512, AVX2, portable) at n = 512.
func BenchmarkGemmPaths(b *testing.B) {
	for _, p := range testPaths() {
		b.Run("path="+p.name+"/f32/n=512", func(b *testing.B) {
			defer p.use()()
			benchGemm(b, Gemm32, false, false, 512)
		})
		b.Run("path="+p.name+"/f64/n=512", func(b *testing.B) {
			defer p.use()()
			benchGemm(b, Gemm64, false, false, 512)
		})
	}
}

var benchVecSizes = []int{64, 1024, 1 << 16}

func benchVec[T Float](b *testing.B, f func(x, y []T)) {
	for _, n := range benchVecSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(21, 22))
			x := make([]T, n)
			y := make([]T, n)
			for i := range x {
				x[i], y[i] = T(rng.NormFloat64()), T(rng.NormFloat64())
			}
			b.SetBytes(int64(n * sizeofT[T]()))
			for b.Loop() {
				f(x, y)
			}
		})
	}
}

var sink32 float32
var sink64 float64

func BenchmarkDot32(b *testing.B) {
	benchVec(b, func(x, y []float32) { sink32 += Dot32(x, y) })
}

func BenchmarkDot64(b *testing.B) {
	benchVec(b, func(x, y []float64) { sink64 += Dot64(x, y) })
}

func BenchmarkAxpy32(b *testing.B) {
	benchVec(b, func(x, y []float32) { Axpy32(1e-9, x, y) })
}

func BenchmarkAxpy64(b *testing.B) {
	benchVec(b, func(x, y []float64) { Axpy64(1e-9, x, y) })
}

func BenchmarkScale32(b *testing.B) {
	benchVec(b, func(x, y []float32) { Scale32(1, x) })
}

func BenchmarkExp32(b *testing.B) {
	benchVec(b, func(x, y []float32) { Exp32(y, x) })
}

func BenchmarkExp64(b *testing.B) {
	benchVec(b, func(x, y []float64) { Exp64(y, x) })
}
