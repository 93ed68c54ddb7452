package model

import "bytes"

// StopStrings streams generated text and finds the first of its stop
// strings: what may be the beginning of one is held back until the next
// token says whether it is, and the text before a stop string is written,
// the stop string and the rest dropped, as llama.cpp's -r does.
type StopStrings struct {
	Stops []string
	Out   func([]byte) // receives the text that is certainly not a stop string's
	Hit   string       // the stop string found, "" until then

	pending []byte
}

// Add takes the text of a new token and reports whether a stop string has
// appeared.
func (s *StopStrings) Add(b []byte) bool {
	s.pending = append(s.pending, b...)
	at := -1
	for _, stop := range s.Stops {
		if i := bytes.Index(s.pending, []byte(stop)); i >= 0 && (at < 0 || i < at) {
			at, s.Hit = i, stop
		}
	}
	if at >= 0 {
		s.Out(s.pending[:at])
		s.pending = nil
		return true
	}
	keep := 0 // the longest end of pending that begins a stop string
	for _, stop := range s.Stops {
		for k := min(len(stop)-1, len(s.pending)); k > keep; k-- {
			if bytes.HasSuffix(s.pending, []byte(stop[:k])) {
				keep = k
				break
			}
		}
	}
	if n := len(s.pending) - keep; n > 0 {
		s.Out(s.pending[:n])
		s.pending = append([]byte(nil), s.pending[n:]...)
	}
	return false
}

// Flush writes what Add held back.
func (s *StopStrings) Flush() {
	if len(s.pending) > 0 {
		s.Out(s.pending)
		s.pending = nil
	}
}

// StopReason says why a generation of out ended: "stop" (with the stop
// string hit), "eos" (its last token is eos) or "length".
func StopReason(out []int, eos int, hit string) (reason, stop string) {
	switch {
	case hit != "":
		return "stop", hit
	case len(out) > 0 && out[len(out)-1] == eos:
		return "eos", ""
	}
	return "length", ""
}
