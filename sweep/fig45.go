package sweep

import (
	"fmt"
	"image/color"
	"io"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/gorgonia-ooc/outofcore/internal/figure"
)

// PlotSpeed draws the Sony paper's Fig. 4 for a sweep: images/s of a training step against the
// batch size, one line per scheduler and allocator, points only where a step completed.
func PlotSpeed(rs []Result, file string) error {
	return plotPerRow(rs, file, "images/s of a training step", "images/s", false,
		func(r Result) float64 { return r.IPS })
}

// PlotReserved draws the paper's Fig. 5: the memory the allocator reserved against the batch
// size, one line per scheduler and allocator, with the device's memory.
func PlotReserved(rs []Result, file string) error {
	return plotPerRow(rs, file, "memory the allocator reserved", "GiB", true,
		func(r Result) float64 { return gib(r.Reserved) })
}

// sweepPlot is a plot of a sweep against the batch size, titled with the model, its input, what
// is drawn and where the numbers come from (simulated on which profile, or measured).
func sweepPlot(rs []Result, what, unit string) *plot.Plot {
	p := figure.New()
	where := "measured on the CPU device"
	if rs[0].Simulated {
		where = "SIMULATED on " + rs[0].Device
	}
	p.Title.Text = fmt.Sprintf("%s %s: %s (%s)", rs[0].Model, rs[0].Size(), what, where)
	p.X.Label.Text = "batch size"
	p.Y.Label.Text = unit
	return p
}

// plotPerRow draws y(r) against the batch for each scheduler+allocator row of a sweep.
func plotPerRow(rs []Result, file, what, unit string, capacity bool, y func(Result) float64) error {
	if len(rs) == 0 {
		return fmt.Errorf("sweep: nothing to plot")
	}
	p := sweepPlot(rs, what, unit)
	lines := map[string]plotter.XYs{}
	var names []string
	var batches []int
	for _, r := range rs {
		name := r.Scheduler + " + " + r.Allocator
		if _, ok := lines[name]; !ok {
			names = append(names, name)
			lines[name] = nil
		}
		batches = append(batches, r.Batch)
		if r.OK {
			lines[name] = append(lines[name], plotter.XY{X: float64(r.Batch), Y: y(r)})
		}
	}
	palette := []color.Color{color.RGBA{B: 200, A: 255}, color.RGBA{G: 140, A: 255}, color.RGBA{R: 230, G: 120, A: 255},
		color.RGBA{R: 120, B: 160, A: 255}, color.RGBA{G: 120, B: 140, A: 255}, color.RGBA{R: 90, G: 90, B: 90, A: 255}}
	for i, name := range names {
		pts := lines[name]
		if len(pts) == 0 {
			continue
		}
		sort.Slice(pts, func(a, b int) bool { return pts[a].X < pts[b].X })
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		c := palette[i%len(palette)]
		l.Color, l.Width, sc.Color = c, vg.Points(1.5), c
		p.Add(l, sc)
		p.Legend.Add(name, l, sc)
	}
	if capacity {
		sort.Ints(batches)
		cl, err := plotter.NewLine(plotter.XYs{{X: float64(batches[0]), Y: gib(rs[0].Capacity)}, {X: float64(batches[len(batches)-1]), Y: gib(rs[0].Capacity)}})
		if err != nil {
			return err
		}
		cl.Color, cl.Width, cl.Dashes = color.RGBA{R: 220, A: 255}, vg.Points(1), []vg.Length{vg.Points(6), vg.Points(2), vg.Points(1), vg.Points(2)}
		p.Add(cl)
		p.Legend.Add("device memory", cl)
		p.Y.Min = 0
	}
	p.Add(plotter.NewGrid())
	p.Legend.ThumbnailWidth = vg.Points(24)
	return figure.Save(p, 8*vg.Inch, 5*vg.Inch, file)
}

// Gains sums up a sweep against the paper's Section 5.2: each row's largest batch, the in-core
// largest (the best baseline row), and, per row, the reserved memory's range over the batches
// it trained.
type Gains struct {
	InCore  int            // largest batch a baseline row trained
	Largest map[string]int // per "scheduler + allocator" row
	// ReservedMin and ReservedMax are the least and most bytes reserved at the batches a row
	// trained.
	ReservedMin, ReservedMax map[string]int64
	rows                     []string
}

// Summarize computes the gains of a sweep.
func Summarize(rs []Result) Gains {
	g := Gains{Largest: map[string]int{}, ReservedMin: map[string]int64{}, ReservedMax: map[string]int64{}}
	for _, r := range rs {
		name := r.Scheduler + " + " + r.Allocator
		if _, ok := g.Largest[name]; !ok {
			g.rows = append(g.rows, name)
			g.Largest[name] = 0
		}
		if !r.OK {
			continue
		}
		g.Largest[name] = max(g.Largest[name], r.Batch)
		if r.Scheduler == "baseline" {
			g.InCore = max(g.InCore, r.Batch)
		}
		if lo, ok := g.ReservedMin[name]; !ok || r.Reserved < lo {
			g.ReservedMin[name] = r.Reserved
		}
		g.ReservedMax[name] = max(g.ReservedMax[name], r.Reserved)
	}
	return g
}

// Spread is a row's reserved-memory range relative to its largest reservation (0: flat).
func (g Gains) Spread(row string) float64 {
	hi := g.ReservedMax[row]
	if hi == 0 {
		return 0
	}
	return float64(hi-g.ReservedMin[row]) / float64(hi)
}

// Write prints the gains: every row's largest batch and its ratio to the in-core largest, and
// how much its reserved memory varies across the batches it trained.
func (g Gains) Write(w io.Writer) error {
	for _, row := range g.rows {
		line := fmt.Sprintf("%-20s largest batch %d", row, g.Largest[row])
		if g.InCore > 0 && g.Largest[row] > 0 {
			line += fmt.Sprintf(" = %.2fx the in-core largest (%d)", float64(g.Largest[row])/float64(g.InCore), g.InCore)
		}
		if g.ReservedMax[row] > 0 {
			line += fmt.Sprintf("; reserved %.2f..%.2f GiB (spread %.1f%%)", gib(g.ReservedMin[row]), gib(g.ReservedMax[row]), 100*g.Spread(row))
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}
