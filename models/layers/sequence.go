package layers

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// A sequence here is laid out like a one-pixel-high image: (N, C, 1, T), step t in column t. The
// data loaders and the per-pixel softmax loss then serve sequence models unchanged, and a 1x1
// convolution over the sequence is a linear layer applied at every step.

// Embedding looks up token ids: ids is (N, 1, 1, T) holding integers in [0, V) as floats (exact
// below 2^24 in float32), table is (V, E), and the result is (N, E, 1, T). The only gradient is
// the table's, a scatter-add of dy in a fixed order; ids are data. An id that is not an integer in
// range is an error, not a panic.
func Embedding(ids, table *G.Node) (*G.Node, error) {
	is, ts := ids.Shape(), table.Shape()
	if is.Dims() != 4 || is[1] != 1 || is[2] != 1 || ts.Dims() != 2 {
		return nil, fmt.Errorf("layers: Embedding wants (N,1,1,T) ids and a (V,E) table, got %v and %v", is, ts)
	}
	return apply(embedSpec{}, ids, table)
}

type embedSpec struct{}

func (embedSpec) name() string { return "Embedding" }
func (embedSpec) arity() int   { return 2 }
func (embedSpec) typ() hm.Type { return fnType(4, 2, 4) }
func (embedSpec) outShape(in []tensor.Shape) (tensor.Shape, error) {
	is, ts := in[0], in[1]
	if is.Dims() != 4 || is[1] != 1 || is[2] != 1 || ts.Dims() != 2 || is.TotalSize() == 0 || ts.TotalSize() == 0 {
		return nil, fmt.Errorf("layers: Embedding wants (N,1,1,T) ids and a (V,E) table, got %v and %v", is, ts)
	}
	return tensor.Shape{is[0], ts[1], 1, is[3]}, nil
}
func (embedSpec) flops(in []tensor.Shape) int64 { return int64(in[0].TotalSize() * in[1][1]) }
func (embedSpec) diff(int) []bool               { return []bool{false, true} }
func (embedSpec) grads(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	dt, err := apply(embedGradSpec{vocab: in[1].Shape()[0]}, in[0], grad)
	return G.Nodes{nil, dt}, err
}
func (embedSpec) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return embedExec[float32](out, in[0], in[1], nil)
	}
	return embedExec[float64](out, in[0], in[1], nil)
}

// embedGradSpec: (ids, dy (N,E,1,T)) -> dtable (V,E).
type embedGradSpec struct {
	backward
	vocab int
}

func (s embedGradSpec) name() string { return fmt.Sprintf("EmbeddingGrad{%d}", s.vocab) }
func (s embedGradSpec) arity() int   { return 2 }
func (s embedGradSpec) typ() hm.Type { return fnType(4, 4, 2) }
func (s embedGradSpec) outShape(in []tensor.Shape) (tensor.Shape, error) {
	is, d := in[0], in[1]
	if is.Dims() != 4 || d.Dims() != 4 || d[0] != is[0] || d[2] != 1 || d[3] != is[3] || s.vocab < 1 {
		return nil, fmt.Errorf("layers: %s of ids %v and gradient %v", s.name(), is, d)
	}
	return tensor.Shape{s.vocab, d[1]}, nil
}
func (s embedGradSpec) flops(in []tensor.Shape) int64 {
	return int64(in[1].TotalSize()) + int64(s.vocab*in[1][1])
}
func (s embedGradSpec) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return embedExec[float32](out, in[0], nil, in[1])
	}
	return embedExec[float64](out, in[0], nil, in[1])
}

// tokenIDs checks and converts the id operand.
func tokenIDs[T float](v G.Value, vocab int) ([]int, error) {
	xs, err := denseData[T](v, nil)
	if err != nil {
		return nil, err
	}
	ids := make([]int, len(xs))
	for i, x := range xs {
		f := float64(x)
		if f != math.Trunc(f) || f < 0 || f >= float64(vocab) {
			return nil, fmt.Errorf("layers: Embedding: token %d is %v, want an integer in [0, %d)", i, f, vocab)
		}
		ids[i] = int(f)
	}
	return ids, nil
}

// embedExec gathers table rows into out, or with dyv scatters dy into out (the table gradient).
// Columns of E run in parallel; each column adds tokens in (n, t) order.
func embedExec[T float](out, idv, tablev, dyv G.Value) error {
	os := out.Shape()
	var V, E int
	if dyv == nil {
		V, E = tablev.Shape()[0], tablev.Shape()[1]
	} else {
		V, E = os[0], os[1]
	}
	ids, err := tokenIDs[T](idv, V)
	if err != nil {
		return err
	}
	is := idv.Shape()
	N, Tn := is[0], is[3]
	res, err := outData[T](out, os)
	if err != nil {
		return err
	}
	if dyv == nil {
		table, err := denseData[T](tablev, tensor.Shape{V, E})
		if err != nil {
			return err
		}
		parallelFor(N, int64(len(res)), func(n0, n1 int) {
			for n := n0; n < n1; n++ {
				for t, id := range ids[n*Tn : (n+1)*Tn] {
					row := table[id*E : (id+1)*E]
					for e, v := range row {
						res[(n*E+e)*Tn+t] = v
					}
				}
			}
		})
		return nil
	}
	dy, err := denseData[T](dyv, tensor.Shape{N, E, 1, Tn})
	if err != nil {
		return err
	}
	clear(res)
	parallelFor(E, int64(len(dy)), func(e0, e1 int) {
		for n := 0; n < N; n++ {
			for t, id := range ids[n*Tn : (n+1)*Tn] {
				for e := e0; e < e1; e++ {
					res[id*E+e] += dy[(n*E+e)*Tn+t]
				}
			}
		}
	})
	return nil
}

// SequenceStep takes step t of a (N, C, 1, T) sequence as an (N, C) matrix. Its gradient is the
// step's gradient placed in an otherwise zero sequence: gorgonia gives every reader of a node a
// full-shaped gradient, so splitting a length-T sequence costs T such tensors in the backward.
func SequenceStep(seq *G.Node, t int) (*G.Node, error) {
	s := seq.Shape()
	if s.Dims() != 4 || s[2] != 1 || t < 0 || t >= s[3] {
		return nil, fmt.Errorf("layers: SequenceStep %d of %v: want an (N,C,1,T) sequence and 0 <= t < T", t, s)
	}
	return apply(seqSpec{kind: seqStep, t: t, steps: s[3]}, seq)
}

// StackSequence stacks T (N, C) steps into an (N, C, 1, T) sequence; step t's gradient is
// SequenceStep(dy, t), so the backward costs one tensor per step.
func StackSequence(steps ...*G.Node) (*G.Node, error) {
	if len(steps) == 0 {
		return nil, fmt.Errorf("layers: StackSequence of nothing")
	}
	return apply(seqSpec{kind: seqStack, steps: len(steps)}, steps...)
}

type seqKind uint8

const (
	seqStep  seqKind = iota // (N,C,1,T) -> (N,C): column t
	seqPlace                // (N,C) -> (N,C,1,T): column t, zeros elsewhere
	seqStack                // T x (N,C) -> (N,C,1,T)
)

// seqSpec moves data between steps and sequences; all three kinds are linear and each one's
// gradients are the others.
type seqSpec struct {
	kind  seqKind
	t     int
	steps int
}

func (s seqSpec) name() string {
	switch s.kind {
	case seqStep:
		return fmt.Sprintf("SequenceStep{%d of %d}", s.t, s.steps)
	case seqPlace:
		return fmt.Sprintf("SequencePlace{%d of %d}", s.t, s.steps)
	}
	return fmt.Sprintf("StackSequence{%d}", s.steps)
}
func (s seqSpec) arity() int {
	if s.kind == seqStack {
		return s.steps
	}
	return 1
}
func (s seqSpec) typ() hm.Type {
	switch s.kind {
	case seqStep:
		return fnType(4, 2)
	case seqPlace:
		return fnType(2, 4)
	}
	dims := make([]int, s.steps+1)
	for i := range dims {
		dims[i] = 2
	}
	dims[s.steps] = 4
	return fnType(dims...)
}
func (s seqSpec) outShape(in []tensor.Shape) (tensor.Shape, error) {
	x := in[0]
	if s.kind == seqStep {
		if x.Dims() != 4 || x[2] != 1 || x[3] != s.steps {
			return nil, fmt.Errorf("layers: %s of %v", s.name(), x)
		}
		return tensor.Shape{x[0], x[1]}, nil
	}
	for _, y := range in {
		if y.Dims() != 2 || !y.Eq(x) {
			return nil, fmt.Errorf("layers: %s of steps %v: want (N,C) steps of one shape", s.name(), in)
		}
	}
	return tensor.Shape{x[0], x[1], 1, s.steps}, nil
}
func (s seqSpec) flops(in []tensor.Shape) int64 {
	if s.kind == seqPlace {
		return size1(in) * int64(s.steps)
	}
	return size1(in) * int64(len(in))
}
func (s seqSpec) diff(n int) []bool {
	d := make([]bool, n)
	for i := range d {
		d[i] = true
	}
	return d
}
func (s seqSpec) grads(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	switch s.kind {
	case seqStep:
		d, err := apply(seqSpec{kind: seqPlace, t: s.t, steps: s.steps}, grad)
		return G.Nodes{d}, err
	case seqPlace:
		d, err := apply(seqSpec{kind: seqStep, t: s.t, steps: s.steps}, grad)
		return G.Nodes{d}, err
	}
	gs := make(G.Nodes, s.steps)
	for t := range gs {
		var err error
		if gs[t], err = apply(seqSpec{kind: seqStep, t: t, steps: s.steps}, grad); err != nil {
			return nil, err
		}
	}
	return gs, nil
}
func (s seqSpec) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return seqExec[float32](s, out, in)
	}
	return seqExec[float64](s, out, in)
}

func seqExec[T float](s seqSpec, out G.Value, in []G.Value) error {
	os := out.Shape()
	res, err := outData[T](out, os)
	if err != nil {
		return err
	}
	switch s.kind {
	case seqStep:
		x, err := denseData[T](in[0], nil)
		if err != nil {
			return err
		}
		for i := range res { // (n, c) rows of the sequence, column t
			res[i] = x[i*s.steps+s.t]
		}
	case seqPlace:
		x, err := denseData[T](in[0], nil)
		if err != nil {
			return err
		}
		clear(res)
		for i, v := range x {
			res[i*s.steps+s.t] = v
		}
	default:
		for t, v := range in {
			x, err := denseData[T](v, nil)
			if err != nil {
				return err
			}
			for i, xv := range x {
				res[i*s.steps+t] = xv
			}
		}
	}
	return nil
}
