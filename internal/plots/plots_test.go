package plots

import (
	"bytes"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/vgimg"
)

// sweep returns a V-shaped error curve like that of a central-difference
// gradient check: c·h² at large steps and u/h at small ones.
func sweep(c float64) Series {
	var s Series
	s.Name = "central"
	for e := -1; e >= -12; e-- {
		h := math.Pow10(e)
		s.X = append(s.X, h)
		s.Y = append(s.Y, c*h*h+1.1e-16/h)
	}
	return s
}

func testSeries() []Series {
	precise := Series{Name: "central-4"}
	for _, h := range sweep(1).X {
		precise.X = append(precise.X, h)
		precise.Y = append(precise.Y, 0.03*h*h*h*h+1.7e-16/h)
	}
	exact := Series{Name: "exact", X: []float64{1e-1, 1e-2, 1e-3}, Y: []float64{0, -1, 1e-17}}
	return []Series{sweep(0.7), precise, exact}
}

// dirEntries returns the names in dir.
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestEpsSweepPNG(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.png"), filepath.Join(dir, "b.png")
	for _, path := range []string{a, b} {
		if err := EpsSweepPNG(path, "gradient check error", testSeries()); err != nil {
			t.Fatal(err)
		}
	}
	if names := dirEntries(t, dir); !slices.Equal(names, []string{"a.png", "b.png"}) {
		t.Errorf("directory holds %v, want only the two images", names)
	}
	da, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(da, db) {
		t.Error("the same input rendered to different bytes")
	}

	img, err := png.Decode(bytes.NewReader(da))
	if err != nil {
		t.Fatalf("output is not a PNG: %v", err)
	}
	dots := func(l vg.Length) int { return int(math.Round(l.Dots(vgimg.DefaultDPI))) }
	wantW, wantH := dots(Width), dots(Height)
	if got := img.Bounds().Size(); got.X != wantW || got.Y != wantH {
		t.Errorf("image is %dx%d, want %dx%d", got.X, got.Y, wantW, wantH)
	}
	if wantW != 605 || wantH != 378 {
		t.Errorf("16cm x 10cm at %d dpi is %dx%d, want 605x378", vgimg.DefaultDPI, wantW, wantH)
	}

	// Rendering a different input changes the image.
	other := testSeries()
	other[0].Y[3] *= 100
	if err := EpsSweepPNG(b, "gradient check error", other); err != nil {
		t.Fatal(err)
	}
	if db, err = os.ReadFile(b); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(da, db) {
		t.Error("different input rendered to the same bytes")
	}
	if fi, err := os.Stat(b); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("stat %s: mode %v, err %v, want 0644", b, fi.Mode(), err)
	}
}

func TestEpsSweepPNGErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sweep.png")
	const old = "previous image"
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		series []Series
	}{
		{"no series", nil},
		{"no points", []Series{{Name: "empty"}}},
		{"length mismatch", []Series{{Name: "s", X: []float64{1e-3, 1e-4}, Y: []float64{1}}}},
		{"zero step", []Series{{Name: "s", X: []float64{0}, Y: []float64{1}}}},
		{"negative step", []Series{{Name: "s", X: []float64{-1e-3}, Y: []float64{1}}}},
		{"NaN step", []Series{{Name: "s", X: []float64{math.NaN()}, Y: []float64{1}}}},
		{"NaN error", []Series{{Name: "s", X: []float64{1e-3}, Y: []float64{math.NaN()}}}},
		{"infinite error", []Series{{Name: "s", X: []float64{1e-3}, Y: []float64{math.Inf(1)}}}},
	} {
		if err := EpsSweepPNG(path, tc.name, tc.series); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != old {
			t.Errorf("%s: existing file changed", tc.name)
		}
	}

	missing := filepath.Join(dir, "missing", "sweep.png")
	if err := EpsSweepPNG(missing, "t", testSeries()); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
	if names := dirEntries(t, dir); !slices.Equal(names, []string{"sweep.png"}) {
		t.Errorf("directory holds %v after failed writes, want only sweep.png", names)
	}
}

func TestEpsSweepRanges(t *testing.T) {
	p, err := epsSweep("t", testSeries())
	if err != nil {
		t.Fatal(err)
	}
	if p.X.Min != 1e-12 || p.X.Max != 1e-1 {
		t.Errorf("x range [%g, %g], want [1e-12, 1e-1]", p.X.Min, p.X.Max)
	}
	if p.Y.Min != Floor || !(p.Y.Max >= 1e-2) {
		t.Errorf("y range [%g, %g], want zero and negative errors clamped to %g", p.Y.Min, p.Y.Max, Floor)
	}

	// A single point still gives a non-empty range.
	p, err = epsSweep("t", []Series{{Name: "s", X: []float64{1e-3}, Y: []float64{1e-9}}})
	if err != nil {
		t.Fatal(err)
	}
	if !(p.X.Min < 1e-3 && p.X.Max > 1e-3 && p.Y.Min < 1e-9 && p.Y.Max > 1e-9) {
		t.Errorf("single point range x [%g, %g] y [%g, %g]", p.X.Min, p.X.Max, p.Y.Min, p.Y.Max)
	}
}

func TestDecadeTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		want   []string
	}{
		{1e-15, 1e-12, []string{"1e-15", "1e-14", "1e-13", "1e-12"}},
		{1e-1, 10, []string{"1e-1", "1", "10"}},
		{1e-18, 1, []string{"1e-18", "1e-15", "1e-12", "1e-9", "1e-6", "1e-3", "1"}},
	} {
		var got []string
		for _, tk := range (decadeTicks{}).Ticks(tc.lo, tc.hi) {
			if tk.Value < tc.lo*(1-1e-9) || tk.Value > tc.hi*(1+1e-9) {
				t.Errorf("[%g, %g]: tick %g out of range", tc.lo, tc.hi, tk.Value)
			}
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("[%g, %g]: labels %q, want %q", tc.lo, tc.hi, got, tc.want)
		}
	}
}

func TestCurvesPNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loss.png")
	err := CurvesPNG(path, "loss", "step", "nats", []Series{
		{Name: "train", X: []float64{1, 2, 3}, Y: []float64{5, 4, 3.5}},
		{Name: "validation", X: []float64{3}, Y: []float64{math.NaN()}},
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("not a PNG: %v", err)
	}
	if err := CurvesPNG(path, "", "", "", nil); err == nil {
		t.Error("an empty plot was accepted")
	}
}
