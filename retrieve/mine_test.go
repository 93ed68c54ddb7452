package retrieve

import (
	"slices"
	"testing"
)

func TestMineHardNegatives(t *testing.T) {
	pairs := []Pair{
		{Query: "parse the widget header", Code: "func ParseWidgetHeader(b []byte) Header { return parseHeader(b) }"},
		{Query: "parse the gadget header", Code: "func ParseGadgetHeader(b []byte) Header { return parse(b, gadget) }"},
		// the same code as pair 0 up to white space: never a negative of 0
		{Query: "reads a widget header", Code: "func  ParseWidgetHeader(b []byte) Header {\n\treturn parseHeader(b)\n}"},
		{Query: "close the file", Code: "func Close(f *File) error { return f.close() }"},
		{Query: "open the file", Code: "func Open(name string) (*File, error) { return open(name) }"},
	}
	negs, st := MineHardNegatives(pairs, MineOptions{K: 2, Margin: -1, Workers: 2})
	if slices.Contains(negs[0], 2) || slices.Contains(negs[2], 0) {
		t.Errorf("identical code mined as a negative: %v", negs)
	}
	if st.Same == 0 {
		t.Errorf("no candidate dropped as identical: %+v", st)
	}
	for i, n := range negs {
		if slices.Contains(n, i) {
			t.Errorf("query %d: its gold mined as a negative", i)
		}
		if len(n) > 2 {
			t.Errorf("query %d: %d negatives, want at most 2", i, len(n))
		}
	}
	if negs[3] == nil || negs[3][0] != 4 {
		t.Errorf("close the file: negatives %v, want open (4) first", negs[3])
	}
	// a margin of 1 drops every candidate scoring above 0
	negs, st = MineHardNegatives(pairs, MineOptions{K: 2, Margin: 1})
	if st.Near == 0 {
		t.Errorf("margin 1 dropped nothing: %+v %v", st, negs)
	}
}
