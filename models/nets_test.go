package models

// Tests of the segmentation, GAN and sequence families: hand-derived parameter counts, names
// and shapes, the GAN's gradient flow against finite differences of its two players' losses,
// and out-of-core training bit for bit with the TapeMachine at sizes a 2-core CPU runs in seconds.

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
)

// conv counts a k x k convolution's weights, plus its bias (b) and a following batch norm (bn).
func convParams(in, out, k int, bias, bn bool) int64 {
	n := int64(in * out * k * k)
	if bias {
		n += int64(out)
	}
	if bn {
		n += 2 * int64(out)
	}
	return n
}

// resnetBackboneParams is torchvision's bottleneck ResNet without its classifier: the stem, and
// per block three convolutions with batch norm, plus the projection shortcut on each stage's
// first block.
func resnetBackboneParams(blocks ...int) int64 {
	n := convParams(3, 64, 7, false, true)
	in := 64
	for stage, count := range blocks {
		w := 64 << stage
		for i := 0; i < count; i++ {
			n += convParams(in, w, 1, false, true) + convParams(w, w, 3, false, true) + convParams(w, 4*w, 1, false, true)
			if i == 0 {
				n += convParams(in, 4*w, 1, false, true)
			}
			in = 4 * w
		}
	}
	return n
}

// deeplabParams counts DeepLabv3+ on ResNet-101: backbone, ASPP (1x1, three atrous 3x3, image
// pooling, 1x1 projection of the 1280 concatenated channels) and decoder (48-channel 1x1 on the
// low-level features, two 3x3 of 256 on the 304 concatenated channels, a 1x1 with bias to the classes).
func deeplabParams(classes int) int64 {
	n := resnetBackboneParams(3, 4, 23, 3)
	n += convParams(2048, 256, 1, false, true) + 3*convParams(2048, 256, 3, false, true) + convParams(2048, 256, 1, false, true)
	n += convParams(5*256, 256, 1, false, true)
	n += convParams(256, 48, 1, false, true) + convParams(256+48, 256, 3, false, true) + convParams(256, 256, 3, false, true)
	return n + convParams(256, classes, 1, true, false)
}

// pix2pixHDParams counts the global generator (every convolution with a bias; instance norm has
// no parameters) and the two-scale discriminator on label+image channels.
func pix2pixHDParams(labels, out int) int64 {
	n := convParams(labels, 64, 7, true, false)
	for c := 64; c < 1024; c *= 2 {
		n += convParams(c, 2*c, 3, true, false) // downsampling
		n += convParams(2*c, c, 3, true, false) // its transposed twin on the way up
	}
	n += 9 * 2 * convParams(1024, 1024, 3, true, false)
	n += convParams(64, out, 7, true, false)
	d := convParams(labels+out, 64, 4, true, false) + convParams(64, 128, 4, true, false) + convParams(128, 256, 4, true, false) +
		convParams(256, 512, 4, true, false) + convParams(512, 1, 4, true, false)
	return n + 2*d
}

// lstmParams counts the embedding, two LSTM layers (PyTorch's four gates over input and hidden,
// with both biases) and the decoder with bias.
func lstmParams(vocab, hidden int) int64 {
	v, h := int64(vocab), int64(hidden)
	layer := 4*h*(h+h) + 8*h
	return v*h + 2*layer + h*v + v
}

func TestNewModelShapesAndNames(t *testing.T) {
	shapes := func(m *Model) map[string]tensor.Shape {
		r := map[string]tensor.Shape{}
		for _, l := range m.Learnables {
			r[l.Name()] = l.Shape()
		}
		return r
	}
	// Inception: torchvision's names and order; the auxiliary classifier only where asked for.
	inc, err := buildNarrow(t, "inceptionv3", Config{Batch: 2, Channels: 3, Height: 299, Width: 299, Classes: 7}, 16)
	require.NoError(t, err)
	s := shapes(inc)
	require.Equal(t, "Conv2d_1a_3x3.conv.weight", inc.Learnables[0].Name())
	require.Equal(t, "fc.bias", inc.Learnables[len(inc.Learnables)-1].Name())
	require.Equal(t, tensor.Shape{768 / 16, 128 / 16, 5, 5}, s["AuxLogits.conv1.conv.weight"])
	require.Equal(t, tensor.Shape{192 / 16, 160 / 16, 7, 1}, s["Mixed_6c.branch7x7_3.conv.weight"])
	require.Len(t, inc.BatchNorms, 94+2)
	require.Equal(t, 1e-3, inc.BatchNorms[0].Epsilon())
	require.Equal(t, tensor.Shape{2, 7}, inc.Logits.Shape())
	noaux, err := buildNarrow(t, "inceptionv3-noaux", Config{Batch: 2, Channels: 3, Height: 75, Width: 75, Classes: 7}, 16)
	require.NoError(t, err)
	require.NotContains(t, shapes(noaux), "AuxLogits.fc.weight")
	require.Len(t, noaux.BatchNorms, 94)

	// DeepLabv3+: the ASPP and decoder widths, logits at the input size.
	dl, err := buildNarrow(t, "deeplabv3plus", Config{Batch: 2, Channels: 3, Height: 33, Width: 45, Classes: 21}, 8)
	require.NoError(t, err)
	s = shapes(dl)
	require.Equal(t, tensor.Shape{256 / 8, 2048 / 8, 3, 3}, s["aspp.aspp4.atrous_conv.weight"])
	require.Equal(t, tensor.Shape{256 / 8, 5 * 256 / 8, 1, 1}, s["aspp.conv1.weight"])
	require.Equal(t, tensor.Shape{256 / 8, (256 + 48) / 8, 3, 3}, s["decoder.last_conv.0.weight"])
	require.Equal(t, tensor.Shape{21}, s["decoder.last_conv.8.bias"])
	require.Equal(t, "backbone.conv1.weight", dl.Learnables[0].Name())
	require.Equal(t, tensor.Shape{2, 21, 33, 45}, dl.Logits.Shape())
	require.Equal(t, tensor.Shape{2, 21, 33, 45}, dl.Labels.Shape())
	// Output stride 16: layer4 runs at layer3's resolution with dilated 3x3 convolutions.
	dilations := map[string]bool{}
	for it := dl.Graph.Nodes(); it.Next(); {
		if op := it.Node().(*G.Node).Op(); op != nil && strings.HasPrefix(op.String(), "Conv2D{s(1,1)") {
			dilations[op.String()[strings.Index(op.String(), "d("):]] = true
		}
	}
	for _, d := range []string{"d(2,2)}", "d(4,4)}", "d(8,8)}", "d(6,6)}", "d(12,12)}", "d(18,18)}"} {
		require.True(t, dilations[d], "no stride-1 convolution with %s", d)
	}

	// Pix2PixHD: the generated image, no batch norm, generator weights before the discriminator's.
	p, err := buildNarrow(t, "pix2pixhd", Config{Batch: 1, Channels: 3, Height: 32, Width: 64, Classes: 5}, 16)
	require.NoError(t, err)
	s = shapes(p)
	require.Equal(t, tensor.Shape{1, 3, 32, 64}, p.Generated.Shape())
	require.Equal(t, tensor.Shape{1, 5, 32, 64}, p.Labels.Shape())
	require.Nil(t, p.Logits)
	require.Empty(t, p.BatchNorms)
	require.Equal(t, "netG.model.1.weight", p.Learnables[0].Name())
	require.Equal(t, tensor.Shape{1024 / 16, 1024 / 16, 3, 3}, s["netG.model.24.conv_block.5.weight"])
	require.Equal(t, tensor.Shape{1024 / 16, 512 / 16, 3, 3}, s["netG.model.25.weight"])
	require.Equal(t, tensor.Shape{3, 64 / 16, 7, 7}, s["netG.model.38.weight"])
	require.Equal(t, tensor.Shape{64 / 16, 5 + 3, 4, 4}, s["netD.scale1_layer0.0.weight"])
	require.Equal(t, tensor.Shape{1, 512 / 16, 4, 4}, s["netD.scale0_layer4.0.weight"])
	require.Equal(t, "netD.scale1_layer4.0.bias", p.Learnables[len(p.Learnables)-1].Name())

	// LSTM: a sequence is a one-pixel-high image of token ids.
	l, err := Build("lstm", Config{Batch: 3, SeqLen: 5, Vocab: 11, Hidden: 6})
	require.NoError(t, err)
	require.Equal(t, tensor.Shape{3, 1, 1, 5}, l.Input.Shape())
	require.Equal(t, tensor.Shape{3, 11, 1, 5}, l.Labels.Shape())
	require.Equal(t, tensor.Shape{3, 11, 1, 5}, l.Logits.Shape())
	require.Equal(t, Config{Batch: 3, Channels: 1, Height: 1, Width: 5, Classes: 11, Dtype: tensor.Float32, SeqLen: 5, Vocab: 11, Hidden: 6}, l.Config)
	require.Equal(t, []string{"encoder.weight", "rnn.weight_ih_l0", "rnn.weight_hh_l0", "rnn.bias_ih_l0", "rnn.bias_hh_l0",
		"rnn.weight_ih_l1", "rnn.weight_hh_l1", "rnn.bias_ih_l1", "rnn.bias_hh_l1", "decoder.weight", "decoder.bias"}, names(l.Learnables))
	require.Equal(t, lstmParams(11, 6), l.NumParams())
	// What a loader of 1 x T sequences reports builds the same model.
	l2, err := Build("lstm", Config{Batch: 3, Channels: 1, Height: 1, Width: 5, Classes: 11, Hidden: 6})
	require.NoError(t, err)
	require.Equal(t, l.Config, l2.Config)
	require.NoError(t, l.BindRandom(1))
	for _, v := range l.Input.Value().Data().([]float32) {
		require.True(t, v >= 0 && v < 11 && v == float32(int(v)), "BindRandom draws token ids, got %v", v)
	}
}

func names(ns G.Nodes) []string {
	var r []string
	for _, n := range ns {
		r = append(r, n.Name())
	}
	return r
}

func TestNewModelBuildErrors(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"inceptionv3", Config{Batch: 1, Channels: 3, Height: 298, Width: 299, Classes: 2}, []string{"inceptionv3", "298x299", "at least 299", "auxiliary"}},
		{"inceptionv3-noaux", Config{Batch: 1, Channels: 3, Height: 74, Width: 80, Classes: 2}, []string{"at least 75"}},
		{"pix2pixhd", Config{Batch: 1, Channels: 3, Height: 40, Width: 64, Classes: 2}, []string{"pix2pixhd", "multiples of 16"}},
		{"pix2pixhd", Config{Batch: 1, Channels: 3, Height: 16, Width: 64, Classes: 2}, []string{"at least 32"}},
		{"lstm", Config{Batch: 1, Channels: 3, Height: 1, Width: 5, Classes: 9}, []string{"lstm", "channels and height"}},
		{"lstm", Config{Batch: 1, SeqLen: 4, Width: 5, Vocab: 9}, []string{"SeqLen 4"}},
		{"lstm", Config{Batch: 1, SeqLen: 4}, []string{"must be positive"}},
		{"lstm", Config{Batch: 1, SeqLen: 4, Vocab: 3, Hidden: -1}, []string{"hidden"}},
	}
	for _, c := range cases {
		m, err := Build(c.name, c.cfg)
		require.Nil(t, m, c.name)
		require.Error(t, err, c.name)
		for _, w := range c.want {
			require.Contains(t, err.Error(), w)
		}
	}
}

// tokenBatch is a learnable language: each sequence counts up from a random start by a
// per-sequence stride, and the target at every step is the next number.
func tokenBatch(cfg Config, seed int64) (x, y *tensor.Dense) {
	rng := rand.New(rand.NewSource(seed))
	N, T, V := cfg.Batch, cfg.SeqLen, cfg.Vocab
	xs, ys := make([]float64, N*T), make([]float64, N*V*T)
	for n := 0; n < N; n++ {
		tok, step := rng.Intn(V), 1+n%2
		for t := 0; t < T; t++ {
			xs[n*T+t] = float64(tok)
			tok = (tok + step) % V
			ys[(n*V+tok)*T+t] = 1
		}
	}
	return denseOf(cfg.Dtype, xs, N, 1, 1, T), denseOf(cfg.Dtype, ys, N, V, 1, T)
}

// netTrainCases are small enough for a 2-core CPU in seconds, yet deep enough that half the
// in-core peak holds every single function. Inception with its auxiliary classifier needs
// 299x299; the GAN runs at its least size.
var netTrainCases = []trainCase{
	{name: "inceptionv3", cfg: Config{Batch: 2, Channels: 3, Height: 299, Width: 299, Classes: 5, Seed: 11}, div: 16, steps: 3, same: 1, lr: 1e-3},
	{name: "inceptionv3-noaux", cfg: Config{Batch: 4, Channels: 3, Height: 75, Width: 75, Classes: 5, Seed: 12}, div: 8, steps: 4, same: 1, lr: 1e-3},
	{name: "deeplabv3plus", cfg: Config{Batch: 2, Channels: 3, Height: 33, Width: 33, Classes: 4, Seed: 13}, div: 16, steps: 4, same: 1, lr: 1e-2},
	{name: "pix2pixhd", cfg: Config{Batch: 4, Channels: 3, Height: 32, Width: 32, Classes: 4, Seed: 14}, div: 16, steps: 3, same: 2, lr: 2e-4},
	{name: "pix2pixhd", cfg: Config{Batch: 4, Channels: 3, Height: 32, Width: 32, Classes: 3, Dtype: tensor.Float64, Seed: 15}, div: 16, steps: 2, same: 1, lr: 2e-4},
	{name: "lstm", cfg: Config{Batch: 4, SeqLen: 6, Vocab: 13, Hidden: 16, Seed: 16}, div: 1, steps: 6, same: 3, lr: 1e-2},
	{name: "lstm", cfg: Config{Batch: 3, SeqLen: 4, Vocab: 7, Hidden: 8, Dtype: tensor.Float64, Seed: 17}, div: 1, steps: 4, same: 2, lr: 1e-2},
}

func TestNewModelsTrainBitForBitUnderHalfBudget(t *testing.T) {
	for _, c := range netTrainCases {
		t.Run(fmt.Sprintf("%s/%v/width-div%d", c.name, c.cfg, c.div), func(t *testing.T) { checkTrainsBitForBit(t, c) })
	}
}

// The single-graph GAN step has the gradients of the usual alternating updates: every
// discriminator weight gets the gradient of the discriminator's loss alone (fakes held fixed),
// every generator weight that of the generator's loss alone (the discriminator held fixed).
// Checked against central differences of the two losses, read term by term from the graph.
func TestPix2PixHDGradientsAreEachPlayersOwn(t *testing.T) {
	cfg := Config{Batch: 1, Channels: 3, Height: 32, Width: 32, Classes: 3, Dtype: tensor.Float64, Seed: 21}
	m, err := buildNarrow(t, "pix2pixhd", cfg, 32)
	require.NoError(t, err)
	x, y := synthetic(cfg, true, 5)
	require.NoError(t, G.Let(m.Input, x))
	require.NoError(t, G.Let(m.Labels, y))
	// The cost is a sum of loss terms; the discriminator's are the two halved LSGAN terms.
	var dTerms, gTerms []*G.Node
	var walk func(n *G.Node)
	walk = func(n *G.Node) {
		op := n.Op().String()
		switch {
		case strings.HasPrefix(op, "MSEToConstant") && strings.HasSuffix(op, "x0.5}"):
			dTerms = append(dTerms, n)
		case strings.HasPrefix(op, "MSEToConstant"), strings.HasPrefix(op, "L1Loss"):
			gTerms = append(gTerms, n)
		default:
			for _, c := range ooc.Operands(n) {
				walk(c)
			}
		}
	}
	walk(m.Loss)
	require.Len(t, dTerms, 2*p2pNumD)
	require.Len(t, gTerms, p2pNumD*(1+p2pLayers+1))
	vals := make([]G.Value, len(dTerms)+len(gTerms))
	for i, n := range append(append(G.Nodes{}, dTerms...), gTerms...) {
		G.Read(n, &vals[i])
	}
	tm := G.NewTapeMachine(m.Graph, G.BindDualValues(m.Learnables...))
	defer tm.Close()
	losses := func() (d, g float64) {
		tm.Reset()
		require.NoError(t, tm.RunAll())
		for i, v := range vals {
			if i < len(dTerms) {
				d += v.Data().(float64)
			} else {
				g += v.Data().(float64)
			}
		}
		return d, g
	}
	losses()
	grads := map[string][]float64{}
	for _, p := range m.Learnables {
		gv, err := p.Grad()
		require.NoError(t, err)
		grads[p.Name()] = append([]float64(nil), gv.Data().([]float64)...)
	}
	// Central differences with a small step: the losses have kinks (ReLU, LeakyReLU, |.|) that a
	// step of 1e-5 already crosses in the first layers; the step is shrunk once where it did.
	fd := func(w []float64, i int, h float64) (d, g float64) {
		orig := w[i]
		w[i] = orig + h
		dp, gp := losses()
		w[i] = orig - h
		dm, gm := losses()
		w[i] = orig
		return (dp - dm) / (2 * h), (gp - gm) / (2 * h)
	}
	rng := rand.New(rand.NewSource(3))
	checked, worstOther := 0, 0.0
	for li, p := range m.Learnables {
		disc := strings.HasPrefix(p.Name(), "netD.")
		if li%3 != 0 && !(disc && strings.HasSuffix(p.Name(), ".weight")) {
			continue // a third of the generator's, every discriminator weight
		}
		w := p.Value().Data().([]float64)
		i := rng.Intn(len(w))
		got := grads[p.Name()][i]
		var own, other float64
		for _, h := range []float64{1e-7, 1e-8} {
			d, g := fd(w, i, h)
			own, other = g, d
			if disc {
				own, other = d, g
			}
			if math.Abs(own-got) <= 1e-5*(1+math.Abs(own)) {
				break
			}
		}
		require.InDelta(t, own, got, 1e-5*(1+math.Abs(own)), "%s[%d]: gradient %v, its player's loss changes at %v (the other's at %v)", p.Name(), i, got, own, other)
		worstOther = math.Max(worstOther, math.Abs(other-got))
		checked++
	}
	t.Logf("%d weight elements checked: each gradient is its own player's loss's (the other player's differs by up to %.3g)", checked, worstOther)
}
