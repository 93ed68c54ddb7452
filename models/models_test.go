package models_test

import (
	"path/filepath"
	"testing"

	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/models"
	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/retrieve/dense"
	"github.com/attnlab/attnlab/retrieve/rerank"
)

// TestShippedModelsLoad: each shipped model extracts and loads as the kind
// the commands expect.
func TestShippedModelsLoad(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	lm, err := models.Dir(models.LM)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := model.LoadLM[float32](lm); err != nil {
		t.Errorf("language model: %v", err)
	}
	enc, err := models.Dir(models.Encoder)
	if err != nil {
		t.Fatal(err)
	}
	if err := model.CheckKind(enc, model.KindDualEncoder); err != nil {
		t.Error(err)
	}
	if _, err := dense.Load(enc); err != nil {
		t.Errorf("encoder: %v", err)
	}
	rr, err := models.Dir(models.Reranker)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rerank.Load(rr); err != nil {
		t.Errorf("reranker: %v", err)
	}
	tr, err := models.Dir(models.Translation)
	if err != nil {
		t.Fatal(err)
	}
	if tab, err := retrieve.LoadTranslation(filepath.Join(tr, retrieve.TranslationFile)); err != nil {
		t.Errorf("translation: %v", err)
	} else if tab.Len() == 0 {
		t.Error("translation: no term")
	}
	if _, err := models.Dir("nosuch"); err == nil {
		t.Error("an unknown model name was accepted")
	}
}
