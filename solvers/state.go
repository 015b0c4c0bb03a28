package solvers

import (
	"fmt"

	"gorgonia.org/tensor"
)

// State is what a Solver carries from one step to the next, for checkpoints: the step count
// (Adam's bias correction depends on it) and each parameter's state vectors, by position.
type State struct {
	Iter int
	// Slots[i] are parameter i's state vectors, each a []float32 or []float64 as long as the
	// parameter: Momentum's velocity, Adam's mean and variance (in that order), RMSProp's
	// cache; none for SGD. Slots is nil before the first step.
	Slots [][]any
}

// Slots reports how many state vectors the rule keeps per parameter.
func (k Kind) Slots() int {
	switch k {
	case Momentum, RMSProp:
		return 1
	case Adam:
		return 2
	}
	return 0
}

// State returns the solver's state. The vectors are the solver's own, not copies: the next Step
// overwrites them, so save them first.
func (s *Solver) State() State {
	st := State{Iter: s.iter}
	if s.params == nil {
		return st
	}
	st.Slots = make([][]any, len(s.params))
	for i := range s.params {
		p := &s.params[i]
		var vs []any
		switch p.dt {
		case tensor.Float32:
			vs = appendSlots(vs, s.kind, &p.f32)
		case tensor.Float64:
			vs = appendSlots(vs, s.kind, &p.f64)
		}
		st.Slots[i] = vs
	}
	return st
}

func appendSlots[T float](vs []any, k Kind, v *vecs[T]) []any {
	switch k.Slots() {
	case 1:
		return append(vs, v.a)
	case 2:
		return append(vs, v.a, v.b)
	}
	return vs
}

// SetState replaces the solver's state with a copy of st, as if it had taken st.Iter steps
// ending in those state vectors: a solver given another's State steps on exactly as that one
// would. The next Step checks that the parameters have the lengths and types of st's vectors.
// On error the solver is unchanged.
func (s *Solver) SetState(st State) error {
	if st.Iter < 0 {
		return fmt.Errorf("solvers: %v state: step count %d is negative", s.kind, st.Iter)
	}
	if st.Slots == nil {
		s.iter, s.params, s.chunks = st.Iter, nil, nil
		return nil
	}
	params := make([]param, len(st.Slots))
	for i, vs := range st.Slots {
		if len(vs) != s.kind.Slots() {
			return fmt.Errorf("solvers: %v state: parameter %d has %d state vectors, want %d", s.kind, i, len(vs), s.kind.Slots())
		}
		p := &params[i]
		p.length = -1
		for j, x := range vs {
			var n int
			var err error
			switch x := x.(type) {
			case []float32:
				n, err = setSlot(p, tensor.Float32, &p.f32, j, x)
			case []float64:
				n, err = setSlot(p, tensor.Float64, &p.f64, j, x)
			default:
				err = fmt.Errorf("is a %T, want []float32 or []float64", x)
			}
			if err != nil {
				return fmt.Errorf("solvers: %v state: parameter %d, vector %d: %w", s.kind, i, j, err)
			}
			p.length = n
		}
	}
	s.iter, s.params, s.chunks = st.Iter, params, nil
	if s.kind == SGD { // SGD keeps no vectors, so the lengths come from the first step
		s.params = nil
		return nil
	}
	s.makeChunks()
	return nil
}

// setSlot copies x into state vector j of p, checking it agrees with p's other vectors.
func setSlot[T float](p *param, dt tensor.Dtype, v *vecs[T], j int, x []T) (int, error) {
	if p.length >= 0 && (p.dt != dt || p.length != len(x)) {
		return 0, fmt.Errorf("%v of %d elements, vector 0 is %v of %d", dt, len(x), p.dt, p.length)
	}
	p.dt = dt
	c := append([]T(nil), x...)
	if j == 0 {
		v.a = c
	} else {
		v.b = c
	}
	return len(x), nil
}
