package oracle

// The ops rope, rmsnorm, swiglu and block: the pieces of a Llama decoder
// block, and the block itself, on tensors from a file.
//
// Output names follow one rule for every op: the gradient of an activation
// input NAME is "dNAME" (x → dx), the gradient of a weight input NAME is
// "grad.NAME" (w → grad.w, gate_proj → grad.gate_proj), so that no output
// name can be mistaken for an input name.
//
// Every input is checked here, before package nn, attention or model sees it
// (they panic on misuse): each problem is an error naming the tensor or the
// metadata key.

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/internal/vec"
	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/nn"
	"github.com/attnlab/attnlab/safetensors"
)

// ---------------------------------------------------------------- inputs

// checkNames rejects a tensor whose name op does not read, so that a typo
// (dY for dy, a prefixed Hugging Face name) is an error, not a silently
// missing input.
func checkNames(in *safetensors.File, op string, known []string) error {
	for _, name := range in.Names() {
		if !slices.Contains(known, name) {
			return fmt.Errorf("tensor %q: not an input of op %s (inputs: %s)", name, op, strings.Join(known, ", "))
		}
	}
	return nil
}

// floatTensor returns the F32 or F64 tensor name as float64 with its shape.
// It must exist, have at least minDims dimensions and none of them empty.
func floatTensor(in *safetensors.File, name string, minDims int, layout string) ([]float64, []int, error) {
	if !in.Has(name) {
		return nil, nil, fmt.Errorf("tensor %q: missing", name)
	}
	x, shape, err := in.Float64(name)
	if err != nil {
		return nil, nil, err
	}
	if len(shape) < minDims {
		return nil, nil, fmt.Errorf("tensor %q: shape %v has %d dimensions, want %s", name, shape, len(shape), layout)
	}
	for _, d := range shape {
		if d < 1 {
			return nil, nil, fmt.Errorf("tensor %q: shape %v has an empty dimension", name, shape)
		}
	}
	return x, shape, nil
}

// optionalGrad reads the optional output gradient dy, which must have the
// shape of the output (the shape of x for every op here).
func optionalGrad(in *safetensors.File, want []int) ([]float64, error) {
	if !in.Has("dy") {
		return nil, nil
	}
	dy, shape, err := in.Float64("dy")
	if err != nil {
		return nil, err
	}
	if !slices.Equal(shape, want) {
		return nil, fmt.Errorf("tensor \"dy\": shape %v, want %v (the shape of y)", shape, want)
	}
	return dy, nil
}

// tokenInts reads the optional I64 tensor name of shape [B, T] as ints; nil
// when it is absent.
func tokenInts(in *safetensors.File, name string, B, T int) ([]int, error) {
	if !in.Has(name) {
		return nil, nil
	}
	x, shape, err := in.Int64(name)
	if err != nil {
		return nil, err
	}
	if want := []int{B, T}; !slices.Equal(shape, want) {
		return nil, fmt.Errorf("tensor %q: shape %v, want %v [B T]", name, shape, want)
	}
	y := make([]int, len(x))
	for i, e := range x {
		y[i] = int(e)
	}
	return y, nil
}

// positions reads the optional positions name ([B, T]), rejecting negative
// ones; absent, token t of every row is at position t.
func positions(in *safetensors.File, name string, B, T int) ([]int, error) {
	pos, err := tokenInts(in, name, B, T)
	if err != nil {
		return nil, err
	}
	if pos == nil {
		pos = make([]int, B*T)
		for i := range pos {
			pos[i] = i % T
		}
		return pos, nil
	}
	if err := nn.CheckPositions(pos, 0); err != nil {
		return nil, fmt.Errorf("tensor %q: %s", name, strings.TrimPrefix(err.Error(), "nn: "))
	}
	return pos, nil
}

// ---------------------------------------------------------------- metadata

// metaField is a metadata key an op reads and the parser of its value.
type metaField struct {
	key   string
	parse func(val string) error
}

// parseMetadata parses every key of meta with its field, in sorted order. A
// key that is not a field is an error unless it starts with "x-".
func parseMetadata(op string, meta map[string]string, fields ...metaField) error {
	for _, key := range slices.Sorted(maps.Keys(meta)) {
		i := slices.IndexFunc(fields, func(f metaField) bool { return f.key == key })
		if i < 0 {
			if strings.HasPrefix(key, "x-") {
				continue
			}
			if len(fields) == 0 {
				return fmt.Errorf("metadata %q: unknown key; op %s takes no metadata (x-* is free)", key, op)
			}
			known := make([]string, len(fields))
			for j, f := range fields {
				known[j] = f.key
			}
			return fmt.Errorf("metadata %q: unknown key for op %s (known: %s; x-* is free)", key, op, strings.Join(known, ", "))
		}
		if err := fields[i].parse(meta[key]); err != nil {
			return fmt.Errorf("metadata %q = %q: %v", key, meta[key], err)
		}
	}
	return nil
}

// floatField parses a finite number accepted by ok (described by want).
func floatField(dst *float64, ok func(float64) bool, want string) func(string) error {
	return func(val string) error {
		v, err := strconv.ParseFloat(val, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || !ok(v) {
			return fmt.Errorf("want %s", want)
		}
		*dst = v
		return nil
	}
}

// intField parses an integer >= least.
func intField(dst *int, least int) func(string) error {
	return func(val string) error {
		v, err := strconv.Atoi(val)
		if err != nil || v < least {
			return fmt.Errorf("want an integer >= %d", least)
		}
		*dst = v
		return nil
	}
}

func boolField(dst *bool) func(string) error {
	return func(val string) error {
		v, err := strconv.ParseBool(val)
		if err != nil {
			return fmt.Errorf("want true or false")
		}
		*dst = v
		return nil
	}
}

// ---------------------------------------------------------------- outputs

// ---------------------------------------------------------------- rope

// ropeInputs is a checked rope input: x (B, H, T, D), pos (B, T) and the
// optional dy.
type ropeInputs struct {
	B, H, T, D int
	x, dy      []float64
	pos        []int
	rope       nn.RoPE[float64]
}

func readRoPE(in *safetensors.File) (*ropeInputs, error) {
	if err := checkNames(in, "rope", []string{"x", "pos", "dy"}); err != nil {
		return nil, err
	}
	x, xs, err := tensor4(in, "x")
	if err != nil {
		return nil, err
	}
	p := &ropeInputs{B: xs[0], H: xs[1], T: xs[2], D: xs[3], x: x}
	if p.D%2 != 0 {
		return nil, fmt.Errorf("tensor \"x\": head dimension D = %d is odd; RoPE rotates pairs of features", p.D)
	}
	if p.pos, err = positions(in, "pos", p.B, p.T); err != nil {
		return nil, err
	}
	if p.dy, err = optionalGrad(in, xs); err != nil {
		return nil, err
	}
	p.rope = nn.RoPE[float64]{D: p.D, Base: 10000}
	factor := 0.0
	err = parseMetadata("rope", in.Metadata,
		metaField{"pairing", func(val string) error {
			switch val {
			case "half":
				p.rope.Pairing = nn.Half
			case "interleaved":
				p.rope.Pairing = nn.Interleaved
			default:
				return fmt.Errorf("want half or interleaved")
			}
			return nil
		}},
		metaField{"base", floatField(&p.rope.Base, func(v float64) bool { return v > 0 }, "a finite base > 0")},
		metaField{"scaling", func(val string) error {
			switch val {
			case "none":
				p.rope.Scaling.Kind = nn.NoScaling
			case "linear":
				p.rope.Scaling.Kind = nn.LinearScaling
			case "ntk":
				p.rope.Scaling.Kind = nn.NTKScaling
			default:
				return fmt.Errorf("want none, linear or ntk")
			}
			return nil
		}},
		metaField{"factor", floatField(&factor, func(v float64) bool { return v >= 1 }, "a finite factor >= 1")},
	)
	if err != nil {
		return nil, err
	}
	_, hasFactor := in.Metadata["factor"]
	switch kind := p.rope.Scaling.Kind; {
	case kind == nn.NoScaling && hasFactor:
		return nil, fmt.Errorf("metadata \"factor\": given without scaling (set scaling to linear or ntk)")
	case kind != nn.NoScaling && !hasFactor:
		return nil, fmt.Errorf("metadata \"factor\": missing; scaling %s needs a factor >= 1", kind)
	case kind == nn.NTKScaling && p.D == 2:
		return nil, fmt.Errorf("metadata \"scaling\" = \"ntk\": needs head dimension D > 2 (the base is raised to D/(D-2)); tensor \"x\" has D = 2")
	}
	p.rope.Scaling.Factor = factor
	if err := p.rope.Validate(); err != nil {
		return nil, err // not reached: every field is checked above
	}
	return p, nil
}

func runRoPE(in *safetensors.File, dtype string) (*safetensors.File, error) {
	p, err := readRoPE(in)
	if err != nil {
		return nil, err
	}
	out := safetensors.New()
	if dtype == "float32" {
		ropeCompute[float32](out, p)
	} else {
		ropeCompute[float64](out, p)
	}
	out.Metadata = map[string]string{
		"op": "rope", "dtype": dtype, "pairing": p.rope.Pairing.String(), "scaling": p.rope.Scaling.Kind.String(),
	}
	if p.rope.Scaling.Kind != nn.NoScaling {
		out.Metadata["factor"] = strconv.FormatFloat(p.rope.Scaling.Factor, 'g', -1, 64)
	}
	return out, nil
}

func ropeCompute[T nn.Float](out *safetensors.File, p *ropeInputs) {
	r := nn.RoPE[T]{D: p.D, Base: p.rope.Base, Pairing: p.rope.Pairing, Scaling: p.rope.Scaling}
	shape := []int{p.B, p.H, p.T, p.D}
	x := vec.Convert[T](p.x)
	y := make([]T, len(x))
	r.Forward(y, x, p.pos, p.B, p.H, p.T)
	safetensors.Set(out, "y", shape, y)
	if p.dy != nil {
		dx := make([]T, len(x))
		r.Backward(dx, vec.Convert[T](p.dy), p.pos, p.B, p.H, p.T)
		safetensors.Set(out, "dx", shape, dx)
	}
}

// ---------------------------------------------------------------- rmsnorm

// rmsInputs is a checked rmsnorm input: x of any shape (…, D), read as
// (n, D), its weight w (D) and the optional dy.
type rmsInputs struct {
	shape     []int
	n, D      int
	x, w, dy  []float64
	eps       float64
	rowsShape []int // the shape of rstd: x's without the last dimension
}

func readRMSNorm(in *safetensors.File) (*rmsInputs, error) {
	if err := checkNames(in, "rmsnorm", []string{"x", "w", "dy"}); err != nil {
		return nil, err
	}
	x, xs, err := floatTensor(in, "x", 1, "at least 1 [... D]")
	if err != nil {
		return nil, err
	}
	p := &rmsInputs{shape: xs, D: xs[len(xs)-1], x: x, eps: 1e-6, rowsShape: xs[:len(xs)-1]}
	p.n = len(x) / p.D
	w, ws, err := floatTensor(in, "w", 1, "1 [D]")
	if err != nil {
		return nil, err
	}
	if !slices.Equal(ws, []int{p.D}) {
		return nil, fmt.Errorf("tensor \"w\": shape %v, want [%d] (the last dimension of x %v)", ws, p.D, xs)
	}
	p.w = w
	if p.dy, err = optionalGrad(in, xs); err != nil {
		return nil, err
	}
	err = parseMetadata("rmsnorm", in.Metadata,
		metaField{"eps", floatField(&p.eps, func(v float64) bool { return v >= 0 }, "a finite eps >= 0")})
	if err != nil {
		return nil, err
	}
	if p.eps == 0 {
		if i := zeroRow(p.x, p.D); i >= 0 {
			return nil, fmt.Errorf("tensor \"x\": row %d is all zeros and eps = 0: its norm is 0/0", i)
		}
	}
	return p, nil
}

// zeroRow returns the first row of x (rows of D) that is all zeros, or -1.
func zeroRow(x []float64, D int) int {
	for i := 0; i < len(x); i += D {
		if !slices.ContainsFunc(x[i:i+D], func(v float64) bool { return v != 0 }) {
			return i / D
		}
	}
	return -1
}

func runRMSNorm(in *safetensors.File, dtype string) (*safetensors.File, error) {
	p, err := readRMSNorm(in)
	if err != nil {
		return nil, err
	}
	out := safetensors.New()
	if dtype == "float32" {
		rmsCompute[float32](out, p)
	} else {
		rmsCompute[float64](out, p)
	}
	out.Metadata = map[string]string{"op": "rmsnorm", "dtype": dtype, "eps": strconv.FormatFloat(p.eps, 'g', -1, 64)}
	return out, nil
}

func rmsCompute[T nn.Float](out *safetensors.File, p *rmsInputs) {
	m := nn.RMSNorm[T]{D: p.D, Eps: T(p.eps)}
	x, w := vec.Convert[T](p.x), vec.Convert[T](p.w)
	y, rstd := make([]T, len(x)), make([]T, p.n)
	m.Forward(y, rstd, x, w, p.n)
	safetensors.Set(out, "y", p.shape, y)
	safetensors.Set(out, "rstd", p.rowsShape, rstd)
	if p.dy != nil {
		dx, dw := make([]T, len(x)), make([]T, p.D)
		m.Backward(dx, dw, vec.Convert[T](p.dy), x, w, rstd, p.n)
		safetensors.Set(out, "dx", p.shape, dx)
		safetensors.Set(out, "grad.w", []int{p.D}, dw)
	}
}

// ---------------------------------------------------------------- swiglu

// swigluInputs is a checked swiglu input: x (…, D) read as (n, D), the
// weights gate_proj and up_proj (F, D), down_proj (D, F), the optional dy.
type swigluInputs struct {
	shape                 []int
	n, D, F               int
	x, gate, up, down, dy []float64
}

// weight reads the 2-D weight name and checks it has the shape want, where
// want[i] < 0 takes any size; layout describes want for the message.
func weight(in *safetensors.File, name string, want []int, layout string) ([]float64, []int, error) {
	w, ws, err := floatTensor(in, name, 0, "")
	if err != nil {
		return nil, nil, err
	}
	ok := len(ws) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = want[i] < 0 || ws[i] == want[i]
	}
	if !ok {
		return nil, nil, fmt.Errorf("tensor %q: shape %v, want %s", name, ws, layout)
	}
	return w, ws, nil
}

func readSwiGLU(in *safetensors.File) (*swigluInputs, error) {
	if err := checkNames(in, "swiglu", []string{"x", "gate_proj", "up_proj", "down_proj", "dy"}); err != nil {
		return nil, err
	}
	x, xs, err := floatTensor(in, "x", 1, "at least 1 [... D]")
	if err != nil {
		return nil, err
	}
	p := &swigluInputs{shape: xs, D: xs[len(xs)-1], x: x}
	p.n = len(x) / p.D
	gate, gs, err := weight(in, "gate_proj", []int{-1, p.D}, fmt.Sprintf("[F %d] (F hidden, D = %d the last dimension of x)", p.D, p.D))
	if err != nil {
		return nil, err
	}
	p.gate, p.F = gate, gs[0]
	if p.up, _, err = weight(in, "up_proj", []int{p.F, p.D}, fmt.Sprintf("[%d %d] (the shape of gate_proj)", p.F, p.D)); err != nil {
		return nil, err
	}
	if p.down, _, err = weight(in, "down_proj", []int{p.D, p.F}, fmt.Sprintf("[%d %d] (the transpose of gate_proj %v)", p.D, p.F, gs)); err != nil {
		return nil, err
	}
	if p.dy, err = optionalGrad(in, xs); err != nil {
		return nil, err
	}
	if err := parseMetadata("swiglu", in.Metadata); err != nil {
		return nil, err
	}
	return p, nil
}

func runSwiGLU(in *safetensors.File, dtype string) (*safetensors.File, error) {
	p, err := readSwiGLU(in)
	if err != nil {
		return nil, err
	}
	out := safetensors.New()
	if dtype == "float32" {
		swigluCompute[float32](out, p)
	} else {
		swigluCompute[float64](out, p)
	}
	out.Metadata = map[string]string{"op": "swiglu", "dtype": dtype}
	return out, nil
}

func swigluCompute[T nn.Float](out *safetensors.File, p *swigluInputs) {
	s := nn.SwiGLU[T]{D: p.D, F: p.F}
	x, gate, up, down := vec.Convert[T](p.x), vec.Convert[T](p.gate), vec.Convert[T](p.up), vec.Convert[T](p.down)
	y := make([]T, len(x))
	a, u, h := make([]T, p.n*p.F), make([]T, p.n*p.F), make([]T, p.n*p.F)
	s.Forward(y, a, u, h, x, gate, up, down, p.n)
	safetensors.Set(out, "y", p.shape, y)
	if p.dy != nil {
		dx := make([]T, len(x))
		dGate, dUp, dDown := make([]T, len(gate)), make([]T, len(up)), make([]T, len(down))
		s.Backward(dx, dGate, dUp, dDown, vec.Convert[T](p.dy), x, gate, up, down, a, u, h, p.n)
		safetensors.Set(out, "dx", p.shape, dx)
		safetensors.Set(out, "grad.gate_proj", []int{p.F, p.D}, dGate)
		safetensors.Set(out, "grad.up_proj", []int{p.F, p.D}, dUp)
		safetensors.Set(out, "grad.down_proj", []int{p.D, p.F}, dDown)
	}
}

// ---------------------------------------------------------------- block

// BlockWeightNames are the tensor names of a decoder block's weights in the
// block op: Hugging Face's per-layer names without "model.layers.{i}.", in
// the order of model.BlockWeights.
var BlockWeightNames = []string{
	"input_layernorm.weight",
	"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
	"post_attention_layernorm.weight",
	"mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
}

// blockFields returns the fields of w in the order of BlockWeightNames.
func blockFields[T nn.Float](w *model.BlockWeights[T]) []*[]T {
	return []*[]T{&w.AttnNorm, &w.Attn.Wq, &w.Attn.Wk, &w.Attn.Wv, &w.Attn.Wo, &w.MLPNorm, &w.Gate, &w.Up, &w.Down}
}

// blockInputs is a checked block input: x (B, T, Dim), the weights in the
// order of BlockWeightNames, the optional dy, and the attention
// configuration with the tokens' positions, validity and segments.
type blockInputs struct {
	B, T, Dim, F     int
	Hq, Hkv, HeadDim int
	eps, theta       float64
	x, dy            []float64
	w                [][]float64
	cfg              *attention.Config
}

func readBlock(in *safetensors.File) (*blockInputs, error) {
	known := append([]string{"x", "dy", "pos", "valid", "seg"}, BlockWeightNames...)
	if err := checkNames(in, "block", known); err != nil {
		return nil, err
	}
	x, xs, err := floatTensor(in, "x", 3, "3 [B T Dim]")
	if err != nil {
		return nil, err
	}
	if len(xs) != 3 {
		return nil, fmt.Errorf("tensor \"x\": shape %v has %d dimensions, want 3 [B T Dim]", xs, len(xs))
	}
	p := &blockInputs{B: xs[0], T: xs[1], Dim: xs[2], x: x, eps: 1e-6, theta: 10000}
	causal, window := true, 0
	err = parseMetadata("block", in.Metadata,
		metaField{"num_attention_heads", intField(&p.Hq, 1)},
		metaField{"num_key_value_heads", intField(&p.Hkv, 1)},
		metaField{"head_dim", intField(&p.HeadDim, 1)},
		metaField{"rms_norm_eps", floatField(&p.eps, func(v float64) bool { return v >= 0 }, "a finite eps >= 0")},
		metaField{"rope_theta", floatField(&p.theta, func(v float64) bool { return v > 0 }, "a finite base > 0")},
		metaField{"causal", boolField(&causal)},
		metaField{"window", intField(&window, 0)},
	)
	if err != nil {
		return nil, err
	}
	// heads: HF's defaults are num_key_value_heads = num_attention_heads and
	// head_dim = hidden_size / num_attention_heads
	switch {
	case p.Hq == 0:
		return nil, fmt.Errorf("metadata \"num_attention_heads\": missing")
	case p.Hkv == 0:
		p.Hkv = p.Hq
	case p.Hq%p.Hkv != 0:
		return nil, fmt.Errorf("metadata \"num_key_value_heads\" = \"%d\": does not divide num_attention_heads = %d", p.Hkv, p.Hq)
	}
	if p.HeadDim == 0 {
		if p.Dim%p.Hq != 0 {
			return nil, fmt.Errorf("metadata \"num_attention_heads\" = \"%d\": does not divide the width %d of x; give head_dim", p.Hq, p.Dim)
		}
		p.HeadDim = p.Dim / p.Hq
		if p.HeadDim%2 != 0 {
			return nil, fmt.Errorf("metadata \"head_dim\": missing, and Dim/num_attention_heads = %d/%d = %d is odd; RoPE rotates pairs of features", p.Dim, p.Hq, p.HeadDim)
		}
	} else if p.HeadDim%2 != 0 {
		return nil, fmt.Errorf("metadata \"head_dim\" = \"%d\": odd; RoPE rotates pairs of features", p.HeadDim)
	}

	// weights: every one present, then every shape
	for _, name := range BlockWeightNames {
		if !in.Has(name) {
			return nil, fmt.Errorf("tensor %q: missing", name)
		}
	}
	gate, gs, err := weight(in, "mlp.gate_proj.weight", []int{-1, p.Dim}, fmt.Sprintf("[F %d] (F = intermediate_size, %d the width of x)", p.Dim, p.Dim))
	if err != nil {
		return nil, err
	}
	p.F = gs[0]
	heads := fmt.Sprintf("num_attention_heads·head_dim = %d·%d", p.Hq, p.HeadDim)
	kvHeads := fmt.Sprintf("num_key_value_heads·head_dim = %d·%d", p.Hkv, p.HeadDim)
	why := []string{
		"the width of x", heads + ", the width of x", kvHeads + ", the width of x", kvHeads + ", the width of x",
		"the width of x, " + heads, "the width of x",
		"", "the shape of mlp.gate_proj.weight", fmt.Sprintf("the transpose of mlp.gate_proj.weight %v", gs),
	}
	p.w = make([][]float64, len(BlockWeightNames))
	for i, name := range BlockWeightNames {
		if name == "mlp.gate_proj.weight" {
			p.w[i] = gate
			continue
		}
		want := p.weightShape(i)
		if p.w[i], _, err = weight(in, name, want, fmt.Sprintf("%v (%s)", want, why[i])); err != nil {
			return nil, err
		}
	}
	if p.dy, err = optionalGrad(in, xs); err != nil {
		return nil, err
	}
	if p.eps == 0 {
		if i := zeroRow(p.x, p.Dim); i >= 0 {
			return nil, fmt.Errorf("tensor \"x\": token %d is all zeros and rms_norm_eps = 0: its norm is 0/0", i)
		}
	}

	// tokens: self-attention, so queries and keys are the same tokens
	c := &attention.Config{
		B: p.B, Hq: p.Hq, Hkv: p.Hkv, M: p.T, N: p.T, D: p.HeadDim, Dv: p.HeadDim,
		Causal: causal, Window: window,
	}
	if c.QPos, err = positions(in, "pos", p.B, p.T); err != nil {
		return nil, err
	}
	if in.Has("valid") {
		v, err := tokenInts(in, "valid", p.B, p.T)
		if err != nil {
			return nil, err
		}
		c.QValid = make([]bool, len(v))
		for i, e := range v {
			if e != 0 && e != 1 {
				return nil, fmt.Errorf("tensor \"valid\": element %d is %d, want 0 or 1", i, e)
			}
			c.QValid[i] = e == 1
		}
	}
	if c.QSeg, err = tokenInts(in, "seg", p.B, p.T); err != nil {
		return nil, err
	}
	c.KPos, c.KValid, c.KSeg = c.QPos, c.QValid, c.QSeg
	if err := c.Validate(); err != nil {
		return nil, err // not reached: every field is checked above
	}
	p.cfg = c
	return p, nil
}

func runBlock(in *safetensors.File, dtype string) (*safetensors.File, error) {
	p, err := readBlock(in)
	if err != nil {
		return nil, err
	}
	out := safetensors.New()
	if dtype == "float32" {
		err = blockCompute[float32](out, p)
	} else {
		err = blockCompute[float64](out, p)
	}
	if err != nil {
		return nil, err
	}
	out.Metadata = map[string]string{"op": "block", "dtype": dtype}
	return out, nil
}

func blockCompute[T nn.Float](out *safetensors.File, p *blockInputs) error {
	k := model.Block[T]{
		Attn: attention.Layer[T]{
			Dim: p.Dim, Hq: p.Hq, Hkv: p.Hkv, HeadDim: p.HeadDim,
			RoPE: nn.RoPE[T]{D: p.HeadDim, Base: p.theta}, // half pairing: HF checkpoints
		},
		MLP:  nn.SwiGLU[T]{D: p.Dim, F: p.F},
		Norm: nn.RMSNorm[T]{D: p.Dim, Eps: T(p.eps)},
	}
	w := k.NewBlockWeights()
	for i, f := range blockFields(w) {
		*f = vec.Convert[T](p.w[i])
	}
	x := vec.Convert[T](p.x)
	y := make([]T, len(x))
	a := k.NewBlockActs(p.B, p.T)
	if err := k.Forward(y, a, x, w, p.cfg); err != nil {
		return err
	}
	safetensors.Set(out, "y", []int{p.B, p.T, p.Dim}, y)
	if p.dy == nil {
		return nil
	}
	dx, dw := make([]T, len(x)), k.NewBlockWeights()
	k.Backward(dx, dw, vec.Convert[T](p.dy), x, w, a, p.cfg)
	safetensors.Set(out, "dx", []int{p.B, p.T, p.Dim}, dx)
	for i, f := range blockFields(dw) {
		safetensors.Set(out, "grad."+BlockWeightNames[i], p.weightShape(i), *f)
	}
	return nil
}

// weightShape returns the shape of weight i of BlockWeightNames.
func (p *blockInputs) weightShape(i int) []int {
	q, kv := p.Hq*p.HeadDim, p.Hkv*p.HeadDim
	shapes := [][]int{{p.Dim}, {q, p.Dim}, {kv, p.Dim}, {kv, p.Dim}, {p.Dim, q}, {p.Dim}, {p.F, p.Dim}, {p.F, p.Dim}, {p.Dim, p.F}}
	return shapes[i]
}
