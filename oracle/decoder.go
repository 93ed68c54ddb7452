package oracle

// The op decoder: a whole Llama-style language model (package model), loaded
// from a checkpoint directory, run forward and backward on a batch of
// tokens. Outputs are the logits, the loss, the number of counted targets
// and the gradient of every parameter under its Hugging Face name.
//
// Every input is checked here, before package model sees it, so that each
// problem is an error naming the tensor or the metadata key.

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"

	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/nn"
	"github.com/attnlab/attnlab/safetensors"
)

// CheckpointKey is the metadata key of the decoder op that holds the path of
// the checkpoint directory (config.json and model.safetensors, as written
// by model.Save or by Hugging Face).
const CheckpointKey = "checkpoint"

// DecoderInputs are the tensor names the decoder op reads: tokens [B, T] and
// the optional targets, valid, seg and pos [B, T], all I64.
var DecoderInputs = []string{"tokens", "targets", "valid", "seg", "pos"}

// RunAt is Run for an input read from a file in directory dir: a relative
// checkpoint path in the metadata of op decoder is resolved against dir,
// where Run resolves it against the working directory. attnlab ref passes
// the directory of its -in file, so that an input file and its checkpoint
// can be moved together.
func RunAt(dir, op string, in *safetensors.File, dtype string) (*safetensors.File, error) {
	if ck := InputPaths(dir, op, in); len(ck) == 1 {
		in = &safetensors.File{Tensors: in.Tensors, Metadata: maps.Clone(in.Metadata)}
		in.Metadata[CheckpointKey] = ck[0]
	}
	return Run(op, in, dtype)
}

// InputPaths returns the files and folders op reads besides its input
// file (the checkpoint of op decoder), resolved as RunAt resolves them.
func InputPaths(dir, op string, in *safetensors.File) []string {
	ck, ok := in.Metadata[CheckpointKey]
	if op != "decoder" || !ok || ck == "" {
		return nil
	}
	if !filepath.IsAbs(ck) {
		ck = filepath.Join(dir, ck)
	}
	return []string{ck}
}

// decoderInputs is a checked decoder input before the checkpoint is read:
// the checkpoint path and the batch, whose values are checked against the
// checkpoint's configuration by check.
type decoderInputs struct {
	checkpoint string
	batch      model.Batch
}

func readDecoder(in *safetensors.File) (*decoderInputs, error) {
	if err := checkNames(in, "decoder", DecoderInputs); err != nil {
		return nil, err
	}
	p := &decoderInputs{}
	err := parseMetadata("decoder", in.Metadata, metaField{CheckpointKey, func(val string) error {
		if val == "" {
			return fmt.Errorf("want the path of a checkpoint directory")
		}
		p.checkpoint = val
		return nil
	}})
	if err != nil {
		return nil, err
	}
	if p.checkpoint == "" {
		return nil, fmt.Errorf("metadata %q: missing; give the path of a checkpoint directory (%s and %s), relative to the input file's directory or absolute",
			CheckpointKey, model.ConfigFile, model.WeightsFile)
	}

	if !in.Has("tokens") {
		return nil, fmt.Errorf("tensor \"tokens\": missing")
	}
	tok, shape, err := in.Int64("tokens")
	if err != nil {
		return nil, err
	}
	if len(shape) != 2 {
		return nil, fmt.Errorf("tensor \"tokens\": shape %v has %d dimensions, want 2 [B T]", shape, len(shape))
	}
	if shape[0] < 1 || shape[1] < 1 {
		return nil, fmt.Errorf("tensor \"tokens\": shape %v has an empty dimension", shape)
	}
	b := &p.batch
	b.B, b.T = shape[0], shape[1]
	b.Tokens = make([]int, len(tok))
	for i, e := range tok {
		b.Tokens[i] = int(e)
	}
	if b.Targets, err = tokenInts(in, "targets", b.B, b.T); err != nil {
		return nil, err
	}
	valid, err := tokenInts(in, "valid", b.B, b.T)
	if err != nil {
		return nil, err
	}
	if valid != nil {
		b.Valid = make([]bool, len(valid))
		for i, e := range valid {
			if e != 0 && e != 1 {
				return nil, fmt.Errorf("tensor \"valid\": %s = %d, want 0 or 1", cell(i, b.T), e)
			}
			b.Valid[i] = e == 1
		}
	}
	if b.Seg, err = tokenInts(in, "seg", b.B, b.T); err != nil {
		return nil, err
	}
	if b.Pos, err = tokenInts(in, "pos", b.B, b.T); err != nil {
		return nil, err
	}
	return p, nil
}

// check checks the values of p's batch against the configuration c of the
// checkpoint: what model.Batch.Check checks, with messages naming the
// tensor, and no target on a padding token.
func (p *decoderInputs) check(c model.Config) error {
	b := &p.batch
	isReal := func(i int) bool { return b.Valid == nil || b.Valid[i] }
	for i, tok := range b.Tokens {
		// padding may hold any id: the model embeds token 0 there
		if isReal(i) && (tok < 0 || tok >= c.VocabSize) {
			return fmt.Errorf("tensor \"tokens\": %s = %d is outside the vocabulary [0, %d) of the checkpoint (vocab_size)",
				cell(i, b.T), tok, c.VocabSize)
		}
	}
	for i, pos := range b.Positions() {
		if pos >= 0 && pos < c.MaxPositionEmbeddings {
			continue
		}
		if b.Pos != nil {
			return fmt.Errorf("tensor \"pos\": %s = %d is outside [0, %d) (max_position_embeddings of the checkpoint)",
				cell(i, b.T), pos, c.MaxPositionEmbeddings)
		}
		return fmt.Errorf("tensor \"tokens\": %s is at position %d (counted over real tokens; no \"pos\" given), outside [0, %d) (max_position_embeddings of the checkpoint)",
			cell(i, b.T), pos, c.MaxPositionEmbeddings)
	}
	for i, tg := range b.Targets {
		switch {
		case tg == nn.DefaultIgnoreIndex:
		case tg < 0 || tg >= c.VocabSize:
			return fmt.Errorf("tensor \"targets\": %s = %d is outside the vocabulary [0, %d) of the checkpoint and is not the ignore index %d",
				cell(i, b.T), tg, c.VocabSize, nn.DefaultIgnoreIndex)
		case !isReal(i):
			return fmt.Errorf("tensor \"targets\": %s = %d is the target of a padding token (valid = 0); padding takes no target (use %d)",
				cell(i, b.T), tg, nn.DefaultIgnoreIndex)
		}
	}
	return nil
}

// cell names element i of a [B, T] tensor as "[row, column]".
func cell(i, T int) string { return fmt.Sprintf("[%d, %d]", i/T, i%T) }

func runDecoder(in *safetensors.File, dtype string) (*safetensors.File, error) {
	p, err := readDecoder(in)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(p.checkpoint)
	switch {
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in the message already
		}
		return nil, fmt.Errorf("metadata %q = %q: %v", CheckpointKey, p.checkpoint, err)
	case !st.IsDir():
		return nil, fmt.Errorf("metadata %q = %q: not a directory; want a checkpoint directory (%s and %s)",
			CheckpointKey, p.checkpoint, model.ConfigFile, model.WeightsFile)
	}
	out := safetensors.New()
	if dtype == "float32" {
		err = decoderCompute[float32](out, p)
	} else {
		err = decoderCompute[float64](out, p)
	}
	if err != nil {
		return nil, err
	}
	targets := "shifted"
	if p.batch.Targets != nil {
		targets = "given"
	}
	out.Metadata = map[string]string{"op": "decoder", "dtype": dtype, CheckpointKey: p.checkpoint, "targets": targets}
	return out, nil
}

func decoderCompute[T nn.Float](out *safetensors.File, p *decoderInputs) error {
	m, params, err := model.Load[T](p.checkpoint)
	if err != nil {
		return fmt.Errorf("metadata %q = %q: %v", CheckpointKey, p.checkpoint, err)
	}
	if err := p.check(m.Config); err != nil {
		return err
	}
	b := &p.batch
	a := m.NewActs(b.B, b.T)
	loss, count, err := m.Forward(a, params, b)
	if err != nil {
		return err // not reached: every input is checked above, and each real token sees itself
	}
	grads := m.NewParams()
	m.Backward(grads, params, a, b)
	safetensors.Set(out, "logits", []int{b.B, b.T, m.Config.VocabSize}, a.Logits)
	safetensors.Set(out, "loss", []int{}, []T{loss})
	out.SetI64("count", []int{}, []int64{int64(count)})
	for _, t := range m.Tensors(grads) {
		safetensors.Set(out, "grad."+t.Name, t.Shape, t.Data)
	}
	return nil
}
