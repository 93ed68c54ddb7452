package dense

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/tokenizer"
)

// TestFromLM: the dual encoder starts with the language model's weights,
// bit for bit, and its tokenizer; a checkpoint of another kind is refused.
func TestFromLM(t *testing.T) {
	tok, err := tokenizer.Train([][]byte{[]byte("func main() { return x + y } // adds the two")}, 270, tokenizer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := tinyConfig()
	cfg.VocabSize, cfg.Kind, cfg.MaxPositionEmbeddings = tok.VocabSize(), model.KindLM, 64
	lm, err := model.New[float32](cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := lm.NewParams()
	lm.Init(p, 0.3, 5)
	var tj bytes.Buffer
	tok.WriteJSON(&tj)
	dir := filepath.Join(t.TempDir(), "lm")
	if err := lm.Save(dir, p, map[string][]byte{model.TokenizerFile: tj.Bytes()}); err != nil {
		t.Fatal(err)
	}
	m, err := FromLM(dir, Settings{MaxQuery: 16, MaxCode: 32, Tau: 0.05}, 0)
	if err != nil {
		t.Fatal(err)
	}
	want, got := lm.Tensors(p), m.Enc.Model.Tensors(m.Enc.Params)
	for i := range want {
		for j := range want[i].Data {
			if got[i].Data[j] != want[i].Data[j] {
				t.Fatalf("%s[%d] = %v, the language model's %v", got[i].Name, j, got[i].Data[j], want[i].Data[j])
			}
		}
	}
	if m.Enc.Model.Config.Kind != model.KindDualEncoder || m.Settings.Text != TextRaw || m.Tok.VocabSize() != tok.VocabSize() {
		t.Errorf("kind %q, text %q, vocabulary %d", m.Enc.Model.Config.Kind, m.Settings.Text, m.Tok.VocabSize())
	}
	enc := filepath.Join(t.TempDir(), "enc")
	if err := m.Save(enc); err != nil {
		t.Fatal(err)
	}
	if _, err := FromLM(enc, Settings{MaxQuery: 16, MaxCode: 32, Tau: 0.05}, 0); err == nil {
		t.Error("a dual encoder taken for a language model")
	}
	if _, err := FromLM(dir, Settings{MaxQuery: 16, MaxCode: 100, Tau: 0.05}, 0); err == nil {
		t.Error("sequences beyond max_position_embeddings accepted")
	}
	// the first block alone: its weights, the embedding's and the norm's
	one, err := FromLM(dir, Settings{MaxQuery: 16, MaxCode: 32, Tau: 0.05}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if n := one.Enc.Model.Config.NumHiddenLayers; n != 1 {
		t.Fatalf("%d layers, want 1", n)
	}
	byName := map[string][]float32{}
	for _, w := range want {
		byName[w.Name] = w.Data
	}
	for _, g := range one.Enc.Model.Tensors(one.Enc.Params) {
		if w := byName[g.Name]; len(w) != len(g.Data) || w[0] != g.Data[0] || w[len(w)-1] != g.Data[len(w)-1] {
			t.Fatalf("%s is not the language model's", g.Name)
		}
	}
	if _, err := FromLM(dir, Settings{MaxQuery: 16, MaxCode: 32, Tau: 0.05}, cfg.NumHiddenLayers+1); err == nil {
		t.Error("more layers than the language model has accepted")
	}
}
