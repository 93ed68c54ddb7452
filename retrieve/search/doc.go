// Package search puts the retrieval pieces together into what a user
// runs: BM25 and the dual encoder as first stages, their fusion, the
// cross-encoder reranker on top, evaluated by name on any set of
// (query, code) pairs.
package search
