package plots

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette/brewer"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Colours shared by the figures below.
var (
	maskedGrey = color.RGBA{R: 0xdd, G: 0xdd, B: 0xdd, A: 0xff}
	zeroRed    = color.RGBA{R: 0xc0, G: 0x10, B: 0x10, A: 0xff}
)

// HeatmapPNG writes to path a grid of coloured cells, z[r][c] in row r
// (drawn top to bottom, labelled rowLabels[r]) and column c (labelled
// colLabels[c]), each cell annotated with its value to two decimals. NaN
// cells are drawn grey and annotated nanLabel: the masked entries of an
// attention matrix, say. Colours run from white at 0 to dark blue at the
// largest value. The image is Width × Height, written atomically and
// deterministically, like EpsSweepPNG.
//
// HeatmapPNG returns an error if z is empty or ragged, a label slice has
// the wrong length, or a value is infinite.
func HeatmapPNG(path, title, xlabel, ylabel string, rowLabels, colLabels []string, z [][]float64, nanLabel string) error {
	if len(z) == 0 || len(z[0]) == 0 {
		return errors.New("plots: empty heat map")
	}
	rows, cols := len(z), len(z[0])
	if len(rowLabels) != rows || len(colLabels) != cols {
		return fmt.Errorf("plots: heat map is %d×%d but has %d row and %d column labels", rows, cols, len(rowLabels), len(colLabels))
	}
	top := 0.0
	for r, row := range z {
		if len(row) != cols {
			return fmt.Errorf("plots: heat map row %d has %d values, want %d", r, len(row), cols)
		}
		for c, v := range row {
			if math.IsInf(v, 0) {
				return fmt.Errorf("plots: heat map value [%d][%d] is infinite", r, c)
			}
			if !math.IsNaN(v) {
				top = max(top, v)
			}
		}
	}
	if top == 0 {
		top = 1
	}
	pal, err := brewer.GetPalette(brewer.TypeSequential, "Blues", 9)
	if err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	g := grid{z: z}
	hm := plotter.NewHeatMap(g, pal)
	hm.Min, hm.Max = 0, top
	hm.NaN = maskedGrey

	p := plot.New()
	p.Title.Text = title
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Add(hm)

	var xys plotter.XYs
	var labels []string
	var styles []text.Style
	base := text.Style{Font: plot.DefaultFont, Handler: plot.DefaultTextHandler, XAlign: draw.XCenter, YAlign: draw.YCenter}
	base.Font.Size = vg.Points(9)
	for r, row := range z {
		for c, v := range row {
			xys = append(xys, plotter.XY{X: float64(c), Y: float64(rows - 1 - r)})
			st := base
			switch {
			case math.IsNaN(v):
				labels = append(labels, nanLabel)
				st.Color = color.Gray{Y: 0x70}
			default:
				labels = append(labels, fmt.Sprintf("%.2f", v))
				st.Color = color.Black
				if v > 0.55*top {
					st.Color = color.White
				}
			}
			styles = append(styles, st)
		}
	}
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
	if err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	l.TextStyle = styles
	p.Add(l)

	p.X.Tick.Marker = fixedTicks(colLabels, false)
	p.Y.Tick.Marker = fixedTicks(rowLabels, true)
	p.X.Min, p.X.Max = -0.5, float64(cols)-0.5
	p.Y.Min, p.Y.Max = -0.5, float64(rows)-0.5
	return render(path, p, Width, Height)
}

// grid is z as a plotter.GridXYZ, row 0 at the top.
type grid struct{ z [][]float64 }

func (g grid) Dims() (c, r int)   { return len(g.z[0]), len(g.z) }
func (g grid) Z(c, r int) float64 { return g.z[len(g.z)-1-r][c] }
func (g grid) X(c int) float64    { return float64(c) }
func (g grid) Y(r int) float64    { return float64(r) }

// fixedTicks labels the integer positions 0, 1, … with labels; reversed
// labels them from the top, for the rows of a heat map.
type fixedTicker struct {
	labels   []string
	reversed bool
}

func fixedTicks(labels []string, reversed bool) plot.Ticker {
	return fixedTicker{labels, reversed}
}

// Ticks implements plot.Ticker.
func (f fixedTicker) Ticks(lo, hi float64) []plot.Tick {
	ticks := make([]plot.Tick, len(f.labels))
	for i, l := range f.labels {
		v := float64(i)
		if f.reversed {
			v = float64(len(f.labels) - 1 - i)
		}
		ticks[i] = plot.Tick{Value: v, Label: l}
	}
	return ticks
}

// BarsPNG writes to path a grouped bar chart: for each category c, one bar
// per series of height series[k].Y[c] (X is ignored), side by side, with a
// legend. A value that is exactly zero gets a red cross on the axis and the
// label zeroLabel above it, so that a zero bar is seen as a zero and not as a
// bar missing from the drawing. Written like EpsSweepPNG.
//
// BarsPNG returns an error if there are no categories or series, a series
// has the wrong length, or a value is negative or not finite.
func BarsPNG(path, title, xlabel, ylabel string, categories []string, series []Series, zeroLabel string) error {
	if len(categories) == 0 || len(series) == 0 {
		return errors.New("plots: no bars to draw")
	}
	p := plot.New()
	p.Title.Text = title
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Legend.Top = true

	width := vg.Points(14)
	var zeros plotter.XYs
	for k, s := range series {
		if len(s.Y) != len(categories) {
			return fmt.Errorf("plots: series %q has %d values for %d categories", s.Name, len(s.Y), len(categories))
		}
		for c, v := range s.Y {
			if !(v >= 0) || math.IsInf(v, 1) {
				return fmt.Errorf("plots: series %q: value %d = %v, want finite and >= 0", s.Name, c, v)
			}
		}
		bars, err := plotter.NewBarChart(plotter.Values(s.Y), width)
		if err != nil {
			return fmt.Errorf("plots: series %q: %w", s.Name, err)
		}
		bars.Color = plotutil.Color(k)
		bars.LineStyle.Width = 0
		bars.Offset = (vg.Length(k) - vg.Length(len(series)-1)/2) * width
		p.Add(bars)
		p.Legend.Add(s.Name, bars)
		for c, v := range s.Y {
			if v == 0 {
				// the offset of a bar, in data units: the plot is not laid out
				// yet, so crosses go at the category and their labels say it
				zeros = append(zeros, plotter.XY{X: float64(c), Y: 0})
			}
		}
	}
	if len(zeros) > 0 {
		// one mark per category whose bars include a zero
		var marks plotter.XYs
		var labels []string
		for _, z := range zeros {
			if len(marks) > 0 && marks[len(marks)-1].X == z.X {
				continue
			}
			marks = append(marks, z)
			labels = append(labels, zeroLabel)
		}
		sc, err := plotter.NewScatter(marks)
		if err != nil {
			return fmt.Errorf("plots: %w", err)
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: zeroRed, Radius: vg.Points(4), Shape: draw.CrossGlyph{}}
		p.Add(sc)
		p.Legend.Add(zeroLabel, sc)
		l, err := plotter.NewLabels(plotter.XYLabels{XYs: marks, Labels: labels})
		if err != nil {
			return fmt.Errorf("plots: %w", err)
		}
		for i := range l.TextStyle {
			l.TextStyle[i].Color = zeroRed
			l.TextStyle[i].XAlign = draw.XCenter
		}
		l.Offset = vg.Point{Y: vg.Points(6)}
		p.Add(l)
	}
	p.NominalX(categories...)
	p.Y.Min = 0
	return render(path, p, Width, Height)
}

// Path is one series of points of PathsPNG: the points (X[i], Y[i]) joined by
// a line (Line) or drawn as open rings (Rings), each labelled Labels[i] when
// Labels is not nil.
type Path struct {
	Name   string
	X, Y   []float64
	Line   bool
	Rings  bool
	Labels []string
}

// PathsPNG writes to path a plot of 2-D paths on equal axes centred on the
// origin, with room for the legend above them: the trajectory of a rotated
// pair of features, say. Each path gets the colour of its index modulo
// colours, so that a line and a ring series may share one (colours = 3 gives
// paths k and k+3 the same colour). The image is PathsWidth wide, written
// like EpsSweepPNG.
//
// PathsPNG returns an error if there are no points, X and Y or Labels have
// different lengths, or a value is not finite.
func PathsPNG(path, title string, paths []Path, colours int) error {
	p := plot.New()
	p.Title.Text = title
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text = "feature i₀ of the pair"
	p.Y.Label.Text = "feature i₁ of the pair"
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	extent := 0.0
	for k, s := range paths {
		if len(s.X) != len(s.Y) || (s.Labels != nil && len(s.Labels) != len(s.X)) {
			return fmt.Errorf("plots: path %q: %d x, %d y and %d labels", s.Name, len(s.X), len(s.Y), len(s.Labels))
		}
		if len(s.X) == 0 {
			continue
		}
		xy := make(plotter.XYs, len(s.X))
		for i := range s.X {
			if math.IsNaN(s.X[i]+s.Y[i]) || math.IsInf(s.X[i]+s.Y[i], 0) {
				return fmt.Errorf("plots: path %q: point %d is not finite", s.Name, i)
			}
			xy[i] = plotter.XY{X: s.X[i], Y: s.Y[i]}
			extent = max(extent, math.Abs(s.X[i]), math.Abs(s.Y[i]))
		}
		col := plotutil.Color(k % max(colours, 1))
		var thumbs []plot.Thumbnailer
		if s.Line {
			l, err := plotter.NewLine(xy)
			if err != nil {
				return fmt.Errorf("plots: %w", err)
			}
			l.Color = col
			l.Width = vg.Points(0.6)
			sc, err := plotter.NewScatter(xy)
			if err != nil {
				return fmt.Errorf("plots: %w", err)
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: col, Radius: vg.Points(2.2), Shape: draw.CircleGlyph{}}
			p.Add(l, sc)
			thumbs = append(thumbs, l, sc)
		}
		if s.Rings {
			sc, err := plotter.NewScatter(xy)
			if err != nil {
				return fmt.Errorf("plots: %w", err)
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: col, Radius: vg.Points(4.5), Shape: draw.RingGlyph{}}
			p.Add(sc)
			thumbs = append(thumbs, sc)
		}
		if s.Name != "" {
			p.Legend.Add(s.Name, thumbs...)
		}
		if s.Labels != nil {
			l, err := plotter.NewLabels(plotter.XYLabels{XYs: xy, Labels: s.Labels})
			if err != nil {
				return fmt.Errorf("plots: %w", err)
			}
			for i := range l.TextStyle {
				l.TextStyle[i].Color = col
				l.TextStyle[i].Font.Size = vg.Points(8)
			}
			l.Offset = vg.Point{X: vg.Points(4), Y: vg.Points(3)}
			p.Add(l)
		}
	}
	if extent == 0 {
		return errors.New("plots: no points to plot")
	}
	// Equal scales on both axes keep circles round: the data area's aspect
	// is that of the ranges. The axes, labels and title take about margin
	// on each dimension; the legend goes in the band above the paths.
	lim := extent * 1.2
	top := lim + extent*0.6
	p.X.Min, p.X.Max = -lim, lim
	p.Y.Min, p.Y.Max = -lim, top
	p.X.Tick.Marker = halfTicks{extent}
	p.Y.Tick.Marker = halfTicks{extent}
	const margin = 1.7 * vg.Centimeter
	h := margin + (PathsWidth-margin)*vg.Length((top+lim)/(2*lim))
	return render(path, p, PathsWidth, h)
}

// PathsWidth is the width of the figures written by PathsPNG.
const PathsWidth = 14 * vg.Centimeter

// FigureDPI is the resolution of the figures below: twice the screen's 96,
// so that they stay sharp when a page shows them at their size in
// centimetres on a high-density screen, or scaled.
const FigureDPI = 192

// render draws p on a w × h canvas at FigureDPI and writes it to path as
// PNG, atomically.
func render(path string, p *plot.Plot, w, h vg.Length) error {
	c := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(FigureDPI))
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&buf); err != nil {
		return fmt.Errorf("plots: rendering %s: %w", path, err)
	}
	return writeFileAtomic(path, buf.Bytes())
}

// halfTicks labels the multiples of a round step within ±extent, so that
// both axes of PathsPNG carry the same labels, whatever their range.
type halfTicks struct{ extent float64 }

// Ticks implements plot.Ticker.
func (h halfTicks) Ticks(lo, hi float64) []plot.Tick {
	step := math.Pow10(int(math.Floor(math.Log10(h.extent))))
	if h.extent/step < 2 {
		step /= 2
	}
	var ticks []plot.Tick
	for k := math.Ceil(-h.extent / step); k*step <= h.extent*(1+1e-9); k++ {
		v := k * step
		if v < lo || v > hi {
			continue
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: fmt.Sprintf("%g", v)})
	}
	return ticks
}
