// Package rerank implements the second stage of code search: a
// cross-encoder that reads a query and one candidate document as a single
// sequence and scores their relevance, re-ordering the top candidates of a
// first-stage retriever (BM25, the dual encoder of package dense, or their
// fusion).
//
// # Model
//
// The sequence is the query's tokens, a separator (the tokenizer's
// end-of-text special token) and the code's tokens, prepared and tokenised
// as the dual encoder does. It goes through the transformer of
// dense.Encoder with bidirectional attention, split as in a modular
// cross-encoder (Gao, Dai and Callan, "Modularized transformer-based
// ranking framework", EMNLP 2020): in the lower blocks, those of a trained
// dual encoder (FromDense), the query and the code are encoded apart, as
// the dual encoder encoded them (dense.Encoder.ForwardSegments); in the
// blocks above, new ones, every query token can attend to every code token,
// so the model can compare the two word by word, which a dual encoder,
// squeezing each side into one vector before they meet, cannot. Each side's
// token vectors are averaged and scaled to unit length, and a learned
// vector w scores their element-wise product (nn.PairPool,
// nn.Listwise). w starts at the dual encoder's 1/τ, so an untrained
// reranker ranks as the dual encoder does, up to the new blocks' small
// initial perturbation.
//
// # Training
//
// Each step takes G training queries. A query's group is its own code (the
// positive) and K−1 hard negatives: code that BM25 or the dual encoder
// ranks high for the query but that is not its answer, mined once before
// training (retrieve.MineHardNegatives, retrieve.MineRanked) with likely false
// negatives dropped. The loss is the softmax cross-entropy of each group
// against its positive (nn.Listwise, whose backward the lab checks
// with finite differences), optimised with AdamW.
//
// # Ranking
//
// Ranker re-scores the top Depth candidates of the first stage and keeps
// the first stage's order below them; the cost is Depth forward passes of
// the cross-encoder per query.
//
// # Files
//
// A checkpoint directory holds config.json and model.safetensors (a Hugging
// Face Llama directory with tied embeddings), tokenizer.json, rerank.json
// (text preparation, sequence limits, separator, pooling) and
// score.safetensors (the score head).
package rerank
