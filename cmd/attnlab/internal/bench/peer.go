package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"
)

// A peer is another engine's program that bench starts once and talks to
// over its standard input and output, one JSON object per line each way
// (docs/bench-peers.md): a hello line first, then one answer per request.
// Its standard error is kept (the last lines) for the reason of a failure.

// PeerProgram is how to run a peer.
type PeerProgram struct {
	Name string   // the column: "ggml", "onnxruntime"
	Argv []string // the program and its arguments (bench adds -threads N)
	Env  []string // added to bench's environment ("KEY=value")
	// Cleanup, when not nil, runs once the program has ended.
	Cleanup func()
}

// PeerHello is the peer's first line.
type PeerHello struct {
	Peer    string   `json:"peer"`
	Version string   `json:"version"`
	Build   string   `json:"build"`
	Threads int      `json:"threads"`
	Ops     []string `json:"ops"`
}

// peerRequest is one request of the protocol.
type peerRequest struct {
	Op      string `json:"op"` // attn_fwd, decode, sgemm
	B       int    `json:"b,omitempty"`
	Hq      int    `json:"hq,omitempty"`
	Hkv     int    `json:"hkv,omitempty"`
	M       int    `json:"m,omitempty"`
	N       int    `json:"n,omitempty"`
	K       int    `json:"k,omitempty"` // sgemm
	D       int    `json:"d,omitempty"`
	Causal  bool   `json:"causal"`
	KVDType string `json:"kv_dtype,omitempty"`
	Reps    int    `json:"reps"`
	Inputs  string `json:"inputs,omitempty"`
	Output  string `json:"output,omitempty"`
}

// peerAnswer is one answer.
type peerAnswer struct {
	OK      bool      `json:"ok"`
	Seconds []float64 `json:"seconds"`
	Error   string    `json:"error"`
	Kernel  string    `json:"kernel"` // optional: what the peer ran
}

// Peer is a running peer.
type Peer struct {
	Name  string
	Hello PeerHello

	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan peerLine
	stderr  *tailBuffer
	done    chan struct{} // closed when the process has exited
	waitErr error
	cleanup func()
	dead    error // set once a request failed at the transport level: the peer is not asked again
}

type peerLine struct {
	data []byte
	err  error
}

// peerStartTimeout bounds the wait for the hello line (node loading ONNX
// Runtime takes a second or two on an idle machine).
const peerStartTimeout = 60 * time.Second

// StartPeer starts p with "-threads threads" appended and reads its hello.
// The peer must say it runs threads threads and name itself p.Name.
func StartPeer(ctx context.Context, p PeerProgram, threads int) (*Peer, error) {
	if len(p.Argv) == 0 {
		panic("bench: StartPeer with no program")
	}
	argv := append(slices.Clone(p.Argv), "-threads", fmt.Sprint(threads))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), p.Env...)
	peer := &Peer{Name: p.Name, cmd: cmd, stderr: &tailBuffer{max: 4096}, done: make(chan struct{}), cleanup: p.Cleanup,
		lines: make(chan peerLine, 1)}
	cmd.Stderr = peer.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	peer.stdin = stdin
	if err := cmd.Start(); err != nil {
		if p.Cleanup != nil {
			p.Cleanup()
		}
		return nil, fmt.Errorf("%s: %w", p.Name, err)
	}
	go func() {
		r := bufio.NewReaderSize(stdout, 1<<16)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				peer.lines <- peerLine{err: err}
				close(peer.lines)
				return
			}
			peer.lines <- peerLine{data: line}
		}
	}()
	go func() {
		peer.waitErr = cmd.Wait()
		close(peer.done)
	}()
	line, err := peer.read(ctx, peerStartTimeout)
	if err == nil {
		err = json.Unmarshal(line, &peer.Hello)
		if err != nil {
			err = fmt.Errorf("its first line is not a hello: %v: %.200q", err, line)
		}
	}
	if err == nil && peer.Hello.Peer != p.Name {
		err = fmt.Errorf("its hello names peer %q", peer.Hello.Peer)
	}
	if err == nil && peer.Hello.Threads != threads {
		err = fmt.Errorf("it runs %d threads, asked for %d", peer.Hello.Threads, threads)
	}
	if err != nil {
		peer.Close()
		return nil, fmt.Errorf("%s: %w", p.Name, err)
	}
	return peer, nil
}

// Supports reports whether the peer's hello lists op.
func (p *Peer) Supports(op string) bool { return slices.Contains(p.Hello.Ops, op) }

// read returns the next line, or an error when the peer ended, ctx is
// done or timeout passed.
func (p *Peer) read(ctx context.Context, timeout time.Duration) ([]byte, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case l, ok := <-p.lines:
		if !ok || l.err != nil {
			return nil, p.exitError()
		}
		return l.data, nil
	case <-ctx.Done():
		p.cmd.Process.Kill() // an interrupt does not wait for the peer's run to end
		return nil, ctx.Err()
	case <-t.C:
		return nil, fmt.Errorf("no answer within %v", timeout)
	}
}

// exitError says how the peer ended, with the tail of its standard error.
func (p *Peer) exitError() error {
	select {
	case <-p.done:
	case <-time.After(2 * time.Second):
	}
	msg := "it closed its output"
	if p.waitErr != nil {
		msg = "it exited: " + p.waitErr.Error()
	}
	if tail := p.stderr.lastLine(); tail != "" {
		msg += ": " + tail
	}
	return errors.New(msg)
}

// do sends req and returns the peer's times. An answer {"ok": false} is a
// *peerRefusal; a peer that does not answer in time, or answers something
// else, is dead: no further request is sent.
func (p *Peer) do(ctx context.Context, req peerRequest, timeout time.Duration) (peerAnswer, error) {
	if p.dead != nil {
		return peerAnswer{}, p.dead
	}
	data, _ := json.Marshal(req)
	var a peerAnswer
	_, err := p.stdin.Write(append(data, '\n'))
	if err != nil {
		err = p.exitError()
	} else {
		var line []byte
		if line, err = p.read(ctx, timeout); err == nil {
			if err = json.Unmarshal(line, &a); err != nil {
				err = fmt.Errorf("answer to %s is not JSON: %v: %.200q", req.Op, err, line)
			}
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			p.dead = err
		}
		return a, err
	}
	if !a.OK {
		msg := a.Error
		if msg == "" {
			msg = "refused, no reason given"
		}
		return a, &peerRefusal{msg}
	}
	if len(a.Seconds) != max(req.Reps, 1) {
		p.dead = fmt.Errorf("answered %d times for %d reps", len(a.Seconds), req.Reps)
		return a, p.dead
	}
	for _, s := range a.Seconds {
		if !(s > 0) || s > 3600 {
			return a, fmt.Errorf("a time of %v s", s)
		}
	}
	return a, nil
}

// peerRefusal is a peer's {"ok": false, "error": ...}: the request is not
// done, the peer is still fine.
type peerRefusal struct{ msg string }

func (e *peerRefusal) Error() string { return e.msg }

// Close closes the peer's input, which ends it, waits a little and kills
// it if it has not ended.
func (p *Peer) Close() error {
	p.stdin.Close()
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
	if p.cleanup != nil {
		p.cleanup()
		p.cleanup = nil
	}
	return nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(b), nil
}

// lastLine is the last non-empty line written.
func (t *tailBuffer) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := bytes.Split(bytes.TrimSpace(t.buf), []byte("\n"))
	return strings.TrimSpace(string(lines[len(lines)-1]))
}
