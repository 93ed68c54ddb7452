// Package dense implements the dual encoder of code search: one transformer
// tower shared by queries and code (the common sentence-transformers set-up),
// trained from scratch with the InfoNCE loss of package retrieve.
//
// # Model
//
// The encoder reads a prepared text (Settings.Text): by default the
// code-aware terms of retrieve.Terms joined by spaces, the units BM25 uses,
// so that an identifier such as HasPrefix and the words "has prefix" of a
// query become the same tokens; or the text as written. The prepared text
// is cut into byte-level BPE tokens by a tokenizer learned on the training
// split's code and queries. A sequence of tokens goes through a token embedding, the pre-norm
// blocks of package model with bidirectional attention (or causal, as in a
// language model it starts from: Settings.Causal) and padding masks, and a
// final RMSNorm. Its embedding
// is the mean of the token vectors of its real tokens, scaled to unit
// length, so that a dot product is a cosine. Queries are truncated to
// MaxQuery tokens and code to MaxCode.
//
// # Training
//
// Each step takes B (query, code) pairs of the training split. The code of
// the B pairs, followed by K BM25-mined hard negatives per query
// (retrieve.MineHardNegatives, mined once before training), forms the
// documents; query i's positive is document i and every other document is
// a negative for it, except known false negatives: documents whose code
// equals the positive's up to white space, and the positives of other
// queries with the same text. Those are masked out of the softmax
// (nn.DuplicateMask). Each sequence is mean-pooled at its own length;
// the pooled vectors go through nn.Head (L2 normalisation and nn.InfoNCE,
// the head the lab checks) at a fixed temperature (0.05 by default) or a
// learned one, optimised with AdamW under warmup and cosine decay.
//
// Each sequence is encoded on its own (a batch of one), padded to a
// multiple of 16 tokens: no compute is spent on padding to the longest
// sequence of a batch, and the kernels of package attention and
// internal/vec spread each sequence over the cores.
//
// The loss depends on the encoder only through the embeddings, so the
// effective batch is not bounded by memory: with Options.Chunk the step
// first encodes every sequence keeping only its pooled vector, computes the
// loss and its gradient with respect to those vectors, then encodes the
// sequences again, Chunk at a time, and runs their backward (GradCache,
// Gao et al. 2021). The gradients are the same bit for bit; the cost is one
// more forward pass per sequence.
//
// # Files
//
// A checkpoint directory holds config.json and model.safetensors (a Hugging
// Face Llama directory with tied embeddings, as model.Save writes it; the
// encoder reads it with bidirectional attention), tokenizer.json and
// dense.json (the sequence limits, pooling and temperature). An index
// directory holds embeddings.safetensors (the (N, D) float32 matrix, with
// the document ids in its metadata), corpus.jsonl (the documents, for
// display) and a copy of the checkpoint under encoder/.
package dense
