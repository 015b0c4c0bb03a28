package solvers

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// vg is a parameter outside any graph: both gorgonia's solvers and ours take it.
type vg struct{ w, g *tensor.Dense }

func (p vg) Value() G.Value         { return p.w }
func (p vg) Grad() (G.Value, error) { return p.g, nil }
func (p vg) String() string         { return fmt.Sprint(p.w.Shape()) }

var sizes = []int{1, 7, 300, chunkLen + 5} // the last spans two chunks

func newModel(r *rand.Rand, dt tensor.Dtype) []G.ValueGrad {
	var m []G.ValueGrad
	for _, n := range sizes {
		w := tensor.New(tensor.Of(dt), tensor.WithShape(n))
		g := tensor.New(tensor.Of(dt), tensor.WithShape(n))
		for i := 0; i < n; i++ {
			v := r.NormFloat64()
			if i%17 == 0 {
				v = 0 // sign(0) in the L1 term
			}
			w.Set(i, convert(dt, v))
		}
		m = append(m, vg{w, g})
	}
	return m
}

func convert(dt tensor.Dtype, v float64) any {
	if dt == tensor.Float32 {
		return float32(v)
	}
	return v
}

func cloneModel(m []G.ValueGrad) []G.ValueGrad {
	out := make([]G.ValueGrad, len(m))
	for i, p := range m {
		out[i] = vg{p.(vg).w.Clone().(*tensor.Dense), p.(vg).g.Clone().(*tensor.Dense)}
	}
	return out
}

func fillGrads(r *rand.Rand, a, b []G.ValueGrad, scale float64) {
	for i := range a {
		ga, gb := a[i].(vg).g, b[i].(vg).g
		for j := 0; j < ga.Len(); j++ {
			v := convert(ga.Dtype(), r.NormFloat64()*scale)
			ga.Set(j, v)
			gb.Set(j, v)
		}
	}
}

func sameBits(t *testing.T, what string, a, b *tensor.Dense) {
	t.Helper()
	switch x := a.Data().(type) {
	case []float32:
		y := b.Data().([]float32)
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
				t.Fatalf("%s[%d]: ours %v, gorgonia %v", what, i, x[i], y[i])
			}
		}
	case []float64:
		y := b.Data().([]float64)
		for i := range x {
			if math.Float64bits(x[i]) != math.Float64bits(y[i]) {
				t.Fatalf("%s[%d]: ours %v, gorgonia %v", what, i, x[i], y[i])
			}
		}
	}
}

type solverCase struct {
	name string
	ours func(...G.SolverOpt) *Solver
	ref  func(...G.SolverOpt) G.Solver
	opts []G.SolverOpt
}

func solverCases() []solverCase {
	opt := map[string][]G.SolverOpt{
		"defaults": nil,
		"lr":       {G.WithLearnRate(0.05)},
		"clip":     {G.WithLearnRate(0.01), G.WithClip(0.5)},
		"l1l2":     {G.WithLearnRate(0.01), G.WithL1Reg(0.01), G.WithL2Reg(0.003)},
		"batch":    {G.WithLearnRate(0.1), G.WithBatchSize(32), G.WithClip(0.02)},
		"all":      {G.WithLearnRate(0.02), G.WithL1Reg(1e-3), G.WithL2Reg(1e-2), G.WithBatchSize(4), G.WithClip(1), G.WithMomentum(0.8), G.WithBeta1(0.8), G.WithBeta2(0.99), G.WithEps(1e-6), G.WithRho(0.9)},
	}
	kinds := []struct {
		name string
		ours func(...G.SolverOpt) *Solver
		ref  func(...G.SolverOpt) G.Solver
	}{
		{"sgd", NewSGD, func(o ...G.SolverOpt) G.Solver { return G.NewVanillaSolver(o...) }},
		{"momentum", NewMomentum, func(o ...G.SolverOpt) G.Solver { return G.NewMomentum(o...) }},
		{"adam", NewAdam, func(o ...G.SolverOpt) G.Solver { return G.NewAdamSolver(o...) }},
		{"rmsprop", NewRMSProp, func(o ...G.SolverOpt) G.Solver { return G.NewRMSPropSolver(o...) }},
	}
	var cs []solverCase
	for _, k := range kinds {
		for _, on := range []string{"defaults", "lr", "clip", "l1l2", "batch", "all"} {
			cs = append(cs, solverCase{k.name + "/" + on, k.ours, k.ref, opt[on]})
		}
	}
	return cs
}

// TestSameBitsAsGorgonia runs each solver next to gorgonia's over many steps with the same
// gradients and requires the same weights, bit for bit, after every step, and zeroed gradients.
func TestSameBitsAsGorgonia(t *testing.T) {
	const steps = 25
	for _, tc := range solverCases() {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			t.Run(fmt.Sprintf("%s/%v", tc.name, dt), func(t *testing.T) {
				r := rand.New(rand.NewPCG(7, uint64(len(tc.name))))
				ours := newModel(r, dt)
				ref := cloneModel(ours)
				s, gs := tc.ours(tc.opts...), tc.ref(tc.opts...)
				for step := 0; step < steps; step++ {
					fillGrads(r, ours, ref, 1+float64(step%3))
					if err := s.Step(ours); err != nil {
						t.Fatal(err)
					}
					if err := gs.Step(ref); err != nil {
						t.Fatal(err)
					}
					for i := range ours {
						sameBits(t, fmt.Sprintf("step %d param %d weights", step, i), ours[i].(vg).w, ref[i].(vg).w)
						sameBits(t, fmt.Sprintf("step %d param %d grad", step, i), ours[i].(vg).g, ref[i].(vg).g)
					}
				}
			})
		}
	}
}

// TestSameBitsAnyThreads: the update is element-wise, so the split cannot matter; this checks
// that no element is skipped or done twice whatever the goroutine count.
func TestSameBitsAnyThreads(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	var first []G.ValueGrad
	for _, procs := range []int{1, 2, 5} {
		runtime.GOMAXPROCS(procs)
		r := rand.New(rand.NewPCG(1, 1))
		m := newModel(r, tensor.Float32)
		s := NewAdam(G.WithLearnRate(0.01))
		for step := 0; step < 5; step++ {
			fillGrads(r, m, cloneModel(m), 1)
			if err := s.Step(m); err != nil {
				t.Fatal(err)
			}
		}
		if first == nil {
			first = m
			continue
		}
		for i := range m {
			sameBits(t, fmt.Sprintf("GOMAXPROCS=%d param %d", procs, i), m[i].(vg).w, first[i].(vg).w)
		}
	}
}

func TestNoAllocationAfterFirstStep(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	m := newModel(r, tensor.Float32)
	for _, s := range []*Solver{NewSGD(), NewMomentum(), NewAdam(), NewRMSProp()} {
		if err := s.Step(m); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(10, func() { s.Step(m) }); n != 0 {
			t.Errorf("%v: %v allocations per step", s.Kind(), n)
		}
	}
}

func TestStepErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	m := newModel(r, tensor.Float32)
	s := NewAdam()
	if err := s.Step(m); err != nil {
		t.Fatal(err)
	}
	ints := tensor.New(tensor.WithShape(2), tensor.WithBacking([]int{1, 2}))
	bad := []struct {
		name  string
		model []G.ValueGrad
	}{
		{"fewer parameters", m[:1]},
		{"resized parameter", append(newModel(r, tensor.Float32)[:3], vg{tensor.New(tensor.WithShape(2), tensor.WithBacking([]float32{1, 2})), tensor.New(tensor.WithShape(2), tensor.WithBacking([]float32{1, 2}))})},
		{"dtype changed", newModel(r, tensor.Float64)},
	}
	for _, b := range bad {
		if err := s.Step(b.model); err == nil {
			t.Errorf("%s: no error", b.name)
		}
	}
	if err := NewSGD().Step([]G.ValueGrad{vg{ints, ints}}); err == nil {
		t.Error("int parameter: no error")
	}
	// A first step that fails binds nothing: the next good step starts afresh.
	fresh := NewSGD(G.WithLearnRate(1))
	w := tensor.New(tensor.WithBacking([]float32{1, 2}))
	g := tensor.New(tensor.WithBacking([]float32{1, 1}))
	if err := fresh.Step([]G.ValueGrad{vg{w, g}, vg{ints, ints}}); err == nil {
		t.Fatal("int parameter after a good one: no error")
	}
	if err := fresh.Step([]G.ValueGrad{vg{w, g}}); err != nil {
		t.Fatal(err)
	}
	if got := w.Data().([]float32); got[0] != 0 || got[1] != 1 {
		t.Errorf("weights after one step of lr 1: %v, want [0 1]", got)
	}
	if err := NewSGD().Step([]G.ValueGrad{vg{tensor.New(tensor.WithBacking([]float32{1, 2})), tensor.New(tensor.WithBacking([]float32{1}))}}); err == nil {
		t.Error("gradient of another size: no error")
	}
}
