package layers

import (
	"fmt"
	"math"
	"math/rand"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Init chooses the Kaiming (He) normal initialisation of convolution weights.
type Init int

const (
	// KaimingFanOut: std = sqrt(2 / (O*KH*KW)), torchvision's ResNet and VGG.
	KaimingFanOut Init = iota
	// KaimingFanIn: std = sqrt(2 / (C*KH*KW)), torchvision's DenseNet and He et al.'s default.
	KaimingFanIn
)

// Builder adds layers to one graph and records their learnables in creation order, so a model's
// parameter list (and a solver's per-position caches) is the same on every build. Weights are
// drawn from the caller's *rand.Rand, so equal seeds give equal models. Building allocates the
// weights and nothing else: no activation-sized memory, whatever the batch.
type Builder struct {
	g     *G.ExprGraph
	dt    tensor.Dtype
	rng   *rand.Rand
	learn G.Nodes
	bns   []*BatchNormOp
	names map[string]bool

	// ConvInit is the initialisation of Conv/ConvBias weights (default KaimingFanOut).
	ConvInit Init
	// BNMomentum and BNEpsilon are used by BN (defaults 0.1 and 1e-5, as PyTorch).
	BNMomentum, BNEpsilon float64
}

// NewBuilder returns a builder for float32 or float64 graphs.
func NewBuilder(g *G.ExprGraph, dt tensor.Dtype, rng *rand.Rand) (*Builder, error) {
	if g == nil || rng == nil {
		return nil, fmt.Errorf("layers: NewBuilder needs a graph and a *rand.Rand")
	}
	if err := checkDtype(dt); err != nil {
		return nil, err
	}
	return &Builder{g: g, dt: dt, rng: rng, names: map[string]bool{}, BNMomentum: 0.1, BNEpsilon: 1e-5}, nil
}

// Graph is the graph being built.
func (b *Builder) Graph() *G.ExprGraph { return b.g }

// Dtype is the element type of every tensor the builder makes.
func (b *Builder) Dtype() tensor.Dtype { return b.dt }

// Learnables returns the weights created so far, in creation order.
func (b *Builder) Learnables() G.Nodes { return append(G.Nodes(nil), b.learn...) }

// NumParams is the total element count of the learnables.
func (b *Builder) NumParams() int64 {
	var n int64
	for _, w := range b.learn {
		n += int64(w.Shape().TotalSize())
	}
	return n
}

// BatchNorms returns the batch-norm ops created so far (their running statistics and mode).
func (b *Builder) BatchNorms() []*BatchNormOp { return append([]*BatchNormOp(nil), b.bns...) }

// SetTraining switches every batch norm built so far between batch and running statistics.
func (b *Builder) SetTraining(training bool) {
	for _, op := range b.bns {
		op.SetTraining(training)
	}
}

// Input makes a (non-learnable) input node of the builder's dtype.
func (b *Builder) Input(name string, shape ...int) (*G.Node, error) {
	if err := b.claim(name); err != nil {
		return nil, err
	}
	return G.NewTensor(b.g, b.dt, len(shape), G.WithShape(shape...), G.WithName(name)), nil
}

// claim reserves a node name: gorgonia merges input nodes with equal name, type and shape, so two
// layers given the same name would silently share one weight.
func (b *Builder) claim(name string) error {
	if name == "" {
		return fmt.Errorf("layers: empty node name")
	}
	if b.names[name] {
		return fmt.Errorf("layers: node name %q used twice", name)
	}
	b.names[name] = true
	return nil
}

// Weight makes a learnable of the given shape, calling fill once per element in row-major order
// (so the draws, and the model, depend only on the seed and the order of Builder calls).
func (b *Builder) Weight(name string, shape tensor.Shape, fill func() float64) (*G.Node, error) {
	if err := b.claim(name); err != nil {
		return nil, err
	}
	n := shape.TotalSize()
	var v *tensor.Dense
	if b.dt == tensor.Float32 {
		d := make([]float32, n)
		for i := range d {
			d[i] = float32(fill())
		}
		v = tensor.New(tensor.WithShape(shape.Clone()...), tensor.WithBacking(d))
	} else {
		d := make([]float64, n)
		for i := range d {
			d[i] = fill()
		}
		v = tensor.New(tensor.WithShape(shape.Clone()...), tensor.WithBacking(d))
	}
	w := G.NewTensor(b.g, b.dt, shape.Dims(), G.WithShape(shape.Clone()...), G.WithName(name), G.WithValue(v))
	b.learn = append(b.learn, w)
	return w, nil
}

// Normal draws from N(0, std²) with the builder's generator, for Weight.
func (b *Builder) Normal(std float64) func() float64 {
	return func() float64 { return b.rng.NormFloat64() * std }
}

// Uniform draws from U(-bound, bound) with the builder's generator, for Weight.
func (b *Builder) Uniform(bound float64) func() float64 {
	return func() float64 { return (2*b.rng.Float64() - 1) * bound }
}

// Constant fills a Weight with v.
func Constant(v float64) func() float64 { return func() float64 { return v } }

func channels(x *G.Node) (int, error) {
	s := x.Shape()
	if s.Dims() != 4 {
		return 0, fmt.Errorf("layers: expected an (N,C,H,W) input, got %v", s)
	}
	return s[1], nil
}

// Conv is a bias-free k x k convolution (the ResNet/DenseNet kind, followed by BN). Its weight is
// "<name>.weight", (outC, C, k, k), Kaiming normal per b.ConvInit.
func (b *Builder) Conv(x *G.Node, outC, k, stride, pad int, name string) (*G.Node, error) {
	return b.ConvWith(x, outC, k, k, Square(stride, pad), false, name)
}

// ConvBias is Conv plus a per-channel bias "<name>.bias" initialised to 0 (VGG, U-Net).
func (b *Builder) ConvBias(x *G.Node, outC, k, stride, pad int, name string) (*G.Node, error) {
	return b.ConvWith(x, outC, k, k, Square(stride, pad), true, name)
}

// ConvWith is the general form: a kh x kw kernel, any ConvParams, optional bias.
func (b *Builder) ConvWith(x *G.Node, outC, kh, kw int, p ConvParams, bias bool, name string) (*G.Node, error) {
	c, err := channels(x)
	if err != nil {
		return nil, err
	}
	if outC < 1 || kh < 1 || kw < 1 {
		return nil, fmt.Errorf("layers: conv %q needs positive channels and kernel", name)
	}
	fan := outC * kh * kw
	if b.ConvInit == KaimingFanIn {
		fan = c * kh * kw
	}
	w, err := b.Weight(name+".weight", tensor.Shape{outC, c, kh, kw}, b.Normal(math.Sqrt(2/float64(fan))))
	if err != nil {
		return nil, err
	}
	var bn *G.Node
	if bias {
		if bn, err = b.Weight(name+".bias", tensor.Shape{outC}, Constant(0)); err != nil {
			return nil, err
		}
	}
	return Conv2D(x, w, bn, p)
}

// ConvTranspose is U-Net's up-convolution: a k x k transposed convolution at the given stride with
// bias (k = stride = 2 doubles H and W). Weight "<name>.weight" is (C, outC, k, k), Kaiming normal
// over the inputs each output sees (C*k*k/stride²); bias "<name>.bias" starts at 0.
func (b *Builder) ConvTranspose(x *G.Node, outC, k, stride int, name string) (*G.Node, error) {
	c, err := channels(x)
	if err != nil {
		return nil, err
	}
	if outC < 1 || k < 1 || stride < 1 {
		return nil, fmt.Errorf("layers: conv-transpose %q needs positive channels, kernel and stride", name)
	}
	fan := max(c*k*k/(stride*stride), 1)
	w, err := b.Weight(name+".weight", tensor.Shape{c, outC, k, k}, b.Normal(math.Sqrt(2/float64(fan))))
	if err != nil {
		return nil, err
	}
	bias, err := b.Weight(name+".bias", tensor.Shape{outC}, Constant(0))
	if err != nil {
		return nil, err
	}
	return ConvTranspose2D(x, w, bias, Square(stride, 0))
}

// BN is train-mode batch norm with gamma "<name>.weight" = 1 and beta "<name>.bias" = 0.
func (b *Builder) BN(x *G.Node, name string) (*G.Node, error) {
	s := x.Shape()
	if s.Dims() < 2 {
		return nil, fmt.Errorf("layers: BN %q needs (N,C,...) input, got %v", name, s)
	}
	gamma, err := b.Weight(name+".weight", tensor.Shape{s[1]}, Constant(1))
	if err != nil {
		return nil, err
	}
	beta, err := b.Weight(name+".bias", tensor.Shape{s[1]}, Constant(0))
	if err != nil {
		return nil, err
	}
	y, op, err := BatchNorm(x, gamma, beta, b.BNMomentum, b.BNEpsilon)
	if err != nil {
		return nil, err
	}
	b.bns = append(b.bns, op)
	return y, nil
}

// ConvBN is Conv then BN, and ReLU if relu: the ResNet unit. Names are "<name>" and "<name>.bn".
func (b *Builder) ConvBN(x *G.Node, outC, k, stride, pad int, relu bool, name string) (*G.Node, error) {
	y, err := b.Conv(x, outC, k, stride, pad, name)
	if err != nil {
		return nil, err
	}
	if y, err = b.BN(y, name+".bn"); err != nil {
		return nil, err
	}
	if relu {
		return ReLU(y)
	}
	return y, nil
}

// Linear is x·W + bias for (N, in) x, with W "<name>.weight" (in, out) and bias "<name>.bias"
// (out), both U(-1/sqrt(in), 1/sqrt(in)) as PyTorch's nn.Linear. W is stored transposed relative to
// PyTorch so no transpose node is needed; the parameter count is the same.
func (b *Builder) Linear(x *G.Node, out int, name string) (*G.Node, error) {
	s := x.Shape()
	if s.Dims() != 2 {
		return nil, fmt.Errorf("layers: Linear %q needs (N, in) input, got %v", name, s)
	}
	bound := 1 / math.Sqrt(float64(s[1]))
	return b.LinearWith(x, out, name, b.Uniform(bound), b.Uniform(bound))
}

// LinearWith is Linear with chosen initialisers (VGG's classifier uses N(0, 0.01²) and zero bias).
func (b *Builder) LinearWith(x *G.Node, out int, name string, wInit, bInit func() float64) (*G.Node, error) {
	s := x.Shape()
	if s.Dims() != 2 || out < 1 {
		return nil, fmt.Errorf("layers: Linear %q needs (N, in) input and out >= 1, got %v and %d", name, s, out)
	}
	w, err := b.Weight(name+".weight", tensor.Shape{s[1], out}, wInit)
	if err != nil {
		return nil, err
	}
	bias, err := b.Weight(name+".bias", tensor.Shape{out}, bInit)
	if err != nil {
		return nil, err
	}
	y, err := G.Mul(x, w)
	if err != nil {
		return nil, err
	}
	return G.BroadcastAdd(y, bias, nil, []byte{0})
}
