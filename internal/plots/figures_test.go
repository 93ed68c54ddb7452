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
)

// pngSize decodes the PNG at path and returns its size.
func pngSize(t *testing.T, path string) (int, int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s is not a PNG: %v", path, err)
	}
	s := img.Bounds().Size()
	return s.X, s.Y
}

func dotsAt(l vg.Length, dpi int) int { return int(math.Round(l.Dots(float64(dpi)))) }

// TestFigures draws each figure twice: the bytes must be equal, the size
// that of the figure at FigureDPI, and nothing but the images left behind.
func TestFigures(t *testing.T) {
	nan := math.NaN()
	draw := map[string]func(path string) error{
		"heat.png": func(path string) error {
			return HeatmapPNG(path, "P", "key", "query", []string{"q0", "q1"}, []string{"k0", "k1", "k2"},
				[][]float64{{1, nan, nan}, {0.25, 0.75, nan}}, "masked")
		},
		"bars.png": func(path string) error {
			return BarsPNG(path, "grads", "key", "norm", []string{"k0", "k1", "k2"},
				[]Series{{Name: "dK", Y: []float64{0.5, 1, 0}}, {Name: "dV", Y: []float64{0.7, 0.2, 0}}}, "exactly 0")
		},
		"paths.png": func(path string) error {
			return PathsPNG(path, "rotation", []Path{
				{Name: "fast", X: []float64{1, 0, -1}, Y: []float64{0, 1, 0}, Line: true, Labels: []string{"0", "1", "2"}},
				{Name: "rings", X: []float64{1, 0, -1}, Y: []float64{0, 1, 0}, Rings: true},
			}, 1)
		},
	}
	dir := t.TempDir()
	for name, f := range draw {
		a, b := filepath.Join(dir, name), filepath.Join(dir, "again-"+name)
		if err := f(a); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := f(b); err != nil {
			t.Fatal(err)
		}
		da, _ := os.ReadFile(a)
		db, _ := os.ReadFile(b)
		if !bytes.Equal(da, db) {
			t.Errorf("%s: the same input rendered to different bytes", name)
		}
		w, h := pngSize(t, a)
		if name == "paths.png" {
			if w != dotsAt(PathsWidth, FigureDPI) || h <= w {
				t.Errorf("%s is %dx%d, want %d wide and taller than wide", name, w, h, dotsAt(PathsWidth, FigureDPI))
			}
		} else if w != dotsAt(Width, FigureDPI) || h != dotsAt(Height, FigureDPI) {
			t.Errorf("%s is %dx%d, want %dx%d", name, w, h, dotsAt(Width, FigureDPI), dotsAt(Height, FigureDPI))
		}
	}
	if got := dirEntries(t, dir); len(got) != 2*len(draw) {
		t.Errorf("directory holds %v", got)
	}
}

func TestFiguresRejectBadInput(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.png")
	for name, err := range map[string]error{
		"empty heat map":     HeatmapPNG(path, "", "", "", nil, nil, nil, ""),
		"ragged heat map":    HeatmapPNG(path, "", "", "", []string{"a", "b"}, []string{"x", "y"}, [][]float64{{1, 2}, {3}}, ""),
		"heat map labels":    HeatmapPNG(path, "", "", "", []string{"a"}, []string{"x"}, [][]float64{{1, 2}}, ""),
		"infinite heat":      HeatmapPNG(path, "", "", "", []string{"a"}, []string{"x"}, [][]float64{{math.Inf(1)}}, ""),
		"no bars":            BarsPNG(path, "", "", "", nil, nil, ""),
		"bars length":        BarsPNG(path, "", "", "", []string{"a", "b"}, []Series{{Name: "s", Y: []float64{1}}}, ""),
		"negative bar":       BarsPNG(path, "", "", "", []string{"a"}, []Series{{Name: "s", Y: []float64{-1}}}, ""),
		"no paths":           PathsPNG(path, "", nil, 1),
		"path lengths":       PathsPNG(path, "", []Path{{X: []float64{1}, Y: []float64{1, 2}}}, 1),
		"path labels":        PathsPNG(path, "", []Path{{X: []float64{1}, Y: []float64{1}, Labels: []string{"a", "b"}}}, 1),
		"non-finite point":   PathsPNG(path, "", []Path{{X: []float64{math.NaN()}, Y: []float64{1}}}, 1),
		"only origin points": PathsPNG(path, "", []Path{{X: []float64{0}, Y: []float64{0}}}, 1),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if got := dirEntries(t, dir); !slices.Equal(got, []string(nil)) {
		t.Errorf("failed draws left %v", got)
	}
}

func TestHalfTicks(t *testing.T) {
	var got []string
	for _, tk := range (halfTicks{1}).Ticks(-1.2, 1.8) {
		got = append(got, tk.Label)
	}
	if want := []string{"-1", "-0.5", "0", "0.5", "1"}; !slices.Equal(got, want) {
		t.Errorf("ticks %q, want %q", got, want)
	}
}
