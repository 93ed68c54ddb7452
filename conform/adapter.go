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
	"os"
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
	// Sinks: it takes tensor sinks [Hq], one logit per query head in every
	// row's softmax denominator with no value row, and answers dsinks with
	// the gradients (docs/design.md §3.1).
	Sinks bool `json:"sinks,omitempty"`
	// Softcap: it takes metadata softcap c and caps each scaled score to
	// c·tanh(s/c) before the mask.
	Softcap bool `json:"softcap,omitempty"`
	// Alibi: it takes tensor alibi_slopes [Hq] and subtracts m_h·|qpos −
	// kpos| (logical positions) from each score, after softcap and before
	// the mask.
	Alibi bool `json:"alibi,omitempty"`
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
	// Sinks [Hq], Softcap (0: none) and Alibi [Hq] are the variants of
	// docs/design.md §3.1, each sent only to an implementation that
	// declares it (Capabilities.Sinks, Softcap, Alibi).
	Sinks   []float64
	Softcap float64
	Alibi   []float64
}

// undeclared names the first variant r uses that caps does not declare,
// "" for none.
func (r *Request) undeclared(caps Capabilities) string {
	switch {
	case r.Sinks != nil && !caps.Sinks:
		return "sinks"
	case r.Softcap != 0 && !caps.Softcap:
		return "softcap"
	case r.Alibi != nil && !caps.Alibi:
		return "alibi"
	}
	return ""
}

// Response is an adapter's answer. Err is set when the implementation
// refused the request (an error response): not a failure of the adapter.
type Response struct {
	O, LSE, DQ, DK, DV []float64
	// DSinks [Hq] is the gradient of the sink logits, when sinks and do
	// were sent; nil when the implementation did not return it.
	DSinks []float64
	Err    string
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

// DefaultCloseGrace is how long Close waits for an adapter to exit after
// its input is closed before ending it. It is generous on purpose: a
// well-behaved adapter may take seconds to tear its runtime down (PyTorch
// does), and a slow clean exit is not a failure.
const DefaultCloseGrace = 30 * time.Second

// termGrace is how long an adapter's process group is given to end after
// SIGTERM before SIGKILL.
const termGrace = 500 * time.Millisecond

// Adapter is a running adapter process. It runs in a process group of its
// own: whatever it starts (the python behind a wrapper script, a shell's
// background job) is ended with it.
type Adapter struct {
	Command string
	Caps    Capabilities
	Timeout time.Duration // per request
	// CloseGrace bounds the wait for the adapter's exit after its input
	// closes (DefaultCloseGrace).
	CloseGrace time.Duration

	ctx     context.Context
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Reader
	stderr  *tail
	exited  chan struct{} // closed once the process is reaped
	waitErr error         // cmd.Wait's, set before exited is closed
	stdout  *os.File
	// stderrPipe is copied into stderr until stderrDone is closed.
	stderrPipe *os.File
	stderrDone chan struct{}
	cleanup    func()
	requests   int
	calls      int
	dead       error
	closed     bool
}

// Start starts the adapter command (split into words like a shell, with
// single and double quotes) and exchanges the hello. timeout bounds every
// exchange; when ctx is done the adapter is ended and the exchange under
// way returns ctx's error.
func Start(ctx context.Context, command string, timeout time.Duration) (*Adapter, error) {
	words, err := splitWords(command)
	if err != nil {
		return nil, fmt.Errorf("conform: -exec %q: %w", command, err)
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("conform: -exec is empty")
	}
	return StartProgram(ctx, Program{Name: command, Argv: words}, timeout)
}

// Program is an adapter program to start.
type Program struct {
	Name string   // how errors name it: the command line, or a shipped adapter's name
	Argv []string // the program and its arguments
	Env  []string // added to attnlab's environment ("KEY=value")
	// Cleanup, when not nil, runs once the program has ended (it removes
	// the files the program was written to, say).
	Cleanup func()
}

// StartProgram starts p and exchanges the hello, as Start does.
func StartProgram(ctx context.Context, p Program, timeout time.Duration) (*Adapter, error) {
	if len(p.Argv) == 0 {
		panic("conform: StartProgram with no program")
	}
	a := &Adapter{Command: p.Name, Timeout: timeout, CloseGrace: DefaultCloseGrace, ctx: ctx, stderr: &tail{},
		exited: make(chan struct{}), stderrDone: make(chan struct{}), cleanup: p.Cleanup}
	a.cmd = exec.Command(p.Argv[0], p.Argv[1:]...)
	if len(p.Env) > 0 {
		a.cmd.Env = append(os.Environ(), p.Env...)
	}
	ownGroup(a.cmd)
	// The pipes are ours, not exec's, so that Wait returns as soon as the
	// adapter exits even when what it started still holds them, and so
	// that its stderr can be read to the end before an error is composed.
	var err error
	if a.in, err = a.cmd.StdinPipe(); err != nil {
		a.runCleanup()
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		a.runCleanup()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		a.runCleanup()
		return nil, err
	}
	a.cmd.Stdout, a.cmd.Stderr = outW, errW
	err = a.cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		a.runCleanup()
		return nil, &Error{Adapter: p.Name, Request: "start", Err: err}
	}
	a.stdout, a.stderrPipe = outR, errR
	a.out = bufio.NewReaderSize(outR, 1<<16)
	go func() {
		io.Copy(a.stderr, errR)
		close(a.stderrDone)
	}()
	go func() {
		a.waitErr = a.cmd.Wait()
		close(a.exited)
	}()
	hello := safetensors.New()
	hello.Metadata = map[string]string{"op": "hello", "protocol": Protocol}
	reply, err := a.exchange("hello", hello)
	if err != nil {
		a.Close()
		return nil, err
	}
	caps := reply.Metadata["capabilities"]
	if err := json.Unmarshal([]byte(caps), &a.Caps); err != nil {
		err = a.fail("hello", fmt.Errorf("capabilities %q: %w", abbrev(caps), err))
		a.Close()
		return nil, err
	}
	if err := a.Caps.validate(); err != nil {
		err = a.fail("hello", err)
		a.Close()
		return nil, err
	}
	return a, nil
}

// Calls is the number of attention requests answered so far.
func (a *Adapter) Calls() int { return a.calls }

// Close ends the adapter: its input is closed and it must exit with status
// 0 within CloseGrace, or it is ended (SIGTERM to its process group, then
// SIGKILL) and that is an error. Whatever is left of its process group is
// ended too, and the process is always reaped. The error of a failed exit
// is an *Error; after a failure of the adapter Close returns nil (the
// failure was the error).
func (a *Adapter) Close() error {
	if a.cmd == nil || a.cmd.Process == nil || a.closed {
		return nil
	}
	a.closed = true
	defer a.runCleanup()
	if a.dead != nil {
		a.endGroup()
		return nil
	}
	a.in.Close()
	grace := a.CloseGrace
	if grace <= 0 {
		grace = DefaultCloseGrace
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-a.exited:
		a.endGroup() // what it started and left behind
		if status := exitStatus(a.waitErr); status != "" {
			return a.closeError(fmt.Errorf("%s after its input closed", status))
		}
		return nil
	case <-timer.C:
		a.endGroup()
		return a.closeError(fmt.Errorf("it did not exit within %v of its input closing", grace))
	case <-a.ctx.Done():
		a.endGroup()
		return a.closeError(a.ctx.Err())
	}
}

func (a *Adapter) closeError(err error) error {
	return &Error{Adapter: a.Command, Request: "close", Err: err, Stderr: a.stderr.String()}
}

// exitStatus describes a failed exit ("" for status 0).
func exitStatus(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return fmt.Sprintf("it exited with status %d", ee.ExitCode())
	case errors.As(err, &ee):
		return "it was ended by " + ee.ProcessState.String()
	}
	return err.Error()
}

// endGroup ends the adapter's process group: SIGTERM, then SIGKILL to what
// is left after termGrace. It returns once the adapter is reaped.
func (a *Adapter) endGroup() {
	pid := a.cmd.Process.Pid
	if groupAlive(pid) {
		signalGroup(pid, true)
		deadline := time.Now().Add(termGrace)
		for groupAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if groupAlive(pid) {
			signalGroup(pid, false)
		}
	}
	select {
	case <-a.exited:
	case <-time.After(termGrace):
		a.cmd.Process.Kill() // not in its group any more (it called setpgid itself)
		<-a.exited
	}
	// the whole of its stderr, unless a process outside the group holds
	// the pipe open
	select {
	case <-a.stderrDone:
	case <-time.After(time.Second):
		a.stderrPipe.Close()
		<-a.stderrDone
	}
	a.stdout.Close()
}

func (a *Adapter) runCleanup() {
	if a.cleanup != nil {
		a.cleanup()
		a.cleanup = nil
	}
}

// Attention sends one request and returns the answer.
func (a *Adapter) Attention(r *Request) (*Response, error) {
	if v := r.undeclared(a.Caps); v != "" {
		// never sent: a request the adapter did not declare it can take
		return nil, fmt.Errorf("conform: a request with %s to adapter %q, which does not declare it", v, a.Command)
	}
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
		// dsinks missing is a finding of the card (dσ missing), not a
		// failure of the protocol; an unasked one is
		{"dsinks", []int{r.Hq}, &resp.DSinks, false},
	}
	asked := func(n string) bool { return n != "dsinks" || r.DO != nil && r.Sinks != nil && a.Caps.Gradients }
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
		if !asked(n) || !slices.ContainsFunc(want, func(w answer) bool { return w.name == n }) {
			return nil, a.fail(name, fmt.Errorf("the answer holds an unknown tensor %q", n))
		}
	}
	a.calls++
	return resp, nil
}

// errClosed is the adapter closing its output.
var errClosed = errors.New("the adapter closed its output (it exited or crashed)")

// exchange writes one frame and reads one, within the timeout.
func (a *Adapter) exchange(request string, f *safetensors.File) (*safetensors.File, error) {
	if a.dead != nil {
		return nil, a.dead
	}
	if err := a.ctx.Err(); err != nil {
		return nil, a.fail(request, err)
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
		reply, err := readFrame(a.out)
		done <- result{reply, err}
	}()
	timer := time.NewTimer(a.Timeout)
	defer timer.Stop()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, a.fail(request, r.err)
		}
		return r.f, nil
	case <-timer.C:
		return nil, a.fail(request, fmt.Errorf("no answer within %v", a.Timeout))
	case <-a.ctx.Done():
		return nil, a.fail(request, a.ctx.Err())
	}
}

// readFrame reads one frame: a uint64 length, then a safetensors file of
// that length. What cannot begin a frame (a stray line of text, a blank
// line before the frame) is reported as soon as it is read, quoting it,
// rather than waiting for bytes that will not come.
func readFrame(r *bufio.Reader) (*safetensors.File, error) {
	var hdr [16]byte
	if n, err := io.ReadFull(r, hdr[:8]); err != nil {
		switch {
		case n == 0 && errors.Is(err, io.EOF):
			return nil, errClosed
		case !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF):
			return nil, fmt.Errorf("reading its output: %w", err)
		}
		return nil, fmt.Errorf("the adapter closed its output after %q, within a frame's length", hdr[:n])
	}
	n := binary.LittleEndian.Uint64(hdr[:8])
	// a safetensors file is at least an 8-byte header length and "{}"
	if n < 10 || n > 1<<31 {
		return nil, malformed(r, hdr[:8], fmt.Sprintf("a frame length of %d bytes", n))
	}
	if k, err := io.ReadFull(r, hdr[8:]); err != nil {
		return nil, malformed(r, hdr[:8+k], "the output ended within the frame")
	}
	hl := binary.LittleEndian.Uint64(hdr[8:])
	if hl < 2 || hl > n-8 {
		return nil, malformed(r, hdr[:], fmt.Sprintf("a safetensors header of %d bytes in a frame of %d", hl, n))
	}
	if b, err := r.Peek(1); err != nil || b[0] != '{' {
		return nil, malformed(r, hdr[:], "no JSON header where the safetensors header begins")
	}
	buf := make([]byte, n)
	copy(buf, hdr[8:])
	if _, err := io.ReadFull(r, buf[8:]); err != nil {
		return nil, fmt.Errorf("a frame cut short: %w", err)
	}
	reply, err := safetensors.Parse(buf)
	if err != nil {
		return nil, fmt.Errorf("the answer is not a safetensors file: %w", err)
	}
	return reply, nil
}

// malformed is the error of output that is not a frame, quoting what was
// read and what else is already waiting (up to 64 bytes).
func malformed(r *bufio.Reader, read []byte, why string) error {
	seen := slices.Clone(read)
	if k := min(r.Buffered(), 64-len(seen)); k > 0 {
		more, _ := r.Peek(k)
		seen = append(seen, more...)
	}
	return fmt.Errorf("malformed framing on its standard output (%s): it wrote %q; a frame is a uint64 length, then a safetensors file, and nothing else may go to standard output (a stray print or blank line?)", why, seen)
}

// fail records the adapter as failed, ends it and its process group, and
// returns the error with the end of its stderr, read after the process is
// reaped so that none of it is missing.
func (a *Adapter) fail(request string, err error) error {
	if a.dead != nil {
		return a.dead
	}
	if errors.Is(err, errClosed) {
		// it is probably exiting: its status says why
		select {
		case <-a.exited:
		case <-time.After(time.Second):
		}
	}
	exitedAlone := false
	select {
	case <-a.exited:
		exitedAlone = true
	default:
	}
	a.endGroup()
	if status := exitStatus(a.waitErr); exitedAlone && status != "" {
		err = fmt.Errorf("%w; %s", err, status)
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
	if r.Softcap != 0 {
		f.Metadata["softcap"] = strconv.FormatFloat(r.Softcap, 'g', -1, 64)
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
		{"sinks", []int{r.Hq}, r.Sinks}, {"alibi_slopes", []int{r.Hq}, r.Alibi},
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
