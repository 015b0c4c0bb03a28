package models

import (
	"math"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models/layers"
)

// Layer helpers for the families whose initialisation is not torchvision's Kaiming (Inception,
// Pix2PixHD, the LSTM) and for the ops those families add. Like the others they keep the first
// error and do nothing after it.

// truncNormal draws from N(0, std²) truncated to [-2, 2] (PyTorch's trunc_normal_ with its
// default absolute bounds, as torchvision's Inception initialises): redrawn until inside.
func (n *net) truncNormal(std float64) func() float64 {
	draw := n.b.Normal(std)
	return func() float64 {
		for {
			if v := draw(); v >= -2 && v <= 2 {
				return v
			}
		}
	}
}

// fanUniform is PyTorch's default bias initialisation, U(-1/sqrt(fan), 1/sqrt(fan)).
func (n *net) fanUniform(fan int) func() float64 {
	return n.b.Uniform(1 / math.Sqrt(float64(max(fan, 1))))
}

// convInit is a kh x kw convolution with chosen initialisers: weight "<name>.weight" (out, C,
// kh, kw) and, if bInit is not nil, bias "<name>.bias" (out). out is taken as it is (callers
// apply the test-only width divisor where a width may shrink).
func (n *net) convInit(x *G.Node, out, kh, kw int, p layers.ConvParams, name string, wInit, bInit func() float64) *G.Node {
	return n.do(name, func() (*G.Node, error) {
		w, err := n.b.Weight(name+".weight", tensor.Shape{out, x.Shape()[1], kh, kw}, wInit)
		if err != nil {
			return nil, err
		}
		var b *G.Node
		if bInit != nil {
			if b, err = n.b.Weight(name+".bias", tensor.Shape{out}, bInit); err != nil {
				return nil, err
			}
		}
		return layers.Conv2D(x, w, b, p)
	})
}

// convTransposeInit is a k x k transposed convolution with weight (C, out, k, k) and bias (out),
// out taken as it is.
func (n *net) convTransposeInit(x *G.Node, out, k int, p layers.ConvParams, name string, wInit, bInit func() float64) *G.Node {
	return n.do(name, func() (*G.Node, error) {
		w, err := n.b.Weight(name+".weight", tensor.Shape{x.Shape()[1], out, k, k}, wInit)
		if err != nil {
			return nil, err
		}
		b, err := n.b.Weight(name+".bias", tensor.Shape{out}, bInit)
		if err != nil {
			return nil, err
		}
		return layers.ConvTranspose2D(x, w, b, p)
	})
}

// convDil is a bias-free k x k convolution with the builder's initialisation, padding and
// dilation rate (rate 1: an ordinary convolution padded by pad).
func (n *net) convDil(x *G.Node, out, k, pad, rate int, bias bool, name string) *G.Node {
	return n.do(name, func() (*G.Node, error) {
		p := layers.ConvParams{PadH: pad, PadW: pad, DilationH: rate, DilationW: rate}
		return n.b.ConvWith(x, n.ch(out), k, k, p, bias, name)
	})
}

func (n *net) instanceNorm(x *G.Node) *G.Node {
	return n.do("instance norm", func() (*G.Node, error) { return layers.InstanceNorm(x, 1e-5) })
}

func (n *net) leaky(x *G.Node) *G.Node {
	return n.do("leaky relu", func() (*G.Node, error) { return layers.LeakyReLU(x, 0.2) })
}

func (n *net) tanh(x *G.Node) *G.Node {
	return n.do("tanh", func() (*G.Node, error) { return layers.Tanh(x) })
}

func (n *net) reflectPad(x *G.Node, p int) *G.Node {
	return n.do("reflection pad", func() (*G.Node, error) { return layers.ReflectionPad2D(x, p) })
}

// resize is bilinear with aligned corners, as DeepLabv3+ upsamples.
func (n *net) resize(x *G.Node, h, w int, name string) *G.Node {
	return n.do(name, func() (*G.Node, error) { return layers.ResizeBilinear(x, h, w, true) })
}

func (n *net) stop(x *G.Node) *G.Node {
	return n.do("stop gradient", func() (*G.Node, error) { return layers.StopGradient(x) })
}

// sum adds scalar losses.
func (n *net) sum(xs ...*G.Node) *G.Node {
	s := xs[0]
	for _, x := range xs[1:] {
		s = n.add(s, x, "loss sum")
	}
	return s
}

// scale multiplies a scalar loss by a constant of the graph's dtype.
func (n *net) scale(x *G.Node, k float64) *G.Node {
	return n.do("loss scale", func() (*G.Node, error) {
		var c *G.Node
		if n.b.Dtype() == tensor.Float32 {
			c = G.NewConstant(float32(k))
		} else {
			c = G.NewConstant(k)
		}
		return G.Mul(x, c)
	})
}

// reshape is gorgonia's Reshape (a view of its operand).
func (n *net) reshape(x *G.Node, s ...int) *G.Node {
	return n.do("reshape", func() (*G.Node, error) { return G.Reshape(x, tensor.Shape(s)) })
}

// shape is x's shape, or ones after an error (so size arithmetic cannot panic; nothing more
// is built anyway).
func (n *net) shape(x *G.Node) tensor.Shape {
	if n.err != nil || x == nil {
		return tensor.Shape{1, 1, 1, 1}
	}
	return x.Shape()
}
