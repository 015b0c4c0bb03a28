package layers

import (
	"fmt"
	"hash"
	"hash/fnv"
	"slices"
	"sync/atomic"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// kernel is what each op of this package supplies; the Do, UsePreallocDo and DoWorkspace entry
// points are all built on it, so the three paths run literally the same code and agree bit for bit.
type kernel interface {
	G.Op
	outShape(in []tensor.Shape) (tensor.Shape, error)
	wsBytes(dt tensor.Dtype, in []tensor.Shape) int64
	// exec writes every element of out; out and ws hold arbitrary bytes on entry.
	exec(dt tensor.Dtype, out G.Value, ws []byte, in []G.Value) error
}

// tiler is a kernel that also runs in less workspace than wsBytes (in tiles), with the same results.
type tiler interface {
	minWsBytes(dt tensor.Dtype, in []tensor.Shape) int64
}

func checkInputs(k kernel, in []G.Value) (tensor.Dtype, []tensor.Shape, error) {
	if len(in) != k.Arity() {
		return tensor.Dtype{}, nil, fmt.Errorf("layers: %v takes %d inputs, got %d", k, k.Arity(), len(in))
	}
	dt, err := commonDtype(in)
	if err != nil {
		return dt, nil, fmt.Errorf("%v: %w", k, err)
	}
	return dt, shapesOf(in), nil
}

func doAlloc(k kernel, in []G.Value) (G.Value, error) {
	dt, shapes, err := checkInputs(k, in)
	if err != nil {
		return nil, err
	}
	os, err := k.outShape(shapes)
	if err != nil {
		return nil, err
	}
	var out G.Value = newDense(dt, os)
	if os.IsScalar() { // the losses
		out = newScalar(dt)
	}
	if err := k.exec(dt, out, allocWorkspace(k.wsBytes(dt, shapes)), in); err != nil {
		return nil, err
	}
	return out, nil
}

func doPrealloc(k kernel, prealloc G.Value, in []G.Value) (G.Value, error) {
	if err := doWorkspace(k, prealloc, nil, in, true); err != nil {
		return nil, err
	}
	return prealloc, nil
}

func doWorkspace(k kernel, out G.Value, ws []byte, in []G.Value, alloc bool) error {
	c, err := checkShapes(k, in)
	if err != nil {
		return err
	}
	dt, shapes, os := c.dt, c.in, c.out
	if out == nil {
		return fmt.Errorf("layers: %v: nil output", k)
	}
	if out.Dtype() != dt {
		return fmt.Errorf("layers: %v: output dtype %v, inputs %v", k, out.Dtype(), dt)
	}
	if !out.Shape().Eq(os) {
		return fmt.Errorf("layers: %v: output shape %v, want %v", k, out.Shape(), os)
	}
	need := k.wsBytes(dt, shapes)
	if t, ok := k.(tiler); ok && !alloc {
		need = t.minWsBytes(dt, shapes)
	}
	if alloc {
		ws = allocWorkspace(need)
	} else if int64(len(ws)) < need {
		return fmt.Errorf("layers: %v: workspace of %d bytes, need %d", k, len(ws), need)
	}
	return k.exec(dt, out, ws, in)
}

// shapeCheck is what checkShapes found for one call: the operands' dtype and shapes (owned
// here) and the output shape they give.
type shapeCheck struct {
	dt  tensor.Dtype
	in  []tensor.Shape
	out tensor.Shape
}

// matches reports whether operands of dtype dt have exactly the shapes the check was made for.
func (c *shapeCheck) matches(dt tensor.Dtype, in []G.Value) bool {
	if c.dt != dt || len(c.in) != len(in) {
		return false
	}
	for i, v := range in {
		if !slices.Equal(v.Shape(), c.in[i]) {
			return false
		}
	}
	return true
}

// shapeMemo keeps an op's last shapeCheck. A training step calls each op with the same shapes
// every time, and building the shape lists again was a hundred allocations a step. Checks are
// immutable once stored and swapped atomically, so concurrent calls are safe. Ops embed it;
// the ones that do not (value types) build their check on every call.
type shapeMemo struct{ last atomic.Pointer[shapeCheck] }

func (m *shapeMemo) memo() *shapeMemo { return m }

// checkShapes is checkInputs and the op's output shape, from the op's memo when the operands'
// dtype and shapes are the last ones it checked. Neither the memo's lists nor the shape it
// returns may be changed: they are shared.
func checkShapes(k kernel, in []G.Value) (*shapeCheck, error) {
	m, memoized := k.(interface{ memo() *shapeMemo })
	if memoized && len(in) == k.Arity() {
		if dt, err := commonDtype(in); err == nil {
			if c := m.memo().last.Load(); c != nil && c.matches(dt, in) {
				return c, nil
			}
		}
	}
	dt, shapes, err := checkInputs(k, in)
	if err != nil {
		return nil, err
	}
	c := &shapeCheck{dt: dt, in: make([]tensor.Shape, len(shapes))}
	for i, s := range shapes {
		c.in[i] = slices.Clone(s)
	}
	if c.out, err = k.outShape(c.in); err != nil {
		return nil, err
	}
	if memoized {
		m.memo().last.Store(c)
	}
	return c, nil
}

func hashOf(op interface{ WriteHash(hash.Hash) }) uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}

// pure holds the Op methods that are the same for every op here: results go to fresh or
// caller-owned memory, never over an input, and nothing calls out of Go.
type pure struct{}

func (pure) ReturnsPtr() bool     { return false }
func (pure) CallsExtern() bool    { return false }
func (pure) OverwritesInput() int { return -1 }

// noDiff marks backward-only ops: nobody here needs second derivatives of them, and saying so
// keeps gorgonia.Grad from wandering into them.
type noDiff struct{}

func (noDiff) DiffWRT(n int) []bool { return make([]bool, n) }
func (noDiff) SymDiff(G.Nodes, *G.Node, *G.Node) (G.Nodes, error) {
	return nil, fmt.Errorf("layers: second-order gradients are not implemented for this op")
}

// is4D tells whether want4D would accept s, without its error label.
func is4D(s tensor.Shape) bool {
	if s.Dims() != 4 {
		return false
	}
	for _, d := range s {
		if d <= 0 {
			return false
		}
	}
	return true
}

func want4D(name string, s tensor.Shape) error {
	if s.Dims() != 4 {
		return fmt.Errorf("layers: %s must be 4-D (N,C,H,W), got shape %v", name, s)
	}
	for _, d := range s {
		if d <= 0 {
			return fmt.Errorf("layers: %s has a non-positive dimension: %v", name, s)
		}
	}
	return nil
}
