package main

import "testing"

func TestLoops(t *testing.T) {
	rep := func(block []int, n int) []int {
		var out []int
		for range n {
			out = append(out, block...)
		}
		return out
	}
	for _, c := range []struct {
		name   string
		tokens []int
		want   bool
	}{
		{"a block of 5 three times", append([]int{9, 8}, rep([]int{1, 2, 3, 4, 5}, 3)...), true},
		{"a block of 5 twice", rep([]int{1, 2, 3, 4, 5}, 2), false},
		{"one token 12 times", rep([]int{7}, 12), true},
		{"one token 11 times", rep([]int{7}, 11), false},
		{"a block of 2 six times", rep([]int{1, 2}, 6), true},
		{"a block of 2 five times", rep([]int{1, 2}, 5), false},
		{"a block of 64 three times", rep(seq(64), 3), true},
		{"a block of 65 three times", rep(seq(65), 3), false},
		{"no repeat", seq(100), false},
	} {
		if got := Loops(c.tokens); got != c.want {
			t.Errorf("%s: Loops = %v, want %v", c.name, got, c.want)
		}
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i + 100
	}
	return s
}

func TestRepeatedLines(t *testing.T) {
	lines, rep := repeatedLines("\tx := f(a)\n}\n\tx := f(a)\n\tx := f(a)\n\ty := g(b)\n\tx := f(a)")
	if lines != 4 || rep != 2 {
		t.Errorf("repeatedLines: %d lines, %d repeated; want 4 and 2 (the short and the cut last line left out)", lines, rep)
	}
}

func TestClosesAndParses(t *testing.T) {
	prompt := "// F doubles x.\nfunc F(x int) int {\n"
	for _, c := range []struct {
		text string
		want bool
	}{
		{"\treturn 2 * x\n}\n\nfunc G() {", true},
		{"\treturn 2 * x\n}", true},
		{"\treturn 2 * x\n\treturn 2 * x\n\treturn 2 * x", false}, // never closed
		{"\treturn 2 * x +\n}\n", false},                          // closed, does not parse
	} {
		if got := ClosesAndParses(prompt, c.text); got != c.want {
			t.Errorf("%q: %v, want %v", c.text, got, c.want)
		}
	}
}
