package plots

import (
	"bytes"
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// CurvesPNG writes to path a plot of each series as a line on linear axes
// (training and validation loss against step, say), with a legend, as a PNG
// image of Width × Height, atomically like EpsSweepPNG. Series may be empty;
// non-finite points are skipped.
func CurvesPNG(path, title, xlabel, ylabel string, series []Series) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	n := 0
	for k, s := range series {
		if len(s.X) != len(s.Y) {
			return fmt.Errorf("plots: series %q has %d x values and %d y values", s.Name, len(s.X), len(s.Y))
		}
		var xy plotter.XYs
		for i, x := range s.X {
			if y := s.Y[i]; !math.IsNaN(x+y) && !math.IsInf(x+y, 0) {
				xy = append(xy, plotter.XY{X: x, Y: y})
			}
		}
		if len(xy) == 0 {
			continue
		}
		n += len(xy)
		line, points, err := plotter.NewLinePoints(xy)
		if err != nil {
			return fmt.Errorf("plots: series %q: %w", s.Name, err)
		}
		line.Color = plotutil.Color(k)
		points.Color = plotutil.Color(k)
		points.Shape = plotutil.Shape(k)
		points.Radius = vg.Points(1.5)
		p.Add(line, points)
		p.Legend.Add(s.Name, line, points)
	}
	if n == 0 {
		return errors.New("plots: no points to plot")
	}
	c, err := draw.NewFormattedCanvas(Width, Height, "png")
	if err != nil {
		return err
	}
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return fmt.Errorf("plots: rendering %s: %w", path, err)
	}
	return writeFileAtomic(path, buf.Bytes())
}
