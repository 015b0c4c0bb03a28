package layers

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// An LSTM step as PyTorch's nn.LSTM computes it, with the 4H gate pre-activations in PyTorch's
// order (input i, forget f, cell g, output o):
//
//	pre = x·W_ih + h·W_hh + b_ih + b_hh      LSTMGates (the products are gorgonia matmuls)
//	c'  = σ(f)·c + σ(i)·tanh(g)              LSTMCell
//	h'  = σ(o)·tanh(c')                      LSTMHidden
//
// Three nodes per step besides the two products, where gorgonia's ops would need slices of the
// gates, four nonlinearities and several products and sums, each an (N,H) tensor kept for the
// backward. The backward of the cell and hidden ops reads pre and c only (no saved gate values).

// LSTMGates adds the input and recurrent products and both biases: xw and hw are (N, 4H),
// bih and bhh (4H). The biases' gradients are per-column sums that carry the serial numbers of
// their own layer, so gorgonia never merges two biases' gradient nodes into one.
func LSTMGates(xw, hw, bih, bhh *G.Node) (*G.Node, error) {
	return apply(gatesSpec{ownerIH: serials.Add(1), ownerHH: serials.Add(1)}, xw, hw, bih, bhh)
}

type gatesSpec struct {
	ownerIH, ownerHH uint64
}

func (s gatesSpec) name() string { return fmt.Sprintf("LSTMGates#%d,%d", s.ownerIH, s.ownerHH) }
func (s gatesSpec) arity() int   { return 4 }
func (s gatesSpec) typ() hm.Type { return fnType(2, 2, 1, 1, 2) }
func (s gatesSpec) outShape(in []tensor.Shape) (tensor.Shape, error) {
	x := in[0]
	if x.Dims() != 2 || !in[1].Eq(x) || in[2].Dims() != 1 || in[2][0] != x[1] || !in[3].Eq(in[2]) || x[1]%4 != 0 {
		return nil, fmt.Errorf("layers: LSTMGates wants (N,4H), (N,4H), (4H), (4H), got %v", in)
	}
	return x.Clone(), nil
}
func (s gatesSpec) flops(in []tensor.Shape) int64 { return 3 * size1(in) }
func (s gatesSpec) diff(n int) []bool             { return []bool{true, true, true, true} }

// inPlace: elementwise over either product (the biases have another shape).
func (s gatesSpec) inPlace(operand int) bool { return operand < 2 }
func (s gatesSpec) grads(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	dbih, err := G.ApplyOp(&channelSumOp{dims: 2, owner: s.ownerIH}, grad)
	if err != nil {
		return nil, err
	}
	dbhh, err := G.ApplyOp(&channelSumOp{dims: 2, owner: s.ownerHH}, grad)
	if err != nil {
		return nil, err
	}
	return G.Nodes{grad, grad, dbih, dbhh}, nil
}
func (s gatesSpec) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return gatesExec[float32](out, in)
	}
	return gatesExec[float64](out, in)
}

func gatesExec[T float](out G.Value, in []G.Value) error {
	s := in[0].Shape()
	var ops [4][]T
	for i := range ops {
		var err error
		if ops[i], err = denseData[T](in[i], nil); err != nil {
			return err
		}
	}
	res, err := outData[T](out, s)
	if err != nil {
		return err
	}
	W := s[1]
	for i := range res {
		res[i] = ops[0][i] + ops[1][i] + ops[2][i%W] + ops[3][i%W]
	}
	return nil
}

// LSTMCell is c' = σ(f)·c + σ(i)·tanh(g) from the (N,4H) pre-activations and the (N,H) cell state.
func LSTMCell(pre, c *G.Node) (*G.Node, error) { return apply(cellSpec{kind: cellC}, pre, c) }

// LSTMHidden is h' = σ(o)·tanh(c') from the pre-activations and the new cell state.
func LSTMHidden(pre, c *G.Node) (*G.Node, error) { return apply(cellSpec{kind: cellH}, pre, c) }

type cellKind uint8

const (
	cellC         cellKind = iota // (pre, c) -> c'
	cellH                         // (pre, c') -> h'
	cellCGradPre                  // (pre, c, dc') -> dpre (i, f, g parts)
	cellCGradPrev                 // (pre, dc') -> dc
	cellHGradPre                  // (pre, c', dh') -> dpre (o part)
	cellHGradC                    // (pre, c', dh') -> dc'
)

var cellNames = [...]string{"LSTMCell", "LSTMHidden", "LSTMCellGradGates", "LSTMCellGradState", "LSTMHiddenGradGates", "LSTMHiddenGradState"}

type cellSpec struct{ kind cellKind }

func (s cellSpec) name() string { return cellNames[s.kind] }
func (s cellSpec) arity() int {
	switch s.kind {
	case cellCGradPre, cellHGradPre, cellHGradC:
		return 3
	}
	return 2
}
func (s cellSpec) typ() hm.Type {
	d := make([]int, s.arity()+1)
	for i := range d {
		d[i] = 2
	}
	return fnType(d...)
}

// outShape: the pre-activations are (N,4H), every other operand (N,H).
func (s cellSpec) outShape(in []tensor.Shape) (tensor.Shape, error) {
	pre := in[0]
	if pre.Dims() != 2 || pre[1]%4 != 0 || pre[1] == 0 {
		return nil, fmt.Errorf("layers: %s: pre-activations must be (N,4H), got %v", s.name(), pre)
	}
	state := tensor.Shape{pre[0], pre[1] / 4}
	for _, x := range in[1:] {
		if !x.Eq(state) {
			return nil, fmt.Errorf("layers: %s: operands %v: want (N,4H) and (N,H)", s.name(), in)
		}
	}
	if s.kind == cellCGradPre || s.kind == cellHGradPre {
		return pre.Clone(), nil
	}
	return state, nil
}
func (s cellSpec) flops(in []tensor.Shape) int64 { return 10 * size1(in) }
func (s cellSpec) diff(n int) []bool {
	if s.kind > cellH {
		return make([]bool, n)
	}
	return []bool{true, true}
}
func (s cellSpec) grads(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	var a, b *G.Node
	var err error
	switch s.kind {
	case cellC:
		if a, err = apply(cellSpec{kind: cellCGradPre}, in[0], in[1], grad); err != nil {
			return nil, err
		}
		b, err = apply(cellSpec{kind: cellCGradPrev}, in[0], grad)
	case cellH:
		if a, err = apply(cellSpec{kind: cellHGradPre}, in[0], in[1], grad); err != nil {
			return nil, err
		}
		b, err = apply(cellSpec{kind: cellHGradC}, in[0], in[1], grad)
	default:
		return nil, fmt.Errorf("layers: second-order gradients of %s are not implemented", s.name())
	}
	return G.Nodes{a, b}, err
}
func (s cellSpec) exec(dt tensor.Dtype, out G.Value, _ []byte, in []G.Value) error {
	if dt == tensor.Float32 {
		return cellExec[float32](s.kind, out, in)
	}
	return cellExec[float64](s.kind, out, in)
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// cellExec computes one of the kinds row by row (rows in parallel); every element is a function of
// the same row's operands only, evaluated in float64.
func cellExec[T float](kind cellKind, out G.Value, in []G.Value) error {
	ops := make([][]T, len(in))
	for i := range in {
		var err error
		if ops[i], err = denseData[T](in[i], nil); err != nil {
			return err
		}
	}
	ps := in[0].Shape()
	N, H := ps[0], ps[1]/4
	res, err := outData[T](out, out.Shape())
	if err != nil {
		return err
	}
	pre, x, d := ops[0], ops[1], ops[len(ops)-1] // x: c, c' or dc' (cellCGradPrev); d: the incoming gradient
	parallelFor(N, int64(N*H), func(n0, n1 int) {
		for n := n0; n < n1; n++ {
			p := pre[n*4*H : (n+1)*4*H]
			for j := 0; j < H; j++ {
				k := n*H + j
				gi, gf, gg, gO := sigmoid(float64(p[j])), sigmoid(float64(p[H+j])), math.Tanh(float64(p[2*H+j])), sigmoid(float64(p[3*H+j]))
				switch kind {
				case cellC:
					res[k] = T(gf*float64(x[k]) + gi*gg)
				case cellH:
					res[k] = T(gO * math.Tanh(float64(x[k])))
				case cellCGradPre:
					dc := float64(d[k])
					r := res[n*4*H : (n+1)*4*H]
					r[j] = T(dc * gg * gi * (1 - gi))
					r[H+j] = T(dc * float64(x[k]) * gf * (1 - gf))
					r[2*H+j] = T(dc * gi * (1 - gg*gg))
					r[3*H+j] = 0
				case cellCGradPrev:
					res[k] = T(float64(d[k]) * gf)
				case cellHGradPre:
					tc := math.Tanh(float64(x[k]))
					r := res[n*4*H : (n+1)*4*H]
					r[j], r[H+j], r[2*H+j] = 0, 0, 0
					r[3*H+j] = T(float64(d[k]) * tc * gO * (1 - gO))
				case cellHGradC:
					tc := math.Tanh(float64(x[k]))
					res[k] = T(float64(d[k]) * gO * (1 - tc*tc))
				}
			}
		}
	})
	return nil
}
