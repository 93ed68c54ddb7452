package conform

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/faults"
	"github.com/attnlab/attnlab/safetensors"
)

// TestMain lets the test binary serve as an adapter: with
// ATTNLAB_TEST_ADAPTER set it speaks the protocol on stdin and stdout (a
// fault of the registry, attnlab's reference, or a misbehaving adapter)
// instead of running the tests.
func TestMain(m *testing.M) {
	if what := os.Getenv("ATTNLAB_TEST_ADAPTER"); what != "" {
		os.Exit(serveForTest(what))
	}
	// The binary started as an adapter without being told what to serve
	// (its environment lost on the way) must not run the tests again: each
	// run would start another, without end.
	if os.Getenv("ATTNLAB_CONFORM_TESTS_RUNNING") != "" {
		fmt.Fprintln(os.Stderr, "conform's test binary started as an adapter without ATTNLAB_TEST_ADAPTER")
		os.Exit(2)
	}
	os.Setenv("ATTNLAB_CONFORM_TESTS_RUNNING", "1")
	os.Exit(m.Run())
}

// attentionFaults are the registered faults of attention and of its
// variants (sinks, softcap, ALiBi).
func attentionFaults() []faults.Fault[checks.Impl] {
	return append(faults.Attention(), faults.Variants()...)
}

// faultSuite is the suite of the lab that runs on a fault, and the prefix
// of that suite's checks in a Report.
type faultSuite struct {
	suite  checks.Suite[checks.Impl]
	prefix string
}

// faultSuites maps each fault of attentionFaults to its suite.
func faultSuites() map[string]faultSuite {
	m := map[string]faultSuite{}
	for _, f := range faults.Attention() {
		m[f.Name] = faultSuite{checks.Attention(), ""}
	}
	for _, f := range faults.Variants() {
		m[f.Name] = faultSuite{checks.Variants(), VariantPrefix}
	}
	return m
}

func serveForTest(what string) int {
	kind, name, _ := strings.Cut(what, ":")
	var impl Implementation
	switch kind {
	case "reference":
		impl = Reference()
	case "plain": // attnlab's reference declaring no variant
		impl = &Func{Name: "attnlab reference, no variants", Run64: attention.Reference[float64]().Run, Run32: attention.Reference[float32]().Run}
	case "fault":
		i := slices.IndexFunc(attentionFaults(), func(f faults.Fault[checks.Impl]) bool { return f.Name == name })
		if i < 0 {
			fmt.Fprintf(os.Stderr, "no fault %q\n", name)
			return 1
		}
		f := attentionFaults()[i]
		impl = &Func{Name: "fault " + f.Name, Run64: RunFunc[float64](f.Impl.Run), Run32: RunFunc[float32](f.Impl.F32), SinkGrad: f.Impl.SinkGrad}
	case "misbehave":
		return misbehave(name)
	case "exit": // attnlab's reference, then an exit of its own after stdin closes
		impl = Reference()
	}
	if err := Serve(os.Stdin, os.Stdout, impl); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if kind == "exit" {
		return exitAfterServing(name)
	}
	return 0
}

// exitAfterServing is how an adapter ends after its input closes: "5"
// exits with status 5 (saying so on stderr), "slow" exits 0 after 1.5 s (a
// runtime's slow teardown), "stay" never exits.
func exitAfterServing(how string) int {
	switch how {
	case "slow":
		time.Sleep(1500 * time.Millisecond)
		return 0
	case "stay":
		time.Sleep(time.Hour)
	}
	code, _ := strconv.Atoi(how)
	fmt.Fprintf(os.Stderr, "exiting with status %d on purpose\n", code)
	return code
}

// misbehave is an adapter that breaks the protocol in the way named.
func misbehave(how string) int {
	in := bufio.NewReader(os.Stdin)
	read := func() *safetensors.File {
		var hdr [8]byte
		if _, err := io.ReadFull(in, hdr[:]); err != nil {
			os.Exit(0)
		}
		buf := make([]byte, binary.LittleEndian.Uint64(hdr[:]))
		io.ReadFull(in, buf)
		f, _ := safetensors.Parse(buf)
		return f
	}
	write := func(f *safetensors.File) {
		data, _ := f.MarshalBinary()
		var hdr [8]byte
		binary.LittleEndian.PutUint64(hdr[:], uint64(len(data)))
		os.Stdout.Write(append(hdr[:], data...))
	}
	caps := `{"name":"misbehaving","version":"0","dtypes":["float64"],"gradients":false,"lse":false,"gqa":false,"masks":["causal"],"kv_cache":false,"scale":false}`
	read()
	switch how {
	case "badcaps":
		h := safetensors.New()
		h.Metadata = map[string]string{"op": "hello", "capabilities": `{"name":"x","dtypes":["float16"],"masks":["causal"]}`}
		write(h)
		read()
		return 0
	case "nohello":
		os.Stdout.Write([]byte("not a frame at all"))
		return 0
	case "longcaps": // capabilities that are not JSON, and long
		h := safetensors.New()
		h.Metadata = map[string]string{"op": "hello", "capabilities": `{"name":"` + strings.Repeat("x", 200)}
		write(h)
		read()
		return 0
	case "dsinks": // declares gradients and sinks, and answers dsinks whatever it is asked
		caps = `{"name":"dsinks","version":"0","dtypes":["float64"],"gradients":true,"lse":false,"gqa":false,"masks":["causal"],"kv_cache":false,"scale":false,"sinks":true}`
	}
	h := safetensors.New()
	h.Metadata = map[string]string{"op": "hello", "capabilities": caps}
	write(h)
	req := read()
	fmt.Fprintln(os.Stderr, "misbehaving on purpose:", how)
	out := safetensors.New()
	out.Metadata = map[string]string{"op": "attention", "request": req.Metadata["request"]}
	q, shape, _ := req.Float64("q")
	switch how {
	case "crash":
		os.Exit(7)
	case "blankline", "textline", "longline": // a stray line before a good answer
		line := map[string]string{"blankline": "\n", "textline": "loading weights\n", "longline": longLine}[how]
		os.Stdout.Write([]byte(line))
		out.SetF64("o", shape, q)
	case "hang":
		time.Sleep(time.Hour)
	case "close":
		os.Stdout.Close()
		time.Sleep(time.Hour)
	case "shape":
		out.SetF64("o", []int{len(q)}, q)
	case "dtype":
		out.SetF32("o", shape, make([]float32, len(q)))
	case "name":
		out.SetF64("out", shape, q)
	case "extra": // the answer, and a tensor nobody asked for
		out.SetF64("o", shape, q)
		out.SetF64("junk", []int{1}, []float64{0})
	case "dsinks":
		out.SetF64("o", shape, q)
		if _, ok := req.Tensors["do"]; ok {
			k, kshape, _ := req.Float64("k")
			v, vshape, _ := req.Float64("v")
			out.SetF64("dq", shape, q)
			out.SetF64("dk", kshape, k)
			out.SetF64("dv", vshape, v)
		}
		out.SetF64("dsinks", []int{shape[1]}, make([]float64, shape[1]))
	}
	write(out)
	read()
	return 0
}

// longLine is a stray line of log that a misbehaving adapter prints.
const longLine = "Some weights of the model checkpoint were not used when initializing\n"

func startTestAdapter(t *testing.T, what string, timeout time.Duration) (*Adapter, error) {
	t.Helper()
	t.Setenv("ATTNLAB_TEST_ADAPTER", what)
	return Start(context.Background(), os.Args[0], timeout)
}

// TestReferenceIsConformant: attnlab's own kernels, in-process and behind
// the protocol, are conformant to the position rule, with the card DESIGN
// §2 and §3 describe.
func TestReferenceIsConformant(t *testing.T) {
	proc, err := startTestAdapter(t, "reference", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Close()
	for _, impl := range []Implementation{Reference(), Fused(), proc} {
		rep, err := Run(context.Background(), impl, AlignPosition)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Conformant {
			t.Errorf("%s: not conformant: %v", rep.Implementation, rep.Why)
		}
		c := rep.Card
		if c.CausalMLtN != AlignPosition || c.CausalMGtN != AlignPosition || c.EmptyRow != EmptyError || c.PaddingRows != EmptyZero ||
			c.GQA != GQAContiguous || c.Scale != ScaleInvSqrtD || c.Float32ErrorRatio == nil || *c.Float32ErrorRatio > 2 ||
			c.Sinks != Supported || c.Softcap != Supported || c.Alibi != Supported || c.SinksEmptyRow != EmptyZero ||
			c.SinksGrad != SinkGradReturned || c.SoftcapOrder != SoftcapBeforeMask || c.AlibiDistance != AlibiPositions {
			t.Errorf("%s: card %+v", rep.Implementation, *c)
		}
		variants := 0
		for _, ch := range rep.Checks {
			if ch.Status != Pass {
				t.Errorf("%s: %s: %s %s", rep.Implementation, ch.Name, ch.Status, ch.Detail)
			}
			if strings.HasPrefix(ch.Name, VariantPrefix) {
				variants++
			}
		}
		if want := len(checks.Variants().Checks) + 1; variants != want {
			t.Errorf("%s: %d checks of the variants, want %d", rep.Implementation, variants, want)
		}
		if other, _ := Run(context.Background(), impl, AlignTopLeft); other.Conformant {
			t.Errorf("%s: conformant to top-left as well", rep.Implementation)
		}
	}
	if proc.Calls() < 500 {
		t.Errorf("the checks made %d calls through the process, want hundreds", proc.Calls())
	}
}

// TestFaultsThroughTheProcess: every registered attention fault, those of
// the variants (sinks, softcap, ALiBi) included, served by a separate
// process that declares the variants, is caught by exactly the checks that
// catch it in the lab (the protocol hides nothing), and conform's verdict
// on it is not conformant, for a reason of its suite. The card rows of the
// variants name what the faults that change them break.
func TestFaultsThroughTheProcess(t *testing.T) {
	suites := faultSuites()
	inLab := map[string][]string{}
	for _, f := range attentionFaults() {
		for _, c := range suites[f.Name].suite.Checks {
			if !c.Run(f.Impl).Pass {
				inLab[f.Name] = append(inLab[f.Name], c.Name)
			}
		}
	}
	// the card rows the variants' faults change, and to what
	cardRows := map[string]func(*Card) string{
		"dsink-sign":         func(c *Card) string { return want(c.SinksGrad, SinkGradWrong) },
		"sink-ignored":       func(c *Card) string { return want(c.SinksGrad, SinkGradWrong) }, // dσ = 0
		"softcap-after-mask": func(c *Card) string { return want(c.SoftcapOrder, SoftcapAfterMask) },
		"alibi-by-slot":      func(c *Card) string { return want(c.AlibiDistance, AlibiSlots) },
		"alibi-sign":         func(c *Card) string { return want(c.AlibiDistance, AlignOther) },
	}
	for _, f := range attentionFaults() {
		t.Run(f.Name, func(t *testing.T) {
			proc, err := startTestAdapter(t, "fault:"+f.Name, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer proc.Close()
			if !proc.Caps.Sinks || !proc.Caps.Softcap || !proc.Caps.Alibi {
				t.Fatalf("the fault's adapter declares %+v, want sinks, softcap and alibi", proc.Caps)
			}
			w := &wrapped{impl: proc, caps: proc.Caps}
			var caught []string
			for _, c := range suites[f.Name].suite.Checks {
				w.skip = ""
				r := c.Run(w.checksImpl())
				if w.fatal != nil {
					t.Fatalf("the adapter failed: %v", w.fatal)
				}
				if w.skip != "" {
					t.Fatalf("%s skipped through the process: %s", c.Name, w.skip)
				}
				if !r.Pass {
					caught = append(caught, c.Name)
				}
			}
			if len(caught) == 0 {
				t.Fatal("not caught through the process")
			}
			if !slices.Equal(caught, inLab[f.Name]) {
				t.Errorf("caught through the process by %v, in the lab by %v", caught, inLab[f.Name])
			}
			if suites[f.Name].prefix == "" {
				return // the attention faults' verdicts: TestVerdictOfKnownImplementations
			}
			rep, err := Run(context.Background(), proc, AlignPosition)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Verdict != NotConformant {
				t.Fatalf("verdict %s, want %s", rep.Verdict, NotConformant)
			}
			for _, c := range caught {
				if got := status(rep, VariantPrefix+c); got.Status != Fail {
					t.Errorf("conform's %s%s: %s %s, want fail", VariantPrefix, c, got.Status, got.Detail)
				}
			}
			if check, ok := cardRows[f.Name]; ok {
				if msg := check(rep.Card); msg != "" {
					t.Errorf("card: %s", msg)
				}
			} else if c := rep.Card; c.SinksGrad != SinkGradReturned || c.SinksEmptyRow != EmptyZero || c.SoftcapOrder != SoftcapBeforeMask || c.AlibiDistance != AlibiPositions {
				t.Errorf("card rows %s, %s, %s, %s: a fault of the backward changes none", c.SinksEmptyRow, c.SinksGrad, c.SoftcapOrder, c.AlibiDistance)
			}
		})
	}
}

// TestAdapterFailures: an adapter that crashes, hangs, closes its output,
// answers with a wrong shape, dtype or name, or declares nonsense, gives an
// error naming the adapter and the request, within the timeout, and the
// process is reaped.
func TestAdapterFailures(t *testing.T) {
	req := randomRequest(1, 1, 1, 1, 2, 2, 4)
	req.DType = "float64"
	for _, c := range []struct {
		how, want string
	}{
		{"crash", "closed its output"},
		{"hang", "no answer within"},
		{"close", "closed its output"},
		{"shape", `tensor "o" has shape`},
		{"dtype", `tensor "o" has dtype F32`},
		{"name", `lacks tensor "o"`},
		{"extra", `unknown tensor "junk"`},
	} {
		t.Run(c.how, func(t *testing.T) {
			a, err := startTestAdapter(t, "misbehave:"+c.how, 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = a.Attention(req)
			var ae *Error
			if !errors.As(err, &ae) || !strings.Contains(err.Error(), c.want) || ae.Request != "attention #1" || !strings.Contains(err.Error(), os.Args[0]) {
				t.Errorf("error %v, want one naming the adapter, attention #1 and %q", err, c.want)
			}
			// the status of a process conform itself ended says nothing of
			// the adapter: it is told only when the adapter exited alone
			if c.how == "hang" && strings.Contains(err.Error(), "it was ended by") {
				t.Errorf("error %v tells the status of the signal conform sent", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
			a.Close()
			if a.cmd.ProcessState == nil {
				t.Error("the adapter process was not reaped")
			}
			// a dead adapter answers nothing more
			if _, err := a.Attention(req); err == nil {
				t.Error("a second request to a failed adapter: no error")
			}
		})
	}
	// dsinks answered to a request without sinks, or without do, is a
	// tensor nobody asked for
	for _, edit := range []func(r *Request){
		func(r *Request) { r.DO = make([]float64, len(r.Q)) },
		func(r *Request) { r.Sinks = []float64{0.5} },
	} {
		a, err := startTestAdapter(t, "misbehave:dsinks", 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		r := randomRequest(1, 1, 1, 1, 2, 2, 4)
		r.DType, r.DO = "float64", nil
		edit(r)
		if _, err := a.Attention(r); err == nil || !strings.Contains(err.Error(), `unknown tensor "dsinks"`) {
			t.Errorf("dsinks to a request with do %v, sinks %v: %v, want a failure naming it", r.DO != nil, r.Sinks != nil, err)
		}
		a.Close()
	}
	// capabilities that are not JSON are quoted, abbreviated
	if _, err := startTestAdapter(t, "misbehave:longcaps", 2*time.Second); err == nil ||
		!strings.Contains(err.Error(), `capabilities "{\"name\":\"`+strings.Repeat("x", 77-9)+`..."`) {
		t.Errorf("long capabilities that are not JSON: %v, want them quoted, cut at 80 characters", err)
	}
	if _, err := Start(context.Background(), " \t ", time.Second); err == nil || err.Error() != "conform: -exec is empty" {
		t.Errorf("an empty command: %v", err)
	}
	for _, how := range []string{"badcaps", "nohello"} {
		if a, err := startTestAdapter(t, "misbehave:"+how, 2*time.Second); err == nil || !strings.Contains(err.Error(), "hello") {
			t.Errorf("%s: %v, want an error at hello", how, err)
			if a != nil {
				a.Close()
			}
		}
	}
	if _, err := Start(context.Background(), "/nonexistent/adapter --flag", time.Second); err == nil {
		t.Error("a missing adapter program: no error")
	}
}

func TestSplitWords(t *testing.T) {
	got, err := splitWords(`python3 'my adapter.py' --name "a \"b\"" x`)
	if err != nil || !slices.Equal(got, []string{"python3", "my adapter.py", "--name", `a "b"`, "x"}) {
		t.Errorf("%q, %v", got, err)
	}
	if _, err := splitWords(`a 'b`); err == nil {
		t.Error("an unterminated quote: no error")
	}
}

// mhaOnly is attnlab's reference declared without GQA and without an
// explicit scale: it refuses both, so the checks pass only if conform
// expresses them another way (K, V repeated per head; the scale in q).
type mhaOnly struct{ *Func }

func (m mhaOnly) Capabilities() Capabilities {
	c := m.Func.Capabilities()
	c.GQA, c.Scale = false, false
	return c
}

func (m mhaOnly) Attention(r *Request) (*Response, error) {
	if r.Hkv != r.Hq || r.Scale != 0 {
		return nil, fmt.Errorf("asked for Hkv %d of Hq %d, scale %g: not declared", r.Hkv, r.Hq, r.Scale)
	}
	return m.Func.Attention(r)
}

// TestEmulatedGQAAndScale: an implementation without GQA or a scale
// parameter still gets every check that does not test those themselves.
func TestEmulatedGQAAndScale(t *testing.T) {
	rep, err := Run(context.Background(), mhaOnly{Reference()}, AlignPosition)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Checks {
		switch {
		case c.Name == "gqa-equals-mha":
			if c.Status != Skip {
				t.Errorf("gqa-equals-mha: %s, want skipped", c.Status)
			}
		case c.Status != Pass:
			t.Errorf("%s: %s %s", c.Name, c.Status, c.Detail)
		}
	}
	if rep.Card.GQA != GQAUnsupported {
		t.Errorf("card GQA %q", rep.Card.GQA)
	}
}
