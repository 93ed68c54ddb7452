// Package models holds the models attnlab ships, embedded in the binary so
// that generate, lm-eval, search and retriever eval work with no training:
//
//	lm        the language model of Go source (the default of generate and lm-eval)
//	encoder   the code retriever's dual encoder (the default -model of search and retriever eval)
//	reranker  its reranker (the default -reranker)
//	translation  the term translation table of its hybrid first stage (the default -translation)
//
// weights/README.md says which command produced each. Dir extracts a model
// into the user's cache directory on first use, under a name that includes
// a hash of its files, and reads it from there afterwards.
package models

import (
	"embed"
	"io/fs"
)

//go:embed weights
var weights embed.FS

// The shipped models.
const (
	LM       = "lm"
	Encoder  = "encoder"
	Reranker = "reranker"
	// Translation is a folder holding retrieve.TranslationFile.
	Translation = "translation"
)

// Dir returns a directory holding the files of the shipped model name,
// extracting them on first use. It returns an error naming the model if
// this build ships no such model.
func Dir(name string) (string, error) {
	sub, err := fs.Sub(weights, "weights")
	if err != nil {
		return "", err
	}
	return extract(sub, name, cacheRoot())
}

// Cache returns the folder the shipped models are extracted into: attnlab/models
// in the user's cache directory ($XDG_CACHE_HOME, ~/.cache), or in the
// temporary directory when there is none.
func Cache() string { return cacheRoot() }

// Shipped returns the names of the models this build ships.
func Shipped() []string {
	entries, err := fs.ReadDir(weights, "weights")
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}
