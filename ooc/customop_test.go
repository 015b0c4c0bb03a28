package ooc_test

import (
	"fmt"
	"hash"
	"math/rand"
	"testing"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// softClipOp is a custom op as a gorgonia user writes one (gorgonia's
// documented extension): y = x / (1 + |x|), forward by Do on a fresh
// tensor, backward by SymDiff in gorgonia's own ops. Compile runs it
// through Do, its result on the host heap counted in the budget.
type softClipOp struct{}

func (softClipOp) Arity() int { return 1 }
func (softClipOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a)
}
func (softClipOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return in[0].(tensor.Shape).Clone(), nil
}
func (softClipOp) Do(vals ...G.Value) (G.Value, error) {
	x := vals[0].(*tensor.Dense)
	out := tensor.New(tensor.Of(x.Dtype()), tensor.WithShape(x.Shape().Clone()...))
	switch d := x.Data().(type) {
	case []float64:
		o := out.Data().([]float64)
		for i, v := range d {
			a := v
			if a < 0 {
				a = -a
			}
			o[i] = v / (1 + a)
		}
	case []float32:
		o := out.Data().([]float32)
		for i, v := range d {
			a := v
			if a < 0 {
				a = -a
			}
			o[i] = v / (1 + a)
		}
	default:
		return nil, fmt.Errorf("softClip: unsupported %T", d)
	}
	return out, nil
}
func (softClipOp) ReturnsPtr() bool      { return false }
func (softClipOp) CallsExtern() bool     { return false }
func (softClipOp) OverwritesInput() int  { return -1 }
func (softClipOp) WriteHash(h hash.Hash) { fmt.Fprint(h, "softclip") }
func (softClipOp) Hashcode() uint32      { return 0x50f7c11b }
func (softClipOp) String() string        { return "softClip" }
func (softClipOp) DiffWRT(int) []bool    { return []bool{true} }

// SymDiff: dy/dx = 1 / (1 + |x|)^2.
func (softClipOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	x := inputs[0]
	one := G.NewConstant(castTo(x.Dtype(), 1))
	den := G.Must(G.Square(G.Must(G.Add(G.Must(G.Abs(x)), one))))
	return G.Nodes{G.Must(G.HadamardDiv(grad, den))}, nil
}

// customOpNet puts the custom op between two learnable layers.
func customOpNet(dt tensor.Dtype, seed int64) *net {
	c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(seed))}
	x := c.leaf("x", 1, 10, 6)
	w1 := c.leaf("w1", 0.8, 6, 8)
	w2 := c.leaf("w2", 0.4, 8, 3)
	h := G.Must(G.ApplyOp(softClipOp{}, G.Must(G.Mul(x, w1))))
	h = G.Must(G.Tanh(G.Must(G.Mul(h, w2))))
	cost := G.Must(G.Mean(G.Must(G.Sum(G.Must(G.Square(h)), 1))))
	if _, err := G.Grad(cost, w1, w2); err != nil {
		panic(err)
	}
	return &net{g: c.g, x: x, cost: cost, params: G.Nodes{w1, w2}}
}

// TestCustomOpBitForBit: a user's own op (Do and SymDiff) trains bit for
// bit as under TapeMachine.
func TestCustomOpBitForBit(t *testing.T) {
	checkBitForBit(t, map[string]builder{"softclip": customOpNet})
}
