package sweep

import (
	"fmt"
	"image/color"
	"sort"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/gorgonia-ooc/outofcore/internal/figure"
)

// PlotBudgets draws the paper's Fig. 3 for a sweep: per batch size, the
// largest budget the scheduler could be given (solid) and the memory the
// allocator actually reserved there (dashed), per scheduler and allocator,
// against the device's memory. The file's extension picks the format
// (.svg, .png, .pdf).
func PlotBudgets(rs []Result, file string) error {
	if len(rs) == 0 {
		return fmt.Errorf("sweep: nothing to plot")
	}
	p := sweepPlot(rs, "scheduling budget and reserved memory", "GiB")

	rows := map[string]plotter.XYs{}
	reserved := map[string]plotter.XYs{}
	var names []string
	var capacity plotter.XYs
	for _, r := range rs {
		name := r.Scheduler + "+" + r.Allocator
		if _, ok := rows[name]; !ok {
			names = append(names, name)
			rows[name] = nil
		}
		if !r.OK {
			continue
		}
		rows[name] = append(rows[name], plotter.XY{X: float64(r.Batch), Y: gib(r.Budget)})
		reserved[name] = append(reserved[name], plotter.XY{X: float64(r.Batch), Y: gib(r.Reserved)})
	}
	batches := map[int]bool{}
	for _, r := range rs {
		batches[r.Batch] = true
	}
	var bs []int
	for b := range batches {
		bs = append(bs, b)
	}
	sort.Ints(bs)
	for _, b := range bs {
		capacity = append(capacity, plotter.XY{X: float64(b), Y: gib(rs[0].Capacity)})
	}
	// The device's memory goes first, thin and dash-dotted, so that budget
	// lines reaching it stay visible on top of it.
	cl, err := plotter.NewLine(capacity)
	if err != nil {
		return err
	}
	cl.Color, cl.Width, cl.Dashes = color.RGBA{R: 220, A: 255}, vg.Points(1), []vg.Length{vg.Points(6), vg.Points(2), vg.Points(1), vg.Points(2)}
	p.Add(cl)
	p.Legend.Add("device memory", cl)
	palette := []color.Color{
		color.RGBA{B: 200, A: 255}, color.RGBA{G: 140, A: 255}, color.RGBA{R: 200, G: 120, A: 255},
		color.RGBA{R: 120, B: 160, A: 255}, color.RGBA{G: 120, B: 140, A: 255}, color.RGBA{R: 90, G: 90, B: 90, A: 255},
	}
	for i, name := range names {
		c := palette[i%len(palette)]
		if len(rows[name]) > 0 {
			l, err := plotter.NewLine(rows[name])
			if err != nil {
				return err
			}
			l.Color, l.Width = c, vg.Points(1.5)
			p.Add(l)
			p.Legend.Add(name+" budget", l)
		}
		if len(reserved[name]) > 0 {
			l, err := plotter.NewLine(reserved[name])
			if err != nil {
				return err
			}
			l.Color, l.Dashes = c, []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(l)
			p.Legend.Add(name+" reserved", l)
		}
	}
	p.Legend.ThumbnailWidth = vg.Points(24)
	return figure.Save(p, 8*vg.Inch, 5*vg.Inch, file)
}

func gib(n int64) float64 { return float64(n) / (1 << 30) }

// PlotCompare draws makespan / lower bound against the budget (as % from the
// least memory to the peak), one line per scheduler: the offloading paper's
// Fig. 5 layout.
func PlotCompare(rs []CompareResult, file string) error {
	return plotSchedulers(rs, file, "makespan / lower bound",
		"budget, % of the way from the least memory to the in-core peak", "makespan / LB",
		func(r CompareResult) plotter.XY { return plotter.XY{X: float64(r.Percent), Y: r.Ratio} })
}

// PlotOverhead draws the DQN paper's Fig. 5: per scheduler, the overhead (makespan over the
// in-core step, less 1) against the memory saved (a fraction of the in-core peak).
func PlotOverhead(rs []CompareResult, file string) error {
	return plotSchedulers(rs, file, "overhead against memory saved",
		"memory saved, fraction of the in-core peak", "overhead (makespan / in-core step - 1)",
		func(r CompareResult) plotter.XY { return plotter.XY{X: r.Saved, Y: r.Overhead} })
}

// plotSchedulers draws one line per scheduler through the points that planned, at(r) each.
func plotSchedulers(rs []CompareResult, file, what, x, y string, at func(CompareResult) plotter.XY) error {
	if len(rs) == 0 {
		return fmt.Errorf("sweep: nothing to plot")
	}
	f := rs[0]
	title := fmt.Sprintf("%s %dx%d batch %d: %s (simulated, %s)", f.Model, f.Image, f.Image, f.Batch, what, f.Device)
	p := figure.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	lines := map[string]plotter.XYs{}
	var names []string
	for _, r := range rs {
		if _, ok := lines[r.Scheduler]; !ok {
			names = append(names, r.Scheduler)
			lines[r.Scheduler] = nil
		}
		if r.OK {
			lines[r.Scheduler] = append(lines[r.Scheduler], at(r))
		}
	}
	palette := []color.Color{color.RGBA{B: 200, A: 255}, color.RGBA{R: 200, A: 255}, color.RGBA{G: 140, A: 255}, color.RGBA{R: 200, G: 120, A: 255}, color.RGBA{R: 120, B: 160, A: 255}, color.RGBA{G: 120, B: 140, A: 255}}
	for i, n := range names {
		if len(lines[n]) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(lines[n])
		if err != nil {
			return err
		}
		l.Color, pts.Color = palette[i%len(palette)], palette[i%len(palette)]
		p.Add(l, pts)
		p.Legend.Add(n, l, pts)
	}
	p.Add(plotter.NewGrid())
	return figure.Save(p, 8*vg.Inch, 5*vg.Inch, file)
}
