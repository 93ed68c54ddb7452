package model

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/safetensors"
)

func TestCheckpointRoundTrip(t *testing.T) {
	for _, tied := range []bool{false, true} {
		m, _ := New[float32](tinyConfig(tied))
		p := m.NewParams()
		m.Init(p, 0.02, 3)
		dir := filepath.Join(t.TempDir(), "ckpt")
		if err := m.Save(dir, p, map[string][]byte{"tokenizer.json": []byte("{}")}); err != nil {
			t.Fatal(err)
		}
		m2, p2, err := Load[float32](dir)
		if err != nil {
			t.Fatal(err)
		}
		if m2.Config != m.Config {
			t.Errorf("config %+v, want %+v", m2.Config, m.Config)
		}
		want, got := m.Tensors(p), m2.Tensors(p2)
		for i := range want {
			for j := range want[i].Data {
				if want[i].Data[j] != got[i].Data[j] {
					t.Fatalf("%s[%d] = %v, want %v", got[i].Name, j, got[i].Data[j], want[i].Data[j])
				}
			}
		}
		if b, err := os.ReadFile(filepath.Join(dir, "tokenizer.json")); err != nil || string(b) != "{}" {
			t.Errorf("extra file: %q, %v", b, err)
		}
		// Saving again replaces the checkpoint and leaves no temporary files.
		if err := m.Save(dir, p, nil); err != nil {
			t.Fatal(err)
		}
		entries, _ := os.ReadDir(filepath.Dir(dir))
		if len(entries) != 1 {
			t.Errorf("after a second save the parent holds %d entries, want 1", len(entries))
		}
	}
}

func TestLoadNamesTheProblem(t *testing.T) {
	m, _ := New[float64](tinyConfig(false))
	p := m.NewParams()
	good := filepath.Join(t.TempDir(), "good")
	if err := m.Save(good, p, nil); err != nil {
		t.Fatal(err)
	}
	weights := func(edit func(f *safetensors.File)) func(dir string) {
		return func(dir string) {
			f, err := safetensors.ReadFile(filepath.Join(dir, WeightsFile))
			if err != nil {
				t.Fatal(err)
			}
			edit(f)
			if err := safetensors.WriteFile(filepath.Join(dir, WeightsFile), f); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name string
		edit func(dir string)
		want string
	}{
		{"missing", weights(func(f *safetensors.File) { delete(f.Tensors, "model.layers.1.mlp.up_proj.weight") }),
			`tensor "model.layers.1.mlp.up_proj.weight" missing`},
		{"shape", weights(func(f *safetensors.File) { f.SetF64("model.norm.weight", []int{7}, make([]float64, 7)) }),
			`tensor "model.norm.weight" has shape [7], the config implies [8]`},
		{"extra", weights(func(f *safetensors.File) { f.SetF64("model.layers.2.mlp.up_proj.weight", []int{1}, []float64{0}) }),
			`unexpected tensor "model.layers.2.mlp.up_proj.weight"`},
		{"truncated", func(dir string) {
			path := filepath.Join(dir, WeightsFile)
			b, _ := os.ReadFile(path)
			os.WriteFile(path, b[:len(b)/2], 0o644)
		}, "safetensors"},
		{"config", func(dir string) {
			path := filepath.Join(dir, ConfigFile)
			b, _ := os.ReadFile(path)
			os.WriteFile(path, []byte(strings.Replace(string(b), `"num_key_value_heads": 2`, `"num_key_value_heads": 3`, 1)), 0o644)
		}, "num_attention_heads = 4 is not a multiple of num_key_value_heads = 3"},
	} {
		dir := filepath.Join(t.TempDir(), tc.name)
		os.CopyFS(dir, os.DirFS(good))
		tc.edit(dir)
		_, _, err := Load[float64](dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want one line containing %q", tc.name, err, tc.want)
		}
	}
}

func TestSaveFailureKeepsTheOldCheckpoint(t *testing.T) {
	m, _ := New[float64](tinyConfig(false))
	p := m.NewParams()
	if err := m.Save(filepath.Join(t.TempDir(), "no", "such", "parent"), p, nil); err == nil {
		t.Error("save into a missing parent succeeded")
	}
	dir := filepath.Join(t.TempDir(), "ckpt")
	if err := m.Save(dir, p, nil); err != nil {
		t.Fatal(err)
	}
	// An extra file name that cannot be created makes the second save fail
	// after it has started writing.
	if err := m.Save(dir, p, map[string][]byte{"sub/dir/x": nil}); err == nil {
		t.Fatal("save with an impossible file name succeeded")
	}
	if _, _, err := Load[float64](dir); err != nil {
		t.Errorf("the old checkpoint was damaged: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(dir))
	if len(entries) != 1 {
		t.Errorf("temporary files left: %d entries", len(entries))
	}
}

// TestLoadRefusesNonFiniteWeights: a NaN or an infinity anywhere in the
// weights (or an F64 value that overflows float32) is refused at load, the
// error naming the file, the tensor and the element.
func TestLoadRefusesNonFiniteWeights(t *testing.T) {
	m, _ := New[float64](tinyConfig(false))
	p := m.NewParams()
	m.Init(p, 0.02, 1)
	good := filepath.Join(t.TempDir(), "good")
	if err := m.Save(good, p, nil); err != nil {
		t.Fatal(err)
	}
	const name = "model.layers.1.self_attn.k_proj.weight"
	for _, tc := range []struct {
		what  string
		value float64
		as32  bool
		want  string
	}{
		{"nan", math.NaN(), false, `element 13 (index [1 5]) is NaN`},
		{"inf", math.Inf(-1), false, `element 13 (index [1 5]) is -Inf`},
		{"overflow", 1e300, true, `element 13 (index [1 5]) is 1e+300, beyond the model's precision (+Inf)`},
	} {
		dir := filepath.Join(t.TempDir(), tc.what)
		os.CopyFS(dir, os.DirFS(good))
		path := filepath.Join(dir, WeightsFile)
		f, err := safetensors.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		x, shape, _ := f.Float64(name)
		x[13] = tc.value
		f.SetF64(name, shape, x)
		if err := safetensors.WriteFile(path, f); err != nil {
			t.Fatal(err)
		}
		var lerr error
		if tc.as32 {
			_, _, lerr = Load[float32](dir)
		} else {
			_, _, lerr = Load[float64](dir)
		}
		want := path + `: tensor "` + name + `": ` + tc.want
		if lerr == nil || !strings.Contains(lerr.Error(), want) || strings.Contains(lerr.Error(), "\n") {
			t.Errorf("%s: got %v, want one line containing %q", tc.what, lerr, want)
		}
	}
	if _, _, err := Load[float32](good); err != nil {
		t.Errorf("finite weights: %v", err)
	}
}

// TestConfigTypeErrorsInWords: a config.json field of the wrong JSON type
// is named with what it holds and what it should, not with Go's types.
func TestConfigTypeErrorsInWords(t *testing.T) {
	_, err := ParseConfig([]byte(`{"hidden_size": "x"}`))
	if err == nil || !strings.Contains(err.Error(), "field hidden_size: a string, want an integer") || strings.Contains(err.Error(), "Go struct") {
		t.Errorf("ParseConfig: %v", err)
	}
}
