package models

import (
	"fmt"
	"math"
	"math/rand"
	"sort"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Config is the input a model is built for.
type Config struct {
	Batch, Channels, Height, Width, Classes int
	Dtype                                   tensor.Dtype
	// Seed makes the weight initialisation reproducible.
	Seed int64
}

// Model is a built training graph.
type Model struct {
	Graph  *G.ExprGraph
	Input  *G.Node // Batch x Channels x Height x Width
	Labels *G.Node // one-hot, Batch x Classes
	Loss   *G.Node // scalar mean cross-entropy
	// Learnables are the nodes gorgonia.Grad differentiated, in a fixed order
	// (solvers index their state by position).
	Learnables G.Nodes
}

// NumParams counts the learnable scalars.
func (m *Model) NumParams() int64 {
	var n int64
	for _, l := range m.Learnables {
		n += int64(l.Shape().TotalSize())
	}
	return n
}

type builderFunc func(b *builder, cfg Config) (*G.Node, error)

var registry = map[string]builderFunc{
	"smallcnn": smallCNN,
}

// Names lists the models Build knows, sorted.
func Names() []string {
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Build makes the named model's training graph for cfg.
func Build(name string, cfg Config) (m *Model, err error) {
	f, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("models: unknown model %q (known: %v)", name, Names())
	}
	if cfg.Batch <= 0 || cfg.Channels <= 0 || cfg.Height <= 0 || cfg.Width <= 0 || cfg.Classes <= 0 {
		return nil, fmt.Errorf("models: %s: batch, channels, height, width and classes must be positive, got %+v", name, cfg)
	}
	if cfg.Dtype == (tensor.Dtype{}) {
		cfg.Dtype = tensor.Float32
	}
	if cfg.Dtype != tensor.Float32 && cfg.Dtype != tensor.Float64 {
		return nil, fmt.Errorf("models: %s: dtype %v is not supported (float32 or float64)", name, cfg.Dtype)
	}
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("models: building %s for %+v: %v", name, cfg, r)
		}
	}()
	g := G.NewGraph()
	b := &builder{g: g, dt: cfg.Dtype, rng: rand.New(rand.NewSource(cfg.Seed))}
	x := G.NewTensor(g, cfg.Dtype, 4, G.WithShape(cfg.Batch, cfg.Channels, cfg.Height, cfg.Width), G.WithName("input"))
	y := G.NewMatrix(g, cfg.Dtype, G.WithShape(cfg.Batch, cfg.Classes), G.WithName("labels"))
	b.x = x
	logits, err := f(b, cfg)
	if err != nil {
		return nil, err
	}
	loss := softmaxCrossEntropy(logits, y)
	if _, err := G.Grad(loss, b.params...); err != nil {
		return nil, fmt.Errorf("models: %s: differentiating: %w", name, err)
	}
	return &Model{Graph: g, Input: x, Labels: y, Loss: loss, Learnables: b.params}, nil
}

// softmaxCrossEntropy is the mean over the batch of -sum(onehot * log softmax),
// reduced one axis at a time: gorgonia's multi-axis Sum/Mean are wrong.
func softmaxCrossEntropy(logits, onehot *G.Node) *G.Node {
	ls := G.Must(G.LogSoftMax(logits))
	s := G.Must(G.Sum(G.Must(G.HadamardProd(ls, onehot)), 1))
	return G.Must(G.Neg(G.Must(G.Mean(s))))
}

// builder carries what layer helpers share while a graph is built.
type builder struct {
	g      *G.ExprGraph
	dt     tensor.Dtype
	rng    *rand.Rand
	x      *G.Node
	params G.Nodes
	n      int
}

// param adds a learnable filled with N(0, std^2), or with a constant when std is 0.
func (b *builder) param(name string, std, constant float64, shape ...int) *G.Node {
	b.n++
	size := tensor.Shape(shape).TotalSize()
	var t *tensor.Dense
	switch b.dt {
	case tensor.Float64:
		d := make([]float64, size)
		for i := range d {
			d[i] = b.rng.NormFloat64()*std + constant
		}
		t = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
	default:
		d := make([]float32, size)
		for i := range d {
			d[i] = float32(b.rng.NormFloat64()*std + constant)
		}
		t = tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
	}
	n := G.NewTensor(b.g, b.dt, len(shape), G.WithShape(shape...), G.WithName(fmt.Sprintf("%s.%d", name, b.n)), G.WithValue(t))
	b.params = append(b.params, n)
	return n
}

// conv is a bias-free convolution with He initialisation.
func (b *builder) conv(x *G.Node, out, k, stride, pad int) *G.Node {
	in := x.Shape()[1]
	w := b.param("conv", math.Sqrt(2/float64(in*k*k)), 0, out, in, k, k)
	return G.Must(G.Conv2d(x, w, tensor.Shape{k, k}, []int{pad, pad}, []int{stride, stride}, []int{1, 1}))
}

// bn is batch normalisation in train mode with a learnable scale and shift.
func (b *builder) bn(x *G.Node) *G.Node {
	c := x.Shape()[1]
	scale := b.param("bn.scale", 0, 1, 1, c, 1, 1)
	shift := b.param("bn.shift", 0, 0, 1, c, 1, 1)
	y, _, _, _, err := G.BatchNorm(x, scale, shift, 0.1, 1e-5)
	if err != nil {
		panic(err)
	}
	return y
}

// linear is x*W + b for a 2-D x.
func (b *builder) linear(x *G.Node, out int) *G.Node {
	in := x.Shape()[1]
	w := b.param("fc.w", math.Sqrt(1/float64(in)), 0, in, out)
	bias := b.param("fc.b", 0, 0, 1, out)
	return G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w)), bias, nil, []byte{0}))
}

// smallCNN is a quick CPU model: conv-bn-relu, a residual block, a channel
// concat, max-pooling and a classifier. It needs Height and Width divisible by 4.
func smallCNN(b *builder, cfg Config) (*G.Node, error) {
	if cfg.Height%4 != 0 || cfg.Width%4 != 0 {
		return nil, fmt.Errorf("models: smallcnn needs height and width divisible by 4, got %dx%d", cfg.Height, cfg.Width)
	}
	const c = 16
	h := G.Must(G.Rectify(b.bn(b.conv(b.x, c, 3, 1, 1))))
	r := G.Must(G.Rectify(b.bn(b.conv(h, c, 3, 1, 1))))
	r = b.bn(b.conv(r, c, 3, 1, 1))
	h = G.Must(G.Rectify(G.Must(G.Add(r, h))))
	h = G.Must(G.MaxPool2D(h, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
	h2 := G.Must(G.Rectify(b.bn(b.conv(h, c, 3, 1, 1))))
	h = G.Must(G.Concat(1, h, h2))
	h = G.Must(G.MaxPool2D(h, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
	s := h.Shape()
	flat := G.Must(G.Reshape(h, tensor.Shape{s[0], s[1] * s[2] * s[3]}))
	return b.linear(flat, cfg.Classes), nil
}
