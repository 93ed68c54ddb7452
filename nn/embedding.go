package nn

import "fmt"

// Embedding is a token embedding: a lookup of rows of a table (V, D), one row
// per vocabulary entry, as Hugging Face's embed_tokens.weight.
type Embedding[T Float] struct {
	V, D int // vocabulary size and row width
}

// Forward copies, for each of the n = len(tokens) tokens, its table row into
// out (n, D):
//
//	out[i,:] = table[tokens[i],:]
//
// Every token is checked before anything is written.
//
// It panics if V or D is not positive, a token is outside [0, V) (naming its
// index and value), or a slice has the wrong length.
func (e Embedding[T]) Forward(out []T, tokens []int, table []T) {
	e.check("Embedding.Forward", "out", out, tokens, table, "table")
	D := e.D
	for i, tok := range tokens {
		copy(out[i*D:(i+1)*D], table[tok*D:(tok+1)*D])
	}
}

// Backward scatters dout = ∂L/∂out (n, D) into the rows of dtable (V, D):
//
//	dtable[tokens[i],:] += dout[i,:]
//
// A token that occurs several times collects the sum of its rows' gradients.
// Backward adds into dtable; callers zero it. With tied input and output
// embeddings the LM head's weight gradient is added into the same buffer.
//
// It panics if V or D is not positive, a token is outside [0, V), or a slice
// has the wrong length.
func (e Embedding[T]) Backward(dtable, dout []T, tokens []int) {
	e.check("Embedding.Backward", "dout", dout, tokens, dtable, "dtable")
	D := e.D
	for i, tok := range tokens {
		// forward was: out[i,:] = table[tokens[i],:]
		row := dtable[tok*D : (tok+1)*D]
		di := dout[i*D : (i+1)*D]
		row = row[:len(di)]
		for j, g := range di {
			row[j] += g
		}
	}
}

// check validates sizes and every token.
func (e Embedding[T]) check(op, rowsName string, rows []T, tokens []int, table []T, tableName string) {
	mustPositive(op, "V", e.V)
	mustPositive(op, "D", e.D)
	mustLen(op, tableName, len(table), e.V*e.D, "V*D")
	mustLen(op, rowsName, len(rows), len(tokens)*e.D, "len(tokens)*D")
	for i, tok := range tokens {
		if tok < 0 || tok >= e.V {
			panic(fmt.Sprintf("nn: %s: tokens[%d] = %d is outside [0, V) with V = %d", op, i, tok, e.V))
		}
	}
}
