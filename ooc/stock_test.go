package ooc_test

import (
	"math/rand"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// stockCNN is a small CNN written the way gorgonia's own examples write
// one: gorgonia's Conv2d (im2col, reshapes, a matmul and a transpose),
// Rectify, MaxPool2D, Reshape, Mul, SoftMax and Mean, with Log(SoftMax)
// (which gorgonia's stabilisation rewrites into LogSoftMax, removing nodes)
// and the cost fetched with gorgonia.Read.
func stockCNN(dt tensor.Dtype, seed int64) *net {
	return stockCNNGrad(dt, seed, true)
}

// stockCNNGrad builds stockCNN, with its backward when grad is set.
func stockCNNGrad(dt tensor.Dtype, seed int64, grad bool) *net {
	rng := rand.New(rand.NewSource(seed))
	g := G.NewGraph()
	const batch, hw, c1, c2, classes = 8, 16, 8, 16, 10
	x := G.NewTensor(g, dt, 4, G.WithShape(batch, 1, hw, hw), G.WithName("x"), G.WithValue(randT(rng, dt, 1, batch, 1, hw, hw)))
	y := G.NewMatrix(g, dt, G.WithShape(batch, classes), G.WithName("y"), G.WithValue(onehot(rng, dt, batch, classes)))
	k1 := G.NewTensor(g, dt, 4, G.WithShape(c1, 1, 3, 3), G.WithName("k1"), G.WithValue(randT(rng, dt, 0.3, c1, 1, 3, 3)))
	k2 := G.NewTensor(g, dt, 4, G.WithShape(c2, c1, 3, 3), G.WithName("k2"), G.WithValue(randT(rng, dt, 0.1, c2, c1, 3, 3)))
	fc := G.NewMatrix(g, dt, G.WithShape(c2*4*4, classes), G.WithName("fc"), G.WithValue(randT(rng, dt, 0.1, c2*4*4, classes)))

	h := G.Must(G.Conv2d(x, k1, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
	h = G.Must(G.Rectify(h))
	h = G.Must(G.MaxPool2D(h, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
	h = G.Must(G.Conv2d(h, k2, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))
	h = G.Must(G.Rectify(h))
	h = G.Must(G.MaxPool2D(h, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
	h = G.Must(G.Reshape(h, tensor.Shape{batch, c2 * 4 * 4}))
	prob := G.Must(G.SoftMax(G.Must(G.Mul(h, fc))))
	cost := G.Must(G.Neg(G.Must(G.Mean(G.Must(G.HadamardProd(G.Must(G.Log(prob)), y))))))
	read := new(G.Value)
	G.Read(cost, read)
	params := G.Nodes{k1, k2, fc}
	if grad {
		if _, err := G.Grad(cost, params...); err != nil {
			panic(err)
		}
	}
	return &net{g: g, x: x, y: y, cost: cost, params: params, read: read, out: prob}
}
