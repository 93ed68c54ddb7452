package train_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/attnlab/attnlab/model"
	"github.com/attnlab/attnlab/train"
)

// tinyRunOptions are the options of a run of a few seconds on this
// repository's own source, into out.
func tinyRunOptions(t *testing.T, out string) train.RunOptions {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	o := train.DefaultRunOptions()
	o.Src, o.Out = root, out
	o.CorpusMB, o.ValFrac, o.ValKB, o.Vocab, o.Window = 0.3, 0.2, 4, 300, 32
	o.Model = model.Config{HiddenSize: 16, NumHiddenLayers: 1, NumAttentionHeads: 2, NumKeyValueHeads: 1, IntermediateSize: 32,
		RMSNormEps: 1e-5, RopeTheta: 10000, TieWordEmbeddings: true}
	o.BatchSize, o.Steps, o.EvalEvery, o.Schedule.Warmup = 2, 6, 2, 2
	o.Derive()
	return o
}

// TestRunRecord: a finished run writes its record (the options it was
// given, its model's size, the held-out measures of its last evaluation
// beside the compressors on the same bytes), which resuming it at its end
// keeps; a run in the folder that is not finished leaves no record, an
// earlier run's included.
func TestRunRecord(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	o := tinyRunOptions(t, out)
	res, err := train.Run(context.Background(), o, train.Events{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := train.ReadRecord(out)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Options, o) {
		t.Errorf("recorded options\n%+v\nwant\n%+v", r.Options, o)
	}
	rows, err := train.ReadCurves(filepath.Join(out, train.CurvesFile), o.Steps)
	if err != nil {
		t.Fatal(err)
	}
	if r.Params != res.Params || r.FromStep != 0 || r.ValBytes != res.ValBytes || r.ValBytes == 0 || !(r.Seconds > 0) {
		t.Errorf("record: params %d, from step %d, %d held-out bytes, %v s; the run: %d params, %d bytes",
			r.Params, r.FromStep, r.ValBytes, r.Seconds, res.Params, res.ValBytes)
	}
	// the last evaluation, as the curves hold it (to their 7 digits)
	if last := rows[len(rows)-1]; relDiff(r.ValLoss, last["val_loss"]) > 1e-6 || relDiff(r.ValBitsPerByte, last["val_bits_per_byte"]) > 1e-6 {
		t.Errorf("record: validation %v nats/token, %v bits/byte; the curves' last row %v", r.ValLoss, r.ValBitsPerByte, last)
	}
	if !reflect.DeepEqual(r.Compressors, res.Compressors) {
		t.Errorf("record's compressors %+v, the run's %+v", r.Compressors, res.Compressors)
	}
	for _, c := range r.Compressors {
		if c.Bytes != r.ValBytes {
			t.Errorf("%s measured on %d bytes, the held-out set has %d", c.Tool, c.Bytes, r.ValBytes)
		}
	}

	// the finished run resumed: nothing to do, its record stays as it is
	before, err := os.ReadFile(filepath.Join(out, train.RecordFile))
	if err != nil {
		t.Fatal(err)
	}
	resumed := o
	resumed.Resume = true
	if res, err := train.Run(context.Background(), resumed, train.Events{}); err != nil || res.Loop.Steps() != 0 {
		t.Fatalf("resuming the finished run: %v", err)
	}
	if after, err := os.ReadFile(filepath.Join(out, train.RecordFile)); err != nil || !bytes.Equal(after, before) {
		t.Errorf("resuming the finished run changed its record (%v):\n%s\nwas\n%s", err, after, before)
	}

	// -force in the same folder, stopped before training (-prepare): the
	// earlier run's record goes.
	o.Force, o.Prepare = true, true
	if _, err := train.Run(context.Background(), o, train.Events{}); err != nil {
		t.Fatal(err)
	}
	if _, err := train.ReadRecord(out); err == nil || !strings.Contains(err.Error(), "no "+train.RecordFile) {
		t.Errorf("an unfinished run's folder: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, train.RecordFile)); !os.IsNotExist(err) {
		t.Errorf("%s left: %v", train.RecordFile, err)
	}
}

func relDiff(a, b float64) float64 {
	d := a - b
	if d < 0 {
		d = -d
	}
	return d / max(1, b, -b)
}
