package model

import (
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
