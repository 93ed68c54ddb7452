package main

import (
	"bytes"
	"github.com/attnlab/attnlab/internal/atomicfile"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/safetensors"
)

// tinyTrain is a language model small enough to train in a fraction of a
// second on tinyCorpus.
var tinyTrain = []string{"-vocab", "300", "-dim", "16", "-layers", "1", "-heads", "2", "-kv-heads", "1",
	"-ffn", "32", "-window", "32", "-batch", "2", "-eval-every", "2", "-save-every", "2", "-quiet", "-val-frac", "0.3"}

func trainArgs(src, out string, extra ...string) []string {
	return append(append([]string{"train", "-src", src, "-out", out}, tinyTrain...), extra...)
}

// TestTrainNeverReplacesAFinishedRun: a second train into a finished run is
// refused (naming the folder, its step, -resume and -force) and changes
// nothing; -force starts over; -resume of a finished run does nothing.
func TestTrainNeverReplacesAFinishedRun(t *testing.T) {
	src, out := tinyCorpus(t), filepath.Join(t.TempDir(), "run")
	if code, stdout, stderr := attnlab(t, trainArgs(src, out, "-steps", "4")...); code != 0 {
		t.Fatalf("train: exit %d\n%s%s", code, stdout, stderr)
	}
	before := readTree(t, out)
	code, _, stderr := attnlab(t, trainArgs(src, out, "-steps", "2")...)
	for _, want := range []string{out, "step 4 of 4", "-resume", "-force"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("refusal %q lacks %q", stderr, want)
		}
	}
	if code != 2 || strings.Count(stderr, "\n") != 2 {
		t.Errorf("second run: exit %d, stderr %q: want 2 and two lines (the error, the hint)", code, stderr)
	}
	if after := readTree(t, out); !sameTree(before, after) {
		t.Fatal("the refused run changed the folder")
	}
	// -resume of a finished run: nothing to do, nothing changed.
	code, stdout, stderr := attnlab(t, trainArgs(src, out, "-steps", "4", "-resume")...)
	if code != 0 || !strings.Contains(stdout, "nothing to do") {
		t.Errorf("resume of a finished run: exit %d\n%s%s", code, stdout, stderr)
	}
	if after := readTree(t, out); !sameTree(before, after) {
		t.Error("resuming a finished run changed the folder")
	}
	// -force starts over.
	if code, stdout, stderr := attnlab(t, trainArgs(src, out, "-steps", "2", "-force")...); code != 0 {
		t.Fatalf("-force: exit %d\n%s%s", code, stdout, stderr)
	}
	if step := checkpointStep(t, out); step != 2 {
		t.Errorf("after -force the checkpoint is at step %d, want 2", step)
	}
	if code, _, _ := attnlab(t, trainArgs(src, out, "-resume", "-force")...); code != 2 {
		t.Errorf("-resume with -force: exit %d, want 2", code)
	}
}

// TestTrainInterrupted: an interrupt during data preparation writes
// nothing and leaves a finished run as it was; exit 130.
func TestTrainInterrupted(t *testing.T) {
	src, out := tinyCorpus(t), filepath.Join(t.TempDir(), "run")
	if code, stdout, stderr := attnlab(t, trainArgs(src, out, "-steps", "4")...); code != 0 {
		t.Fatalf("train: exit %d\n%s%s", code, stdout, stderr)
	}
	before := readTree(t, out)
	code, stdout, stderr := attnlabCtx(t, interruptedContext(), trainArgs(src, out, "-steps", "6", "-resume")...)
	if code != 130 || !strings.Contains(stdout, "nothing written") || strings.Contains(stderr, "no points") {
		t.Errorf("interrupted resume: exit %d\n%s%s", code, stdout, stderr)
	}
	if after := readTree(t, out); !sameTree(before, after) {
		t.Error("an interrupt before the first step changed the run")
	}
	fresh := filepath.Join(t.TempDir(), "fresh")
	if code, _, _ := attnlabCtx(t, interruptedContext(), trainArgs(src, fresh, "-steps", "4")...); code != 130 {
		t.Errorf("interrupted fresh run: exit %d, want 130", code)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("an interrupted fresh run created %s", fresh)
	}
}

// TestTrainSurvivesAKillAtEveryStep kills a run during its save at each
// step of the checkpoint's swap and of the file writes (a hook in package
// atomicfile ends the process there, as a kill would): the next run
// recovers the newest complete checkpoint, removes the temporaries, and
// -resume finishes the run. Lookalikes of temporaries that are the user's
// stay.
func TestTrainSurvivesAKillAtEveryStep(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the command in child processes")
	}
	src := tinyCorpus(t)
	for _, at := range atomicfile.Steps {
		if strings.HasPrefix(at, "recover:") {
			continue
		}
		t.Run(at, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run")
			// killed in the save after the first checkpoint's
			if code := killedAt(t, at, trainArgs(src, out, "-steps", "4")...); code != 9 {
				t.Fatalf("the run was not killed at %s: exit %d", at, code)
			}
			user := []string{filepath.Join(out, ".notes.tmp1"), filepath.Join(out, ".checkpoint.tmp-2024"), filepath.Join(filepath.Dir(out), ".run.tmp-1.old")}
			for _, u := range user {
				os.WriteFile(u, []byte("mine"), 0o644)
			}
			// a plain run is refused: the folder holds a run, recovered
			code, _, stderr := attnlab(t, trainArgs(src, out, "-steps", "4")...)
			t.Logf("after the kill: %s", stderr)
			if code != 2 || !strings.Contains(stderr, "it holds a run at step") {
				t.Errorf("plain run after the kill: exit %d, %s", code, stderr)
			}
			if code, stdout, stderr := attnlab(t, trainArgs(src, out, "-steps", "4", "-resume")...); code != 0 {
				t.Fatalf("resume after the kill: exit %d\n%s%s", code, stdout, stderr)
			}
			if step := checkpointStep(t, out); step != 4 {
				t.Errorf("checkpoint at step %d, want 4", step)
			}
			for _, dir := range []string{out, filepath.Dir(out)} {
				entries, _ := os.ReadDir(dir)
				for _, e := range entries {
					if atomicfile.IsTemporary(e.Name()) {
						t.Errorf("temporary %s left in %s", e.Name(), dir)
					}
				}
			}
			for _, u := range user {
				if b, err := os.ReadFile(u); string(b) != "mine" {
					t.Errorf("the user's %s: %q, %v", u, b, err)
				}
			}
		})
	}
}

// TestTrainRejectsBadOptimiserFlags: a learning rate that trains uphill,
// NaN, or a negative weight decay is a usage error before any work.
func TestTrainRejectsBadOptimiserFlags(t *testing.T) {
	src := tinyCorpus(t)
	for _, bad := range [][]string{{"-lr", "-1"}, {"-lr", "0"}, {"-lr", "NaN"}, {"-min-lr", "1"}, {"-wd", "-0.1"}, {"-clip", "Inf"}, {"-warmup", "-1"}, {"-init-std", "0"}} {
		out := filepath.Join(t.TempDir(), "run")
		code, _, stderr := attnlab(t, trainArgs(src, out, append([]string{"-steps", "2"}, bad...)...)...)
		if code != 2 || !strings.Contains(stderr, strings.TrimPrefix(bad[0], "-")) {
			t.Errorf("%v: exit %d, stderr %q: want 2 naming the flag", bad, code, stderr)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%v: the output folder was created", bad)
		}
	}
}

// TestGenerateRefusesAnotherKind: the weights of a dual encoder would
// "generate" gibberish.
func TestGenerateRefusesAnotherKind(t *testing.T) {
	data := retrieverData(t)
	out := filepath.Join(t.TempDir(), "run")
	trainRetriever(t, data, out)
	code, stdout, stderr := attnlab(t, "generate", "-model", filepath.Join(out, "model"), "-prompt", "func f(", "-n", "3")
	if code != 1 || !strings.Contains(stderr, "dual-encoder") || !strings.Contains(stderr, "language-model") || stdout != "" {
		t.Errorf("generate on a dual encoder: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestRefNeverOverwrites: the output may not be the input, and an existing
// output needs -force.
func TestRefNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.safetensors"), filepath.Join(dir, "out.safetensors")
	f := safetensors.New()
	f.SetF64("q", []int{1, 1, 2, 2}, []float64{1, 2, 3, 4})
	f.SetF64("k", []int{1, 1, 3, 2}, []float64{1, 0, 0, 1, 1, 1})
	f.SetF64("v", []int{1, 1, 3, 2}, []float64{1, 2, 3, 4, 5, 6})
	if err := safetensors.WriteFile(in, f); err != nil {
		t.Fatal(err)
	}
	original, _ := os.ReadFile(in)
	code, _, stderr := attnlab(t, "ref", "-op", "attention", "-in", in, "-out", in, "-force")
	if got, _ := os.ReadFile(in); code != 2 || !bytes.Equal(got, original) || !strings.Contains(stderr, "input") {
		t.Errorf("-out = -in: exit %d, stderr %q, input changed %v", code, stderr, !bytes.Equal(got, original))
	}
	if code, _, stderr := attnlab(t, "ref", "-op", "attention", "-in", in, "-out", out); code != 0 {
		t.Fatalf("ref: exit %d %s", code, stderr)
	}
	code, _, stderr = attnlab(t, "ref", "-op", "attention", "-in", in, "-out", out)
	if code != 2 || !strings.Contains(stderr, "-force") {
		t.Errorf("existing -out: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := attnlab(t, "ref", "-op", "attention", "-in", in, "-out", out, "-force"); code != 0 {
		t.Errorf("-force: exit %d %s", code, stderr)
	}
	// NaN inputs: an error naming the tensor, and no output.
	f.SetF64("q", []int{1, 1, 2, 2}, []float64{1, 2, 3, nanValue()})
	nan := filepath.Join(dir, "nan.safetensors")
	safetensors.WriteFile(nan, f)
	code, _, stderr = attnlab(t, "ref", "-op", "attention", "-in", nan, "-out", filepath.Join(dir, "nan-out.safetensors"))
	if code != 1 || !strings.Contains(stderr, `"q"`) || !strings.Contains(stderr, "NaN") {
		t.Errorf("NaN input: exit %d, stderr %q", code, stderr)
	}
}

// TestInterruptedCommandsStop: every command given an interrupted context
// stops with exit 130 instead of running to the end.
func TestInterruptedCommandsStop(t *testing.T) {
	data := retrieverData(t)
	for _, args := range [][]string{
		{"lab"},
		{"bench", "-max-n", "256", "-seconds", "0.01", "-torch=false", "-memory=false"},
		{"retriever", "data", "-src", retrieverTree(t), "-out", filepath.Join(t.TempDir(), "d")},
		{"retriever", "eval", "-pairs", filepath.Join(data, "train.jsonl")},
		{"train", "-src", tinyCorpus(t), "-out", filepath.Join(t.TempDir(), "r"), "-quiet", "-val-frac", "0.3"},
	} {
		if code, stdout, stderr := attnlabCtx(t, interruptedContext(), args...); code != 130 || !strings.Contains(stderr, "interrupted") {
			t.Errorf("%v: exit %d\n%s%s", args, code, stdout, stderr)
		}
	}
}

// TestMaskRefusesAHugeTable: 100,000² cells is not a table anyone reads.
func TestMaskRefusesAHugeTable(t *testing.T) {
	code, stdout, stderr := attnlab(t, "mask", "-past", "100000", "-new", "100000")
	if code != 2 || stdout != "" || !strings.Contains(stderr, "past+new") {
		t.Errorf("exit %d, stdout %d bytes, stderr %q", code, len(stdout), stderr)
	}
}

func checkpointStep(t *testing.T, out string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(out, "checkpoint", "trainer_state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var step int
	if i := bytes.Index(data, []byte(`"step":`)); i >= 0 {
		for _, c := range bytes.TrimSpace(data[i+7:]) {
			if c < '0' || c > '9' {
				break
			}
			step = 10*step + int(c-'0')
		}
	}
	return step
}

func sameTree(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !bytes.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

func nanValue() float64 {
	var zero float64
	return zero / zero
}
