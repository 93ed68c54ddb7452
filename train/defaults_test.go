package train

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/model"
)

// TestDefaultModel: the model of the defaults is valid, and it is the
// model a run at the defaults builds before the tokenizer fixes the
// vocabulary.
func TestDefaultModel(t *testing.T) {
	o := DefaultRunOptions()
	if err := o.Validate(); err != nil {
		t.Errorf("DefaultRunOptions: %v", err)
	}
	c := DefaultModel()
	if err := c.Validate(); err != nil {
		t.Fatalf("DefaultModel: %v", err)
	}
	want := o.Model
	want.VocabSize, want.MaxPositionEmbeddings, want.Kind = o.Vocab, max(o.Window, 256), model.KindLM
	if c != want {
		t.Errorf("DefaultModel() = %+v, want %+v", c, want)
	}
}

func TestDerive(t *testing.T) {
	o := DefaultRunOptions()
	o.Steps, o.Window = 7, 512
	o.Derive()
	if o.Schedule.Total != 7 || o.Model.MaxPositionEmbeddings != 512 {
		t.Errorf("Derive: schedule total %d, positions %d; want 7, 512", o.Schedule.Total, o.Model.MaxPositionEmbeddings)
	}
}

// TestApplyPreset: a preset sets the flags not given, in order; an unknown
// name and a missing flag the preset needs are errors that set nothing.
func TestApplyPreset(t *testing.T) {
	var set []string
	record := func(flag, value string) error {
		set = append(set, flag+"="+value)
		return nil
	}
	p := Presets["pretrain"]
	if err := ApplyPreset("pretrain", map[string]bool{"corpus": true, "steps": true}, record); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, kv := range p.Values {
		if kv[0] != "steps" {
			want = append(want, kv[0]+"="+kv[1])
		}
	}
	if !slices.Equal(set, want) {
		t.Errorf("set %v, want %v", set, want)
	}

	set = nil
	for _, tc := range []struct {
		name string
		want string
	}{
		{"nosuch", `-preset "nosuch": want one of ` + strings.Join(PresetNames(), ", ")},
		{"pretrain", "-preset pretrain needs -corpus DIR (the folder of attnlab corpus fetch)"},
	} {
		if err := ApplyPreset(tc.name, map[string]bool{}, record); err == nil || err.Error() != tc.want {
			t.Errorf("ApplyPreset(%q): %v, want %q", tc.name, err, tc.want)
		}
	}
	if set != nil {
		t.Errorf("a refused preset set %v", set)
	}

	bad := errors.New("bad value")
	if err := ApplyPreset("pretrain", map[string]bool{"corpus": true}, func(string, string) error { return bad }); err != bad {
		t.Errorf("the error of set: got %v", err)
	}
}
