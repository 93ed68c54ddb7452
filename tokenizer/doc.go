// Package tokenizer implements a byte-level BPE tokenizer of the GPT-2 and
// tiktoken family [1, 2, 3] for language models trained on Go source.
//
// Text is bytes. The first 256 ids are the bytes themselves, so every input
// encodes, invalid UTF-8 included, and Decode(Encode(x)) == x for all x.
// A pre-tokenizer splits the text into chunks; [Train] learns merges, each
// of which joins an adjacent pair of tokens into a new id, and merges never
// cross a chunk boundary. A [Tokenizer] comes from [Train], [TrainReader],
// [Load] or [ReadJSON]; it is safe for concurrent use.
//
// # Vocabulary
//
// With M merges and S special tokens the ids are
//
//	[0, 256)              byte id
//	[256, 256+M)          merge i = id−256, whose bytes are Token(Left) followed by Token(Right)
//	[256+M, 256+M+S)      special token j = id−256−M, such as EndOfText
//
// The vocabulary size given to Train counts all three: Train(docs, 4096,
// Options{}) learns up to 4096−256−1 = 3839 merges, and EndOfText then
// has the id 4095. [Tokenizer.Encode] never produces a special id, whatever the
// text holds; [Tokenizer.EncodeWithSpecial] turns special token names into
// their ids and [Tokenizer.Special] looks one up. Two merges may spell the
// same bytes (ab·c and a·bc); they are distinct ids that decode alike.
//
// # Pre-tokenization
//
// The pre-tokenizer, recorded as "gocode-v1" in files, adapts GPT-2's
// pattern and tiktoken's cl100k_base pattern [3] to Go source, without
// regular expressions. It reads the text as units, which are UTF-8 encoded
// runes and, where the text is not valid UTF-8, single bytes. Each unit is
// in one class:
//
//	letter        Unicode letters and marks (\p{L}, \p{M}) and '_'
//	digit         Unicode numbers (\p{N})
//	space         ' '
//	layout        '\t' '\n' '\v' '\f' '\r'
//	punctuation   every other rune, and every byte of invalid UTF-8
//
// '_' is a letter so that identifiers such as _Ctype_int or SYS_READ
// stay whole; digits are not, so int64 is "int" then "64". A chunk is the
// first of these that matches where the previous chunk ended:
//
//  1. Whitespace: a run of spaces and layout bytes together, so that a
//     newline keeps its indentation ("\n\t\t"). If the run ends with a
//     space and a non-whitespace unit follows, that space is left out and
//     starts the next chunk, as with GPT-2's \s+(?!\S): "a  b" is "a",
//     " ", " b". A run of exactly that one space is not a chunk: it is
//     the prefix of the chunk of rule 3, 4 or 5 that follows (" err",
//     " 123", " :=").
//  2. One punctuation unit followed by a run of letters: ".Println",
//     "(ctx", "*T", as in cl100k's [^\r\n\p{L}\p{N}]?\p{L}+.
//  3. A run of letters.
//  4. One to three digits: numbers are cut in groups of three from the
//     left, as in cl100k and Llama 3, so no merge spends an id on a long
//     number.
//  5. A run of punctuation, extended by the whitespace run after it if
//     that starts with '\n' or '\r' (less a final space before a word, as
//     in rule 1): " {\n\t\t", "},\n", ")\n". cl100k takes only the
//     newlines; Go's tab indentation is worth keeping with them.
//
// So "if err != nil {\n\t\treturn err\n\t}" is "if", " err", " !=",
// " nil", " {\n\t\t", "return", " err", "\n\t", "}". GPT-2's contraction
// rule ('s, 't, …) is left out: in Go an apostrophe opens a rune literal.
// On Go source, rules 2 and 5 raise the held-out compression of a 4096-id
// vocabulary from 2.45 to 2.65 bytes per token (see Performance). Each
// chunk depends only on the text from its start onwards, so a text can be
// cut after any newline that is followed by a non-whitespace byte and the
// parts pre-tokenized apart; training uses this to count chunks on
// several goroutines. [PreTokenize] returns the chunks.
//
// # Training
//
// Train counts the distinct chunks of the corpus, then repeats: take the
// adjacent pair with the highest count, summed over all chunks weighted by
// their number of occurrences, and replace its occurrences, scanning each
// chunk from the left (in a run a a a of a merge a·a, the first two
// join). Ties go to the pair (a, b) with the lowest id a, then the lowest
// b. The result depends only on the corpus and the options, not on the
// number of goroutines or the order of map iteration.
//
// The counts are kept up to date incrementally, as in the Hugging Face
// tokenizers trainer: an index from each pair to the chunks that hold it
// lets a merge visit only those chunks, and only the pairs next to a
// replaced occurrence change count. A heap orders the pairs by count;
// entries made stale by later changes are dropped when they reach the
// top. The tests compare this, merge by merge, with a trainer that
// recounts everything before each merge.
//
// # Encoding
//
// Encode applies the merges to each chunk by rank: it repeatedly merges
// the leftmost pair of lowest rank. A merge's id only occurs in later
// merges, so this is the same as applying the merges one after the other,
// which is what training did. Chunks of up to 64 bytes use a quadratic
// scan that is fast at that size, longer ones a heap. Each goroutine that
// encodes gets an encoder with its own cache of chunk encodings, so the
// frequent chunks of code (keywords, identifiers, indentation) are merged
// once.
//
// # File format
//
// [Tokenizer.Save] writes, and [Load] reads, a JSON object:
//
//	{
//	  "format": "attnlab-bpe",
//	  "version": 1,
//	  "pretokenizer": "gocode-v1",
//	  "vocab_size": 259,
//	  "merges": [
//	    [104, 105],
//	    [256, 33]
//	  ],
//	  "special_tokens": [
//	    {"id": 258, "content": "<|endoftext|>"}
//	  ]
//	}
//
// merges[i] is the pair of ids [Left, Right] that merge i joins into the
// id 256+i; here 256 is "hi" and 257 is "hi!". special_tokens lists the
// special tokens in id order, each with its id, which must be 256 +
// len(merges) + its index, and its content, a non-empty string.
// vocab_size must equal 256 + len(merges) + len(special_tokens).
//
// Loading is strict: it rejects unknown keys, repeated or miscased
// top-level keys, trailing data, another format, version or
// pretokenizer, a merge that is not a pair of ids or refers to an id not
// defined before it, a repeated merge, merges whose tokens would hold more
// than 64 MiB in all, special tokens that are empty, repeated or
// misnumbered, and a wrong vocab_size. Errors are [*FormatError] values
// naming the field and index at fault, such as
// "tokenizer: merge 17 refers to id 900 beyond the vocabulary: ids
// [0, 273) exist before it". Save replaces the file atomically.
//
// # Performance
//
// Measured on a 2-core x86-64 virtual machine shared with other jobs (load
// average 5 to 7, hence the ranges), with the .go files of GOROOT/src
// (Go 1.26) in a fixed shuffled order: the first 20 MB (1729 files) for
// training, the next 2 MB for testing.
//
//	Train, 4096 ids, 20 MB, fresh process   1.7–2.6 s wall, 0.85–1.3 s CPU
//	Encode, one goroutine, warm cache       40–80 MB/s (84 MB per CPU second)
//	PreTokenize                             110–200 MB/s
//	Held-out compression                    2.65 bytes per token, 3.59 per chunk
//
// BenchmarkTrain and BenchmarkEncode reproduce these with
//
//	go test -run '^$' -bench 'Train|Encode' -benchtime 1x -corpus-mb 20 -vocab 4096
//
// # References
//
// [1] R. Sennrich, B. Haddow, A. Birch. Neural Machine Translation of
// Rare Words with Subword Units. ACL 2016. https://arxiv.org/abs/1508.07909
//
// [2] A. Radford et al. Language Models are Unsupervised Multitask
// Learners, 2019 (GPT-2; byte-level BPE). Pattern in
// https://github.com/openai/gpt-2/blob/master/src/encoder.py
//
// [3] tiktoken, the gpt2 and cl100k_base patterns:
// https://github.com/openai/tiktoken/blob/main/tiktoken_ext/openai_public.py
//
// [4] Hugging Face LLM course, chapter 6, Byte-Pair Encoding
// tokenization: the corpus of TestTrainHandComputed.
// https://huggingface.co/learn/llm-course/chapter6/5
package tokenizer
