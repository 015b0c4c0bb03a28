package models

import (
	"fmt"
	"math"
	"math/rand"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

func TestNames(t *testing.T) {
	want := []string{"deeplabv3plus", "densenet121", "densenet169", "densenet201", "inceptionv3", "inceptionv3-noaux",
		"lstm", "pix2pixhd", "resnet101", "resnet152", "resnet18", "resnet34", "resnet50", "smallcnn", "unet", "vgg16"}
	require.Equal(t, want, Names())
}

// TestNumParamsMatchTorchvision builds every model at 3x224x224 with 1000 classes (batch 1: only
// the weights are allocated) and compares the learnable count with torchvision's.
func TestNumParamsMatchTorchvision(t *testing.T) {
	want := map[string]int64{
		"resnet18":    11_689_512,
		"resnet34":    21_797_672,
		"resnet50":    25_557_032,
		"resnet101":   44_549_160,
		"resnet152":   60_192_808,
		"densenet121": 7_978_856,
		"densenet169": 14_149_480,
		"densenet201": 20_013_928,
		"vgg16":       138_357_544,
		// Not torchvision models: unet counted by hand (below); smallcnn's classifier reads the
		// flattened 32 x H/4 x W/4 map, so it is checked at 32x32 (at 224x224 it has 100M weights).
		"unet":     unetParams(3, 1000),
		"smallcnn": smallCNNParams(3, 32, 32, 1000),
		// torchvision's inception_v3 with and without its auxiliary classifier, at its 299x299.
		"inceptionv3":       27_161_264,
		"inceptionv3-noaux": 23_834_568,
		// Not torchvision models: counted by hand from the architectures (nets_test.go).
		"deeplabv3plus": deeplabParams(21),
		"pix2pixhd":     pix2pixHDParams(35, 3),
		"lstm":          lstmParams(10000, 650),
	}
	require.Len(t, want, len(Names()))
	heavy := map[string]bool{"vgg16": true, "resnet101": true, "resnet152": true, "densenet169": true, "densenet201": true,
		"pix2pixhd": true, "deeplabv3plus": true}
	// Sizes the counts are published for: Inception's 299x299 (its auxiliary classifier needs
	// it), PASCAL VOC's 21 classes, Cityscapes' 35 label ids and RGB at a small size (the weights
	// do not depend on it), Zaremba et al.'s medium LSTM on the 10k-word Penn Treebank.
	special := map[string]Config{
		"inceptionv3":       {Batch: 1, Channels: 3, Height: 299, Width: 299, Classes: 1000},
		"inceptionv3-noaux": {Batch: 1, Channels: 3, Height: 299, Width: 299, Classes: 1000},
		"deeplabv3plus":     {Batch: 1, Channels: 3, Height: 65, Width: 65, Classes: 21},
		"pix2pixhd":         {Batch: 1, Channels: 3, Height: 32, Width: 64, Classes: 35},
		"lstm":              {Batch: 1, SeqLen: 2, Vocab: 10000, Hidden: 650},
	}
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			if heavy[name] && testing.Short() {
				t.Skip("heavy (over 40M weights or many layers): skipped with -short")
			}
			cfg := Config{Batch: 1, Channels: 3, Height: 224, Width: 224, Classes: 1000, Seed: 1}
			if name == "smallcnn" {
				cfg.Height, cfg.Width = 32, 32
			}
			if c, ok := special[name]; ok {
				cfg = c
			}
			m, err := Build(name, cfg)
			require.NoError(t, err)
			require.Equal(t, want[name], m.NumParams())
		})
	}
}

// unetParams counts Ronneberger's U-Net with padded convolutions: conv weights and biases of the
// two 3x3 convs per level, the 2x2 up-convolutions, and the 1x1 head.
func unetParams(in, classes int) int64 {
	conv := func(c, o, k int) int64 { return int64(c*o*k*k + o) }
	var n int64
	c := in
	for _, w := range []int{64, 128, 256, 512, 1024} {
		n += conv(c, w, 3) + conv(w, w, 3)
		c = w
	}
	for _, w := range []int{512, 256, 128, 64} {
		n += conv(c, w, 2) // up-convolution: (c, w, 2, 2) weight, w biases
		n += conv(2*w, w, 3) + conv(w, w, 3)
		c = w
	}
	return n + conv(64, classes, 1)
}

func smallCNNParams(in, h, w, classes int) int64 {
	const c = 16
	conv := func(i int) int64 { return int64(c*i*9 + 2*c) } // weight and the BN's gamma and beta
	return conv(in) + 3*conv(c) + int64(2*c*(h/4)*(w/4)*classes+classes)
}

func TestTorchvisionNamesAndShapes(t *testing.T) {
	m, err := Build("resnet50", Config{Batch: 2, Channels: 3, Height: 64, Width: 64, Classes: 10})
	require.NoError(t, err)
	shapes := map[string]tensor.Shape{}
	for _, l := range m.Learnables {
		shapes[l.Name()] = l.Shape()
	}
	require.Equal(t, tensor.Shape{64, 3, 7, 7}, shapes["conv1.weight"])
	require.Equal(t, tensor.Shape{64}, shapes["bn1.weight"])
	require.Equal(t, tensor.Shape{128, 128, 3, 3}, shapes["layer2.0.conv2.weight"])
	require.Equal(t, tensor.Shape{2048, 1024, 1, 1}, shapes["layer4.0.downsample.0.weight"])
	require.Equal(t, tensor.Shape{2048, 10}, shapes["fc.weight"], "stored as (in, out)")
	require.Equal(t, "conv1.weight", m.Learnables[0].Name(), "creation order, as torchvision's parameters()")
	require.Equal(t, "fc.bias", m.Learnables[len(m.Learnables)-1].Name())
	require.Len(t, m.BatchNorms, 53)
	require.Equal(t, tensor.Shape{2, 10}, m.Logits.Shape())
	require.Equal(t, tensor.Shape{2, 3, 64, 64}, m.Input.Shape())
	require.Equal(t, tensor.Shape{2, 10}, m.Labels.Shape())
	require.True(t, m.Loss.IsScalar())
	require.Equal(t, tensor.Float32, m.Config.Dtype, "the zero dtype means float32")

	d, err := Build("densenet121", Config{Batch: 1, Channels: 3, Height: 32, Width: 32, Classes: 10})
	require.NoError(t, err)
	require.Len(t, d.BatchNorms, 2*58+1+3+1) // two per dense layer, norm0, three transitions, norm5
	u, err := Build("unet", Config{Batch: 2, Channels: 1, Height: 32, Width: 48, Classes: 3})
	require.NoError(t, err)
	require.Equal(t, tensor.Shape{2, 3, 32, 48}, u.Labels.Shape())
	require.Equal(t, tensor.Shape{2, 3, 32, 48}, u.Logits.Shape())
	require.Empty(t, u.BatchNorms)
}

// Every learnable has a gradient node of its own: two learnables sharing one (as the BN shifts of
// both branches of a residual add once did, through gorgonia merging equal expressions) would share
// one gradient tensor, which a solver zeroes after updating the first.
func TestGradientsAreDistinct(t *testing.T) {
	small := Config{Batch: 1, Channels: 3, Height: 32, Width: 32, Classes: 4}
	cfgs := map[string]Config{
		"inceptionv3":       {Batch: 1, Channels: 3, Height: 299, Width: 299, Classes: 4},
		"inceptionv3-noaux": {Batch: 1, Channels: 3, Height: 75, Width: 75, Classes: 4},
		"lstm":              {Batch: 2, SeqLen: 3, Vocab: 5, Hidden: 16},
	}
	for _, name := range []string{"smallcnn", "resnet18", "resnet50", "densenet121", "vgg16", "unet",
		"inceptionv3", "inceptionv3-noaux", "deeplabv3plus", "pix2pixhd", "lstm"} {
		cfg, ok := cfgs[name]
		if !ok {
			cfg = small
		}
		m, err := buildNarrow(t, name, cfg, 8)
		require.NoError(t, err)
		seen := map[*G.Node]string{}
		for _, l := range m.Learnables {
			d := l.Deriv()
			require.NotNil(t, d, "%s: %s has no gradient", name, l.Name())
			prev, dup := seen[d]
			require.False(t, dup, "%s: %s and %s share gradient node %v", name, prev, l.Name(), d)
			seen[d] = l.Name()
		}
	}
}

func TestBuildErrors(t *testing.T) {
	ok := Config{Batch: 2, Channels: 3, Height: 32, Width: 32, Classes: 10}
	with := func(f func(*Config)) Config { c := ok; f(&c); return c }
	cases := []struct {
		name string
		cfg  Config
		want []string // substrings of the error
	}{
		{"resnet51", ok, []string{`unknown model "resnet51"`, "resnet50"}},
		{"", ok, []string{"unknown model"}},
		{"unet", with(func(c *Config) { c.Height = 24 }), []string{"unet", "24x32", "divisible by 16"}},
		{"unet", with(func(c *Config) { c.Height, c.Width = 8, 8 }), []string{"unet", "8x8"}},
		{"vgg16", with(func(c *Config) { c.Height, c.Width = 16, 16 }), []string{"vgg16", "16x16", "at least 32"}},
		{"densenet121", with(func(c *Config) { c.Height, c.Width = 28, 64 }), []string{"densenet121", "28x64", "at least 29"}},
		{"densenet201", with(func(c *Config) { c.Width = 16 }), []string{"densenet201", "32x16"}},
		{"smallcnn", with(func(c *Config) { c.Height = 30 }), []string{"smallcnn", "30x32", "multiples of 4"}},
		{"resnet18", with(func(c *Config) { c.Batch = 0 }), []string{"resnet18", "must be positive"}},
		{"resnet18", with(func(c *Config) { c.Channels = -1 }), []string{"resnet18", "must be positive"}},
		{"resnet50", with(func(c *Config) { c.Classes = 0 }), []string{"resnet50", "must be positive"}},
		{"vgg16", with(func(c *Config) { c.Dtype = tensor.Int }), []string{"vgg16", "dtype int"}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%dx%d", c.name, c.cfg.Height, c.cfg.Width), func(t *testing.T) {
			var m *Model
			var err error
			require.NotPanics(t, func() { m, err = Build(c.name, c.cfg) })
			require.Error(t, err)
			require.Nil(t, m)
			for _, s := range c.want {
				require.Contains(t, err.Error(), s)
			}
		})
	}
}

// A panic inside an architecture becomes an error naming the model.
func TestBuildRecovers(t *testing.T) {
	a := arch{forward: func(n *net, x *G.Node, cfg Config) *G.Node { panic("boom") }}
	m, err := build("broken", a, Config{Batch: 1, Channels: 1, Height: 4, Width: 4, Classes: 2}, 1)
	require.Nil(t, m)
	require.ErrorContains(t, err, "broken")
	require.ErrorContains(t, err, "boom")
}

// Every resnet and densenet builds at 32x32 (two of them also at an odd size), resnets even at 1x1.
func TestSmallSizesBuild(t *testing.T) {
	for _, name := range []string{"resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "densenet121", "densenet169", "densenet201"} {
		_, err := Build(name, Config{Batch: 2, Channels: 3, Height: 32, Width: 32, Classes: 10})
		require.NoError(t, err, name)
	}
	for _, name := range []string{"resnet18", "densenet121"} {
		_, err := Build(name, Config{Batch: 2, Channels: 3, Height: 29, Width: 45, Classes: 10})
		require.NoError(t, err, name)
	}
	_, err := Build("resnet18", Config{Batch: 2, Channels: 1, Height: 1, Width: 1, Classes: 2})
	require.NoError(t, err)
	_, err = Build("vgg16", Config{Batch: 1, Channels: 3, Height: 48, Width: 40, Classes: 2})
	require.NoError(t, err)
}

// vgg16's classifier reads a 7x7 map whenever the last map is a square multiple of 7 (as
// torchvision's adaptive pooling), else the flattened map as it is.
func TestVGGClassifierInput(t *testing.T) {
	for _, c := range []struct{ hw, in int }{{32, 512}, {64, 512 * 2 * 2}, {224, 512 * 49}, {448, 512 * 49}} {
		m, err := buildNarrow(t, "vgg16", Config{Batch: 1, Channels: 3, Height: c.hw, Width: c.hw, Classes: 5}, 16)
		require.NoError(t, err)
		var in int
		for _, l := range m.Learnables {
			if l.Name() == "classifier.0.weight" {
				in = l.Shape()[0]
			}
		}
		require.Equal(t, c.in/16, in, "vgg16 at %d", c.hw)
	}
}

func TestSeedDeterminesWeights(t *testing.T) {
	cfg := Config{Batch: 1, Channels: 3, Height: 32, Width: 32, Classes: 10, Seed: 5}
	a, err := Build("resnet18", cfg)
	require.NoError(t, err)
	b, err := Build("resnet18", cfg)
	require.NoError(t, err)
	cfg.Seed = 6
	c, err := Build("resnet18", cfg)
	require.NoError(t, err)
	require.Equal(t, a.Learnables[0].Value().Data(), b.Learnables[0].Value().Data())
	require.NotEqual(t, a.Learnables[0].Value().Data(), c.Learnables[0].Value().Data())
}

// ---- training: bit for bit with the TapeMachine, loss going down under half the in-core memory ----

// buildNarrow builds a registered model with every layer width divided by div (1: the real model).
func buildNarrow(t testing.TB, name string, cfg Config, div int) (*Model, error) {
	t.Helper()
	a, ok := registry[name]
	require.True(t, ok, name)
	return build(name, a, cfg, div)
}

// synthetic returns a learnable batch: images are noise plus, for each image (or pixel), a bump on
// the channel of its class; labels one-hot per image, or per pixel when pixel is set.
func synthetic(cfg Config, pixel bool, seed int64) (x, y *tensor.Dense) {
	rng := rand.New(rand.NewSource(seed))
	N, C, H, W, K := cfg.Batch, cfg.Channels, cfg.Height, cfg.Width, cfg.Classes
	xs := make([]float64, N*C*H*W)
	for i := range xs {
		xs[i] = rng.NormFloat64() * 0.5
	}
	var ys []float64
	if pixel {
		ys = make([]float64, N*K*H*W)
		for n := 0; n < N; n++ {
			for p := 0; p < H*W; p++ {
				k := (p/W/4 + p%W/4 + n) % K // 4x4 tiles
				ys[(n*K+k)*H*W+p] = 1
				xs[(n*C+k%C)*H*W+p] += 1
			}
		}
	} else {
		ys = make([]float64, N*K)
		for n := 0; n < N; n++ {
			k := rng.Intn(K)
			ys[n*K+k] = 1
			for p := k % (H * W); p < H*W; p += K {
				xs[(n*C+k%C)*H*W+p] += 1
			}
		}
	}
	x = denseOf(cfg.Dtype, xs, N, C, H, W)
	if pixel {
		return x, denseOf(cfg.Dtype, ys, N, K, H, W)
	}
	return x, denseOf(cfg.Dtype, ys, N, K)
}

// denseOf is a tensor of the config's dtype (float32 unless Float64) holding d.
func denseOf(dt tensor.Dtype, d []float64, shape ...int) *tensor.Dense {
	if dt == tensor.Float64 {
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d))
	}
	f := make([]float32, len(d))
	for i, v := range d {
		f[i] = float32(v)
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(f))
}

// firstBitDiff compares two values' contents as raw bits (so NaN payloads and signed zeros count)
// and returns the first differing element's index, or -1.
func firstBitDiff(t testing.TB, a, b G.Value) int {
	t.Helper()
	require.True(t, a.Shape().Eq(b.Shape()) || (a.Shape().IsScalar() && b.Shape().IsScalar()), "shapes %v and %v", a.Shape(), b.Shape())
	switch x := a.Data().(type) {
	case []float32:
		y, ok := b.Data().([]float32)
		require.True(t, ok, "dtypes %T and %T", a.Data(), b.Data())
		require.Len(t, y, len(x))
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
				return i
			}
		}
	case []float64:
		y, ok := b.Data().([]float64)
		require.True(t, ok, "dtypes %T and %T", a.Data(), b.Data())
		require.Len(t, y, len(x))
		for i := range x {
			if math.Float64bits(x[i]) != math.Float64bits(y[i]) {
				return i
			}
		}
	case float32:
		if math.Float32bits(x) != math.Float32bits(b.Data().(float32)) {
			return 0
		}
	case float64:
		if math.Float64bits(x) != math.Float64bits(b.Data().(float64)) {
			return 0
		}
	default:
		t.Fatalf("unexpected value data %T", a.Data())
	}
	return -1
}

func scalar(v G.Value) float64 {
	switch d := v.Data().(type) {
	case float32:
		return float64(d)
	case float64:
		return d
	}
	return math.NaN()
}

// snapshot is one training step kept for comparison: the loss and every gradient before the Adam
// step, every weight after it (deep copies: the machines reuse their memory).
type snapshot struct {
	loss           G.Value
	grads, weights []G.Value
}

func clone(t testing.TB, v G.Value) G.Value {
	t.Helper()
	c, err := G.CloneValue(v)
	require.NoError(t, err)
	return c
}

// train runs steps of forward, backward and Adam on machine, returns every step's loss and keeps a
// snapshot of the first keep steps.
func train(t testing.TB, m *Model, machine G.VM, steps, keep int, lr float64) (losses []float64, snaps []snapshot) {
	t.Helper()
	solver := G.NewAdamSolver(G.WithLearnRate(lr))
	for s := 0; s < steps; s++ {
		require.NoError(t, machine.RunAll())
		losses = append(losses, scalar(m.Loss.Value()))
		var snap snapshot
		if s < keep {
			snap.loss = clone(t, m.Loss.Value())
			for _, p := range m.Learnables {
				gv, err := p.Grad()
				require.NoError(t, err)
				snap.grads = append(snap.grads, clone(t, gv))
			}
		}
		require.NoError(t, solver.Step(G.NodesToValueGrads(m.Learnables)))
		if s < keep {
			for _, p := range m.Learnables {
				snap.weights = append(snap.weights, clone(t, p.Value()))
			}
			snaps = append(snaps, snap)
		}
		machine.Reset()
	}
	return losses, snaps
}

type trainCase struct {
	name  string
	cfg   Config
	div   int // width divisor (1: the real model)
	steps int // on the out-of-core machine; the TapeMachine runs the first `same` of them
	same  int
	lr    float64
	heavy bool // skipped with -short
}

// trainCases cover every family at sizes a 2-core CPU trains in seconds, and where half the in-core
// peak can hold the largest single function (its operands, output, workspace and, at the end, a
// weight gradient: at tiny batches one 512x512x3x3 gradient is most of the peak). The resnets and
// densenet121 are full width; vgg16 (at 32x32, its least size) and unet run at an eighth of their
// widths, whose full-width classifier or bottom gradients (64 MiB, 36 MiB) would need batches
// too slow for a unit test.
var trainCases = []trainCase{
	{name: "smallcnn", cfg: Config{Batch: 4, Channels: 3, Height: 16, Width: 16, Classes: 4, Seed: 1}, div: 1, steps: 4, same: 4, lr: 3e-3},
	{name: "smallcnn", cfg: Config{Batch: 4, Channels: 3, Height: 16, Width: 16, Classes: 4, Dtype: tensor.Float64, Seed: 2}, div: 1, steps: 3, same: 3, lr: 3e-3},
	{name: "resnet18", cfg: Config{Batch: 8, Channels: 3, Height: 64, Width: 64, Classes: 10, Seed: 3}, div: 1, steps: 4, same: 1, lr: 1e-3},
	{name: "resnet50", cfg: Config{Batch: 8, Channels: 3, Height: 32, Width: 32, Classes: 10, Seed: 4}, div: 1, steps: 4, same: 1, lr: 1e-3, heavy: true},
	{name: "densenet121", cfg: Config{Batch: 2, Channels: 3, Height: 32, Width: 32, Classes: 10, Seed: 5}, div: 1, steps: 4, same: 1, lr: 1e-3},
	{name: "vgg16", cfg: Config{Batch: 8, Channels: 3, Height: 32, Width: 32, Classes: 10, Seed: 6}, div: 8, steps: 4, same: 1, lr: 1e-3},
	{name: "unet", cfg: Config{Batch: 4, Channels: 3, Height: 32, Width: 32, Classes: 3, Seed: 7}, div: 8, steps: 4, same: 1, lr: 1e-3},
}

// TestTrainsBitForBitUnderHalfBudget: each model trains on the out-of-core machine with half its
// in-core (Baseline) peak as budget, so it must swap; its loss goes down, and its first steps
// (loss, every gradient, every weight after Adam) equal gorgonia's TapeMachine on the same graph
// built from the same seed, bit for bit.
func TestTrainsBitForBitUnderHalfBudget(t *testing.T) {
	for _, c := range trainCases {
		t.Run(fmt.Sprintf("%s/%v/width-div%d", c.name, c.cfg, c.div), func(t *testing.T) { checkTrainsBitForBit(t, c) })
	}
}

// trainData is a learnable batch for the case: synthetic images (per-pixel targets for the
// per-pixel models), or token sequences for the sequence models.
func trainData(t testing.TB, c trainCase) (x, y *tensor.Dense) {
	a := registry[c.name]
	cfg := c.cfg
	if a.normalize != nil {
		var err error
		cfg, err = a.normalize(cfg)
		require.NoError(t, err)
	}
	if a.tokens {
		return tokenBatch(cfg, cfg.Seed)
	}
	return synthetic(cfg, a.pixel, cfg.Seed)
}

// checkTrainsBitForBit trains the case on the out-of-core machine with half its in-core
// (Baseline) peak as budget, so it must swap; its loss goes down (for the GAN, the sum of both
// players' losses, which does at these seeds),
// and its first steps (loss, every gradient, every weight after Adam) equal gorgonia's
// TapeMachine on the same graph built from the same seed, bit for bit.
func checkTrainsBitForBit(t *testing.T, c trainCase) {
	if c.heavy && testing.Short() {
		t.Skip("heavy: skipped with -short")
	}
	start := time.Now()
	x, y := trainData(t, c)

	ref, err := buildNarrow(t, c.name, c.cfg, c.div)
	require.NoError(t, err)
	require.NoError(t, G.Let(ref.Input, x))
	require.NoError(t, G.Let(ref.Labels, y))
	tm := G.NewTapeMachine(ref.Graph, G.BindDualValues(ref.Learnables...))
	defer tm.Close()
	_, want := train(t, ref, tm, c.same, c.same, c.lr)
	tmTime := time.Since(start)

	got, err := buildNarrow(t, c.name, c.cfg, c.div)
	require.NoError(t, err)
	require.NoError(t, G.Let(got.Input, x))
	require.NoError(t, G.Let(got.Labels, y))
	inCore, err := ooc.Plan(got.Graph, ooc.Baseline())
	require.NoError(t, err)
	budget := inCore.Peak / 2
	machine, err := ooc.Compile(got.Graph, ooc.BindDualValues(got.Learnables...), ooc.WithBudget(budget))
	require.NoError(t, err)
	defer machine.Close()
	losses, have := train(t, got, machine, c.steps, c.same, c.lr)

	for s := 0; s < c.same; s++ {
		require.Equal(t, -1, firstBitDiff(t, want[s].loss, have[s].loss), "step %d: loss %v, TapeMachine %v", s, have[s].loss, want[s].loss)
		for i, p := range got.Learnables {
			require.Equal(t, -1, firstBitDiff(t, want[s].grads[i], have[s].grads[i]), "step %d: gradient of %s differs at this element", s, p.Name())
		}
		for i, p := range got.Learnables {
			require.Equal(t, -1, firstBitDiff(t, want[s].weights[i], have[s].weights[i]), "step %d: %s after Adam differs at this element", s, p.Name())
		}
	}
	st := machine.Stats()
	require.LessOrEqual(t, st.PeakDeviceBytes, budget)
	require.Positive(t, st.SwapInBytes, "half the in-core peak must make it swap")
	for _, l := range losses {
		require.False(t, math.IsNaN(l) || math.IsInf(l, 0), "loss %v", l)
	}
	require.Less(t, losses[len(losses)-1], losses[0], "loss must go down: %v", losses)
	t.Logf("%d params, in-core peak %.2f MiB, budget %.2f MiB, peak %.2f MiB, swapped in %.2f MiB/step; losses %.4f; tape %v, total %v",
		got.NumParams(), mib(inCore.Peak), mib(budget), mib(st.PeakDeviceBytes), mib(st.SwapInBytes)/float64(st.Steps),
		losses, tmTime.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// SetTraining switches every batch norm to its running statistics, which training updated.
func TestSetTraining(t *testing.T) {
	cfg := Config{Batch: 4, Channels: 3, Height: 8, Width: 8, Classes: 4, Seed: 1}
	m, err := Build("smallcnn", cfg)
	require.NoError(t, err)
	require.Len(t, m.BatchNorms, 4)
	x, y := synthetic(cfg, false, 1)
	require.NoError(t, G.Let(m.Input, x))
	require.NoError(t, G.Let(m.Labels, y))
	machine, err := ooc.Compile(m.Graph, ooc.Baseline(), ooc.WithOutputs(m.Logits))
	require.NoError(t, err)
	defer machine.Close()
	require.NoError(t, machine.RunAll())
	train := scalar(m.Loss.Value())
	mean, _ := m.BatchNorms[0].RunningStats()
	require.NotEqual(t, 0.0, mean[0], "a training forward updates the running mean")
	machine.Reset()

	m.SetTraining(false)
	for _, op := range m.BatchNorms {
		require.False(t, op.Training())
	}
	require.NoError(t, machine.RunAll())
	eval := scalar(m.Loss.Value())
	require.NotEqual(t, train, eval, "inference mode normalises with the running statistics")
	require.Equal(t, tensor.Shape{4, 4}, m.Logits.Value().Shape())
	after, _ := m.BatchNorms[0].RunningStats()
	require.Equal(t, mean, after, "inference leaves the running statistics alone")
	machine.Reset()
	m.SetTraining(true)
	require.True(t, m.BatchNorms[0].Training())
}

// ---- memory ----

// bigDevice is an accounting-only stand-in with room for any plan: Plan needs only a capacity.
type bigDevice struct{}

func (bigDevice) Name() string         { return "plan-only" }
func (bigDevice) Memory() alloc.Memory { return nil }
func (bigDevice) Capacity() int64      { return 1 << 50 }
func (bigDevice) Simulated() bool      { return true }
func (bigDevice) Close() error         { return nil }

var _ vm.Device = bigDevice{}

// heapAfterGC is the live heap. Several collections: objects with finalizers (earlier tests'
// machines, say) survive the first one.
func heapAfterGC() int64 {
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	return int64(s.HeapAlloc)
}

// ResNet-50 at 224x224 needs at most 85 MiB per image in the in-core baseline (liveness peak with
// workspace), and at the paper's batch of 1440 it builds, growing the heap by its weights only,
// and plans.
func TestResNet50Memory(t *testing.T) {
	const perImageTarget = 85 << 20
	cfg := Config{Batch: 1440, Channels: 3, Height: 224, Width: 224, Classes: 1000, Seed: 1}
	before := heapAfterGC()
	start := time.Now()
	big, err := Build("resnet50", cfg)
	require.NoError(t, err)
	built := time.Since(start)
	grown := heapAfterGC() - before
	weights := 4 * big.NumParams()
	t.Logf("ResNet-50 batch 1440: built in %v, heap grew %.1f MiB for %.1f MiB of weights", built.Round(time.Millisecond), mib(grown), mib(weights))
	require.Less(t, grown, weights+32<<20, "building must allocate the weights and nothing activation-sized")
	require.Greater(t, grown, weights/2, "the weights themselves are on the heap")

	start = time.Now()
	p, err := ooc.Plan(big.Graph, ooc.Baseline(), ooc.WithDevice(bigDevice{}))
	require.NoError(t, err)
	t.Logf("ResNet-50 batch 1440: in-core peak %.1f GiB = %.2f MiB per image, planned in %v",
		float64(p.Peak)/(1<<30), mib(p.Peak/1440), time.Since(start).Round(time.Millisecond))
	require.LessOrEqual(t, p.Peak/1440, int64(perImageTarget))

	// The same at a batch that a CPU device's default capacity holds.
	cfg.Batch = 16
	m, err := Build("resnet50", cfg)
	require.NoError(t, err)
	p, err = ooc.Plan(m.Graph, ooc.Baseline())
	require.NoError(t, err)
	perImage := p.Peak / int64(cfg.Batch)
	t.Logf("ResNet-50, 3x224x224, batch %d, Baseline(): liveness peak %.1f MiB incl. workspace = %.2f MiB per image",
		cfg.Batch, mib(p.Peak), mib(perImage))
	require.LessOrEqual(t, perImage, int64(perImageTarget))
	runtime.KeepAlive(big)
}
