// Package conform runs attnlab's attention checks on implementations that
// are not attnlab's, through an adapter process that speaks the protocol of
// docs/conform-protocol.md, and says which semantics each one has.
package conform

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/attnlab/attnlab/safetensors"
)

// Protocol is the name and version of the protocol.
const Protocol = "attnlab-conform/1"

// Capabilities are what an adapter declares it can do.
type Capabilities struct {
	Name      string   `json:"name"`
	Version   string   `json:"version"`
	DTypes    []string `json:"dtypes"`
	Gradients bool     `json:"gradients"`
	LSE       bool     `json:"lse"`
	GQA       bool     `json:"gqa"`
	Masks     []string `json:"masks"`
	KVCache   bool     `json:"kv_cache"`
	Scale     bool     `json:"scale"`
	// Conventions: it takes the metadata convention (position,
	// bottom-right, top-left) and applies that causal alignment.
	Conventions bool `json:"conventions,omitempty"`
	// Accumulates: it takes gradients dq, dk, dv in the request and adds
	// its own into them (the += contract of attnlab's Go kernels).
	Accumulates bool `json:"accumulates,omitempty"`
}

// Mask kinds of Capabilities.Masks.
const (
	MaskCausal    = "causal"
	MaskBool      = "bool"
	MaskPositions = "positions"
	MaskValidity  = "validity"
	MaskSegments  = "segments"
	MaskWindow    = "window"
)

// Has reports whether the adapter expresses masks of kind k.
func (c Capabilities) Has(k string) bool { return slices.Contains(c.Masks, k) }

// HasDType reports whether the adapter computes in dtype.
func (c Capabilities) HasDType(dtype string) bool { return slices.Contains(c.DTypes, dtype) }

func (c Capabilities) validate() error {
	switch {
	case c.Name == "":
		return errors.New("capabilities: no name")
	case len(c.DTypes) == 0:
		return errors.New("capabilities: no dtype")
	case len(c.Masks) == 0:
		return errors.New("capabilities: no way to express a mask (masks is empty)")
	}
	for _, d := range c.DTypes {
		if d != "float32" && d != "float64" {
			return fmt.Errorf("capabilities: dtype %q (want float32 or float64)", d)
		}
	}
	for _, m := range c.Masks {
		switch m {
		case MaskCausal, MaskBool, MaskPositions, MaskValidity, MaskSegments, MaskWindow:
		default:
			return fmt.Errorf("capabilities: mask kind %q (want causal, bool, positions, validity, segments or window)", m)
		}
	}
	return nil
}

// Request is one attention call. Slices are row-major in the layout of
// DESIGN §1: Q [B,Hq,M,D], K [B,Hkv,N,D], V [B,Hkv,N,Dv], DO [B,Hq,M,Dv].
type Request struct {
	B, Hq, Hkv, M, N, D, Dv int
	DType                   string // "float64" or "float32"
	Q, K, V, DO             []float64
	Causal                  bool
	Scale                   float64 // 0: the implementation's default
	Window                  int
	WantLSE                 bool
	Mask                    []bool  // [B,M,N], true = may attend; nil: none
	QPos, KPos              []int64 // [B,M], [B,N]; nil: none
	QValid, KValid          []int64
	QSeg, KSeg              []int64
	// Convention is the causal alignment to apply, "" for the
	// implementation's own (Capabilities.Conventions).
	Convention string
	// DQ0, DK0, DV0 are gradients to add into (Capabilities.Accumulates);
	// nil for none.
	DQ0, DK0, DV0 []float64
}

// Response is an adapter's answer. Err is set when the implementation
// refused the request (an error response): not a failure of the adapter.
type Response struct {
	O, LSE, DQ, DK, DV []float64
	Err                string
}

// Error is a failure of the adapter itself: it crashed, hung, closed its
// output, or answered outside the protocol. It names the adapter and the
// request.
type Error struct {
	Adapter string // the command
	Request string // "hello", or "attention #17"
	Err     error
	Stderr  string // the adapter's last lines of standard error
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("adapter %q, request %s: %v", e.Adapter, e.Request, e.Err)
	if s := strings.TrimSpace(e.Stderr); s != "" {
		lines := strings.Split(s, "\n")
		msg += "; its stderr ends: " + strings.TrimSpace(lines[len(lines)-1])
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Adapter is a running adapter process.
type Adapter struct {
	Command string
	Caps    Capabilities
	Timeout time.Duration // per request

	cmd      *exec.Cmd
	in       io.WriteCloser
	out      *bufio.Reader
	stderr   *tail
	requests int
	calls    int
	dead     error
}

// Start starts the adapter command (split into words like a shell, with
// single and double quotes) and exchanges the hello. timeout bounds every
// exchange.
func Start(ctx context.Context, command string, timeout time.Duration) (*Adapter, error) {
	words, err := splitWords(command)
	if err != nil {
		return nil, fmt.Errorf("conform: -exec %q: %w", command, err)
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("conform: -exec is empty")
	}
	a := &Adapter{Command: command, Timeout: timeout, stderr: &tail{}}
	a.cmd = exec.CommandContext(ctx, words[0], words[1:]...)
	a.cmd.Stderr = a.stderr
	a.cmd.WaitDelay = time.Second
	if a.in, err = a.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := a.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	a.out = bufio.NewReaderSize(stdout, 1<<16)
	if err := a.cmd.Start(); err != nil {
		return nil, &Error{Adapter: command, Request: "start", Err: err}
	}
	hello := safetensors.New()
	hello.Metadata = map[string]string{"op": "hello", "protocol": Protocol}
	reply, err := a.exchange("hello", hello)
	if err != nil {
		a.Close()
		return nil, err
	}
	caps := reply.Metadata["capabilities"]
	if err := json.Unmarshal([]byte(caps), &a.Caps); err != nil {
		a.Close()
		return nil, a.fail("hello", fmt.Errorf("capabilities %q: %w", abbrev(caps), err))
	}
	if err := a.Caps.validate(); err != nil {
		a.Close()
		return nil, a.fail("hello", err)
	}
	return a, nil
}

// Calls is the number of attention requests answered so far.
func (a *Adapter) Calls() int { return a.calls }

// Close ends the adapter: its input is closed and it must exit; one that
// does not within a second is killed. The process is always reaped.
func (a *Adapter) Close() error {
	if a.cmd == nil || a.cmd.Process == nil {
		return nil
	}
	a.in.Close()
	done := make(chan error, 1)
	go func() { done <- a.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Second):
		a.cmd.Process.Kill()
		return <-done
	}
}

// Attention sends one request and returns the answer.
func (a *Adapter) Attention(r *Request) (*Response, error) {
	a.requests++
	name := "attention #" + strconv.Itoa(a.requests)
	f, err := r.file(a.requests)
	if err != nil {
		return nil, err // a bad request is attnlab's bug, not the adapter's
	}
	reply, err := a.exchange(name, f)
	if err != nil {
		return nil, err
	}
	if msg, ok := reply.Metadata["error"]; ok {
		if len(reply.Tensors) > 0 {
			return nil, a.fail(name, errors.New("an error response with tensors"))
		}
		a.calls++
		return &Response{Err: msg}, nil
	}
	if got := reply.Metadata["request"]; got != strconv.Itoa(a.requests) {
		return nil, a.fail(name, fmt.Errorf("the answer is to request %q", got))
	}
	resp := &Response{}
	type answer struct {
		name  string
		shape []int
		dst   *[]float64
		need  bool
	}
	want := []answer{
		{"o", []int{r.B, r.Hq, r.M, r.Dv}, &resp.O, true},
		{"lse", []int{r.B, r.Hq, r.M}, &resp.LSE, r.WantLSE && a.Caps.LSE},
		{"dq", []int{r.B, r.Hq, r.M, r.D}, &resp.DQ, r.DO != nil && a.Caps.Gradients},
		{"dk", []int{r.B, r.Hkv, r.N, r.D}, &resp.DK, r.DO != nil && a.Caps.Gradients},
		{"dv", []int{r.B, r.Hkv, r.N, r.Dv}, &resp.DV, r.DO != nil && a.Caps.Gradients},
	}
	dtype := safetensors.F64
	if r.DType == "float32" {
		dtype = safetensors.F32
	}
	for _, w := range want {
		t, ok := reply.Tensors[w.name]
		if !ok {
			if w.need {
				return nil, a.fail(name, fmt.Errorf("the answer lacks tensor %q", w.name))
			}
			continue
		}
		if t.DType != dtype {
			return nil, a.fail(name, fmt.Errorf("tensor %q has dtype %s, the request's is %s", w.name, t.DType, dtype))
		}
		x, shape, err := reply.Float64(w.name)
		if err != nil {
			return nil, a.fail(name, err)
		}
		if !slices.Equal(shape, w.shape) {
			return nil, a.fail(name, fmt.Errorf("tensor %q has shape %v, want %v", w.name, shape, w.shape))
		}
		*w.dst = x
	}
	for n := range reply.Tensors {
		if !slices.ContainsFunc(want, func(w answer) bool { return w.name == n }) {
			return nil, a.fail(name, fmt.Errorf("the answer holds an unknown tensor %q", n))
		}
	}
	a.calls++
	return resp, nil
}

// exchange writes one frame and reads one, within the timeout.
func (a *Adapter) exchange(request string, f *safetensors.File) (*safetensors.File, error) {
	if a.dead != nil {
		return nil, a.dead
	}
	data, err := f.MarshalBinary()
	if err != nil {
		return nil, err
	}
	type result struct {
		f   *safetensors.File
		err error
	}
	done := make(chan result, 1)
	go func() {
		var hdr [8]byte
		binary.LittleEndian.PutUint64(hdr[:], uint64(len(data)))
		if _, err := a.in.Write(append(hdr[:], data...)); err != nil {
			done <- result{nil, fmt.Errorf("writing the request: %w (the adapter stopped reading)", err)}
			return
		}
		if _, err := io.ReadFull(a.out, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("the adapter closed its output (it exited or crashed)")
			}
			done <- result{nil, err}
			return
		}
		n := binary.LittleEndian.Uint64(hdr[:])
		if n > 1<<31 {
			done <- result{nil, fmt.Errorf("a frame of %d bytes", n)}
			return
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(a.out, buf); err != nil {
			done <- result{nil, fmt.Errorf("a frame cut short: %w", err)}
			return
		}
		reply, err := safetensors.Parse(buf)
		if err != nil {
			err = fmt.Errorf("the answer is not a safetensors file: %w", err)
		}
		done <- result{reply, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, a.fail(request, r.err)
		}
		return r.f, nil
	case <-time.After(a.Timeout):
		return nil, a.fail(request, fmt.Errorf("no answer within %v", a.Timeout))
	}
}

// fail records the adapter as failed, stops it and returns the error.
func (a *Adapter) fail(request string, err error) error {
	if a.cmd.Process != nil {
		a.cmd.Process.Kill()
	}
	e := &Error{Adapter: a.Command, Request: request, Err: err, Stderr: a.stderr.String()}
	a.dead = e
	return e
}

// file encodes the request as a safetensors file.
func (r *Request) file(id int) (*safetensors.File, error) {
	f := safetensors.New()
	f.Metadata = map[string]string{"op": "attention", "request": strconv.Itoa(id), "causal": strconv.FormatBool(r.Causal),
		"past": strconv.Itoa(r.N - r.M)}
	if r.Scale != 0 {
		f.Metadata["scale"] = strconv.FormatFloat(r.Scale, 'g', -1, 64)
	}
	if r.Window != 0 {
		f.Metadata["window"] = strconv.Itoa(r.Window)
	}
	if r.WantLSE {
		f.Metadata["want_lse"] = "true"
	}
	if r.Convention != "" {
		f.Metadata["convention"] = r.Convention
	}
	put := func(name string, shape []int, x []float64) error {
		if x == nil {
			return nil
		}
		n := 1
		for _, s := range shape {
			n *= s
		}
		if len(x) != n {
			return fmt.Errorf("conform: request %s has %d values, want %d", name, len(x), n)
		}
		if r.DType == "float32" {
			y := make([]float32, len(x))
			for i, v := range x {
				y[i] = float32(v)
			}
			f.SetF32(name, shape, y)
		} else {
			f.SetF64(name, shape, x)
		}
		return nil
	}
	for _, t := range []struct {
		name  string
		shape []int
		x     []float64
	}{
		{"q", []int{r.B, r.Hq, r.M, r.D}, r.Q}, {"k", []int{r.B, r.Hkv, r.N, r.D}, r.K},
		{"v", []int{r.B, r.Hkv, r.N, r.Dv}, r.V}, {"do", []int{r.B, r.Hq, r.M, r.Dv}, r.DO},
		{"dq", []int{r.B, r.Hq, r.M, r.D}, r.DQ0}, {"dk", []int{r.B, r.Hkv, r.N, r.D}, r.DK0}, {"dv", []int{r.B, r.Hkv, r.N, r.Dv}, r.DV0},
	} {
		if err := put(t.name, t.shape, t.x); err != nil {
			return nil, err
		}
	}
	if r.Mask != nil {
		m := make([]int64, len(r.Mask))
		for i, ok := range r.Mask {
			if ok {
				m[i] = 1
			}
		}
		f.SetI64("mask", []int{r.B, r.M, r.N}, m)
	}
	for _, t := range []struct {
		name string
		rows int
		x    []int64
	}{
		{"q_pos", r.M, r.QPos}, {"k_pos", r.N, r.KPos}, {"q_valid", r.M, r.QValid}, {"k_valid", r.N, r.KValid},
		{"q_seg", r.M, r.QSeg}, {"k_seg", r.N, r.KSeg},
	} {
		if t.x != nil {
			f.SetI64(t.name, []int{r.B, t.rows}, t.x)
		}
	}
	return f, nil
}

// tail keeps the last 4 KB written to it: an adapter's standard error.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 4096 {
		t.buf = t.buf[len(t.buf)-4096:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// splitWords splits a command line into words: blanks separate them,
// single quotes keep everything, double quotes keep all but \" and \\.
func splitWords(s string) ([]string, error) {
	var words []string
	var w bytes.Buffer
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				w.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote")
			}
			inWord = true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

func abbrev(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
