package oracle_test

import (
	"math/rand/v2"
	"strings"

	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/nn"
	"github.com/attnlab/attnlab/safetensors"
)

// decoderModel is a random two-layer checkpoint for the decoder op.
type decoderModel struct {
	name string
	cfg  model.Config
	f32  bool // an F32 checkpoint (a float32 model), else F64
	seed uint64
}

// decoderModels are GQA (the model), GQA with tied embeddings and
// a non-default rope_theta, and MQA with head_dim given (Hq·hd ≠ Dim) saved
// in F32.
var decoderModels = []decoderModel{
	{name: "gqa", seed: 1, cfg: model.Config{
		HiddenSize: 16, IntermediateSize: 24, NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2,
		RMSNormEps: 1e-5, RopeTheta: 10000, VocabSize: 37, MaxPositionEmbeddings: 32,
	}},
	{name: "gqa-tied", seed: 2, cfg: model.Config{
		HiddenSize: 24, IntermediateSize: 20, NumHiddenLayers: 2, NumAttentionHeads: 6, NumKeyValueHeads: 2,
		RMSNormEps: 1e-6, RopeTheta: 500000, VocabSize: 29, MaxPositionEmbeddings: 24, TieWordEmbeddings: true,
	}},
	{name: "mqa-hd6-f32", seed: 3, f32: true, cfg: model.Config{
		HiddenSize: 16, IntermediateSize: 20, NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 1, HeadDim: 6,
		RMSNormEps: 1e-6, RopeTheta: 10000, VocabSize: 41, MaxPositionEmbeddings: 16,
	}},
}

// save writes the model's checkpoint to dir: every projection and the
// embedding from N(0, 0.5²), so that gradients are large, and every RMSNorm
// weight 1 + N(0, 0.2²), so that a norm weight applied to the wrong tensor
// shows.
func (d decoderModel) save(dir string) error {
	if d.f32 {
		return saveRandom[float32](d.cfg, d.seed, dir)
	}
	return saveRandom[float64](d.cfg, d.seed, dir)
}

func saveRandom[T nn.Float](cfg model.Config, seed uint64, dir string) error {
	m, err := model.New[T](cfg)
	if err != nil {
		return err
	}
	p := m.NewParams()
	m.Init(p, 0.5, seed)
	r := rand.New(rand.NewPCG(seed, 99))
	for _, t := range m.Tensors(p) {
		if strings.HasSuffix(t.Name, "norm.weight") {
			for i := range t.Data {
				t.Data[i] = T(1 + 0.2*r.NormFloat64())
			}
		}
	}
	return m.Save(dir, p, nil)
}

// decoderCase is one input of the decoder op: a batch for one of
// decoderModels; nil tensors are absent.
type decoderCase struct {
	name                             string
	model                            int // index into decoderModels
	B, T                             int
	tokens, targets, valid, seg, pos []int64
}

// file returns the case as an input file whose checkpoint metadata is
// checkpoint.
func (c decoderCase) file(checkpoint string) *safetensors.File {
	f := safetensors.New()
	for _, t := range []struct {
		name string
		x    []int64
	}{{"tokens", c.tokens}, {"targets", c.targets}, {"valid", c.valid}, {"seg", c.seg}, {"pos", c.pos}} {
		if t.x != nil {
			f.SetI64(t.name, []int{c.B, c.T}, t.x)
		}
	}
	f.Metadata["checkpoint"] = checkpoint
	f.Metadata["x-case"] = c.name
	return f
}

// batch returns the case as a model.Batch, for the test's own expectations
// (the number of counted targets).
func (c decoderCase) batch() *model.Batch {
	b := &model.Batch{B: c.B, T: c.T, Tokens: ints(c.tokens), Targets: ints(c.targets), Seg: ints(c.seg), Pos: ints(c.pos)}
	if c.valid != nil {
		b.Valid = bools(c.valid)
	}
	return b
}

// count returns the number of targets the loss counts.
func (c decoderCase) count() int {
	n := 0
	for _, tg := range c.batch().ShiftedTargets() {
		if tg != nn.DefaultIgnoreIndex {
			n++
		}
	}
	return n
}

// outputs returns the names and shapes both oracles must write.
func (c decoderCase) outputs() map[string][]int {
	cfg := decoderModels[c.model].cfg
	m, err := model.New[float64](cfg)
	if err != nil {
		panic(err)
	}
	out := map[string][]int{"logits": {c.B, c.T, cfg.VocabSize}, "loss": {}, "count": {}}
	for _, t := range m.Tensors(m.NewParams()) {
		out["grad."+t.Name] = t.Shape
	}
	return out
}

// randTokens returns n token ids in [0, V).
func randTokens(r *rand.Rand, n, V int) []int64 {
	x := make([]int64, n)
	for i := range x {
		x[i] = r.Int64N(int64(V))
	}
	return x
}

// decoderCases returns, for every model: plain; left padding (padding
// holding ids outside the vocabulary); packed documents with trailing
// padding and default positions restarting per document; explicit targets
// with ignores (one on a row's last token); explicit positions with gaps,
// out of index order and up to max_position_embeddings - 1, with a padding
// token. For the first model
// also two cases with no counted target (loss 0, zero gradients). B = 2 and
// T up to 9 throughout.
func decoderCases(r *rand.Rand) []decoderCase {
	var cases []decoderCase
	for mi, dm := range decoderModels {
		V, maxPos := dm.cfg.VocabSize, dm.cfg.MaxPositionEmbeddings
		name := func(s string) string { return dm.name + "/" + s }

		cases = append(cases, decoderCase{name: name("plain"), model: mi, B: 2, T: 7, tokens: randTokens(r, 14, V)})

		lp := decoderCase{name: name("leftpad"), model: mi, B: 2, T: 8, tokens: randTokens(r, 16, V)}
		lp.valid, _ = leftPadPositions([]int{3, 1}, 2, 8)
		lp.tokens[0], lp.tokens[1], lp.tokens[2], lp.tokens[8] = -1, int64(V+3), 0, int64(V) // any id in padding
		cases = append(cases, lp)

		pk := decoderCase{name: name("packed"), model: mi, B: 2, T: 9, tokens: randTokens(r, 18, V)}
		pk.seg = []int64{0, 0, 0, 1, 1, 1, 1, 2, 2, 5, 5, 5, 5, 5, 6, 6, -1, -1}
		pk.valid = []int64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}
		cases = append(cases, pk)

		tg := decoderCase{name: name("targets"), model: mi, B: 2, T: 6, tokens: randTokens(r, 12, V), targets: randTokens(r, 12, V)}
		for i := range tg.targets {
			if r.IntN(3) == 0 && i != 5 && i != 0 {
				tg.targets[i] = nn.DefaultIgnoreIndex
			}
		}
		cases = append(cases, tg)

		// gaps (RoPE sees distances other than the index differences) and, in
		// row 1, positions out of index order (the mask follows positions)
		ps := decoderCase{name: name("pos"), model: mi, B: 2, T: 5, tokens: randTokens(r, 10, V)}
		ps.valid = []int64{1, 1, 1, 1, 1, 0, 1, 1, 1, 1}
		last := int64(maxPos - 1)
		ps.pos = []int64{0, 2, 3, 7, 8, 0, last - 4, last, last - 3, last - 1}
		cases = append(cases, ps)

		if mi == 0 {
			cases = append(cases, decoderCase{name: name("one-token"), model: mi, B: 2, T: 1, tokens: randTokens(r, 2, V)})
			ig := decoderCase{name: name("all-ignored"), model: mi, B: 2, T: 4, tokens: randTokens(r, 8, V), targets: make([]int64, 8)}
			for i := range ig.targets {
				ig.targets[i] = nn.DefaultIgnoreIndex
			}
			cases = append(cases, ig)
		}
	}
	return cases
}
