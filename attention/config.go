package attention

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/attnlab/attnlab/internal/vec"
)

// Float is the element type of the attention kernels: the module's one
// constraint (package vec's). The checks run in float64, the fast paths in
// float32.
type Float = vec.Float

// Convention says how a causal mask lines up queries with keys when M != N.
// Peers disagree, so each is named; all three agree when M == N and the
// default positions are used.
type Convention int

const (
	// Positions decides by logical positions: key j is visible to query i iff
	// kpos[j] <= qpos[i]. With the default positions (qpos[i] = N-M+i,
	// kpos[j] = j) it equals BottomRight; unlike BottomRight it stays right
	// under left padding, packing and any explicit positions. The default.
	Positions Convention = iota
	// BottomRight aligns the last query with the last key by array index:
	// j <= i + (N-M). FlashAttention >= 2.1 uses it.
	BottomRight
	// TopLeft aligns the first query with the first key: j <= i, the mask
	// tril(ones(M, N)) that PyTorch's is_causal builds. After a cache of past
	// tokens it hides most of the history from the new chunk.
	TopLeft
)

var conventionNames = [...]string{"position", "bottom-right", "top-left"}

// String returns the convention's name as used on the command line.
func (c Convention) String() string {
	if c < 0 || int(c) >= len(conventionNames) {
		return fmt.Sprintf("Convention(%d)", int(c))
	}
	return conventionNames[c]
}

// ParseConvention returns the convention named s ("position", "bottom-right"
// or "top-left").
func ParseConvention(s string) (Convention, error) {
	for i, n := range conventionNames {
		if s == n {
			return Convention(i), nil
		}
	}
	return 0, fmt.Errorf("attention: unknown convention %q (want %s)", s, strings.Join(conventionNames[:], ", "))
}

// Config describes one attention call: shapes, scale and mask. It holds
// hyper-parameters and mask metadata only, never buffers.
//
// The per-token slices are indexed [b*M+i] for queries and [b*N+j] for keys.
// A nil slice takes its default: positions qpos[i] = N-M+i and kpos[j] = j
// (a cache of N-M past tokens followed by the M new ones), every token valid,
// no segments.
type Config struct {
	B, Hq, Hkv int // batch items, query heads, key/value heads (Hq % Hkv == 0)
	M, N       int // queries (the new chunk) and keys (cache included)
	D, Dv      int // head dimension of Q and K, and of V and O

	Scale float64 // score scale; 0 means 1/sqrt(D)

	Causal     bool
	Convention Convention
	Window     int // 0: unlimited; else key j needs qpos[i] - kpos[j] < Window

	QPos, KPos     []int  // logical positions, [B*M] and [B*N]
	QValid, KValid []bool // validity (false = padding), [B*M] and [B*N]
	QSeg, KSeg     []int  // document segment ids, [B*M] and [B*N]; both or neither

	// The variants of today's models, applied in this order to every score
	// s = scale · q·k before the mask (see Logit):
	//
	//	softcap c > 0:  s ← c · tanh(s / c)            (Gemma 2)
	//	ALiBi slope m_h: s ← s − m_h · |qpos − kpos|   (MPT, BLOOM)
	//
	// and, in the softmax of every row of query head h, a sink logit σ_h
	// that takes part in the denominator and has no value row:
	//
	//	P_j = exp(s_j) / (Σ_j' exp(s_j') + exp(σ_h)),  O = P V
	//
	// With sinks a valid row that sees no key is defined: O = 0, lse = σ_h.
	// Softcap and the slopes are fixed; the sinks are learned, and their
	// gradient comes from SinkGrad.
	Softcap float64   // 0: none
	Alibi   []float64 // [Hq] slopes, or nil
	Sinks   []float64 // [Hq] sink logits, or nil
}

// Logit returns the score s = scale · q·k of query i and key j of batch
// item b and query head h after softcap and ALiBi (Config's variants), the
// number the mask then keeps or hides.
func (c *Config) Logit(s float64, b, h, i, j int) float64 {
	if c.Softcap > 0 {
		s = c.Softcap * math.Tanh(s/c.Softcap)
	}
	if c.Alibi != nil {
		d := c.QueryPos(b, i) - c.KeyPos(b, j)
		if d < 0 {
			d = -d
		}
		s -= c.Alibi[h] * float64(d)
	}
	return s
}

// Plain reports whether c uses none of the variants: no softcap, ALiBi or
// sinks.
func (c *Config) Plain() bool { return c.Softcap == 0 && c.Alibi == nil && c.Sinks == nil }

// ScaleValue returns the scale the call uses: Scale, or 1/sqrt(D) when Scale is 0.
func (c *Config) ScaleValue() float64 {
	if c.Scale != 0 {
		return c.Scale
	}
	return 1 / math.Sqrt(float64(c.D))
}

// QueryPos returns the logical position of query i of batch item b.
func (c *Config) QueryPos(b, i int) int {
	if c.QPos != nil {
		return c.QPos[b*c.M+i]
	}
	return c.N - c.M + i
}

// KeyPos returns the logical position of key j of batch item b.
func (c *Config) KeyPos(b, j int) int {
	if c.KPos != nil {
		return c.KPos[b*c.N+j]
	}
	return j
}

// QueryValid reports whether query i of batch item b is a real token.
func (c *Config) QueryValid(b, i int) bool { return c.QValid == nil || c.QValid[b*c.M+i] }

// KeyValid reports whether key j of batch item b is a real token.
func (c *Config) KeyValid(b, j int) bool { return c.KValid == nil || c.KValid[b*c.N+j] }

// Visible reports whether key j may be read by query i of batch item b. It is
// the specification of the mask:
//
//	qvalid[i] && kvalid[j]
//	  && (no segments || kseg[j] == qseg[i])
//	  && (!causal || dist >= 0)
//	  && (window == 0 || dist < window)
//
// where dist is qpos[i] - kpos[j] under Positions, i + (N-M) - j under
// BottomRight and i - j under TopLeft. Without Causal a window limits only the
// past. A padding query sees nothing: its output is zero and it passes no
// gradient.
func (c *Config) Visible(b, i, j int) bool {
	if !c.QueryValid(b, i) || !c.KeyValid(b, j) {
		return false
	}
	if c.QSeg != nil && c.QSeg[b*c.M+i] != c.KSeg[b*c.N+j] {
		return false
	}
	var dist int
	switch c.Convention {
	case BottomRight:
		dist = i + c.N - c.M - j
	case TopLeft:
		dist = i - j
	default:
		dist = c.QueryPos(b, i) - c.KeyPos(b, j)
	}
	if c.Causal && dist < 0 {
		return false
	}
	return c.Window == 0 || dist < c.Window
}

// Validate reports the first inconsistency in c as an error naming the
// offending field with its oracle-file name (q_pos, k_valid, ...).
func (c *Config) Validate() error {
	dims := []struct {
		name string
		v    int
	}{{"B", c.B}, {"Hq", c.Hq}, {"Hkv", c.Hkv}, {"M", c.M}, {"N", c.N}, {"D", c.D}, {"Dv", c.Dv}}
	for _, d := range dims {
		if d.v < 1 {
			return fmt.Errorf("attention: %s = %d, want >= 1", d.name, d.v)
		}
	}
	if c.Hq%c.Hkv != 0 {
		return fmt.Errorf("attention: Hq = %d is not a multiple of Hkv = %d", c.Hq, c.Hkv)
	}
	if c.Window < 0 {
		return fmt.Errorf("attention: window = %d, want >= 0", c.Window)
	}
	if math.IsNaN(c.Scale) || math.IsInf(c.Scale, 0) {
		return fmt.Errorf("attention: scale = %v is not finite", c.Scale)
	}
	if c.Convention < Positions || c.Convention > TopLeft {
		return fmt.Errorf("attention: unknown convention %d", int(c.Convention))
	}
	if !(c.Softcap >= 0) || math.IsInf(c.Softcap, 0) {
		return fmt.Errorf("attention: softcap = %v, want a finite number >= 0", c.Softcap)
	}
	for _, s := range []struct {
		name string
		v    []float64
	}{{"alibi_slopes", c.Alibi}, {"sinks", c.Sinks}} {
		if s.v != nil && len(s.v) != c.Hq {
			return fmt.Errorf("attention: %s has %d entries, want Hq = %d", s.name, len(s.v), c.Hq)
		}
		for h, x := range s.v {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("attention: %s[%d] = %v is not finite", s.name, h, x)
			}
		}
	}
	bm, bn := c.B*c.M, c.B*c.N
	for _, s := range []struct {
		name string
		got  int
		set  bool
		want int
		dim  string
	}{
		{"q_pos", len(c.QPos), c.QPos != nil, bm, "B*M"},
		{"k_pos", len(c.KPos), c.KPos != nil, bn, "B*N"},
		{"q_valid", len(c.QValid), c.QValid != nil, bm, "B*M"},
		{"k_valid", len(c.KValid), c.KValid != nil, bn, "B*N"},
		{"q_seg", len(c.QSeg), c.QSeg != nil, bm, "B*M"},
		{"k_seg", len(c.KSeg), c.KSeg != nil, bn, "B*N"},
	} {
		if s.set && s.got != s.want {
			return fmt.Errorf("attention: %s has %d entries, want %s = %d", s.name, s.got, s.dim, s.want)
		}
	}
	if (c.QSeg == nil) != (c.KSeg == nil) {
		return errors.New("attention: q_seg and k_seg must be given together")
	}
	for _, s := range []struct {
		name string
		pos  []int
	}{{"q_pos", c.QPos}, {"k_pos", c.KPos}} {
		for x, p := range s.pos {
			if p < 0 {
				return fmt.Errorf("attention: %s[%d] = %d is negative", s.name, x, p)
			}
		}
	}
	return nil
}

// EmptyRowError reports a valid query row that sees no key at all. Such a row
// has no probability distribution to compute, so it is rejected rather than
// turned into NaN or a silent zero row.
type EmptyRowError struct {
	Batch, Row int // batch item and query row (array index)
	Pos        int // the row's logical position
}

func (e *EmptyRowError) Error() string {
	return fmt.Sprintf("attention: batch %d, query row %d (position %d) sees no key: every key is masked", e.Batch, e.Row, e.Pos)
}

// PositionsFromValidity returns logical positions for B rows of T tokens that
// count only real tokens: the first valid token of a row is position 0, and
// each padding token gets the position of the next real token (it is masked
// anyway). This is the left-padding rule: positions never come from array
// indices.
func PositionsFromValidity(valid []bool, B, T int) []int {
	if len(valid) != B*T {
		panic(fmt.Sprintf("attention: PositionsFromValidity: len(valid) = %d, want B*T = %d", len(valid), B*T))
	}
	pos := make([]int, B*T)
	for b := range B {
		n := 0
		for t := range T {
			pos[b*T+t] = n
			if valid[b*T+t] {
				n++
			}
		}
	}
	return pos
}
