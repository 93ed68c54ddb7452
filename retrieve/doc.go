// Package retrieve implements code search: a dataset of natural-language
// queries paired with the Go functions they describe, a code-aware
// tokenizer, a BM25 baseline, the Ranker interface that dense, hybrid and
// reranking systems share, and the evaluation that compares them.
//
// # Task and data
//
// BuildDataset turns a tree of Go source into Pairs: the query is the first
// paragraph of a function's doc comment without its leading name ("Foo
// returns the length" → "returns the length"), the document is the
// function's source without the comment. Relevance is therefore known
// without labelling: each query has exactly one correct document, its own.
//
// That definition has a weak spot that matters more for training a dual
// encoder than for BM25: any other document that also answers the query is
// scored as wrong, a false negative, and the same holds for in-batch
// negatives in contrastive training. BuildDataset removes the two sources of
// such pairs that can be detected mechanically: build-tag variants of one
// function (file_unix.go and file_windows.go share the comment but not the
// code) and code that is identical up to white space. Queries that are
// generic ("returns the string form of x") still occur in several packages;
// Stats.SharedQuery counts them.
//
// Splits are by package directory, so the test split measures search in
// packages never seen in training, the situation of a user searching a new
// code base, rather than recall of memorised neighbours.
//
// # Conventions
//
// Documents of a corpus are numbered from 0. In a dataset split, document i
// is Pairs[i].Code and the gold of query i is document i. Rankers return
// documents best first, with equal scores in increasing document order.
// Terms is the tokenizer of both queries and documents.
//
// Evaluation reports two protocols. Whole-corpus ranking (MRR@10,
// Recall@1/5/10, nDCG@10) asks the system to find the gold among every code
// document of the split: the task a code search tool faces. The
// CodeSearchNet protocol ranks the gold against 999 random distractors; its
// MRR is comparable with published numbers but easier, since random
// distractors are rarely near misses.
//
// # References
//
// [1] S. Robertson and H. Zaragoza, The probabilistic relevance framework:
// BM25 and beyond, Foundations and Trends in IR 3(4), 2009.
//
// [2] H. Husain et al., CodeSearchNet challenge: evaluating the state of
// semantic code search, arXiv:1909.09436, 2019.
//
// [3] G. Cormack, C. Clarke and S. Büttcher, Reciprocal rank fusion
// outperforms Condorcet and individual rank learning methods, SIGIR 2009.
//
// [4] V. Karpukhin et al., Dense passage retrieval for open-domain question
// answering, EMNLP 2020.
//
// [5] R. Nogueira and K. Cho, Passage re-ranking with BERT,
// arXiv:1901.04085, 2019.
//
// [6] L. Gao, Z. Dai and J. Callan, Rethink training of BERT rerankers in
// multi-stage retrieval pipeline, ECIR 2021.
package retrieve
