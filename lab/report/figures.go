package report

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/faults"
	"github.com/attnlab/attnlab/internal/plots"
	"github.com/attnlab/attnlab/lab"
	"github.com/attnlab/attnlab/nn"
)

// The figures of the HTML report: small examples computed here, with fixed
// seeds, by the same code the lab checks.

// FigureSeed seeds the random inputs of the report's examples.
const FigureSeed = 1

// Image files of the report.
const (
	sweepPNG   = "eps-sweep.png"
	weightsPNG = "attention-weights.png"
	gradsPNG   = "first-row-gradients.png"
	ropePNG    = "rope-rotation.png"
)

// maskGrid is one visibility matrix drawn as a table, like the design notes'.
type maskGrid struct {
	Title   string
	Caption string
	Config  *attention.Config
}

// label names key/query slot t as the mask command does: pad, oldP (cached)
// or newP (the chunk), P the token's logical position.
func (g maskGrid) label(t int) string {
	c := g.Config
	past := c.N - c.M
	switch {
	case !c.KeyValid(0, t):
		return "pad"
	case t < past:
		return fmt.Sprintf("old%d", c.KeyPos(0, t))
	default:
		return fmt.Sprintf("new%d", c.KeyPos(0, t))
	}
}

// maskGrids returns the visibility tables of the report.
func maskGrids() []maskGrid {
	causal := func(past, m int) *attention.Config {
		return &attention.Config{B: 1, Hq: 1, Hkv: 1, M: m, N: past + m, D: 1, Dv: 1, Causal: true}
	}
	// left padding: 2 pads then 4 tokens, positions counting real tokens
	padValid := []bool{false, false, true, true, true, true}
	padPos := attention.PositionsFromValidity(padValid, 1, 6)
	leftPad := &attention.Config{B: 1, Hq: 1, Hkv: 1, M: 6, N: 6, D: 1, Dv: 1, Causal: true,
		QValid: padValid, KValid: padValid, QPos: padPos, KPos: padPos}
	// two documents of 3 and 4 tokens packed into one row
	seg := []int{0, 0, 0, 1, 1, 1, 1}
	segPos := []int{0, 1, 2, 0, 1, 2, 3}
	packed := &attention.Config{B: 1, Hq: 1, Hkv: 1, M: 7, N: 7, D: 1, Dv: 1, Causal: true,
		QSeg: seg, KSeg: seg, QPos: segPos, KPos: segPos}
	window := causal(0, 6)
	window.Window = 3

	grids := []maskGrid{
		{Title: "No cache: 4 tokens", Config: causal(0, 4),
			Caption: "Queries and keys start at the same position 0, so the causal mask is lower-triangular."},
		{Title: "Causal with a cache: 3 cached + 2 new", Config: causal(3, 2),
			Caption: "The new tokens are at positions 3 and 4 and read the whole cache: key_position ≤ past_length + local_query_index. tril(ones(2, 5)) would hide most of the history (see top-left below)."},
		{Title: "Left padding: 2 pads + 4 tokens", Config: leftPad,
			Caption: "Padding keys are never read; padding queries see nothing and get zero output and no gradient. Positions count real tokens, so the first real token is at position 0."},
		{Title: "Packed documents: 3 + 4 tokens with segment ids", Config: packed,
			Caption: "Segment ids make two documents in one row invisible to each other; positions restart in each document. An end-of-text token alone would not do this."},
		{Title: "Sliding window of 3", Config: window,
			Caption: "A key is visible when 0 ≤ qpos − kpos < 3: each query reads itself and the two tokens before it."},
	}
	for _, conv := range []attention.Convention{attention.Positions, attention.BottomRight, attention.TopLeft} {
		c := causal(3, 2)
		c.Convention = conv
		grids = append(grids, maskGrid{Title: "M=2, N=5, convention " + conv.String(), Config: c})
	}
	// A cache with two empty slots and a window of 2 (the conventions check's
	// third case): positions count tokens, bottom-right counts slots.
	for _, conv := range []attention.Convention{attention.Positions, attention.BottomRight} {
		c := &attention.Config{B: 1, Hq: 1, Hkv: 1, M: 1, N: 6, D: 1, Dv: 1, Causal: true, Window: 2, Convention: conv,
			KValid: []bool{true, true, true, false, false, true}, KPos: []int{0, 1, 2, 3, 3, 3}, QPos: []int{3}}
		caption := "Positions count tokens: the new token at position 3 reads old2 and itself, both within 2 positions."
		if conv == attention.BottomRight {
			caption = "Bottom-right counts slots: the new token sits in slot 5, so only slot 5 is within 2, and old2 is lost behind the empty slots."
		}
		grids = append(grids, maskGrid{Title: "Cache with 2 empty slots, window 2, convention " + conv.String(), Config: c, Caption: caption})
	}
	return grids
}

// attentionExample is the small attention call of the weight heat map and
// the first-row gradient bars.
type attentionExample struct {
	Config *attention.Config
	P      [][]float64 // head 0's weights (M, N), NaN where masked
	DK, DV []float64   // ‖dK_j‖, ‖dV_j‖ per key under the first-row loss
	// The same loss on the fault mask-dropped, which finite differences pass.
	FaultDK, FaultDV []float64
	RowPos           int   // logical position of query row 0
	Future           []int // keys row 0 may not read
	ExactZero        bool  // every element of dK, dV of the future keys is == 0
}

// newAttentionExample runs attention.Reference on B=1, Hq=2, Hkv=1, a chunk
// of M=4 new tokens after 4 cached ones (N=8), causal, with the loss on query
// row 0 only: dO is zero on every other row.
func newAttentionExample() (*attentionExample, error) {
	c := &attention.Config{B: 1, Hq: 2, Hkv: 1, M: 4, N: 8, D: 4, Dv: 3, Causal: true}
	r := rand.New(rand.NewPCG(FigureSeed, 0xf16))
	fill := func(n int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = r.NormFloat64()
		}
		return x
	}
	q, k, v := fill(c.B*c.Hq*c.M*c.D), fill(c.B*c.Hkv*c.N*c.D), fill(c.B*c.Hkv*c.N*c.Dv)
	do := make([]float64, c.B*c.Hq*c.M*c.Dv)
	for h := range c.Hq { // the loss reads query row 0 of every head
		copy(do[h*c.M*c.Dv:], fill(c.Dv))
	}
	ref := attention.Reference[float64]()
	o := make([]float64, len(do))
	lse := make([]float64, c.B*c.Hq*c.M)
	p := make([]float64, c.B*c.Hq*c.M*c.N)
	if err := ref.Forward(o, lse, p, q, k, v, c); err != nil {
		return nil, err
	}
	dq, dk, dv := make([]float64, len(q)), make([]float64, len(k)), make([]float64, len(v))
	ref.Backward(dq, dk, dv, do, q, k, v, p, c)

	ex := &attentionExample{Config: c, RowPos: c.QueryPos(0, 0), ExactZero: true}
	for i := range c.M {
		row := make([]float64, c.N)
		for j := range c.N {
			row[j] = p[i*c.N+j]
			if !c.Visible(0, i, j) {
				row[j] = math.NaN()
			}
		}
		ex.P = append(ex.P, row)
	}
	ex.DK, ex.DV = rowNorms(dk, c.N, c.D), rowNorms(dv, c.N, c.Dv)
	for j := range c.N {
		if c.Visible(0, 0, j) {
			continue
		}
		ex.Future = append(ex.Future, j)
		for _, x := range append(slices.Clone(dk[j*c.D:(j+1)*c.D]), dv[j*c.Dv:(j+1)*c.Dv]...) {
			ex.ExactZero = ex.ExactZero && x == 0
		}
	}

	for _, f := range faults.Attention() {
		if f.Name != "mask-dropped" {
			continue
		}
		fo, flse := make([]float64, len(o)), make([]float64, len(lse))
		fdq, fdk, fdv := make([]float64, len(q)), make([]float64, len(k)), make([]float64, len(v))
		if err := f.Impl.Run(fo, flse, fdq, fdk, fdv, q, k, v, do, c); err != nil {
			return nil, fmt.Errorf("fault %s: %w", f.Name, err)
		}
		ex.FaultDK, ex.FaultDV = rowNorms(fdk, c.N, c.D), rowNorms(fdv, c.N, c.Dv)
	}
	return ex, nil
}

// rowNorms returns the Euclidean norm of each of the n rows of width w of x
// (the first n·w values: KV head 0 of batch item 0).
func rowNorms(x []float64, n, w int) []float64 {
	out := make([]float64, n)
	for j := range n {
		var s float64
		for _, v := range x[j*w : (j+1)*w] {
			s += v * v
		}
		out[j] = math.Sqrt(s)
	}
	return out
}

func (ex *attentionExample) keyLabels() []string {
	var l []string
	for j := range ex.Config.N {
		l = append(l, fmt.Sprintf("k%d", ex.Config.KeyPos(0, j)))
	}
	return l
}

func (ex *attentionExample) queryLabels() []string {
	var l []string
	for i := range ex.Config.M {
		l = append(l, fmt.Sprintf("q%d", ex.Config.QueryPos(0, i)))
	}
	return l
}

// gqaRow is one query head of the GQA picture.
type gqaRow struct {
	Head, KVHead, Wrong int // Wrong: the fault gqa-mod-mapping's h % Hkv
}

// gqaExample maps Hq=8 query heads to Hkv=2 KV heads with attention.KVHead.
func gqaExample(hq, hkv int) []gqaRow {
	var rows []gqaRow
	for h := range hq {
		rows = append(rows, gqaRow{Head: h, KVHead: attention.KVHead(h, hq, hkv), Wrong: h % hkv})
	}
	return rows
}

// ropeExample rotates one pair of features of a head of width D=8, base
// 10000, across positions 0..ropePositions with both pairings.
type ropeExample struct {
	D         int
	Base      float64
	Freqs     []float64
	Pairs     []int          // the pairs k drawn
	Radius    []float64      // the pair's starting point is (Radius[k], 0)
	Half, Int [][][2]float64 // [pair][position] → rotated point
	MaxDiff   float64        // max |half − interleaved| over all points
}

const ropePositions = 12

func newRopeExample() *ropeExample {
	ex := &ropeExample{D: 8, Base: 10000, Pairs: []int{0, 1, 2}, Radius: []float64{1, 0.72, 0.45}}
	T := ropePositions + 1
	pos := make([]int, T)
	for t := range pos {
		pos[t] = t
	}
	for _, pairing := range []nn.Pairing{nn.Half, nn.Interleaved} {
		r := nn.RoPE[float64]{D: ex.D, Base: ex.Base, Pairing: pairing}
		ex.Freqs = r.Freqs()
		for x, k := range ex.Pairs {
			i0, i1 := k, k+ex.D/2
			if pairing == nn.Interleaved {
				i0, i1 = 2*k, 2*k+1
			}
			in := make([]float64, T*ex.D)
			for t := range T {
				in[t*ex.D+i0] = ex.Radius[x]
			}
			out := make([]float64, len(in))
			r.Forward(out, in, pos, 1, 1, T)
			pts := make([][2]float64, T)
			for t := range T {
				pts[t] = [2]float64{out[t*ex.D+i0], out[t*ex.D+i1]}
			}
			if pairing == nn.Half {
				ex.Half = append(ex.Half, pts)
			} else {
				ex.Int = append(ex.Int, pts)
			}
		}
	}
	for x := range ex.Half {
		for t := range ex.Half[x] {
			for a := range 2 {
				ex.MaxDiff = max(ex.MaxDiff, math.Abs(ex.Half[x][t][a]-ex.Int[x][t][a]))
			}
		}
	}
	return ex
}

// drawFigures writes the report's PNG images into dir.
func drawFigures(dir string, r *lab.Report, ex *attentionExample, rope *ropeExample) error {
	if err := Plot(filepath.Join(dir, sweepPNG), r.Sweep); err != nil {
		return err
	}
	c := ex.Config
	err := plots.HeatmapPNG(filepath.Join(dir, weightsPNG),
		fmt.Sprintf("Attention weights P, head 0: %d new queries after %d cached keys", c.M, c.N-c.M),
		"key (position)", "query (position)", ex.queryLabels(), ex.keyLabels(), ex.P, "masked")
	if err != nil {
		return err
	}
	err = plots.BarsPNG(filepath.Join(dir, gradsPNG),
		fmt.Sprintf("Loss on query row 0 (position %d) only: gradient per key", ex.RowPos),
		"key (position)", "norm of the key's gradient row",
		ex.keyLabels(), []plots.Series{{Name: "‖dK‖ of the key's row", Y: ex.DK}, {Name: "‖dV‖ of the key's row", Y: ex.DV}}, "exactly 0")
	if err != nil {
		return err
	}
	var paths []plots.Path
	for x, k := range rope.Pairs {
		p := plots.Path{Name: fmt.Sprintf("pair %d, θ = %.3g rad per position", k, rope.Freqs[k]), Line: true}
		for t, pt := range rope.Half[x] {
			p.X, p.Y = append(p.X, pt[0]), append(p.Y, pt[1])
			if x == 0 {
				p.Labels = append(p.Labels, fmt.Sprint(t))
			}
		}
		paths = append(paths, p)
	}
	for x := range rope.Pairs {
		p := plots.Path{Rings: true}
		if x == 0 {
			p.Name = "interleaved pairing (rings)"
		}
		for _, pt := range rope.Int[x] {
			p.X, p.Y = append(p.X, pt[0]), append(p.Y, pt[1])
		}
		paths = append(paths, p)
	}
	return plots.PathsPNG(filepath.Join(dir, ropePNG),
		fmt.Sprintf("RoPE: one pair rotated across positions 0..%d (D=%d, base %g)", ropePositions, rope.D, rope.Base),
		paths, len(rope.Pairs))
}
