package main

import (
	"flag"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/attnlab/attnlab/models"
	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/retrieve/rerank"
	"github.com/attnlab/attnlab/retrieve/search"
)

// hybridFlags defines -fusion and -bm25-weight, which say how the hybrid
// first stage combines BM25 and the encoder, into h; the function returned
// checks them after parsing.
func hybridFlags(fs *flag.FlagSet, h *retrieve.Hybrid, fuseWeight *float64) func() error {
	fs.Float64Var(fuseWeight, "fuse-weight", rerank.DefaultFuseWeight, "fused reranking: the first stage's and the reranker's scores, each rescaled to [0, 1] over the re-scored candidates, are added with the first stage's weighed this and the reranker's the rest; 0: the reciprocal rank fusion of their ranks instead")
	fusion := fs.String("fusion", "blend", "how the hybrid first stage combines BM25 and the encoder: blend (their scores, each rescaled to [0, 1] over the candidates, BM25's weighed -bm25-weight and the encoder's the rest) or rrf (reciprocal rank fusion of their ranks)")
	fs.Float64Var(&h.BM25Weight, "bm25-weight", 0, fmt.Sprintf("with -fusion blend: the weight of BM25's score, in (0, 1) (default: %g over pairs, where the doc comment is the query; %g over a folder, doc comments indexed)", retrieve.DefaultBM25Weight, search.DefaultBM25Weight))
	return func() error {
		switch *fusion {
		case "blend":
		case "rrf":
			h.RRF = true
		default:
			return usagef("-fusion %q: want blend or rrf", *fusion)
		}
		given := false
		fs.Visit(func(f *flag.Flag) { given = given || f.Name == "bm25-weight" })
		if h.Validate() != nil || given && h.BM25Weight == 0 {
			// 0 stands for the command's default only when the flag is not given
			return usagef("-bm25-weight %v: want a value in (0, 1) (the encoder's weight is the rest)", h.BM25Weight)
		}
		if !(*fuseWeight >= 0 && *fuseWeight < 1) {
			return usagef("-fuse-weight %v: want 0 (ranks) or a value in (0, 1)", *fuseWeight)
		}
		return nil
	}
}

// fieldFlags defines -fields, the weights of a function's fields in the
// first stage, into f; the function returned checks it after parsing.
func fieldFlags(fs *flag.FlagSet, f *search.Fields) func() error {
	d := search.DefaultFields
	spec := fs.String("fields", fmt.Sprintf("doc=%g,sig=%g,body=%g,dense-doc=%g,stem=%d", d.Doc, d.Sig, d.Body, d.DocDense, b2i(d.Stem)),
		"weights of a function's fields: BM25F's doc comment, signature and body, and the encoder's cosine with the doc comment beside that with the code (weight 1); stem=1 folds plurals onto singulars in BM25F's terms; k1 and doc-b set BM25F's saturation and the doc's length normalisation")
	return func() error {
		*f = search.DefaultFields
		for item := range strings.SplitSeq(*spec, ",") {
			name, val, ok := strings.Cut(strings.TrimSpace(item), "=")
			w, err := strconv.ParseFloat(val, 64)
			if !ok || err != nil {
				return usagef("-fields %q: want NAME=WEIGHT,… with names doc, sig, body, dense-doc", *spec)
			}
			switch name {
			case "doc":
				f.Doc = w
			case "sig":
				f.Sig = w
			case "body":
				f.Body = w
			case "dense-doc":
				f.DocDense = w
			case "stem":
				f.Stem = w != 0
			case "k1":
				f.K1 = w
			case "doc-b":
				f.DocB = w
			default:
				return usagef("-fields: unknown field %q (known: doc, sig, body, dense-doc, stem, k1, doc-b)", name)
			}
		}
		if err := f.Validate(); err != nil {
			return usagef("-fields %q: want finite weights >= 0, one of doc, sig, body above 0", *spec)
		}
		return nil
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// translationFlags defines -translation and -translate-alpha, the term
// translation table that expands BM25's queries in the hybrid, into h; the
// function returned, told whether the command searches folders (doc
// comments indexed) or pairs, fills the weight's default and loads the
// table.
func translationFlags(fs *flag.FlagSet, h *retrieve.Hybrid) func(folder bool) error {
	table := fs.String("translation", "shipped", "term translation table that expands BM25's queries in the hybrid first stage: a file retriever translate wrote, shipped (the one attnlab ships) or none")
	alpha := fs.Float64("translate-alpha", 0, fmt.Sprintf("weight of the translated terms in BM25's queries (default: %g over pairs, where the doc comment is the query; %g over a folder, doc comments indexed)", retrieve.DefaultTranslateAlpha, search.DefaultTranslateAlpha))
	return func(folder bool) error {
		given := false
		fs.Visit(func(f *flag.Flag) { given = given || f.Name == "translate-alpha" })
		switch {
		case given && (!(*alpha >= 0) || math.IsInf(*alpha, 0)):
			return usagef("-translate-alpha %v: want a finite value >= 0", *alpha)
		case given:
			h.TranslateAlpha = *alpha
		case folder:
			h.TranslateAlpha = search.DefaultTranslateAlpha
		default:
			h.TranslateAlpha = retrieve.DefaultTranslateAlpha
		}
		path := *table
		switch path {
		case "none":
			h.Translation, h.TranslateAlpha = nil, 0
			return nil
		case "shipped":
			dir, err := models.Dir(models.Translation)
			if err != nil {
				return fmt.Errorf("-translation shipped: %w", err)
			}
			path = filepath.Join(dir, retrieve.TranslationFile)
		case "":
			return usagef(`-translation "": want a file, shipped or none`)
		}
		t, err := retrieve.LoadTranslation(path)
		if err != nil {
			return err
		}
		h.Translation = t
		return nil
	}
}
