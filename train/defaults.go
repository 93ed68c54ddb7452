package train

import (
	"fmt"
	"sort"
	"strings"

	"github.com/attnlab/attnlab/model"
)

// DefaultRunOptions returns the options of a run of attnlab train at its
// flags' defaults (the flags take their defaults from here). The model has
// RMSNorm eps 1e-5, RoPE base 10000 and tied embeddings; call Derive after
// changing the options.
func DefaultRunOptions() RunOptions {
	return RunOptions{
		CorpusMB: 24, ValFrac: 0.05, ValKB: 256, Vocab: 2048,
		Model: model.Config{HiddenSize: 128, NumHiddenLayers: 4, NumAttentionHeads: 4, NumKeyValueHeads: 2, IntermediateSize: 352,
			RMSNormEps: 1e-5, RopeTheta: 10000, TieWordEmbeddings: true},
		Window: 128,
		Options: Options{BatchSize: 16, Accum: 1, Shards: 1, Steps: 1000, Schedule: Schedule{Peak: 3e-3, Min: 3e-4, Warmup: 50},
			Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Clip: 1, Seed: 1},
		InitStd: 0.02, EvalEvery: 100, SaveEvery: 250,
		Out: "attnlab-run",
	}
}

// Derive sets the fields that follow from others: the schedule runs over
// Steps, and the model takes max(Window, 256) positions.
func (o *RunOptions) Derive() {
	o.Schedule.Total = o.Steps
	o.Model.MaxPositionEmbeddings = max(o.Window, 256)
}

// DefaultModel returns the model attnlab train builds at its defaults: the
// model of DefaultRunOptions, derived, with a vocabulary of Vocab ids.
func DefaultModel() model.Config {
	o := DefaultRunOptions()
	o.Derive()
	c := o.Model
	c.VocabSize, c.Kind = o.Vocab, model.KindLM
	return c
}

// A Preset is a documented recipe of attnlab train: flag values, which
// flags given on the command line override. Each is measured in docs/model.md.
type Preset struct {
	Values [][2]string // flag name and value, set in this order
	Needs  [][2]string // flags that must be given with the preset, and what each holds
}

// Presets are the recipes of attnlab train -preset, by name.
var Presets = map[string]Preset{
	// pretrain: the language model shipped in models/lm, on the standard
	// library and the Debian corpus (-corpus is the user's); chosen from
	// the scaling study of docs/model.md.
	"pretrain": {
		Values: [][2]string{
			{"corpus-mb", "0"}, {"val-frac", "0.1"}, {"val-kb", "512"}, {"tokenizer-mb", "32"}, {"vocab", "4096"},
			{"window", "512"}, {"batch", "8"}, {"shards", "2"},
			{"dim", "192"}, {"layers", "6"}, {"heads", "6"}, {"kv-heads", "2"}, {"ffn", "512"},
			{"steps", "8000"}, {"warmup", "200"}, {"lr", "2e-3"}, {"min-lr", "2e-4"}, {"wd", "0.1"},
			{"eval-every", "250"}, {"save-every", "100"},
		},
		Needs: [][2]string{{"corpus", "DIR (the folder of attnlab corpus fetch)"}},
	},
}

// PresetNames returns the names of Presets, sorted.
func PresetNames() []string {
	var names []string
	for n := range Presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ApplyPreset sets, by calling set, the values of the preset called name
// for the flags that given does not hold (the flags given on the command
// line). It is an error when there is no such preset or a flag the preset
// needs is not given; an error of set is returned as is.
func ApplyPreset(name string, given map[string]bool, set func(flag, value string) error) error {
	p, ok := Presets[name]
	if !ok {
		return fmt.Errorf("-preset %q: want one of %s", name, strings.Join(PresetNames(), ", "))
	}
	for _, need := range p.Needs {
		if !given[need[0]] {
			return fmt.Errorf("-preset %s needs -%s %s", name, need[0], need[1])
		}
	}
	for _, kv := range p.Values {
		if !given[kv[0]] {
			if err := set(kv[0], kv[1]); err != nil {
				return err
			}
		}
	}
	return nil
}
