package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/checks"
	"github.com/attnlab/attnlab/conform"
	"github.com/attnlab/attnlab/faults"
)

// serveTestAdapter serves, as a conformance adapter on stdin and stdout,
// what names: "reference" (attnlab's reference), "fault:NAME" (a
// registered fault of attention), and either followed by ",exit:N" to exit
// with status N after the input closes.
func serveTestAdapter(what string) int {
	what, exit, _ := strings.Cut(what, ",exit:")
	impl := conform.Reference()
	if name, ok := strings.CutPrefix(what, "fault:"); ok {
		all := faults.Attention()
		i := slices.IndexFunc(all, func(f faults.Fault[checks.Impl]) bool { return f.Name == name })
		if i < 0 {
			fmt.Fprintf(os.Stderr, "no fault %q\n", name)
			return 1
		}
		f := all[i]
		impl = &conform.Func{Name: "fault " + f.Name, Run64: conform.RunFunc[float64](f.Impl.Run), Run32: conform.RunFunc[float32](f.Impl.F32),
			SinkGrad: f.Impl.SinkGrad}
	}
	if err := conform.Serve(os.Stdin, os.Stdout, impl); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := 0
	if exit != "" {
		fmt.Sscan(exit, &code)
		fmt.Fprintf(os.Stderr, "exiting with status %d on purpose\n", code)
	}
	return code
}

// testAdapter is an -exec command that runs this test binary as the
// adapter what names (see serveTestAdapter).
func testAdapter(t *testing.T, what string) string {
	t.Helper()
	t.Setenv("ATTNLAB_TEST_ADAPTER", what)
	return os.Args[0]
}

// TestConformAdapterExitStatus: a run whose adapter answered everything
// but exits 5 when its input closes is an adapter failure, exit 3, naming
// the adapter and its stderr; the same adapter exiting 0 is conformant.
func TestConformAdapterExitStatus(t *testing.T) {
	if code, stdout, stderr := attnlab(t, "conform", "-exec", testAdapter(t, "reference")); code != 0 {
		t.Fatalf("the reference through the test binary: exit %d\n%s%s", code, stdout, stderr)
	}
	code, _, stderr := attnlab(t, "conform", "-exec", testAdapter(t, "reference,exit:5"))
	if code != 3 || !strings.Contains(stderr, "exited with status 5 after its input closed") ||
		!strings.Contains(stderr, "exiting with status 5 on purpose") || !strings.Contains(stderr, os.Args[0]) {
		t.Errorf("exit %d, stderr %q; want 3 naming the adapter, its status and its stderr", code, stderr)
	}
}
