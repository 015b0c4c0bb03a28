package models

import (
	"fmt"

	G "gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/models/layers"
)

// ---- Inception v3 (Szegedy et al. 2016), torchvision's layout ----

// inceptionV3 is torchvision's inception_v3 (no transform_input, dropout omitted as elsewhere);
// with aux the auxiliary classifier on Mixed_6e adds 0.4 times its cross-entropy to the loss, as
// torchvision's reference training does.
func inceptionV3(aux bool) arch {
	a := arch{
		bnEps: 1e-3, // torchvision's BasicConv2d
		check: func(cfg Config) error {
			least := 1
			for !inceptionFits(least, aux) {
				least++
			}
			if !inceptionFits(cfg.Height, aux) || !inceptionFits(cfg.Width, aux) {
				what := "the stem and the two grid reductions leave no pixels"
				if aux {
					what = "the auxiliary classifier's 5x5 convolution needs a 5x5 map after its pooling"
				}
				return fmt.Errorf("%s: height and width must be at least %d", what, least)
			}
			return nil
		},
	}
	if !aux {
		a.forward = func(n *net, x *G.Node, cfg Config) *G.Node {
			logits, _ := inception(n, x, cfg, false)
			return logits
		}
		return a
	}
	a.head = func(n *net, x, y *G.Node, cfg Config) outputs {
		logits, auxLogits := inception(n, x, cfg, true)
		main := n.crossEntropy(logits, y, false)
		return outputs{loss: n.add(main, n.scale(n.crossEntropy(auxLogits, y, false), 0.4), "loss"), logits: logits}
	}
	return a
}

// inceptionFits follows one side of the input through the stride and valid-padding layers.
func inceptionFits(s int, aux bool) bool {
	s = convOut(s, 3, 2, 0) // Conv2d_1a_3x3
	s = convOut(s, 3, 1, 0) // Conv2d_2a_3x3
	s = convOut(s, 3, 2, 0) // maxpool1
	s = convOut(s, 3, 1, 0) // Conv2d_4a_3x3
	s = convOut(s, 3, 2, 0) // maxpool2
	s = convOut(s, 3, 2, 0) // Mixed_6a
	if aux && convOut(s, 5, 3, 0) < 5 {
		return false
	}
	return convOut(s, 3, 2, 0) >= 1 // Mixed_7a
}

// inception builds the network and returns the logits and, with aux, the auxiliary logits.
func inception(n *net, x *G.Node, cfg Config, aux bool) (logits, auxLogits *G.Node) {
	bc := func(x *G.Node, out, kh, kw, sh, sw, ph, pw int, name string) *G.Node {
		return n.basicConv(x, out, kh, kw, layers.ConvParams{StrideH: sh, StrideW: sw, PadH: ph, PadW: pw}, name)
	}
	sq := func(x *G.Node, out, k, stride, pad int, name string) *G.Node {
		return bc(x, out, k, k, stride, stride, pad, pad, name)
	}
	h := sq(x, 32, 3, 2, 0, "Conv2d_1a_3x3")
	h = sq(h, 32, 3, 1, 0, "Conv2d_2a_3x3")
	h = sq(h, 64, 3, 1, 1, "Conv2d_2b_3x3")
	h = n.maxPool(h, 3, 2, 0, "maxpool1")
	h = sq(h, 80, 1, 1, 0, "Conv2d_3b_1x1")
	h = sq(h, 192, 3, 1, 0, "Conv2d_4a_3x3")
	h = n.maxPool(h, 3, 2, 0, "maxpool2")

	pool := func(x *G.Node, name string) *G.Node { return n.avgPool3(x, name) }
	inceptionA := func(x *G.Node, poolFeatures int, name string) *G.Node {
		b1 := sq(x, 64, 1, 1, 0, name+".branch1x1")
		b5 := sq(sq(x, 48, 1, 1, 0, name+".branch5x5_1"), 64, 5, 1, 2, name+".branch5x5_2")
		b3 := sq(x, 64, 1, 1, 0, name+".branch3x3dbl_1")
		b3 = sq(sq(b3, 96, 3, 1, 1, name+".branch3x3dbl_2"), 96, 3, 1, 1, name+".branch3x3dbl_3")
		bp := sq(pool(x, name), poolFeatures, 1, 1, 0, name+".branch_pool")
		return n.concat(name, b1, b5, b3, bp)
	}
	h = inceptionA(h, 32, "Mixed_5b")
	h = inceptionA(h, 64, "Mixed_5c")
	h = inceptionA(h, 64, "Mixed_5d")

	{ // InceptionB: grid reduction 35 -> 17
		name := "Mixed_6a"
		b3 := sq(h, 384, 3, 2, 0, name+".branch3x3")
		bd := sq(h, 64, 1, 1, 0, name+".branch3x3dbl_1")
		bd = sq(sq(bd, 96, 3, 1, 1, name+".branch3x3dbl_2"), 96, 3, 2, 0, name+".branch3x3dbl_3")
		h = n.concat(name, b3, bd, n.maxPool(h, 3, 2, 0, name+".pool"))
	}
	inceptionC := func(x *G.Node, c7 int, name string) *G.Node {
		b1 := sq(x, 192, 1, 1, 0, name+".branch1x1")
		b7 := sq(x, c7, 1, 1, 0, name+".branch7x7_1")
		b7 = bc(b7, c7, 1, 7, 1, 1, 0, 3, name+".branch7x7_2")
		b7 = bc(b7, 192, 7, 1, 1, 1, 3, 0, name+".branch7x7_3")
		bd := sq(x, c7, 1, 1, 0, name+".branch7x7dbl_1")
		bd = bc(bd, c7, 7, 1, 1, 1, 3, 0, name+".branch7x7dbl_2")
		bd = bc(bd, c7, 1, 7, 1, 1, 0, 3, name+".branch7x7dbl_3")
		bd = bc(bd, c7, 7, 1, 1, 1, 3, 0, name+".branch7x7dbl_4")
		bd = bc(bd, 192, 1, 7, 1, 1, 0, 3, name+".branch7x7dbl_5")
		bp := sq(pool(x, name), 192, 1, 1, 0, name+".branch_pool")
		return n.concat(name, b1, b7, bd, bp)
	}
	h = inceptionC(h, 128, "Mixed_6b")
	h = inceptionC(h, 160, "Mixed_6c")
	h = inceptionC(h, 160, "Mixed_6d")
	h = inceptionC(h, 192, "Mixed_6e")

	if aux { // InceptionAux, created where torchvision registers it (before Mixed_7a)
		a := n.avgPool(h, 5, 3, "AuxLogits.pool")
		a = sq(a, 128, 1, 1, 0, "AuxLogits.conv0")
		a = sq(a, 768, 5, 1, 0, "AuxLogits.conv1")
		a = n.globalAvgPool(a)
		auxLogits = n.linearWith(a, cfg.Classes, "AuxLogits.fc", n.truncNormal(0.001), n.fanUniform(n.shape(a)[1]))
	}

	{ // InceptionD: grid reduction 17 -> 8
		name := "Mixed_7a"
		b3 := sq(sq(h, 192, 1, 1, 0, name+".branch3x3_1"), 320, 3, 2, 0, name+".branch3x3_2")
		b7 := sq(h, 192, 1, 1, 0, name+".branch7x7x3_1")
		b7 = bc(b7, 192, 1, 7, 1, 1, 0, 3, name+".branch7x7x3_2")
		b7 = bc(b7, 192, 7, 1, 1, 1, 3, 0, name+".branch7x7x3_3")
		b7 = sq(b7, 192, 3, 2, 0, name+".branch7x7x3_4")
		h = n.concat(name, b3, b7, n.maxPool(h, 3, 2, 0, name+".pool"))
	}
	inceptionE := func(x *G.Node, name string) *G.Node {
		b1 := sq(x, 320, 1, 1, 0, name+".branch1x1")
		b3 := sq(x, 384, 1, 1, 0, name+".branch3x3_1")
		b3 = n.concat(name+".3x3", bc(b3, 384, 1, 3, 1, 1, 0, 1, name+".branch3x3_2a"), bc(b3, 384, 3, 1, 1, 1, 1, 0, name+".branch3x3_2b"))
		bd := sq(x, 448, 1, 1, 0, name+".branch3x3dbl_1")
		bd = sq(bd, 384, 3, 1, 1, name+".branch3x3dbl_2")
		bd = n.concat(name+".dbl", bc(bd, 384, 1, 3, 1, 1, 0, 1, name+".branch3x3dbl_3a"), bc(bd, 384, 3, 1, 1, 1, 1, 0, name+".branch3x3dbl_3b"))
		bp := sq(pool(x, name), 192, 1, 1, 0, name+".branch_pool")
		return n.concat(name, b1, b3, bd, bp)
	}
	h = inceptionE(h, "Mixed_7b")
	h = inceptionE(h, "Mixed_7c")
	h = n.globalAvgPool(h)
	in := n.shape(h)[1]
	return n.linearWith(h, cfg.Classes, "fc", n.truncNormal(0.1), n.fanUniform(in)), auxLogits
}

// basicConv is torchvision's BasicConv2d: a bias-free convolution, batch norm (eps 0.001) and
// ReLU, the convolution drawn from N(0, 0.1²) truncated at ±2 as torchvision's Inception3 does.
func (n *net) basicConv(x *G.Node, out, kh, kw int, p layers.ConvParams, name string) *G.Node {
	y := n.convInit(x, n.ch(out), kh, kw, p, name+".conv", n.truncNormal(0.1), nil)
	return n.relu(n.bn(y, name+".bn"))
}

// avgPool3 is the 3x3 stride-1 average pool padded by 1 (counting the padding, torchvision's
// F.avg_pool2d default) on each Inception block's pooling branch.
func (n *net) avgPool3(x *G.Node, name string) *G.Node {
	return n.do(name+".avgpool", func() (*G.Node, error) { return layers.AvgPool2D(x, 3, 1, 1) })
}
