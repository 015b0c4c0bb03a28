package solvers

import (
	"fmt"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// A solver given another's State (after some steps, or before any) steps on exactly as that one:
// same weights, bit for bit, and the same state after.
func TestStateRoundTrip(t *testing.T) {
	for _, k := range []struct {
		name string
		mk   func(...G.SolverOpt) *Solver
	}{{"sgd", NewSGD}, {"momentum", NewMomentum}, {"adam", NewAdam}, {"rmsprop", NewRMSProp}} {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			for _, before := range []int{0, 3} {
				t.Run(fmt.Sprintf("%s/%v/after-%d", k.name, dt, before), func(t *testing.T) {
					opts := []G.SolverOpt{G.WithLearnRate(0.02), G.WithL2Reg(1e-3)}
					r := rand.New(rand.NewPCG(5, uint64(before)))
					a := newModel(r, dt)
					sa := k.mk(opts...)
					for step := 0; step < before; step++ {
						fillGrads(r, a, cloneModel(a), 1)
						if err := sa.Step(a); err != nil {
							t.Fatal(err)
						}
					}
					st := sa.State()
					if st.Iter != before || (before == 0) != (st.Slots == nil) {
						t.Fatalf("state after %d steps: iter %d, %d parameters", before, st.Iter, len(st.Slots))
					}
					for i, vs := range st.Slots {
						if len(vs) != sa.Kind().Slots() {
							t.Fatalf("parameter %d: %d vectors", i, len(vs))
						}
					}
					b := cloneModel(a)
					sb := k.mk(opts...)
					if err := sb.SetState(st); err != nil {
						t.Fatal(err)
					}
					for step := 0; step < 3; step++ {
						fillGrads(r, a, b, 2)
						if err := sa.Step(a); err != nil {
							t.Fatal(err)
						}
						if err := sb.Step(b); err != nil {
							t.Fatal(err)
						}
					}
					for i := range a {
						sameBits(t, fmt.Sprintf("param %d", i), b[i].(vg).w, a[i].(vg).w)
					}
					ga, gb := sa.State(), sb.State()
					for i := range ga.Slots {
						for j := range ga.Slots[i] {
							x := tensor.New(tensor.WithBacking(ga.Slots[i][j]))
							y := tensor.New(tensor.WithBacking(gb.Slots[i][j]))
							sameBits(t, fmt.Sprintf("param %d state %d", i, j), y, x)
						}
					}
				})
			}
		}
	}
}

// SetState copies: the state it was given can change afterwards without effect.
func TestSetStateCopies(t *testing.T) {
	v := []float32{1, 2}
	s := NewMomentum(G.WithLearnRate(1))
	if err := s.SetState(State{Slots: [][]any{{v}}}); err != nil {
		t.Fatal(err)
	}
	v[0] = 100
	w := tensor.New(tensor.WithBacking([]float32{0, 0}))
	g := tensor.New(tensor.WithBacking([]float32{0, 0}))
	if err := s.Step([]G.ValueGrad{vg{w, g}}); err != nil {
		t.Fatal(err)
	}
	// velocity = 0.9*v - 1*g
	if got := w.Data().([]float32); got[0] != 0.9 || got[1] != 1.8 {
		t.Errorf("weights %v, want [0.9 1.8]", got)
	}
}

func TestSetStateErrors(t *testing.T) {
	f32, f64 := []float32{1, 2}, []float64{1, 2}
	for _, tc := range []struct {
		name string
		s    *Solver
		st   State
	}{
		{"negative step count", NewAdam(), State{Iter: -1}},
		{"too few vectors", NewAdam(), State{Iter: 1, Slots: [][]any{{f32}}}},
		{"vectors for sgd", NewSGD(), State{Iter: 1, Slots: [][]any{{f32}}}},
		{"mixed types", NewAdam(), State{Iter: 1, Slots: [][]any{{f32, f64}}}},
		{"mixed lengths", NewAdam(), State{Iter: 1, Slots: [][]any{{f32, f32[:1]}}}},
		{"not a slice of floats", NewMomentum(), State{Iter: 1, Slots: [][]any{{[]int{1, 2}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.s.SetState(tc.st); err == nil {
				t.Error("no error")
			}
			if st := tc.s.State(); st.Iter != 0 || st.Slots != nil {
				t.Errorf("state changed by a refused SetState: %+v", st)
			}
		})
	}
	// State that does not fit the parameters is refused at the next step.
	s := NewAdam()
	if err := s.SetState(State{Iter: 1, Slots: [][]any{{f32, f32}}}); err != nil {
		t.Fatal(err)
	}
	w := tensor.New(tensor.WithBacking([]float32{1, 2, 3}))
	g := tensor.New(tensor.WithBacking([]float32{1, 1, 1}))
	if err := s.Step([]G.ValueGrad{vg{w, g}}); err == nil {
		t.Error("state of 2 elements, parameter of 3: no error")
	}
}

// SetLearnRate is gorgonia.WithLearnRate for this solver: both change rate mid-run and agree.
func TestSetLearnRate(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	ours := newModel(r, tensor.Float32)
	ref := cloneModel(ours)
	s, gs := NewAdam(G.WithLearnRate(0.01)), G.NewAdamSolver(G.WithLearnRate(0.01))
	for step := 0; step < 4; step++ {
		if step == 2 {
			s.SetLearnRate(0.001)
			G.WithLearnRate(0.001)(gs)
		}
		fillGrads(r, ours, ref, 1)
		if err := s.Step(ours); err != nil {
			t.Fatal(err)
		}
		if err := gs.Step(ref); err != nil {
			t.Fatal(err)
		}
	}
	for i := range ours {
		sameBits(t, fmt.Sprintf("param %d", i), ours[i].(vg).w, ref[i].(vg).w)
	}
}
