package model

import (
	"encoding/json"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// bigNumParams is NumParams in exact arithmetic: the elements of the
// embedding, the final norm, the head unless tied, and per layer two
// norms, q and o (H·Dh·D each), k and v (KVH·Dh·D each) and the three
// SwiGLU matrices (D·F each).
func bigNumParams(c Config) *big.Int {
	n := func(x int) *big.Int { return big.NewInt(int64(x)) }
	mul := func(xs ...int) *big.Int {
		p := n(1)
		for _, x := range xs {
			p.Mul(p, n(x))
		}
		return p
	}
	D, F, V, L, dh := c.HiddenSize, c.IntermediateSize, c.VocabSize, c.NumHiddenLayers, c.Head()
	heads := 2
	if c.TieWordEmbeddings {
		heads = 1
	}
	block := mul(2, D)
	block.Add(block, mul(2, c.NumAttentionHeads, dh, D))
	block.Add(block, mul(2, c.NumKeyValueHeads, dh, D))
	block.Add(block, mul(3, D, F))
	total := mul(heads, V, D)
	total.Add(total, n(D))
	return total.Add(total, block.Mul(block, n(L)))
}

// FuzzParseConfig: ParseConfig never panics; its errors are one line
// naming config.json or the field; a config it accepts is valid, counts
// its parameters exactly (no overflow: every size is within the limits
// Validate states) and writes back to a config.json that reads the same.
func FuzzParseConfig(f *testing.F) {
	for _, c := range []Config{tinyConfig(true), tinyConfig(false)} {
		data, err := json.Marshal(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	c := tinyConfig(false)
	c.HeadDim, c.Kind = 6, KindReranker
	bos, eos := 1, 10
	c.BOSTokenID, c.EOSTokenID = &bos, &eos
	data, _ := json.Marshal(c)
	f.Add(data)
	base := `"hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 50`
	for _, s := range []string{
		"{" + base + "}",
		"{" + base + `, "num_key_value_heads": null, "rms_norm_eps": 0, "max_position_embeddings": 64, "num_key_value_heads": 2}`,
		"{" + base + `, "rope_theta": 0}`,
		`{"hidden_size": 1048576, "intermediate_size": 1048576, "num_hidden_layers": 4096, "num_attention_heads": 1, "vocab_size": 1048576, "max_position_embeddings": 16777216}`,
		`{"hidden_size": 1000000000, "intermediate_size": 12, "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 11}`,
		`{"model_type": "gpt2"}`, `{"rope_scaling": {"type": "linear"}}`, `[]`, `{"hidden_size": 1e3}`, ``,
	} {
		f.Add([]byte(s))
	}
	maxInt := big.NewInt(math.MaxInt)
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "model: config") || strings.Contains(msg, "\n") {
				t.Fatalf("error %q is not one line naming config.json or the field", msg)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("ParseConfig accepted a config Validate refuses: %v", err)
		}
		want := bigNumParams(c)
		if want.Cmp(maxInt) >= 0 {
			t.Fatalf("a valid config has %v parameters, beyond an int", want)
		}
		if got := c.NumParams(); int64(got) != want.Int64() {
			t.Fatalf("NumParams = %d, want %v", got, want)
		}
		if a := c.ActsSize(1, 1, false); a <= 0 || a == math.MaxInt {
			t.Fatalf("ActsSize(1, 1) of a valid config = %d", a)
		}
		if _, err := New[float32](c); err != nil && !strings.Contains(err.Error(), "available") {
			t.Fatalf("New of a valid config: %v", err)
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseConfig(out)
		if err != nil {
			t.Fatalf("ParseConfig of the config.json written for an accepted config: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(again, c) {
			t.Fatalf("write and read changed the config: %+v, then %+v", c, again)
		}
	})
}

// TestLoadConfigBounded: Load reads at most MaxConfigBytes of config.json,
// so a config.json that is /dev/zero is refused, naming it, at once.
func TestLoadConfigBounded(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ConfigFile)
	big := append([]byte(`{"hidden_size": 8, "x": "`), strings.Repeat("a", MaxConfigBytes)...)
	if err := os.WriteFile(path, append(big, `"}`...), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "model: " + path + ": larger than 1048576 bytes"
	if _, _, err := Load[float32](dir); err == nil || err.Error() != want {
		t.Errorf("Load of a 1 MiB config.json: %v, want %s", err, want)
	}
	if _, err := ReadKind(dir); err == nil || err.Error() != want {
		t.Errorf("ReadKind of a 1 MiB config.json: %v, want %s", err, want)
	}
	if _, err := os.Stat("/dev/zero"); err != nil {
		return
	}
	os.Remove(path)
	if err := os.Symlink("/dev/zero", path); err != nil {
		t.Skip("no symlink:", err)
	}
	if _, _, err := Load[float32](dir); err == nil || err.Error() != want {
		t.Errorf("Load of a config.json linked to /dev/zero: %v, want %s", err, want)
	}
}
