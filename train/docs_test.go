package train_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/attnlab/attnlab/internal/atomicfile"
	"github.com/attnlab/attnlab/internal/docblock"
	"github.com/attnlab/attnlab/train"
	"github.com/attnlab/attnlab/train/internal/compress"
)

var updateDocs = flag.Bool("update", false, "rewrite docs/lab.md's table of the training cross-check from this run, and docs/model.md's block of the default run (from the run folder $ATTNLAB_RUN when set)")

// checkTrainingTable: docs/lab.md's table of the training cross-check
// against PyTorch is this run's (steps AdamW steps of variants models, the
// worst |a−b|/(1+|b|) over their losses and final weights); go test
// ./train -run TrainingMatchesPyTorch -update rewrites it.
func checkTrainingTable(t *testing.T, steps, variants int, worst float64) {
	t.Helper()
	want := fmt.Sprintf("| what | cases | worst |\n|---|---|---|\n| %d AdamW training steps (clipping, accumulation, weight decay groups): losses and weights | %d | %.2g |\n",
		steps, variants, worst)
	blk, err := docblock.Find(filepath.Join("..", "docs", "lab.md"), "<!-- training table: go test ./train -run TrainingMatchesPyTorch -update -->\n", "<!-- end of training table -->")
	if err != nil {
		t.Fatal(err)
	}
	if *updateDocs {
		if err := blk.Replace(want); err != nil {
			t.Fatal(err)
		}
		return
	}
	if old := blk.Text(); old != want {
		t.Errorf("docs/lab.md's table of the training cross-check differs from this run (go test ./train -run TrainingMatchesPyTorch -update rewrites it):\ndocs/lab.md:\n%s\nrun:\n%s", old, want)
	}
}

// The block of docs/model.md that shows a run of attnlab train at its
// defaults, and the record it is rendered from.
const (
	defaultRunCommand = "ATTNLAB_RUN=DIR go test ./train -run DefaultRunDocs -update"
	defaultRunBegin   = "<!-- default run: " + defaultRunCommand + " -->\n"
	defaultRunEnd     = "<!-- end of default run -->"
	modelPage         = "../docs/model.md"
	defaultRunFile    = "../docs/train-run.json"
	defaultRunPlot    = "../docs/train-loss.png"
)

// defaultRun is docs/train-run.json: what docs/model.md shows of a run of
// attnlab train at its defaults, taken from the run's folder.
type defaultRun struct {
	GeneratedBy  string          `json:"generated_by"`
	Record       train.RunRecord `json:"record"`        // the run's result.json
	FirstLoss    float64         `json:"first_loss"`    // the training loss of the first step (curves.csv)
	LastLoss     float64         `json:"last_loss"`     // and of the last
	TrainSeconds float64         `json:"train_seconds"` // curves.csv's seconds at the last step: training and evaluations
	Evaluations  []evaluation    `json:"evaluations"`   // the rows of curves.csv with a validation loss
}

// evaluation is one validation of the run, as curves.csv holds it.
type evaluation struct {
	Step           int     `json:"step"`
	ValLoss        float64 `json:"val_loss"`          // nats per token
	ValBitsPerByte float64 `json:"val_bits_per_byte"` // over the held-out bytes
}

// readDefaultRun reads what docs/model.md shows from the folder dir of a
// finished run that was not resumed (the wall time of a resumed one is
// its last part's).
func readDefaultRun(dir string) (*defaultRun, error) {
	rec, err := train.ReadRecord(dir)
	if err != nil {
		return nil, err
	}
	if rec.FromStep != 0 {
		return nil, fmt.Errorf("%s: the run was resumed at step %d: its wall time is not the whole run's", dir, rec.FromStep)
	}
	curves := filepath.Join(dir, train.CurvesFile)
	rows, err := train.ReadCurves(curves, rec.Options.Steps)
	if err != nil {
		return nil, err
	}
	d := &defaultRun{GeneratedBy: defaultRunCommand, Record: *rec}
	for i, r := range rows {
		if int(r["step"]) != i+1 {
			return nil, fmt.Errorf("%s: row %d is step %v, want %d", curves, i+1, r["step"], i+1)
		}
		if v, ok := r["val_loss"]; ok {
			d.Evaluations = append(d.Evaluations, evaluation{Step: i + 1, ValLoss: v, ValBitsPerByte: r["val_bits_per_byte"]})
		}
	}
	if len(rows) != rec.Options.Steps || len(d.Evaluations) == 0 {
		return nil, fmt.Errorf("%s: %d steps and %d evaluations, want %d steps and an evaluation", curves, len(rows), len(d.Evaluations), rec.Options.Steps)
	}
	last := rows[len(rows)-1]
	d.FirstLoss, d.LastLoss, d.TrainSeconds = rows[0]["loss"], last["loss"], last["seconds"]
	if !(d.TrainSeconds > 0) {
		return nil, fmt.Errorf("%s: the last step's seconds are %v", curves, d.TrainSeconds)
	}
	return d, nil
}

// checkDefaults says how the run's options and model differ from attnlab
// train's defaults (its -src and -out aside): a run of other options
// (or of a tokenizer that fell short of its vocabulary) is not the one
// docs/model.md describes. Whether the folder was given with -force
// does not count either.
func (d *defaultRun) checkDefaults() error {
	want := train.DefaultRunOptions()
	want.Derive()
	got := d.Record.Options
	want.Src, want.Out, want.Force = got.Src, got.Out, got.Force
	var diffs []string
	flat, defaults := flatJSON(got), flatJSON(want)
	for _, k := range slices.Sorted(maps.Keys(defaults)) {
		if flat[k] != defaults[k] {
			diffs = append(diffs, fmt.Sprintf("%s %s (defaults %s)", k, flat[k], defaults[k]))
		}
	}
	if n := train.DefaultModel().NumParams(); d.Record.Params != n {
		diffs = append(diffs, fmt.Sprintf("%d parameters (defaults %d)", d.Record.Params, n))
	}
	if len(diffs) > 0 {
		return fmt.Errorf("the run is not at attnlab train's defaults: %s", strings.Join(diffs, ", "))
	}
	return nil
}

// flatJSON is v's JSON as leaf path → value ("Schedule.Peak" → "0.003").
func flatJSON(v any) map[string]string {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var tree any
	if err := json.Unmarshal(data, &tree); err != nil {
		panic(err)
	}
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if m, ok := v.(map[string]any); ok {
			for k, c := range m {
				walk(strings.TrimPrefix(prefix+"."+k, "."), c)
			}
			return
		}
		leaf, _ := json.Marshal(v)
		out[prefix] = string(leaf)
	}
	walk("", tree)
	return out
}

// render is the block of docs/model.md: the run's time, losses, the
// table of its evaluations and the compressors on its held-out bytes.
func (d *defaultRun) render() string {
	r, o := d.Record, d.Record.Options
	evals := d.Evaluations
	trend := "falling at every evaluation"
	low := evals[0]
	for i, e := range evals {
		if i > 0 && !(e.ValLoss < evals[i-1].ValLoss) {
			trend = ""
		}
		if e.ValLoss < low.ValLoss {
			low = e
		}
	}
	if trend == "" {
		trend = fmt.Sprintf("lowest at step %d (%.2f)", low.Step, low.ValLoss)
	}
	tokensPerSec := float64(o.Steps*o.BatchSize*o.Accum*o.Window) / d.TrainSeconds
	var b strings.Builder
	b.WriteString(wrap(fmt.Sprintf("Measured by `attnlab train -out run1` itself (its `result.json` and `curves.csv`) on the shared 2-core machine: %s in all, %s training tokens/s; training loss %.2f → %.2f, validation loss %s, %.2f → %.2f nats/token:",
		minSec(r.Seconds), thousands(tokensPerSec), d.FirstLoss, d.LastLoss, trend, evals[0].ValLoss, evals[len(evals)-1].ValLoss)))
	b.WriteString("\n")
	rows := [3][]string{{"step"}, {"validation loss"}, {"bits per byte"}}
	for _, e := range evals {
		rows[0] = append(rows[0], strconv.Itoa(e.Step))
		rows[1] = append(rows[1], fmt.Sprintf("%.2f", e.ValLoss))
		rows[2] = append(rows[2], fmt.Sprintf("%.2f", e.ValBitsPerByte))
	}
	for i, row := range rows {
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
		if i == 0 {
			b.WriteString(strings.Repeat("|---", len(row)) + "|\n")
		}
	}
	held := fmt.Sprintf("On the same %.0f KB of held-out packages: attnlab %.3f bits per byte", float64(r.ValBytes)/1e3, r.ValBitsPerByte)
	for _, c := range r.Compressors {
		held += fmt.Sprintf(", `%s` %.3f", c.Tool, c.BitsPerByte)
	}
	b.WriteString("\n" + wrap(held+"."))
	return b.String()
}

// minSec writes seconds as "5 min 46 s".
func minSec(seconds float64) string {
	s := int(math.Round(seconds))
	if s < 60 {
		return fmt.Sprintf("%d s", s)
	}
	return fmt.Sprintf("%d min %d s", s/60, s%60)
}

// thousands writes v rounded, with commas between thousands: "5,963".
func thousands(v float64) string {
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// wrap breaks a paragraph into lines of at most 72 characters (a longer
// word alone), never inside a code span, each ending in a newline.
func wrap(text string) string {
	var words []string
	inCode := false
	for _, w := range strings.Fields(text) {
		if inCode {
			words[len(words)-1] += " " + w
		} else {
			words = append(words, w)
		}
		if strings.Count(w, "`")%2 == 1 {
			inCode = !inCode
		}
	}
	var b strings.Builder
	n := 0
	for _, w := range words {
		switch {
		case n == 0:
		case n+1+utf8.RuneCountInString(w) > 72:
			b.WriteString("\n")
			n = 0
		default:
			b.WriteString(" ")
			n++
		}
		b.WriteString(w)
		n += utf8.RuneCountInString(w)
	}
	return b.String() + "\n"
}

// defaultRunProse are the sentences of docs/model.md outside the block
// that state the defaults and the run's numbers, rendered from the code's
// defaults and from d.
func (d *defaultRun) prose() []string {
	o, c := train.DefaultRunOptions(), train.DefaultModel()
	heads := fmt.Sprintf("%d heads", c.NumAttentionHeads)
	if c.NumKeyValueHeads < c.NumAttentionHeads {
		heads = fmt.Sprintf("GQA %d/%d heads", c.NumAttentionHeads, c.NumKeyValueHeads)
	}
	tied := "untied embeddings"
	if c.TieWordEmbeddings {
		tied = "tied embeddings"
	}
	minutes := int(math.Round(d.Record.Seconds / 60))
	return []string{
		fmt.Sprintf("a %d-minute model from the defaults of `attnlab train`", minutes),
		fmt.Sprintf("(a seeded %g MB sample)", o.CorpusMB),
		fmt.Sprintf("trains a %d-token byte-level BPE tokenizer", o.Vocab),
		fmt.Sprintf("packs documents into %d-token windows", o.Window),
		fmt.Sprintf("trains a %.1f M-parameter model (dim %d, %d layers, %s, SwiGLU %d, %s) for %d AdamW steps of %d tokens",
			float64(c.NumParams())/1e6, c.HiddenSize, c.NumHiddenLayers, heads, c.IntermediateSize, tied, o.Steps, o.BatchSize*o.Accum*o.Window),
		fmt.Sprintf("The default %d-minute model of the previous section needs %.2f bits per byte on standard-library packages.", minutes, d.Record.ValBitsPerByte),
		fmt.Sprintf("The default %d-minute model of the previous section on the same prompts", minutes),
	}
}

// TestDefaultRunDocs: docs/model.md's block of the default run is the
// rendering of docs/train-run.json, whose run is at attnlab train's
// defaults as they are now, and the sentences around it say the defaults
// and that run's numbers. With -update it rewrites the block (and, with
// ATTNLAB_RUN=DIR, first docs/train-run.json and docs/train-loss.png from
// the run folder DIR). The run takes minutes, so tests never run it.
func TestDefaultRunDocs(t *testing.T) {
	var d *defaultRun
	if dir := os.Getenv("ATTNLAB_RUN"); dir != "" && *updateDocs {
		var err error
		if d, err = readDefaultRun(dir); err != nil {
			t.Fatal(err)
		}
		if err := d.checkDefaults(); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		data, err := json.MarshalIndent(d, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		plot, err := os.ReadFile(filepath.Join(dir, train.PlotFile))
		if err != nil {
			t.Fatal(err)
		}
		if err := atomicfile.WriteFile(defaultRunFile, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := atomicfile.WriteFile(defaultRunPlot, plot, 0o644); err != nil {
			t.Fatal(err)
		}
	} else {
		data, err := os.ReadFile(defaultRunFile)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatalf("%s: %v", defaultRunFile, err)
		}
		if err := d.checkDefaults(); err != nil {
			t.Errorf("%s: %v: docs/model.md shows another run; run attnlab train -out DIR at the defaults and %s", defaultRunFile, err, defaultRunCommand)
		}
	}
	blk, err := docblock.Find(modelPage, defaultRunBegin, defaultRunEnd)
	if err != nil {
		t.Fatal(err)
	}
	want := d.render()
	if *updateDocs {
		if err := blk.Replace(want); err != nil {
			t.Fatal(err)
		}
	} else if blk.Text() != want {
		t.Errorf("docs/model.md's block of the default run is not the rendering of %s (go test ./train -run DefaultRunDocs -update rewrites it):\ndocs/model.md:\n%s\n%s:\n%s", defaultRunFile, blk.Text(), defaultRunFile, want)
	}
	page, err := os.ReadFile(modelPage)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(page)), " ")
	for _, s := range d.prose() {
		if !strings.Contains(text, s) {
			t.Errorf("docs/model.md does not say %q (from attnlab train's defaults and %s)", s, defaultRunFile)
		}
	}
}

// TestDefaultRunFromRunFolder: the generator of docs/model.md's block,
// on the folder of a tiny real run: it takes the record, the first and
// last losses and every evaluation from the folder, renders them, and
// refuses a run not at the defaults, a resumed run and an unfinished one.
func TestDefaultRunFromRunFolder(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	o := tinyRunOptions(t, out)
	if _, err := train.Run(context.Background(), o, train.Events{}); err != nil {
		t.Fatal(err)
	}
	d, err := readDefaultRun(out)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := train.ReadRecord(out)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := train.ReadCurves(filepath.Join(out, train.CurvesFile), o.Steps)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.Record, *rec) || d.FirstLoss != rows[0]["loss"] || d.LastLoss != rows[5]["loss"] || d.TrainSeconds != rows[5]["seconds"] {
		t.Errorf("read %+v; the record %+v, the curves %v", d, rec, rows)
	}
	var steps []int
	for _, e := range d.Evaluations {
		steps = append(steps, e.Step)
		if r := rows[e.Step-1]; e.ValLoss != r["val_loss"] || e.ValBitsPerByte != r["val_bits_per_byte"] {
			t.Errorf("evaluation %+v, curves %v", e, r)
		}
	}
	if !slices.Equal(steps, []int{2, 4, 6}) {
		t.Errorf("evaluations at steps %v, want 2, 4, 6", steps)
	}
	text := d.render()
	for _, s := range []string{
		"| step | 2 | 4 | 6 |\n|---|---|---|---|\n",
		fmt.Sprintf("| bits per byte | %.2f | %.2f | %.2f |\n", rows[1]["val_bits_per_byte"], rows[3]["val_bits_per_byte"], rows[5]["val_bits_per_byte"]),
		fmt.Sprintf("training loss %.2f → %.2f", rows[0]["loss"], rows[5]["loss"]),
		fmt.Sprintf("attnlab %.3f bits per byte", rec.ValBitsPerByte),
	} {
		if !strings.Contains(text, s) {
			t.Errorf("the rendering does not say %q:\n%s", s, text)
		}
	}
	for _, c := range rec.Compressors {
		if s := fmt.Sprintf("`%s` %.3f", c.Tool, c.BitsPerByte); !strings.Contains(strings.ReplaceAll(text, "\n", " "), s) {
			t.Errorf("the rendering does not say %q:\n%s", s, text)
		}
	}
	if err := d.checkDefaults(); err == nil || !strings.Contains(err.Error(), "Steps 6 (defaults 1000)") || !strings.Contains(err.Error(), "Window 32 (defaults 128)") {
		t.Errorf("a run at other options: %v", err)
	}

	// resumed at step 4: refused
	path := filepath.Join(out, train.RecordFile)
	data, _ := os.ReadFile(path)
	if err := os.WriteFile(path, bytes.Replace(data, []byte(`"from_step": 0`), []byte(`"from_step": 4`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readDefaultRun(out); err == nil || !strings.Contains(err.Error(), "resumed at step 4") {
		t.Errorf("a resumed run: %v", err)
	}
	os.Remove(path)
	if _, err := readDefaultRun(out); err == nil || !strings.Contains(err.Error(), train.RecordFile) {
		t.Errorf("an unfinished run: %v", err)
	}
}

// TestRenderDefaultRun: the block of a synthetic run, word for word; a
// validation loss that rises says where it was lowest.
func TestRenderDefaultRun(t *testing.T) {
	o := train.DefaultRunOptions()
	o.Steps, o.BatchSize, o.Window = 3, 2, 10 // 20 tokens a step
	d := &defaultRun{
		Record: train.RunRecord{Options: o, Seconds: 345.6, ValBytes: 256_789, ValBitsPerByte: 2.3766,
			Compressors: []compress.Result{{Tool: "gzip -9", BitsPerByte: 2.3534}, {Tool: "xz -9e", BitsPerByte: 2.0571}}},
		FirstLoss: 7.654, LastLoss: 4.061, TrainSeconds: 0.012,
		Evaluations: []evaluation{{1, 6.18, 3.384}, {2, 5.5449, 3.03}, {3, 4.335, 2.3766}},
	}
	want := "Measured by `attnlab train -out run1` itself (its `result.json` and\n" +
		"`curves.csv`) on the shared 2-core machine: 5 min 46 s in all, 5,000\n" +
		"training tokens/s; training loss 7.65 → 4.06, validation loss falling at\n" +
		"every evaluation, 6.18 → 4.33 nats/token:\n" +
		"\n" +
		"| step | 1 | 2 | 3 |\n" +
		"|---|---|---|---|\n" +
		"| validation loss | 6.18 | 5.54 | 4.33 |\n" +
		"| bits per byte | 3.38 | 3.03 | 2.38 |\n" +
		"\n" +
		"On the same 257 KB of held-out packages: attnlab 2.377 bits per byte,\n" +
		"`gzip -9` 2.353, `xz -9e` 2.057.\n"
	if got := d.render(); got != want {
		t.Errorf("rendered\n%s\nwant\n%s", got, want)
	}
	d.Evaluations[2].ValLoss = 5.6
	if got := d.render(); !strings.Contains(strings.Join(strings.Fields(got), " "), "validation loss lowest at step 2 (5.54), 6.18 → 5.60 nats/token") {
		t.Errorf("a validation loss that rose at the end:\n%s", got)
	}
	if got := minSec(59.4); got != "59 s" {
		t.Errorf("minSec(59.4) = %q", got)
	}
	if got := thousands(1234567.5); got != "1,234,568" {
		t.Errorf("thousands(1234567.5) = %q", got)
	}
}
