package model

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"github.com/attnlab/attnlab/internal/atomicfile"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/safetensors"
)

// refRound rounds v to a binary format with bits significant bits whose
// smallest spacing is minQ, to nearest, ties to even, in float64 arithmetic:
// an oracle written from the definition, apart from package safetensors.
func refRound(v float32, bits int, minQ float64) float64 {
	x := float64(v)
	if x == 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	_, exp := math.Frexp(x) // x = fr·2^exp, 0.5 ≤ |fr| < 1
	q := math.Max(math.Ldexp(1, exp-bits), minQ)
	return math.RoundToEven(x/q) * q
}

func refBF16(v float32) float64 { return refRound(v, 8, 0x1p-133) }
func refF16(v float32) float64  { return refRound(v, 11, 0x1p-24) }

// savedTiny saves a tiny float32 model with a tokenizer and returns the
// model, its parameters and the directory.
func savedTiny(t *testing.T, tied bool) (*Model[float32], *Params[float32], string) {
	t.Helper()
	m, err := New[float32](tinyConfig(tied))
	if err != nil {
		t.Fatal(err)
	}
	p := m.NewParams()
	m.Init(p, 0.02, 7)
	// a few values that round differently in the two formats, and one
	// that is F16-subnormal
	w := m.Tensors(p)[0].Data
	w[0], w[1], w[2] = 1+0x1p-8, 1+0x1p-8+0x1p-20, 3e-6
	dir := filepath.Join(t.TempDir(), "ckpt")
	if err := m.Save(dir, p, map[string][]byte{"tokenizer.json": []byte(`{"v":1}`)}); err != nil {
		t.Fatal(err)
	}
	return m, p, dir
}

// checkRounded reports whether the model loaded from dir has the weights of
// p rounded by round, read as float32 and as float64.
func checkRounded(t *testing.T, m *Model[float32], p *Params[float32], dir string, round func(float32) float64) {
	t.Helper()
	_, p32, err := Load[float32](dir)
	if err != nil {
		t.Fatal(err)
	}
	_, p64, err := Load[float64](dir)
	if err != nil {
		t.Fatal(err)
	}
	want, got32 := m.Tensors(p), m.Tensors(p32)
	m64, _ := New[float64](m.Config)
	got64 := m64.Tensors(p64)
	changed := 0
	for i := range want {
		for j, v := range want[i].Data {
			w := round(v)
			if float64(got32[i].Data[j]) != w || got64[i].Data[j] != w {
				t.Fatalf("%s[%d]: loaded %v (float32) and %v (float64), want %v rounded: %v", want[i].Name, j, got32[i].Data[j], got64[i].Data[j], v, w)
			}
			if w != float64(v) {
				changed++
			}
		}
	}
	if changed == 0 {
		t.Error("no weight changed in rounding: the test proves nothing")
	}
}

// TestLoadHalfPrecision: a BF16 or F16 copy of a saved model's weights
// loads, and its weights are the originals rounded to that format.
func TestLoadHalfPrecision(t *testing.T) {
	for _, tied := range []bool{false, true} {
		m, p, dir := savedTiny(t, tied)
		for _, c := range []struct {
			dtype safetensors.DType
			set   func(f *safetensors.File, name string, shape []int, v []float32)
			round func(float32) float64
		}{{safetensors.BF16, (*safetensors.File).SetBF16, refBF16}, {safetensors.F16, (*safetensors.File).SetF16, refF16}} {
			half := filepath.Join(t.TempDir(), string(c.dtype))
			os.CopyFS(half, os.DirFS(dir))
			f, err := safetensors.ReadFile(filepath.Join(half, WeightsFile))
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range f.Names() {
				v, shape, _ := f.Float32(name)
				c.set(f, name, shape, v)
			}
			if err := safetensors.WriteFile(filepath.Join(half, WeightsFile), f); err != nil {
				t.Fatal(err)
			}
			checkRounded(t, m, p, half, c.round)
		}
	}
}

// fileSizes returns the total size of the files in dir.
func fileSizes(t *testing.T, dir string) (n int, size int64) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fi, _ := e.Info()
		n, size = n+1, size+fi.Size()
	}
	return n, size
}

// dataBytes returns the size of the data buffer of a safetensors file: what
// follows the 8-byte header length and the header.
func dataBytes(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 8 {
		t.Fatalf("%s: %d bytes, %v", path, len(b), err)
	}
	return len(b) - 8 - int(binary.LittleEndian.Uint64(b))
}

func TestConvert(t *testing.T) {
	m, p, dir := savedTiny(t, false)
	// a head file as the reranker writes, with an integer tensor beside
	head := safetensors.New()
	head.Metadata["format"] = "pt"
	head.SetF32("score.weight", []int{3}, []float32{0.5, -1, 1 + 0x1p-8})
	head.SetI64("ids", []int{2}, []int64{1, 1 << 40})
	if err := safetensors.WriteFile(filepath.Join(dir, "score.safetensors"), head); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "rerank.json"), []byte("{}\n"), 0o644)
	leftover(t, filepath.Join(dir, WeightsFile)) // what a killed write leaves: skipped
	nIn, sizeIn := fileSizes(t, dir)
	nTensors := len(m.Tensors(p)) + 1

	out := filepath.Join(t.TempDir(), "bf16")
	got, err := Convert(context.Background(), dir, out, safetensors.BF16)
	if err != nil {
		t.Fatal(err)
	}
	nOut, sizeOut := fileSizes(t, out)
	if want := (Converted{Files: nIn - 1, Tensors: nTensors, InBytes: sizeIn - 4, OutBytes: sizeOut}); got != want || nOut != nIn-1 {
		t.Errorf("Convert = %+v, want %+v (%d files written)", got, want, nOut)
	}
	if a, b := dataBytes(t, filepath.Join(dir, WeightsFile)), dataBytes(t, filepath.Join(out, WeightsFile)); 2*b != a {
		t.Errorf("the BF16 weights hold %d bytes of data, the F32 ones %d: want half", b, a)
	}
	checkRounded(t, m, p, out, refBF16)
	for _, name := range []string{ConfigFile, "tokenizer.json", "rerank.json"} {
		a, _ := os.ReadFile(filepath.Join(dir, name))
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s not copied as is: %v", name, err)
		}
	}
	h, err := safetensors.ReadFile(filepath.Join(out, "score.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	ids, _, err := h.Int64("ids")
	if err != nil || !slices.Equal(ids, []int64{1, 1 << 40}) || h.Metadata["format"] != "pt" || h.Tensors["score.weight"].DType != safetensors.BF16 {
		t.Errorf("head file: ids %v (%v), metadata %v, dtype %s", ids, err, h.Metadata, h.Tensors["score.weight"].DType)
	}
	if w, _, _ := h.Float32("score.weight"); !slices.Equal(w, []float32{0.5, -1, 1}) {
		t.Errorf("score.weight = %v, want [0.5 -1 1] (the tie to even)", w)
	}

	// Back to F32: widening is exact, and the weights stay rounded.
	back := filepath.Join(t.TempDir(), "f32")
	if c, err := Convert(context.Background(), out, back, safetensors.F32); err != nil || c.Tensors != nTensors {
		t.Fatalf("BF16 to F32: %+v, %v", c, err)
	}
	checkRounded(t, m, p, back, refBF16)
	// To the dtype it has: nothing converted, every file copied byte for byte.
	same := filepath.Join(t.TempDir(), "same")
	if c, err := Convert(context.Background(), back, same, safetensors.F32); err != nil || c.Tensors != 0 || c.InBytes != c.OutBytes {
		t.Errorf("F32 to F32: %+v, %v", c, err)
	}
	a, _ := os.ReadFile(filepath.Join(back, WeightsFile))
	b, _ := os.ReadFile(filepath.Join(same, WeightsFile))
	if !bytes.Equal(a, b) {
		t.Error("F32 to F32 changed the weights file")
	}
	// An existing output is replaced whole (refusing it is the caller's
	// policy).
	os.WriteFile(filepath.Join(same, "old.txt"), nil, 0o644)
	if _, err := Convert(context.Background(), dir, same, safetensors.F16); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(same, "old.txt")); !os.IsNotExist(err) {
		t.Error("the replaced output kept a file of the old one")
	}
	checkRounded(t, m, p, same, refF16)
}

func TestConvertRefuses(t *testing.T) {
	_, _, dir := savedTiny(t, true)
	parent := filepath.Dir(dir)
	nested := filepath.Join(t.TempDir(), "nested")
	os.CopyFS(nested, os.DirFS(dir))
	os.Mkdir(filepath.Join(nested, "encoder"), 0o755)
	noConfig := t.TempDir()
	os.WriteFile(filepath.Join(noConfig, WeightsFile), nil, 0o644)
	big := filepath.Join(t.TempDir(), "big")
	os.CopyFS(big, os.DirFS(dir))
	extra := safetensors.New()
	extra.SetF32("x", []int{2}, []float32{1, 1e5})
	safetensors.WriteFile(filepath.Join(big, "extra.safetensors"), extra)
	broken := filepath.Join(t.TempDir(), "broken")
	os.CopyFS(broken, os.DirFS(dir))
	os.WriteFile(filepath.Join(broken, WeightsFile), []byte("not safetensors"), 0o644)
	missing := filepath.Join(parent, "missing")
	free := func() string { return filepath.Join(t.TempDir(), "out") }

	for _, tc := range []struct {
		name    string
		in, out string
		dtype   safetensors.DType
		want    string
	}{
		{"same", dir, dir, safetensors.BF16, "would overwrite the input"},
		{"same, another spelling", dir, parent + "/./ckpt/", safetensors.BF16, "would overwrite the input"},
		{"inside", dir, filepath.Join(dir, "bf16"), safetensors.BF16, "would overwrite the input"},
		{"holds it", dir, parent, safetensors.BF16, "would overwrite the input"},
		{"missing input", missing, free(), safetensors.BF16, missing + ": no such file or directory"},
		{"input is a file", filepath.Join(dir, ConfigFile), free(), safetensors.BF16, "config.json is a file, not a checkpoint directory"},
		{"no config", noConfig, free(), safetensors.BF16, "holds no config.json"},
		{"folder inside", nested, free(), safetensors.BF16, "encoder is a folder"},
		{"overflow", big, free(), safetensors.F16, `extra.safetensors: safetensors: tensor "x": element 1 (100000) is beyond the range of F16`},
		{"not safetensors", broken, free(), safetensors.BF16, "broken/model.safetensors: safetensors: "},
		{"integer dtype", dir, free(), safetensors.I64, `dtype "I64": want F32, F64, BF16 or F16`},
		{"missing output folder", dir, filepath.Join(missing, "out"), safetensors.BF16, "the folder of the output"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Convert(context.Background(), tc.in, tc.out, tc.dtype)
			if err == nil || !strings.HasPrefix(err.Error(), "model: convert: ") || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want one line containing %q", err, tc.want)
			}
			if o := filepath.Clean(tc.out); o != parent && !strings.HasPrefix(o, parent+string(filepath.Separator)) {
				if _, err := os.Stat(tc.out); !os.IsNotExist(err) {
					t.Errorf("a refused conversion created %s", tc.out)
				}
				if entries, _ := os.ReadDir(filepath.Dir(tc.out)); len(entries) != 0 {
					t.Errorf("a refused conversion left %d entries beside its output", len(entries))
				}
			}
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Errorf("the input holds %d entries after the refusals, want 3 (config, weights, tokenizer)", len(entries))
	}

	// Interrupted: the cause is returned and nothing is written.
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("stop")
	cancel(stop)
	out := free()
	if _, err := Convert(ctx, dir, out, safetensors.BF16); !errors.Is(err, stop) {
		t.Errorf("interrupted: error %v, want the cause", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Error("an interrupted conversion created its output")
	}
}

// leftover leaves beside path the temporary of a write of 4 bytes that
// was killed before its rename.
func leftover(t *testing.T, path string) {
	t.Helper()
	type killed struct{}
	defer func() {
		atomicfile.TestHook = nil
		if r := recover(); r != (killed{}) {
			t.Fatalf("the write was not stopped: %v", r)
		}
	}()
	atomicfile.TestHook = func(step string) {
		if step == "write:synced" {
			panic(killed{})
		}
	}
	atomicfile.WriteFile(path, []byte("half"), 0o644)
}
