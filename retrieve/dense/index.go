package dense

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/attnlab/attnlab/internal/atomicfile"
	"github.com/attnlab/attnlab/retrieve"
	"github.com/attnlab/attnlab/safetensors"
)

// Index file names inside an index directory.
const (
	EmbeddingsFile = "embeddings.safetensors"
	CorpusFile     = "corpus.jsonl"
	EncoderDir     = "encoder"

	embeddingsTensor = "embeddings"
	fingerprintKey   = "encoder_sha256"
)

// Index is a searchable corpus: the documents, their embeddings in a flat
// index, and the model that embeds queries.
type Index struct {
	Model *Model
	Docs  []retrieve.Pair // document i is Docs[i].Code; Docs[i].ID its id
	Flat  *retrieve.Flat
}

// NewIndex embeds the code of docs with m. progress, if not nil, is called
// with the number of documents done.
func NewIndex(ctx context.Context, m *Model, docs []retrieve.Pair, progress func(done int)) (*Index, error) {
	codes := make([]string, len(docs))
	for i, p := range docs {
		codes[i] = p.Code
	}
	vecs, err := m.EmbedCodes(ctx, codes, progress)
	if err != nil {
		return nil, err
	}
	flat := &retrieve.Flat{D: m.Dim(), Vecs: vecs}
	if err := flat.CheckUnit(UnitTol); err != nil {
		return nil, fmt.Errorf("dense: embedding the documents turned non-finite or zero: %w", err)
	}
	return &Index{Model: m, Docs: docs, Flat: flat}, nil
}

// Search returns the k documents nearest to the query, best first, and
// their cosine similarities.
func (x *Index) Search(query string, k int) (docs []int, scores []float64) {
	q := make([]float32, x.Flat.D)
	x.Model.EmbedQuery(q, query)
	docs = x.Flat.Search(q, k)
	scores = make([]float64, len(docs))
	x.Flat.Dots(scores, q, docs)
	return docs, scores
}

// Ranker returns the index as a retrieve.Ranker (retrieve.Dense).
func (x *Index) Ranker() retrieve.Ranker {
	return retrieve.Dense{Query: x.Model.Query(), Index: x.Flat}
}

// Save writes the index directory dir: embeddings.safetensors (the (N, D)
// float32 tensor "embeddings", with the document ids as a JSON list under
// the metadata key "ids"), corpus.jsonl and the encoder checkpoint under
// encoder/. The directory is assembled under a temporary name beside dir
// and renamed into place, so dir holds either the whole new index or what
// it held before.
func (x *Index) Save(dir string) error {
	ids := make([]string, len(x.Docs))
	for i, p := range x.Docs {
		ids[i] = p.ID
	}
	idsJSON, err := json.Marshal(ids)
	if err != nil {
		return fmt.Errorf("dense: %w", err)
	}
	f := safetensors.New()
	f.Metadata["format"] = "pt"
	f.Metadata["ids"] = string(idsJSON)
	f.Metadata["dim"] = strconv.Itoa(x.Flat.D)
	fp, err := x.Model.Fingerprint()
	if err != nil {
		return fmt.Errorf("dense: save index %s: %w", dir, err)
	}
	f.Metadata[fingerprintKey] = fp
	f.SetF32(embeddingsTensor, []int{len(x.Docs), x.Flat.D}, x.Flat.Vecs)

	err = atomicfile.ReplaceDir(dir, func(tmp string) error {
		if err := safetensors.WriteFile(filepath.Join(tmp, EmbeddingsFile), f); err != nil {
			return err
		}
		if err := retrieve.WriteJSONL(filepath.Join(tmp, CorpusFile), x.Docs); err != nil {
			return err
		}
		return x.Model.Save(filepath.Join(tmp, EncoderDir))
	})
	if err != nil {
		return fmt.Errorf("dense: save index %s: %w", dir, err)
	}
	return nil
}

// LoadIndex reads an index directory written by Index.Save. The ids of the
// embeddings must be those of the corpus, in order, and the encoder must be
// the one that made them: Save records its Fingerprint in the embeddings'
// metadata (key "encoder_sha256"). Every embedding must be finite and of
// unit length (within UnitTol): a NaN, an infinity or a zero vector is
// refused, naming the vector (and for zero vectors their count).
func LoadIndex(dir string) (*Index, error) {
	m, err := Load(filepath.Join(dir, EncoderDir))
	if err != nil {
		return nil, err
	}
	docs, err := retrieve.ReadJSONL(filepath.Join(dir, CorpusFile))
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, EmbeddingsFile)
	f, err := safetensors.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("dense: %w", err)
	}
	vecs, shape, err := f.Float32(embeddingsTensor)
	if err != nil {
		return nil, fmt.Errorf("dense: %s: %w", path, err)
	}
	if len(shape) != 2 || shape[0] != len(docs) || shape[1] != m.Dim() {
		return nil, fmt.Errorf("dense: %s: embeddings of shape %v, want [%d %d] (%d documents in %s, width %d)",
			path, shape, len(docs), m.Dim(), len(docs), CorpusFile, m.Dim())
	}
	var ids []string
	if err := json.Unmarshal([]byte(f.Metadata["ids"]), &ids); err != nil {
		return nil, fmt.Errorf("dense: %s: metadata ids: %w", path, err)
	}
	want := make([]string, len(docs))
	for i, p := range docs {
		want[i] = p.ID
	}
	if !slices.Equal(ids, want) {
		return nil, fmt.Errorf("dense: %s: the ids of the embeddings are not those of %s", path, CorpusFile)
	}
	if saved, ok := f.Metadata[fingerprintKey]; ok {
		fp, err := m.Fingerprint()
		if err != nil {
			return nil, err
		}
		if fp != saved {
			return nil, fmt.Errorf("dense: %s: the embeddings were made by another encoder than %s (fingerprint %.12s…, the encoder's %.12s…)",
				dir, filepath.Join(dir, EncoderDir), saved, fp)
		}
	}
	flat := &retrieve.Flat{D: m.Dim(), Vecs: vecs}
	if err := flat.CheckUnit(UnitTol); err != nil {
		return nil, fmt.Errorf("dense: %s: tensor %q: %w", path, embeddingsTensor, err)
	}
	return &Index{Model: m, Docs: docs, Flat: flat}, nil
}

// UnitTol is how far from 1 the norm of a saved embedding may be: the
// encoder writes unit vectors in float32, a few ulps from 1; anything
// further off was not written by it.
const UnitTol = 1e-3
