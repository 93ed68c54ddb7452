package model

import (
	"strings"
	"testing"
)

// TestStopStrings: what may begin a stop string is held back, and no
// more; the text before the stop string is written, the rest dropped.
func TestStopStrings(t *testing.T) {
	var out strings.Builder
	st := &StopStrings{Stops: []string{"}\n}"}, Out: func(b []byte) { out.Write(b) }}
	for _, piece := range []string{"a}", "\n", "b}\n", "}c"} {
		if st.Add([]byte(piece)) {
			break
		}
	}
	if out.String() != "a}\nb" || st.Hit != "}\n}" {
		t.Errorf("wrote %q, hit %q; want \"a}\\nb\" and the stop string", out.String(), st.Hit)
	}
	out.Reset()
	st = &StopStrings{Stops: []string{"xyz"}, Out: func(b []byte) { out.Write(b) }}
	st.Add([]byte("abx"))
	if out.String() != "ab" {
		t.Errorf("held back %q, want x alone held", out.String())
	}
	st.Flush()
	if out.String() != "abx" || st.Hit != "" {
		t.Errorf("after Flush %q, hit %q", out.String(), st.Hit)
	}
	for _, c := range []struct {
		out       []int
		hit, want string
	}{{[]int{1, 2}, "}", "stop"}, {[]int{1, 0}, "", "eos"}, {[]int{1, 2}, "", "length"}, {nil, "", "length"}} {
		if got, _ := StopReason(c.out, 0, c.hit); got != c.want {
			t.Errorf("StopReason(%v, %q) = %s, want %s", c.out, c.hit, got, c.want)
		}
	}
}
