package oracle_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/oracle"
	"github.com/attnlab/attnlab/safetensors"
)

// TestRunRefusesUnknownTensors: a tensor an op does not read is an error
// naming it, for every op; attention's variants (sinks, alibi_slopes) are
// read, never dropped from a plain attention answer.
func TestRunRefusesUnknownTensors(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, op := range oracle.Ops {
		f := safetensors.New()
		f.SetF64("bogus", []int{1}, []float64{1})
		_, err := oracle.Run(op, f, "")
		if err == nil || !strings.Contains(err.Error(), `tensor "bogus": not an input of op `+op) {
			t.Errorf("op %s with a tensor bogus: %v", op, err)
		}
	}
	for _, name := range []string{"sink", "q_mask"} {
		f := refInput(r)
		f.SetF64(name, []int{4}, []float64{0.5, 0.25, 0.125, 0.0625})
		_, err := oracle.Run("attention", f, "")
		if err == nil || !strings.HasPrefix(err.Error(), `tensor "`+name+`": not an input of op attention`) {
			t.Errorf("attention with a tensor %s: %v", name, err)
		}
	}
	plain, err := oracle.Run("attention", refInput(r), "")
	if err != nil {
		t.Fatalf("a plain attention input: %v", err)
	}
	for _, name := range []string{"sinks", "alibi_slopes"} {
		f := refInput(r)
		f.SetF64(name, []int{4}, []float64{0.5, 0.25, 0.125, 0.0625})
		out, err := oracle.Run("attention", f, "")
		if err != nil {
			t.Fatalf("attention with %s: %v", name, err)
		}
		if out.Has("dsinks") != (name == "sinks") {
			t.Errorf("attention with %s: dsinks written: %v", name, out.Has("dsinks"))
		}
		o1, _, _ := out.Float64("o")
		o0, _, _ := plain.Float64("o")
		if len(o1) == len(o0) && o1[0] == o0[0] {
			t.Errorf("attention with %s answers as without it", name)
		}
		f.SetF64(name, []int{3}, []float64{0.5, 0.25, 0.125})
		if _, err := oracle.Run("attention", f, ""); err == nil || !strings.Contains(err.Error(), `tensor "`+name+`": shape [3], want [4]`) {
			t.Errorf("%s of the wrong shape: %v", name, err)
		}
	}
}

// TestRunRefusesOverflow: finite inputs whose scores overflow the dtype give
// an error naming the output tensor, in float32 and in float64, where the
// answer would hold NaN; a padding row's lse = +Inf is an answer, not an
// overflow.
func TestRunRefusesOverflow(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		dtype string
		big   float64
	}{{"float32", 1e20}, {"float64", 1e160}} {
		f := refInput(r)
		for _, name := range []string{"q", "k"} {
			x, shape, _ := f.Float64(name)
			for i := range x {
				x[i] *= tc.big // q·k ~ big², beyond the dtype
			}
			f.SetF64(name, shape, x)
		}
		_, err := oracle.Run("attention", f, tc.dtype)
		if err == nil || !strings.HasPrefix(err.Error(), "oracle: output tensor ") ||
			!strings.Contains(err.Error(), "the "+tc.dtype+" computation overflowed for finite inputs") {
			t.Errorf("%s, q and k scaled by %g: %v", tc.dtype, tc.big, err)
		}
	}
	// a finite input beyond float32 is named before any computation
	f := refInput(r)
	q, qs, _ := f.Float64("q")
	q[5] = 1e39
	f.SetF64("q", qs, q)
	if _, err := oracle.Run("attention", f, "float32"); err == nil || !strings.Contains(err.Error(), `tensor "q": element 5 is 1e+39, beyond float32`) {
		t.Errorf("q[5] = 1e39 with -dtype float32: %v", err)
	}
	if _, err := oracle.Run("attention", f, "float64"); err != nil {
		t.Errorf("q[5] = 1e39 in float64: %v", err)
	}
	f = refInput(r)
	f.SetI64("q_valid", []int{2, 3}, []int64{1, 0, 1, 1, 1, 0})
	out, err := oracle.Run("attention", f, "")
	if err != nil {
		t.Fatalf("padding rows: %v", err)
	}
	lse, _, _ := out.Float64("lse")
	if !math.IsInf(lse[1], 1) {
		t.Errorf("lse of a padding row = %v, want +Inf", lse[1])
	}
}
