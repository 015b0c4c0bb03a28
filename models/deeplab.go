package models

import (
	G "gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/models/layers"
)

// ---- DeepLabv3+ (Chen et al. 2018) with a ResNet-101 backbone at output stride 16 ----

// deeplabV3Plus is the encoder-decoder of "Encoder-Decoder with Atrous Separable Convolution"
// with the ResNet-101 backbone, laid out and named as the widely used PyTorch implementation
// (jfzhang95/pytorch-deeplab-xception):
//
//   - backbone: torchvision's ResNet-101 without its classifier; layer4 keeps layer3's resolution
//     (output stride 16) and dilates its three blocks' 3x3 convolutions by 2, 4 and 8 (rate 2
//     with the multi-grid (1, 2, 4) of DeepLabv3);
//   - ASPP on the 2048-channel map: a 1x1 convolution, three 3x3 convolutions at rates 6, 12 and
//     18, and image pooling (global average, 1x1 convolution, upsampled back), each to 256
//     channels with batch norm and ReLU, concatenated and projected to 256 by a 1x1 convolution;
//   - decoder: layer1's output (stride 4) reduced to 48 channels by a 1x1 convolution, the ASPP
//     output upsampled bilinearly (corners aligned) to its size and concatenated, two 3x3
//     convolutions of 256 channels and a 1x1 convolution with bias to Classes scores, upsampled
//     to the input size.
//
// As everywhere here, dropout (0.5 and 0.1 in the decoder) is omitted. 513x513 inputs make the
// stride-4 and stride-16 maps 129x129 and 33x33, so both upsamplings are exactly 4x.
func deeplabV3Plus() arch {
	return arch{pixel: true, init: layers.KaimingFanOut, forward: deeplab}
}

func deeplab(n *net, x *G.Node, cfg Config) *G.Node {
	h := n.resnetStem(x, "backbone.")
	h, low := n.resnetStages(h, true, []int{3, 4, 23, 3}, "backbone.", [][]int{nil, nil, nil, {2, 4, 8}})
	// The reference implementation initialises its heads with kaiming_normal_ (fan in).
	n.b.ConvInit = layers.KaimingFanIn
	s := n.shape(h)
	aspp := func(k, rate int, name string) *G.Node {
		y := n.convDil(h, 256, k, rate*(k/2), rate, false, name+".atrous_conv")
		return n.relu(n.bn(y, name+".bn"))
	}
	a1 := aspp(1, 1, "aspp.aspp1")
	a2 := aspp(3, 6, "aspp.aspp2")
	a3 := aspp(3, 12, "aspp.aspp3")
	a4 := aspp(3, 18, "aspp.aspp4")
	g := n.reshape(n.globalAvgPool(h), s[0], s[1], 1, 1)
	g = n.relu(n.bn(n.conv(g, 256, 1, 1, 0, "aspp.global_avg_pool.1"), "aspp.global_avg_pool.2"))
	g = n.resize(g, s[2], s[3], "aspp.image_pool.upsample")
	a := n.concat("aspp.cat", a1, a2, a3, a4, g)
	a = n.relu(n.bn(n.conv(a, 256, 1, 1, 0, "aspp.conv1"), "aspp.bn1"))

	l := n.relu(n.bn(n.conv(low, 48, 1, 1, 0, "decoder.conv1"), "decoder.bn1"))
	ls := n.shape(l)
	d := n.concat("decoder.cat", n.resize(a, ls[2], ls[3], "decoder.upsample"), l)
	d = n.relu(n.bn(n.conv(d, 256, 3, 1, 1, "decoder.last_conv.0"), "decoder.last_conv.1"))
	d = n.relu(n.bn(n.conv(d, 256, 3, 1, 1, "decoder.last_conv.4"), "decoder.last_conv.5"))
	d = n.do("decoder.last_conv.8", func() (*G.Node, error) {
		return n.b.ConvBias(d, cfg.Classes, 1, 1, 0, "decoder.last_conv.8")
	})
	return n.resize(d, cfg.Height, cfg.Width, "upsample")
}
