package models

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/models/layers"
)

// ---- Pix2PixHD (Wang et al. 2018): the global generator and the multi-scale discriminator ----

// pix2pixHD trains the global generator against the multi-scale PatchGAN discriminator in one
// graph whose single cost is the generator's loss plus the discriminator's (see the package
// documentation for the gradient flow). Input is the real image (Batch, Channels, H, W), in
// [-1, 1]; Labels is the one-hot semantic label map (Batch, Classes, H, W), the generator's input
// (Cityscapes: 35 label ids, Channels 3). A segmentation data set of image and label-map pairs
// thus feeds it unchanged.
func pix2pixHD() arch {
	return arch{
		pixel: true,
		check: func(cfg Config) error {
			if cfg.Height%16 != 0 || cfg.Width%16 != 0 || cfg.Height < 32 || cfg.Width < 32 {
				return fmt.Errorf("four stride-2 downsamplings and transposed upsamplings, and the residual blocks' reflection padding, need height and width that are multiples of 16 and at least 32")
			}
			return nil
		},
		head: pix2pix,
	}
}

// Pix2PixHD's settings (its options' defaults, as for Cityscapes): ngf 64 with 4 downsamplings
// and 9 residual blocks, ndf 64 with 3 layers and 2 scales, LSGAN, feature matching weighted 10.
const (
	p2pNGF, p2pDown, p2pBlocks = 64, 4, 9
	p2pNDF, p2pLayers, p2pNumD = 64, 3, 2
	p2pLambdaFeat              = 10.0
)

func pix2pix(n *net, real, label *G.Node, cfg Config) outputs {
	fake := n.globalGenerator(label, cfg.Channels)
	d := n.newDiscriminator(cfg.Classes + cfg.Channels)

	predReal := d.forward(n, n.concat("D.real", label, real), false)
	predFakeD := d.forward(n, n.concat("D.fake.detached", label, n.stop(fake)), false)
	predFakeG := d.forward(n, n.concat("D.fake", label, fake), true)

	var terms []*G.Node
	last := p2pLayers + 1
	for i := range predReal {
		terms = append(terms,
			n.mse(predFakeD[i][last], 0, 0.5), // the discriminator: fakes are fake (halved as Pix2PixHD)
			n.mse(predReal[i][last], 1, 0.5),  // and real images real
			n.mse(predFakeG[i][last], 1, 1))   // the generator: its fakes should pass as real
		// Feature matching: the discriminator's features of the fake follow those of the real
		// image (a target: stopped), weighted 1/num_D * 4/(n_layers+1) * lambda_feat.
		w := 1.0 / p2pNumD * 4.0 / (p2pLayers + 1) * p2pLambdaFeat
		for j := 0; j < last; j++ {
			terms = append(terms, n.l1(predFakeG[i][j], n.stop(predReal[i][j]), w))
		}
	}
	return outputs{loss: n.sum(terms...), generated: fake}
}

// normal02 is Pix2PixHD's weights_init for convolutions: N(0, 0.02²). Biases keep PyTorch's
// default U(±1/sqrt(fan_in)).
func (n *net) normal02() func() float64 { return n.b.Normal(0.02) }

// globalGenerator is Pix2PixHD's GlobalGenerator with instance norm, named as its nn.Sequential
// ("netG.model.<index>"): a reflection-padded 7x7 convolution, four stride-2 3x3 convolutions
// doubling the channels, nine residual blocks (reflection pad, 3x3, norm, ReLU, reflection pad,
// 3x3, norm, plus the input), four transposed 3x3 stride-2 convolutions halving them, and a
// reflection-padded 7x7 convolution to outC channels with tanh. Every convolution has a bias.
func (n *net) globalGenerator(label *G.Node, outC int) *G.Node {
	conv := func(x *G.Node, out, k, stride, pad int, name string) *G.Node {
		fan := n.shape(x)[1] * k * k
		return n.convInit(x, out, k, k, layers.Square(stride, pad), name, n.normal02(), n.fanUniform(fan))
	}
	seq := func(i int) string { return fmt.Sprintf("netG.model.%d", i) }
	ch := n.ch(p2pNGF)
	h := n.relu(n.instanceNorm(conv(n.reflectPad(label, 3), ch, 7, 1, 0, seq(1))))
	for i := 0; i < p2pDown; i++ {
		h = n.relu(n.instanceNorm(conv(h, 2*ch, 3, 2, 1, seq(4+3*i))))
		ch *= 2
	}
	for i := 0; i < p2pBlocks; i++ {
		name := seq(4+3*p2pDown+i) + ".conv_block"
		r := n.relu(n.instanceNorm(conv(n.reflectPad(h, 1), ch, 3, 1, 0, name+".1")))
		r = n.instanceNorm(conv(n.reflectPad(r, 1), ch, 3, 1, 0, name+".5"))
		h = n.add(h, r, name)
	}
	up := layers.ConvParams{StrideH: 2, StrideW: 2, PadH: 1, PadW: 1, OutPadH: 1, OutPadW: 1}
	for i := 0; i < p2pDown; i++ {
		idx := 4 + 3*p2pDown + p2pBlocks + 3*i
		// PyTorch takes a transposed convolution's fan-in from the weight's second axis.
		h = n.convTransposeInit(h, ch/2, 3, up, seq(idx), n.normal02(), n.fanUniform(ch/2*9))
		h = n.relu(n.instanceNorm(h))
		ch /= 2
	}
	last := 4 + 3*p2pDown + p2pBlocks + 3*p2pDown + 1
	return n.tanh(conv(n.reflectPad(h, 3), outC, 7, 1, 0, seq(last)))
}

// discriminator holds the weights of Pix2PixHD's MultiscaleDiscriminator with intermediate
// features (getIntermFeat): p2pNumD NLayerDiscriminators, each 4x4 convolutions with bias, padding
// 2: ndf at stride 2 with LeakyReLU 0.2; 2ndf and 4ndf at stride 2 and 8ndf at stride 1, each
// with instance norm and LeakyReLU; then one output channel at stride 1.
type discriminator struct {
	w, b [][]*G.Node // [scale][layer]
	// frozen are StopGradient copies of w and b, made once, for the generator's loss.
	fw, fb [][]*G.Node
}

// newDiscriminator creates the weights in PyTorch's parameter order, scale0_layer0 first, and
// named as Pix2PixHD names them ("netD.scale0_layer0.0.weight").
func (n *net) newDiscriminator(in int) *discriminator {
	d := &discriminator{}
	for s := 0; s < p2pNumD; s++ {
		var ws, bs []*G.Node
		c, nf := in, n.ch(p2pNDF)
		for j := 0; j <= p2pLayers+1; j++ {
			out := nf
			switch {
			case j == p2pLayers+1:
				out = 1
			case j > 0:
				out = min(2*c, n.ch(8*p2pNDF))
			}
			name := fmt.Sprintf("netD.scale%d_layer%d.0", s, j)
			w := n.do(name, func() (*G.Node, error) {
				return n.b.Weight(name+".weight", []int{out, c, 4, 4}, n.normal02())
			})
			b := n.do(name, func() (*G.Node, error) {
				return n.b.Weight(name+".bias", []int{out}, n.fanUniform(c*16))
			})
			ws, bs = append(ws, w), append(bs, b)
			c = out
		}
		d.w, d.b = append(d.w, ws), append(d.b, bs)
	}
	return d
}

// forward runs every scale on x (full resolution on the last scale, then each next one on x
// average-pooled 3x3/2 without counting the padding, as Pix2PixHD) and returns per scale the
// features of each layer, the last being the patch scores. With frozen the weights are read
// through StopGradient, so nothing computed from the result trains the discriminator.
func (d *discriminator) forward(n *net, x *G.Node, frozen bool) [][]*G.Node {
	ws, bs := d.w, d.b
	if frozen {
		if d.fw == nil {
			for s := range d.w {
				var fw, fb []*G.Node
				for j := range d.w[s] {
					fw, fb = append(fw, n.stop(d.w[s][j])), append(fb, n.stop(d.b[s][j]))
				}
				d.fw, d.fb = append(d.fw, fw), append(d.fb, fb)
			}
		}
		ws, bs = d.fw, d.fb
	}
	var out [][]*G.Node
	for i := 0; i < p2pNumD; i++ {
		s := p2pNumD - 1 - i
		h := x
		var feats []*G.Node
		for j := range ws[s] {
			stride := 2
			if j >= p2pLayers {
				stride = 1
			}
			w, b := ws[s][j], bs[s][j]
			h = n.do(fmt.Sprintf("netD.scale%d_layer%d", s, j), func() (*G.Node, error) {
				return layers.Conv2D(h, w, b, layers.Square(stride, 2))
			})
			if j > 0 && j <= p2pLayers {
				h = n.instanceNorm(h)
			}
			if j <= p2pLayers {
				h = n.leaky(h)
			}
			feats = append(feats, h)
		}
		out = append(out, feats)
		if i != p2pNumD-1 {
			x = n.do("netD.downsample", func() (*G.Node, error) { return layers.AvgPool2DExcludePad(x, 3, 2, 1) })
		}
	}
	return out
}

func (n *net) mse(x *G.Node, target, scale float64) *G.Node {
	return n.do("lsgan loss", func() (*G.Node, error) { return layers.MSEToConstant(x, target, scale) })
}

func (n *net) l1(a, b *G.Node, scale float64) *G.Node {
	return n.do("feature matching loss", func() (*G.Node, error) { return layers.L1Loss(a, b, scale) })
}
