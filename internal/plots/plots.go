package plots

import (
	"bytes"
	"errors"
	"fmt"
	"math"

	"github.com/attnlab/attnlab/internal/atomicfile"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Size of the figures written by EpsSweepPNG.
const (
	Width  = 16 * vg.Centimeter
	Height = 10 * vg.Centimeter
)

// Floor is the value that zero and negative errors are raised to before
// they are drawn on a log scale.
const Floor = 1e-18

// maxLabels is the largest number of labelled decades on a log axis.
const maxLabels = 8

// Series is one named curve: Y[i] is drawn against X[i].
type Series struct {
	Name string
	X, Y []float64
}

// Axis labels of EpsSweepPNG.
const (
	xLabel = "step ε"
	yLabel = "max |analytic − numeric|"
)

// EpsSweepPNG writes to path a log-log plot of error (Y) against
// finite-difference step (X) for each series, drawn as points joined by
// lines, with the given title and a legend, as a PNG image of
// Width × Height. Y values that are zero or negative are drawn at Floor.
//
// The image is rendered in memory and written to a temporary file in the
// same directory, which is then renamed to path, so path is either left
// untouched or replaced by a complete image. The same input always gives
// the same bytes.
//
// EpsSweepPNG returns an error if there are no points, if a series has X
// and Y of different lengths, if an X value is not positive and finite, or
// if a Y value is NaN or infinite.
func EpsSweepPNG(path, title string, series []Series) error {
	p, err := epsSweep(title, series)
	if err != nil {
		return err
	}
	data, err := renderPNG(p)
	if err != nil {
		return fmt.Errorf("plots: rendering %s: %w", path, err)
	}
	return writeFileAtomic(path, data)
}

// epsSweep builds the plot drawn by EpsSweepPNG. Its Y axis label is left
// blank, to be drawn by renderPNG.
func epsSweep(title string, series []Series) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text = xLabel
	p.X.Scale = plot.LogScale{}
	p.Y.Scale = plot.LogScale{}
	p.X.Tick.Marker = decadeTicks{}
	p.Y.Tick.Marker = decadeTicks{}
	// plot places the bounding box of a vertical axis label at the
	// arithmetic mean of the axis range, which on a log axis is near the
	// top, and then shrinks the plot to keep that box inside the image.
	// A blank label reserves the same width; renderPNG draws the text.
	p.Y.Label.Text = " "
	// The error is large at both ends of a sweep and smallest in the
	// middle, so the legend goes at the top centre (see renderPNG).
	p.Legend.Top = true
	p.Legend.YOffs = -vg.Points(4)

	xmin, xmax := math.Inf(1), math.Inf(-1)
	ymin, ymax := math.Inf(1), math.Inf(-1)
	for k, s := range series {
		if len(s.X) != len(s.Y) {
			return nil, fmt.Errorf("plots: series %q has %d x values and %d y values", s.Name, len(s.X), len(s.Y))
		}
		if len(s.X) == 0 {
			continue
		}
		xy := make(plotter.XYs, len(s.X))
		for i, x := range s.X {
			y := s.Y[i]
			if !(x > 0) || math.IsInf(x, 1) {
				return nil, fmt.Errorf("plots: series %q: x[%d] = %v is not positive and finite", s.Name, i, x)
			}
			if math.IsNaN(y) || math.IsInf(y, 0) {
				return nil, fmt.Errorf("plots: series %q: y[%d] = %v is not finite", s.Name, i, y)
			}
			xy[i].X, xy[i].Y = x, max(y, Floor)
			xmin, xmax = min(xmin, x), max(xmax, x)
			ymin, ymax = min(ymin, xy[i].Y), max(ymax, xy[i].Y)
		}
		line, points, err := plotter.NewLinePoints(xy)
		if err != nil {
			return nil, fmt.Errorf("plots: series %q: %w", s.Name, err)
		}
		line.Color = plotutil.Color(k)
		points.Color = plotutil.Color(k)
		points.Shape = plotutil.Shape(k)
		p.Add(line, points)
		p.Legend.Add(s.Name, line, points)
	}
	if math.IsInf(xmin, 1) {
		return nil, errors.New("plots: no points to plot")
	}
	// Whole decades at both ends, so that the axes start and end on a
	// labelled tick.
	p.X.Min, p.X.Max = decades(xmin, xmax)
	p.Y.Min, p.Y.Max = decades(ymin, ymax)
	return p, nil
}

// renderPNG draws p, as built by epsSweep, on a Width × Height canvas and
// returns it encoded as PNG.
func renderPNG(p *plot.Plot) ([]byte, error) {
	c, err := draw.NewFormattedCanvas(Width, Height, "png")
	if err != nil {
		return nil, err
	}
	dc := draw.New(c)
	data := p.DataCanvas(dc)

	// Centre the legend over the data area.
	legend := p.Legend.Rectangle(dc)
	p.Legend.XOffs = data.Center().X + (legend.Max.X-legend.Min.X)/2 - dc.Max.X

	p.Draw(dc)

	// The Y axis label, where plot would draw it: rotated, against the
	// left edge, centred on the data area.
	sty := p.Y.Label.TextStyle
	x := dc.Min.X + sty.Height(yLabel) - sty.FontExtents().Descent
	sty.Rotation += math.Pi / 2
	dc.FillText(sty, vg.Point{X: x, Y: data.Center().Y}, yLabel)

	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeFileAtomic writes data to path atomically (see package atomicfile).
func writeFileAtomic(path string, data []byte) error {
	if err := atomicfile.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	return nil
}

// decades returns the smallest range of whole decades holding [lo, hi],
// at least one decade wide.
func decades(lo, hi float64) (float64, float64) {
	lo, hi = decadeBelow(lo), decadeAbove(hi)
	if lo == hi {
		lo, hi = lo/10, hi*10
	}
	return lo, hi
}

// decadeBelow returns the largest power of ten not above x > 0.
func decadeBelow(x float64) float64 {
	e := int(math.Floor(math.Log10(x)))
	// Log10 may be off by an ulp at powers of ten.
	if math.Pow10(e+1) <= x {
		e++
	}
	if math.Pow10(e) > x {
		e--
	}
	if d := math.Pow10(e); d > 0 {
		return d
	}
	return x
}

// decadeAbove returns the smallest power of ten not below x > 0.
func decadeAbove(x float64) float64 {
	e := int(math.Ceil(math.Log10(x)))
	if math.Pow10(e-1) >= x {
		e--
	}
	if math.Pow10(e) < x {
		e++
	}
	if d := math.Pow10(e); !math.IsInf(d, 1) {
		return d
	}
	return x
}

// decadeTicks is a plot.Ticker for log axes. It places ticks with
// plot.LogTicks, labels decades as 1e-12, 1e-11, ..., 0.1, 1, 10, ... and,
// when the axis spans many decades, labels only every k-th decade so that
// at most maxLabels labels are drawn.
type decadeTicks struct{}

// Ticks implements plot.Ticker.
func (decadeTicks) Ticks(lo, hi float64) []plot.Tick {
	// LogTicks starts at 10^int(log10(lo)), truncating toward zero, which
	// skips the first decade when log10(lo) rounds to just above a
	// negative integer; starting from lo/2 avoids that, and the ticks
	// outside [lo, hi] are dropped.
	all := plot.LogTicks{}.Ticks(lo/2, hi)
	const slack = 1e-9
	ticks := all[:0]
	labels := 0
	for _, t := range all {
		if t.Value < lo*(1-slack) || t.Value > hi*(1+slack) {
			continue
		}
		if t.Label != "" {
			labels++
		}
		ticks = append(ticks, t)
	}
	step := max(1, (labels+maxLabels-1)/maxLabels)
	for i, t := range ticks {
		if t.Label == "" {
			continue
		}
		e := int(math.Round(math.Log10(t.Value)))
		switch {
		case e%step != 0:
			ticks[i].Label = ""
		case e == 0:
			ticks[i].Label = "1"
		case e == 1:
			ticks[i].Label = "10"
		default:
			ticks[i].Label = fmt.Sprintf("1e%d", e)
		}
	}
	return ticks
}
