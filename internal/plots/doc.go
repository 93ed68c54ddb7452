// Package plots draws the figures of the project's reports with
// gonum.org/v1/plot.
//
// EpsSweepPNG plots the error of a finite-difference gradient check against
// its step on log-log axes, which shows the truncation regime (error falling
// with the step) and the rounding regime (error growing as the step
// shrinks) as two straight lines meeting at the best step. Files are
// written atomically and the rendering is deterministic, so a figure only
// changes when its data do.
package plots
