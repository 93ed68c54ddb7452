// Package docblock reads and rewrites the generated blocks of the
// documentation: the text between a begin and an end marker of a page,
// which a test checks against its run and rewrites with -update.
package docblock

import (
	"fmt"
	"os"
	"strings"

	"github.com/attnlab/attnlab/internal/atomicfile"
)

// Block is one generated block of a page.
type Block struct {
	Path       string
	begin, end string
	page       string
	i, j       int // the block's text is page[i:j]
}

// Find reads path and finds the block between begin and end (begin
// includes its newline).
func Find(path, begin, end string) (*Block, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := string(data)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return nil, fmt.Errorf("%s has no block between %q and %q", path, begin, end)
	}
	return &Block{Path: path, begin: begin, end: end, page: s, i: i + len(begin), j: j}, nil
}

// Text is the block's text as the page holds it.
func (b *Block) Text() string { return b.page[b.i:b.j] }

// Replace writes the page with text in place of the block's, through a
// temporary file renamed into place.
func (b *Block) Replace(text string) error {
	return atomicfile.WriteFile(b.Path, []byte(b.page[:b.i]+text+b.page[b.j:]), 0o644)
}
