// Command plotcurves draws the validation bits per byte of training runs
// against the training tokens they had seen, one line per run, from their
// curves.csv: the scaling study of docs/model.md.
//
//	go run ./scripts/plotcurves -o docs/scaling.png NAME=RUN NAME=RUN ...
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/attnlab/attnlab/internal/plots"
	"github.com/attnlab/attnlab/train"
)

func main() {
	out := flag.String("o", "scaling.png", "the PNG to write")
	title := flag.String("title", "validation bits per byte against training tokens", "the plot's title")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: plotcurves -o FILE NAME=RUN ...")
		os.Exit(2)
	}
	var series []plots.Series
	for _, arg := range flag.Args() {
		name, run, ok := strings.Cut(arg, "=")
		if !ok {
			name, run = filepath.Base(arg), arg
		}
		rows, err := train.ReadCurves(filepath.Join(run, train.CurvesFile), math.MaxInt)
		if err != nil {
			fmt.Fprintln(os.Stderr, "plotcurves:", err)
			os.Exit(1)
		}
		s := plots.Series{Name: name}
		tokens := 0.0
		for _, r := range rows {
			tokens += r["tokens"]
			if v, ok := r["val_bits_per_byte"]; ok {
				s.X, s.Y = append(s.X, tokens/1e6), append(s.Y, v)
			}
		}
		series = append(series, s)
	}
	if err := plots.CurvesPNG(*out, *title, "training tokens (millions)", "held-out bits per byte", series); err != nil {
		fmt.Fprintln(os.Stderr, "plotcurves:", err)
		os.Exit(1)
	}
}
