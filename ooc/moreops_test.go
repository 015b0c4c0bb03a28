package ooc_test

import (
	"math/rand"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// graphFn builds a graph's cost and learnables; asBuilder makes it a
// builder that differentiates it.
type graphFn func(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (cost *G.Node, params G.Nodes)

func asBuilder(f graphFn) builder {
	return func(dt tensor.Dtype, seed int64) *net {
		rng := rand.New(rand.NewSource(seed))
		g := G.NewGraph()
		cost, params := f(g, dt, rng)
		if _, err := G.Grad(cost, params...); err != nil {
			panic(err)
		}
		return &net{g: g, cost: cost, params: params}
	}
}

// mat is a learnable of scale·N(0,1) values.
func mat(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand, name string, s float64, shape ...int) *G.Node {
	return G.NewTensor(g, dt, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(randT(rng, dt, s, shape...)))
}

// moreOpsCases are TestMoreOpsBitForBit's programs.
var moreOpsCases = map[string]graphFn{
	"unary-zoo": func(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
		x := mat(g, dt, rng, "x", 1, 6, 5)
		w := mat(g, dt, rng, "w", 0.3, 5, 7)
		h := G.Must(G.Mul(x, w))
		a := G.Must(G.Exp(G.Must(G.Neg(G.Must(G.Abs(h))))))
		b := G.Must(G.Log1p(G.Must(G.Square(h))))
		c := G.Must(G.Sqrt(G.Must(G.Add(G.Must(G.Square(h)), G.Must(G.Cube(a))))))
		d := G.Must(G.Softplus(h))
		e := G.Must(G.HadamardDiv(a, G.Must(G.Add(d, c))))
		s := G.Must(G.Sum(G.Must(G.Add(G.Must(G.Add(a, b)), e))))
		return s, G.Nodes{w}
	},
	"transpose3d-concat0-slice-step": func(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
		x := mat(g, dt, rng, "x", 1, 4, 3, 6)
		y := mat(g, dt, rng, "y", 1, 2, 3, 6)
		c := G.Must(G.Concat(0, x, y))
		tr := G.Must(G.Transpose(c, 2, 0, 1))
		sl := G.Must(G.Slice(tr, G.S(0, 6, 2)))
		r := G.Must(G.Reshape(sl, tensor.Shape{3, 18}))
		th := G.Must(G.Tanh(r))
		return G.Must(G.Mean(G.Must(G.Sum(th, 1)))), G.Nodes{x, y}
	},
	"batched-matmul-softmax": func(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
		a := mat(g, dt, rng, "a", 1, 3, 4, 5)
		b := mat(g, dt, rng, "b", 1, 3, 5, 2)
		p := G.Must(G.BatchedMatMul(a, b))
		r := G.Must(G.Reshape(p, tensor.Shape{12, 2}))
		sm := G.Must(G.SoftMax(r))
		return G.Must(G.Sum(G.Must(G.Sum(G.Must(G.Square(sm)), 1)))), G.Nodes{a, b}
	},
	"max-reduce-pow-scalar-learnable": func(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
		x := mat(g, dt, rng, "x", 1, 8, 4)
		var bias *G.Node
		if dt == tensor.Float32 {
			bias = G.NewScalar(g, dt, G.WithName("bias"), G.WithValue(float32(0.3)))
		} else {
			bias = G.NewScalar(g, dt, G.WithName("bias"), G.WithValue(0.3))
		}
		m := G.Must(G.Max(G.Must(G.Add(x, bias)), 1))
		p := G.Must(G.Pow(G.Must(G.Sigmoid(m)), scalarConst(g, dt, 2, "two")))
		return G.Must(G.Mean(p)), G.Nodes{x, bias}
	},
	"broadcast-hadamard": func(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*G.Node, G.Nodes) {
		x := mat(g, dt, rng, "x", 1, 5, 4)
		k := mat(g, dt, rng, "k", 1, 1, 4)
		h := G.Must(G.BroadcastHadamardProd(x, k, nil, []byte{0}))
		v := mat(g, dt, rng, "v", 1, 4)
		o := G.Must(G.Mul(h, v))
		return G.Must(G.Sum(G.Must(G.Square(o)))), G.Nodes{x, v}
	},
}

// TestMoreOpsBitForBit: gorgonia's unary functions (Exp, Abs, Log1p,
// Square, Cube, Sqrt, Softplus, HadamardDiv), a 3-D Transpose after a
// Concat on axis 0 and a stepped Slice, BatchedMatMul, Max along an axis,
// Pow with a constant, a scalar learnable broadcast by Add, and a
// broadcast Hadamard product train bit for bit as under TapeMachine.
func TestMoreOpsBitForBit(t *testing.T) {
	models := map[string]builder{}
	for name, f := range moreOpsCases {
		models[name] = asBuilder(f)
	}
	checkBitForBit(t, models)
}
