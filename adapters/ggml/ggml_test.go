package ggml_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/adapters/ggml/internal/build"
	"github.com/attnlab/attnlab/attention"
	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/models"
	"github.com/attnlab/attnlab/safetensors"
	"github.com/attnlab/attnlab/tokenizer"
)

// bin is the folder the programs were built into for this run; skipWhy is
// why they could not be (no C compiler, no ollama module), "" when built.
var bin, skipWhy string

// TestMain builds the programs once, with the flags of internal/build, so
// that every test runs what the build tool ships.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "attnlab-ggml-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	c, err := build.Configure(context.Background(), ".")
	if err != nil {
		skipWhy = "the ggml programs cannot be built here: " + err.Error()
	} else if err := c.Build(context.Background(), dir); err != nil {
		fmt.Fprintln(os.Stderr, "building the ggml programs:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	bin = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func need(t *testing.T) {
	t.Helper()
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
}

// TestMaskedRowReproduces runs the finding's reproduction: it exits 1, with
// the masked row zero through flash_attn_ext and NaN through soft_max_ext,
// and the row that sees keys equal on both paths.
func TestMaskedRowReproduces(t *testing.T) {
	need(t)
	out, err := exec.Command(filepath.Join(bin, "ggml-masked-row")).CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1 (the paths disagree):\n%s", err, out)
	}
	lines := strings.Split(string(out), "\n")
	if len(lines) < 7 || !strings.Contains(lines[0], "github.com/ollama/ollama v") {
		t.Fatalf("output:\n%s", out)
	}
	flash, soft := strings.Fields(lines[5]), strings.Fields(lines[6])
	if len(flash) != 5 || len(soft) != 5 {
		t.Fatalf("row 1 lines %q, %q", lines[5], lines[6])
	}
	for d := 1; d < 5; d++ {
		if flash[d] != "0.000000" || !strings.Contains(soft[d], "nan") {
			t.Errorf("row 1 feature %d: flash %s, softmax %s; want 0 and NaN", d-1, flash[d], soft[d])
		}
	}
	if a, b := strings.Fields(lines[2]), strings.Fields(lines[3]); len(a) != 5 || fmt.Sprint(a[1:]) != fmt.Sprint(b[1:]) {
		t.Errorf("row 0 differs:\n%s\n%s", lines[2], lines[3])
	}
}

// peerProc is a running ggml-peer.
type peerProc struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	hello map[string]any
}

func startPeer(t *testing.T, threads int) *peerProc {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "ggml-peer"), "-threads", fmt.Sprint(threads))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &peerProc{cmd: cmd, in: in, out: bufio.NewReader(out)}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	line, err := p.out.ReadBytes('\n')
	if err != nil || json.Unmarshal(line, &p.hello) != nil {
		t.Fatalf("hello: %q %v", line, err)
	}
	return p
}

// call sends one request line and decodes the answer.
func (p *peerProc) call(t *testing.T, req map[string]any) (ok bool, seconds []float64, msg string) {
	t.Helper()
	data, _ := json.Marshal(req)
	if _, err := p.in.Write(append(data, '\n')); err != nil {
		t.Fatal(err)
	}
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		t.Fatalf("%s: no answer: %v", data, err)
	}
	var resp struct {
		OK      bool      `json:"ok"`
		Seconds []float64 `json:"seconds"`
		Error   string    `json:"error"`
	}
	if err := json.Unmarshal(line, &resp); err != nil {
		t.Fatalf("%s: answer %q: %v", data, line, err)
	}
	return resp.OK, resp.Seconds, resp.Error
}

// TestPeerAgreesWithReference runs the bench peer on small shapes, with
// inputs from a file, and checks its output against attnlab's reference
// attention in float64 — prefill causal and full, MHA and GQA, decode,
// K/V in F32 and F16 — so that what the peer times is attention.
func TestPeerAgreesWithReference(t *testing.T) {
	need(t)
	p := startPeer(t, 2)
	if p.hello["peer"] != "ggml" || p.hello["threads"] != 2.0 || !strings.Contains(fmt.Sprint(p.hello["version"]), "github.com/ollama/ollama v") ||
		!strings.Contains(fmt.Sprint(p.hello["build"]), build.CFlags) || fmt.Sprint(p.hello["ops"]) != "[attn_fwd decode sgemm]" {
		t.Errorf("hello %v", p.hello)
	}
	dir := t.TempDir()
	for i, c := range []struct {
		op                  string
		b, hq, hkv, m, n, d int
		causal              bool
		kv                  string
	}{
		{"attn_fwd", 1, 2, 2, 5, 5, 8, true, "f32"},
		{"attn_fwd", 2, 4, 2, 3, 7, 16, true, "f32"},
		{"attn_fwd", 1, 4, 1, 4, 6, 8, false, "f32"},
		{"attn_fwd", 2, 4, 2, 6, 6, 32, true, "f16"},
		{"decode", 1, 4, 4, 1, 9, 8, false, "f32"},
		{"decode", 2, 8, 2, 1, 33, 64, false, "f16"},
	} {
		name := fmt.Sprintf("%s/B=%d/Hq=%d/Hkv=%d/M=%d/N=%d/D=%d/causal=%v/%s", c.op, c.b, c.hq, c.hkv, c.m, c.n, c.d, c.causal, c.kv)
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 9))
			draw := func(n int) []float32 {
				x := make([]float32, n)
				for j := range x {
					x[j] = float32(rng.NormFloat64())
				}
				return x
			}
			q, k, v := draw(c.b*c.hq*c.m*c.d), draw(c.b*c.hkv*c.n*c.d), draw(c.b*c.hkv*c.n*c.d)
			f := safetensors.New()
			f.SetF32("q", []int{c.b, c.hq, c.m, c.d}, q)
			f.SetF32("k", []int{c.b, c.hkv, c.n, c.d}, k)
			f.SetF32("v", []int{c.b, c.hkv, c.n, c.d}, v)
			data, err := f.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			in, out := filepath.Join(dir, fmt.Sprintf("in%d.safetensors", i)), filepath.Join(dir, fmt.Sprintf("out%d.safetensors", i))
			if err := os.WriteFile(in, data, 0o644); err != nil {
				t.Fatal(err)
			}
			ok, secs, msg := p.call(t, map[string]any{"op": c.op, "b": c.b, "hq": c.hq, "hkv": c.hkv, "m": c.m, "n": c.n, "d": c.d,
				"causal": c.causal, "kv_dtype": c.kv, "reps": 2, "inputs": in, "output": out})
			if !ok || len(secs) != 2 || secs[0] <= 0 || secs[1] <= 0 {
				t.Fatalf("ok %v, seconds %v, error %q", ok, secs, msg)
			}
			res, err := safetensors.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			o, shape, err := res.Float32("o")
			if err != nil || fmt.Sprint(shape) != fmt.Sprint([]int{c.b, c.hq, c.m, c.d}) {
				t.Fatalf("o: shape %v, %v", shape, err)
			}
			cfg := &attention.Config{B: c.b, Hq: c.hq, Hkv: c.hkv, M: c.m, N: c.n, D: c.d, Dv: c.d, Causal: c.causal}
			want := make([]float64, len(o))
			if err := attention.Forward(want, make([]float64, c.b*c.hq*c.m), make([]float64, c.b*c.hq*c.m*c.n), f64(q), f64(k), f64(v), cfg); err != nil {
				t.Fatal(err)
			}
			// F32 K/V: float32 rounding; F16: K, V and (for F16 K) each
			// query row rounded to 11 bits, V·P accumulated in F16
			tol := 2e-5
			if c.kv == "f16" {
				tol = 1e-2
			}
			worst := 0.0
			for j := range o {
				worst = math.Max(worst, math.Abs(float64(o[j])-want[j]))
			}
			if !(worst <= tol) {
				t.Errorf("max |o − reference| = %.3g, tolerance %.3g", worst, tol)
			}
			t.Logf("max |o − reference| = %.3g (%s)", worst, c.kv)
		})
	}
	t.Run("sgemm", func(t *testing.T) {
		ok, secs, msg := p.call(t, map[string]any{"op": "sgemm", "m": 64, "n": 48, "k": 32, "reps": 3})
		if !ok || len(secs) != 3 {
			t.Errorf("ok %v, seconds %v, error %q", ok, secs, msg)
		}
	})
	// bad requests get one-line errors and the peer goes on
	for _, bad := range []map[string]any{
		{"op": "attn_fwd", "b": 1, "hq": 3, "hkv": 2, "m": 4, "n": 4, "d": 8, "kv_dtype": "f32", "reps": 1},
		{"op": "attn_fwd", "b": 1, "hq": 2, "hkv": 2, "m": 4, "n": 4, "d": 8, "kv_dtype": "q8_0", "reps": 1},
		{"op": "decode", "b": 1, "hq": 2, "hkv": 2, "m": 3, "n": 4, "d": 8, "kv_dtype": "f32", "reps": 1},
		{"op": "attn_fwd", "b": 1, "hq": 2, "hkv": 2, "m": 4, "n": 4, "d": 8, "kv_dtype": "f32", "reps": 1, "inputs": filepath.Join(dir, "missing")},
		{"op": "attn_fwd", "b": 1, "hq": 2, "hkv": 2, "m": 4, "n": 4, "d": 8, "kv_dtype": "f32", "reps": 0},
		{"op": "softmax", "reps": 1},
	} {
		if ok, _, msg := p.call(t, bad); ok || msg == "" || strings.Contains(msg, "\n") {
			t.Errorf("%v: ok %v, error %q; want a one-line error", bad, ok, msg)
		}
	}
	if ok, _, msg := p.call(t, map[string]any{"op": "decode", "b": 1, "hq": 2, "hkv": 1, "n": 5, "d": 8, "kv_dtype": "f16", "reps": 1}); !ok {
		t.Errorf("a good request after the bad ones: %q", msg)
	}
	p.in.Close()
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("exit after its input closed: %v", err)
	}
}

func f64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// TestDecoderMatchesGenerate: ggml-lm, attnlab's shipped model run by ggml
// graphs, prints what attnlab generate -temp 0 -repeat-penalty 1 prints
// (token healing included), and without healing chooses the token ids
// attnlab's model.Generate chooses greedily; with flash attention on and
// off. Its times are reported, not judged.
func TestDecoderMatchesGenerate(t *testing.T) {
	need(t)
	attnlab := filepath.Join(t.TempDir(), "attnlab")
	goBuild := exec.Command("go", "build", "-o", attnlab, "./cmd/attnlab")
	goBuild.Dir = filepath.Join("..", "..") // the root module, with its own go.sum
	if out, err := goBuild.CombinedOutput(); err != nil {
		t.Fatalf("building attnlab: %v\n%s", err, out)
	}
	dir, err := models.Dir(models.LM)
	if err != nil {
		t.Fatal(err)
	}
	lm, err := model.LoadLM[float32](dir)
	if err != nil {
		t.Fatal(err)
	}
	m, p, tok := lm.Model, lm.Params, lm.Tok
	const n = 32
	for _, prompt := range []string{"func (b *Buffer) ", "// Reverse returns s with its runes in reverse order.\nfunc Reverse(s string) string {"} {
		want, err := exec.Command(attnlab, "generate", "-prompt", prompt, "-n", fmt.Sprint(n), "-temp", "0", "-repeat-penalty", "1").Output()
		if err != nil {
			t.Fatalf("attnlab generate: %v", err)
		}
		ids := tok.Encode([]byte(prompt))
		gen, err := m.Generate(context.Background(), p, [][]int{ids}, model.GenerateOptions{MaxNew: n, EOS: tok.Special(tokenizer.EndOfText)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, flash := range []string{"true", "false"} {
			t.Run(fmt.Sprintf("flash=%s/%q", flash, prompt[:8]), func(t *testing.T) {
				cmd := exec.Command(filepath.Join(bin, "ggml-lm"), "-prompt", prompt, "-n", fmt.Sprint(n), "-threads", "2", "-flash="+flash)
				var stderr strings.Builder
				cmd.Stderr = &stderr
				got, err := cmd.Output()
				if err != nil {
					t.Fatalf("ggml-lm: %v\n%s", err, stderr.String())
				}
				if string(got) != string(want) {
					t.Errorf("ggml-lm printed\n%s\nattnlab generate printed\n%s", got, want)
				}
				t.Log(strings.TrimSpace(stderr.String()))
				out, err := exec.Command(filepath.Join(bin, "ggml-lm"), "-prompt", prompt, "-n", fmt.Sprint(n), "-threads", "2", "-flash="+flash, "-heal=false", "-json").Output()
				if err != nil {
					t.Fatalf("ggml-lm -json: %v", err)
				}
				var r struct {
					Prompt         []int   `json:"prompt_tokens"`
					Tokens         []int   `json:"tokens"`
					PrefillSeconds float64 `json:"prefill_seconds"`
					DecodeSeconds  float64 `json:"decode_seconds"`
				}
				if err := json.Unmarshal(out, &r); err != nil {
					t.Fatalf("%s: %v", out, err)
				}
				if fmt.Sprint(r.Prompt) != fmt.Sprint(ids) || fmt.Sprint(r.Tokens) != fmt.Sprint(gen[0]) {
					t.Errorf("ggml-lm: prompt %v, tokens %v\nmodel.Generate: prompt %v, tokens %v", r.Prompt, r.Tokens, ids, gen[0])
				}
				if !(r.PrefillSeconds > 0) || len(r.Tokens) > 1 && !(r.DecodeSeconds > 0) {
					t.Errorf("times: prefill %v s, decode %v s", r.PrefillSeconds, r.DecodeSeconds)
				}
			})
		}
	}
}

// TestOllamaWindowReproduces runs the reproduction of
// docs/findings/ollama-swa-window.md: ollama's kvcache.NewSWACache(2) lets
// a query see 3 keys, and the program exits 1 saying so.
func TestOllamaWindowReproduces(t *testing.T) {
	need(t)
	out, err := exec.Command(filepath.Join(bin, "ollama-swa-window")).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1:\n%s", err, out)
	}
	if !strings.Contains(string(out), "query at 5: x x x · · ·   sees 3 keys") || !strings.Contains(string(out), "a window of 2 shows up to 3 keys") {
		t.Errorf("output:\n%s", out)
	}
}

// TestDecoderCompare runs ggml-lm -compare: both sides chose the same
// tokens, and each rate and ratio is a positive number (what they are is
// measured, not judged).
func TestDecoderCompare(t *testing.T) {
	need(t)
	out, err := exec.Command(filepath.Join(bin, "ggml-lm"), "-prompt", "package main\n\nfunc main() {", "-n", "8", "-threads", "1", "-compare", "2", "-json").Output()
	if err != nil {
		t.Fatalf("ggml-lm -compare: %v", err)
	}
	var c struct {
		Rounds     int   `json:"rounds"`
		NewTokens  int   `json:"new_tokens"`
		SameTokens bool  `json:"same_tokens"`
		Tokens     []int `json:"tokens"`
		GGML       struct {
			Prefill float64 `json:"prefill_tokens_per_second"`
			Decode  float64 `json:"decode_tokens_per_second"`
		} `json:"ggml"`
		Attnlab struct {
			Prefill float64 `json:"prefill_tokens_per_second"`
			Decode  float64 `json:"decode_tokens_per_second"`
		} `json:"attnlab"`
		PrefillRatio struct{ Median, Min, Max float64 } `json:"prefill_ratio"`
		DecodeRatio  struct{ Median, Min, Max float64 } `json:"decode_ratio"`
	}
	if err := json.Unmarshal(out, &c); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if c.Rounds != 2 || !c.SameTokens || c.NewTokens != len(c.Tokens) || c.NewTokens < 2 {
		t.Errorf("%s", out)
	}
	for name, x := range map[string]float64{"ggml prefill": c.GGML.Prefill, "ggml decode": c.GGML.Decode, "attnlab prefill": c.Attnlab.Prefill,
		"attnlab decode": c.Attnlab.Decode, "prefill ratio": c.PrefillRatio.Median, "decode ratio": c.DecodeRatio.Median} {
		if !(x > 0) || math.IsInf(x, 0) {
			t.Errorf("%s = %v", name, x)
		}
	}
	if !(c.DecodeRatio.Min <= c.DecodeRatio.Median && c.DecodeRatio.Median <= c.DecodeRatio.Max) {
		t.Errorf("decode ratio %+v", c.DecodeRatio)
	}
}
