package main

import (
	"context"
	"encoding/json"
	"io"

	"github.com/attnlab/attnlab/lab"
)

var labCmd = register(&command{
	name:  "lab",
	usage: "[-json] [-plot FILE]",
	short: "run every check and negative control; exit 1 if any fails or escapes",
	long: `Lab is the main job. It runs every check on the reference attention (all
must pass), runs every check on every registered fault (each must be caught
by at least one check, and the report names which), and sweeps the finite-
difference step ε from 1e-1 to 1e-12 to show the truncation and rounding
regimes, as a table and as a PNG plot.

It exits 0 when everything passes, 1 when a check fails or a fault escapes.

Example: attnlab lab -plot eps-sweep.png`,
})

var (
	labJSON = labCmd.flags.Bool("json", false, "print the report as JSON")
	labPlot = labCmd.flags.String("plot", "eps-sweep.png", "write the ε-sweep plot to this PNG file (\"\" for none)")
)

func init() { labCmd.run = runLab }

func runLab(ctx context.Context, args []string, stdout io.Writer) error {
	if err := noArgs(args); err != nil {
		return err
	}
	r, err := lab.Run(lab.Options{PlotPath: *labPlot})
	if err != nil {
		return err
	}
	if *labJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			*lab.Report
			OK bool `json:"ok"`
		}{r, r.OK()}); err != nil {
			return err
		}
	} else if err := r.WriteText(stdout); err != nil {
		return err
	}
	if !r.OK() {
		return errFailed
	}
	return nil
}
