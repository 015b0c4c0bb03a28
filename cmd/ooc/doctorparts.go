package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gorgonia-ooc/outofcore/internal/checkrun"
	"github.com/gorgonia-ooc/outofcore/train"
	"github.com/gorgonia-ooc/outofcore/vm/alloc"
	"github.com/gorgonia-ooc/outofcore/vm/cuda"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/zoocheck"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels/kernelcheck"
)

// gpuKernels is kernelcheck's Device on a GPU: each buffer is a device
// segment mirrored by host bytes, copied in before every launch that uses it
// and back after (synchronously: the checks are small, and a check reads its
// results right after the launch).
type gpuKernels struct {
	d    *cuda.Device
	mod  *cuda.Module
	fns  map[string]*cuda.Function
	segs []alloc.Segment
	// corrupt, if set, names a kernel whose first output element is changed
	// after each launch: the doctor's tests prove a wrong kernel is caught.
	corrupt string
}

func (g *gpuKernels) Alloc(n int) ([]byte, uintptr, error) {
	s, err := g.d.Memory().AllocSegment(int64(max(n, 1)))
	if err != nil {
		return nil, 0, err
	}
	g.segs = append(g.segs, s)
	return make([]byte, n), s.Addr, nil
}

func (g *gpuKernels) Launch(s *kernels.Spec, l *kernels.Launch, bufs []*kernelcheck.Buffer) error {
	if l.Empty() {
		return nil
	}
	f := g.fns[s.Name]
	if f == nil {
		var err error
		if f, err = g.mod.Function(s.Name); err != nil {
			return err
		}
		g.fns[s.Name] = f
	}
	for _, b := range bufs {
		if b.Size() == 0 {
			continue
		}
		ev, err := g.d.CopyIn(b.Addr(), b.Data())
		if err != nil {
			return err
		}
		if err := g.d.WaitFor(ev); err != nil {
			return err
		}
	}
	err := g.d.LaunchPacked(f, cuda.Dim3{X: l.Grid[0], Y: l.Grid[1], Z: l.Grid[2]}, cuda.Dim3{X: l.Block[0], Y: l.Block[1], Z: l.Block[2]},
		l.SharedBytes, l.Params().Pointer())
	if err != nil {
		return err
	}
	for _, b := range bufs {
		if b.Size() == 0 {
			continue
		}
		if _, err := g.d.CopyOut(b.Data(), b.Addr()); err != nil {
			return err
		}
	}
	if _, err := g.d.EndStep(); err != nil {
		return err
	}
	if g.corrupt == s.Name && len(bufs) > 0 && bufs[0].Size() > 0 {
		b := bufs[0].Data() // the last element becomes a NaN (float32 or float64: top bytes 0x7fff)
		b[len(b)-1], b[len(b)-2] = 0x7f, 0xff
	}
	return nil
}

// free returns the case's segments.
func (g *gpuKernels) free() error {
	var errs []error
	for _, s := range g.segs {
		errs = append(errs, g.d.Memory().FreeSegment(s))
	}
	g.segs = g.segs[:0]
	return errors.Join(errs...)
}

// doctorKernels is the kernels part: every case of kernelcheck.Cases on the
// GPU, one line per kernel as its first case finishes (and a FAIL line for
// a kernel a later case finds wrong).
func doctorKernels(ctx context.Context, rep *doctorReport, d *cuda.Device, cases []kernelcheck.Case, corrupt string) {
	mod, err := d.LoadModule([]byte(kernels.PTX))
	if err != nil {
		rep.add(doctorLine{Part: "kernels", Name: "module", Detail: fmt.Sprintf("loading the PTX: %v", err)})
		return
	}
	defer mod.Unload()
	g := &gpuKernels{d: d, mod: mod, fns: map[string]*cuda.Function{}, corrupt: corrupt}
	done := map[string]bool{}
	for i, c := range cases {
		start := time.Now()
		var mem *kernelcheck.Mem
		res := checkrun.Run(ctx, func(t checkrun.TB) {
			mem = kernelcheck.NewMem(t, g, false)
			c.Run(t, mem)
		})
		if ferr := g.free(); ferr != nil && res.Err == nil {
			res.Err = ferr
		}
		secs := time.Since(start).Seconds()
		if errors.Is(res.Err, checkrun.ErrTimeout) {
			rep.timeout("kernels", fmt.Sprintf("%d of %d cases finished, %d of %d kernels reported; stopped in %s",
				i, len(cases), len(done), len(kernels.Specs), c.Name()))
			return
		}
		reportKernels(rep, c, mem, res.Err, secs, done)
	}
	if len(cases) < len(kernelcheck.Cases) {
		return // -kernels chose some
	}
	for _, s := range kernels.Specs {
		if !done[s.Name] {
			rep.add(doctorLine{Part: "kernels", Name: s.Name, Detail: "no case launched it"})
		}
	}
}

// reportKernels prints the lines of one case: its kernels not yet reported,
// and a FAIL for any kernel it found wrong.
func reportKernels(rep *doctorReport, c kernelcheck.Case, mem *kernelcheck.Mem, err error, secs float64, done map[string]bool) {
	var accs []kernelcheck.Accuracy
	if mem != nil {
		accs = mem.Report()
	}
	blamed := false
	for _, a := range accs {
		wrong := err != nil && !(a.MaxRelErr <= a.Tol)
		if done[a.Kernel] && !wrong {
			continue
		}
		done[a.Kernel] = true
		l := doctorLine{Part: "kernels", Name: a.Kernel, OK: !wrong, Seconds: secs,
			Numbers: map[string]float64{"max_rel_err": a.MaxRelErr, "tol": a.Tol, "launches": float64(a.Launches)},
			Detail:  fmt.Sprintf("max-rel-err %.2g (tol %.0g)", a.MaxRelErr, a.Tol)}
		if wrong {
			blamed = true
			l.Detail += fmt.Sprintf(" in case %s: %v", c.Name(), err)
		}
		rep.add(l)
	}
	if err != nil && !blamed {
		rep.add(doctorLine{Part: "kernels", Name: "case " + c.Name(), Seconds: secs, Detail: err.Error()})
	}
}

// doctorModels is the models part: each zoo case at 100%, 50% and the least
// budget against the CPU device, by zoocheck's rule, one line per model and
// budget.
func doctorModels(ctx context.Context, rep *doctorReport, d *cuda.Device, cases []zoocheck.Case) {
	for i, c := range cases {
		var budgets []zoocheck.Budget
		var peak int64
		start := time.Now()
		res := checkrun.Run(ctx, func(t checkrun.TB) {
			peak = inCorePeak(t, c)
			budgets = zoocheck.Budgets(t, d, c, peak)
		})
		if modelTimeout(rep, res, i, len(cases), c, "planning its budgets") {
			return
		}
		if res.Err != nil {
			rep.add(doctorLine{Part: "models", Name: c.Label(), Seconds: time.Since(start).Seconds(), Detail: res.Err.Error()})
			continue
		}
		for _, b := range budgets {
			start := time.Now()
			var worst map[string]float64
			res := checkrun.Run(ctx, func(t checkrun.TB) { worst = zoocheck.RunAt(t, d, c, b, peak, false) })
			if modelTimeout(rep, res, i, len(cases), c, "at "+b.Label) {
				return
			}
			l := doctorLine{Part: "models", Name: c.Label() + " at " + b.Label, OK: res.Err == nil, Seconds: time.Since(start).Seconds(),
				Numbers: map[string]float64{"budget_bytes": float64(b.Bytes), "peak_bytes": float64(peak),
					"tol": zoocheck.Tolerance(c.Dtype(), false)}}
			var parts []string
			for _, what := range []string{"loss", "gradients", "running statistics", "weights"} {
				if e, ok := worst[what]; ok {
					l.Numbers[strings.ReplaceAll(what, " ", "_")] = e
					parts = append(parts, fmt.Sprintf("%s %.2g", what, e))
				}
			}
			l.Detail = fmt.Sprintf("%s of %s: %s (tol %.0g)", train.FormatBytes(b.Bytes), train.FormatBytes(peak), strings.Join(parts, ", "), l.Numbers["tol"])
			if res.Err != nil {
				l.Detail += ": " + res.Err.Error()
			}
			rep.add(l)
		}
	}
}

func inCorePeak(t checkrun.TB, c zoocheck.Case) int64 {
	return zoocheck.InCorePeak(t, c)
}

// modelTimeout prints the models part's TIMEOUT line if res timed out.
func modelTimeout(rep *doctorReport, res checkrun.Result, i, n int, c zoocheck.Case, where string) bool {
	if !errors.Is(res.Err, checkrun.ErrTimeout) {
		return false
	}
	rep.timeout("models", fmt.Sprintf("%d of %d models finished; stopped in %s %s", i, n, c.Label(), where))
	return true
}

// selectKernels picks kernelcheck cases by group (or all), in their order.
func selectKernels(list string) ([]kernelcheck.Case, error) {
	if list == "" || list == "all" {
		return kernelcheck.Cases, nil
	}
	var out []kernelcheck.Case
	for _, n := range strings.Split(list, ",") {
		cs := kernelcheck.Group(strings.TrimSpace(n))
		if len(cs) == 0 {
			return nil, fmt.Errorf("no kernel check group %q", n)
		}
		out = append(out, cs...)
	}
	return out, nil
}

// selectModels picks zoo cases by model name, or name:dtype
// ("smallcnn:float32"), in the zoo's order, or all, the deep ones last.
func selectModels(list string) ([]zoocheck.Case, error) {
	if list == "" || list == "all" {
		// The default cases first: they take seconds, so a deadline that
		// falls among the deep models leaves every small model checked.
		out := slices.Clone(zoocheck.Cases)
		slices.SortStableFunc(out, func(a, b zoocheck.Case) int {
			switch {
			case a.Deep == b.Deep:
				return 0
			case b.Deep:
				return -1
			}
			return 1
		})
		return out, nil
	}
	var out []zoocheck.Case
	names := strings.Split(list, ",")
	for _, n := range names {
		found := false
		for _, c := range zoocheck.Cases {
			if n = strings.TrimSpace(n); c.Name == n || c.Name+":"+c.Dtype().String() == n {
				found = true
				if !slices.ContainsFunc(out, func(o zoocheck.Case) bool { return o.Name == c.Name && o.Cfg == c.Cfg }) {
					out = append(out, c)
				}
			}
		}
		if !found {
			return nil, fmt.Errorf("no zoo case for model %q", n)
		}
	}
	return out, nil
}
