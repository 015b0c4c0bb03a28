package models

import (
	"fmt"
	"math"
	"math/rand"
	"sort"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models/layers"
)

// Config is the input a model is built for.
type Config struct {
	Batch, Channels, Height, Width, Classes int
	// Dtype is tensor.Float32 (the zero value means Float32) or tensor.Float64.
	Dtype tensor.Dtype
	// Seed makes the weight initialisation reproducible: equal configs give equal weights.
	Seed int64

	// Sequence models (lstm). A sequence is held as a one-pixel-high image, so that the data
	// loaders and the per-pixel loss serve it unchanged: Input is (Batch, 1, 1, SeqLen) token ids
	// (as floats), Labels the one-hot next tokens (Batch, Vocab, 1, SeqLen). SeqLen is the number
	// of steps unrolled in the graph and Vocab the vocabulary; 0 takes Width and Classes (what a
	// loader of 1 x SeqLen sequences reports), and Channels and Height must then be 0 or 1.
	SeqLen, Vocab int
	// Hidden is the lstm's embedding and hidden width (0: 650, Zaremba et al.'s medium model).
	Hidden int
}

// String is a short description, e.g. "b8-3x32x32-c10-float32".
func (c Config) String() string {
	dt := "float32"
	if c.Dtype != (tensor.Dtype{}) {
		dt = c.Dtype.String()
	}
	s := fmt.Sprintf("b%d-%dx%dx%d-c%d-%s", c.Batch, c.Channels, c.Height, c.Width, c.Classes, dt)
	if c.SeqLen > 0 || c.Vocab > 0 || c.Hidden > 0 {
		s += fmt.Sprintf("-t%d-v%d-h%d", c.SeqLen, c.Vocab, c.Hidden)
	}
	return s
}

// Model is a built training graph: forward, loss and (gorgonia.Grad) backward, with only the
// weights allocated. Input and Labels have no value until the caller binds one (gorgonia.Let).
type Model struct {
	Graph *G.ExprGraph
	// Input is the (Batch, Channels, Height, Width) image batch (pix2pixhd: the real images; lstm:
	// (Batch, 1, 1, SeqLen) token ids).
	Input *G.Node
	// Labels are one-hot targets: (Batch, Classes) for the classifiers, (Batch, Classes, Height,
	// Width) for unet and deeplabv3plus (one class per pixel) and for pix2pixhd (the label map the
	// generator translates), (Batch, Vocab, 1, SeqLen) for lstm (the next tokens).
	Labels *G.Node
	// Loss is the scalar mean softmax cross-entropy (per image, pixel or token), plus 0.4 times
	// the auxiliary classifier's for inceptionv3, and for pix2pixhd the sum of both players' GAN
	// losses (see the package documentation).
	Loss *G.Node
	// Learnables are the nodes gorgonia.Grad differentiated, in a fixed order (solvers index their
	// state by position): the order the layers are created, as torchvision's parameters().
	Learnables G.Nodes

	// Name is the model's name as passed to Build, and Config the configuration it was built for
	// (with the default dtype filled in).
	Name   string
	Config Config
	// Logits are the scores the loss reads: (Batch, Classes), or (Batch, Classes, Height, Width)
	// for the per-pixel models (Inception: the main classifier's). Pass it to ooc.WithOutputs to
	// read predictions after RunAll. nil for pix2pixhd.
	Logits *G.Node
	// BatchNorms are the model's batch-norm ops in creation order (their running statistics, for
	// checkpoints, and their train/inference mode). Empty for vgg16, unet, pix2pixhd and lstm.
	BatchNorms []*layers.BatchNormOp
	// Generated is pix2pixhd's generator output, (Batch, Channels, Height, Width) in [-1, 1]; nil
	// for the other models. (pix2pixhd has no Logits: its loss reads discriminator scores.)
	Generated *G.Node

	// vocab is the range of the token ids the input holds (lstm), 0 for pixel inputs.
	vocab int
}

// BindRandom binds a random input batch (normal, from seed; token ids for
// lstm) and random one-hot labels (one class per image, or per pixel for
// the per-pixel models), for runs that need values but not data: timing a
// step, a batch-size sweep.
func (m *Model) BindRandom(seed int64) error {
	rng := rand.New(rand.NewSource(seed))
	dt := m.Input.Dtype()
	x := tensor.New(tensor.Of(dt), tensor.WithShape(m.Input.Shape()...))
	y := tensor.New(tensor.Of(dt), tensor.WithShape(m.Labels.Shape()...))
	draw := rng.NormFloat64
	if m.vocab > 0 {
		draw = func() float64 { return float64(rng.Intn(m.vocab)) }
	}
	switch xs := x.Data().(type) {
	case []float32:
		for i := range xs {
			xs[i] = float32(draw())
		}
	case []float64:
		for i := range xs {
			xs[i] = draw()
		}
	default:
		return fmt.Errorf("models: %s has dtype %v, want float32 or float64", m.Name, dt)
	}
	// Labels are one-hot along axis 1: one class per image (or pixel).
	ls := m.Labels.Shape()
	classes, inner := ls[1], ls.TotalSize()/(ls[0]*ls[1])
	for n := 0; n < ls[0]; n++ {
		for p := 0; p < inner; p++ {
			at := (n*classes+rng.Intn(classes))*inner + p
			switch ys := y.Data().(type) {
			case []float32:
				ys[at] = 1
			case []float64:
				ys[at] = 1
			}
		}
	}
	if err := G.Let(m.Input, x); err != nil {
		return err
	}
	return G.Let(m.Labels, y)
}

// NumParams counts the learnable scalars.
func (m *Model) NumParams() int64 {
	var n int64
	for _, l := range m.Learnables {
		n += int64(l.Shape().TotalSize())
	}
	return n
}

// SetTraining switches every batch norm between batch statistics (true, the default after Build)
// and running statistics (false: inference, e.g. an evaluation pass). Models without batch norm
// behave the same either way. The running statistics are updated by every training-mode forward.
func (m *Model) SetTraining(training bool) {
	for _, op := range m.BatchNorms {
		_ = op.SetTraining(training)
	}
}

// arch builds a network's forward pass from the input x and returns its logits. check, if set,
// rejects a configuration before any node is made, with a message naming what the size must be.
type arch struct {
	check   func(cfg Config) error
	forward func(n *net, x *G.Node, cfg Config) *G.Node
	// pixel: the logits and labels are per pixel (N, Classes, H, W).
	pixel bool
	// init is the convolution initialisation (torchvision's choice for the family).
	init layers.Init
	// bnEps is batch norm's epsilon (0: PyTorch's default 1e-5).
	bnEps float64
	// normalize, if set, fills the fields a family derives from others (lstm: SeqLen and Vocab
	// from Width and Classes) before the configuration is checked.
	normalize func(cfg Config) (Config, error)
	// head, if set, replaces forward and the softmax cross-entropy, for models whose loss is
	// not one softmax over the logits (the GAN, Inception's auxiliary classifier).
	head func(n *net, x, y *G.Node, cfg Config) outputs
	// tokens: the input holds token ids below Classes (lstm), not pixels.
	tokens bool
}

// outputs is what a head builds: the scalar loss, the logits (nil if none) and, for the GAN,
// the generated images.
type outputs struct{ loss, logits, generated *G.Node }

var registry = map[string]arch{
	"smallcnn":    {check: smallCNNCheck, forward: smallCNN},
	"resnet18":    resnet(false, 2, 2, 2, 2),
	"resnet34":    resnet(false, 3, 4, 6, 3),
	"resnet50":    resnet(true, 3, 4, 6, 3),
	"resnet101":   resnet(true, 3, 4, 23, 3),
	"resnet152":   resnet(true, 3, 8, 36, 3),
	"densenet121": densenet(64, 6, 12, 24, 16),
	"densenet169": densenet(64, 6, 12, 32, 32),
	"densenet201": densenet(64, 6, 12, 48, 32),
	"vgg16":       {check: vggCheck, forward: vgg16},
	"unet":        {check: unetCheck, forward: unet, pixel: true, init: layers.KaimingFanIn},

	"inceptionv3":       inceptionV3(true),
	"inceptionv3-noaux": inceptionV3(false),
	"deeplabv3plus":     deeplabV3Plus(),
	"pix2pixhd":         pix2pixHD(),
	"lstm":              lstmLM(),
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

// Build makes the named model's training graph for cfg: forward, loss and backward. Only the
// weights are allocated, so a paper-scale batch builds (and can be planned) on a small machine.
// An unknown name or a size the architecture cannot take is an error naming the model and the
// size; Build never panics.
func Build(name string, cfg Config) (m *Model, err error) {
	a, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("models: unknown model %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return build(name, a, cfg, 1)
}

// BuildNarrow is Build with every layer's channel count divided by div (at
// least 1 channel): the real topology at a fraction of its width, for tests
// and experiments that must run quickly (the models' own tests train vgg16
// and unet at an eighth of their widths). div 1 is Build.
func BuildNarrow(name string, cfg Config, div int) (*Model, error) {
	a, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("models: unknown model %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	if div < 1 {
		return nil, fmt.Errorf("models: %s: width divisor %d is not positive", name, div)
	}
	return build(name, a, cfg, div)
}

// build is Build with a width divisor: every layer's channel count is divided by div (at least 1
// channel), which the tests use to run the real topologies quickly. div 1 is the real model.
func build(name string, a arch, cfg Config, div int) (m *Model, err error) {
	if a.normalize != nil {
		if cfg, err = a.normalize(cfg); err != nil {
			return nil, fmt.Errorf("models: %s: %w", name, err)
		}
	}
	if cfg.Batch <= 0 || cfg.Channels <= 0 || cfg.Height <= 0 || cfg.Width <= 0 || cfg.Classes <= 0 {
		return nil, fmt.Errorf("models: %s: batch, channels, height, width and classes must be positive, got batch %d, %d channels, %dx%d, %d classes",
			name, cfg.Batch, cfg.Channels, cfg.Height, cfg.Width, cfg.Classes)
	}
	if cfg.Dtype == (tensor.Dtype{}) {
		cfg.Dtype = tensor.Float32
	}
	if cfg.Dtype != tensor.Float32 && cfg.Dtype != tensor.Float64 {
		return nil, fmt.Errorf("models: %s: dtype %v is not supported (float32 or float64)", name, cfg.Dtype.String())
	}
	if a.check != nil {
		if err := a.check(cfg); err != nil {
			return nil, fmt.Errorf("models: %s cannot take a %dx%d input: %w", name, cfg.Height, cfg.Width, err)
		}
	}
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("models: building %s for %v: %v", name, cfg, r)
		}
	}()
	g := G.NewGraph()
	b, err := layers.NewBuilder(g, cfg.Dtype, rand.New(rand.NewSource(cfg.Seed)))
	if err != nil {
		return nil, fmt.Errorf("models: %s: %w", name, err)
	}
	b.ConvInit = a.init
	if a.bnEps > 0 {
		b.BNEpsilon = a.bnEps
	}
	n := &net{b: b, div: max(div, 1)}
	x := n.input("input", cfg.Batch, cfg.Channels, cfg.Height, cfg.Width)
	var y *G.Node
	if a.pixel {
		y = n.input("labels", cfg.Batch, cfg.Classes, cfg.Height, cfg.Width)
	} else {
		y = n.input("labels", cfg.Batch, cfg.Classes)
	}
	var out outputs
	if a.head != nil {
		out = a.head(n, x, y, cfg)
	} else {
		out.logits = a.forward(n, x, cfg)
		out.loss = n.crossEntropy(out.logits, y, a.pixel)
	}
	if n.err != nil {
		return nil, fmt.Errorf("models: building %s for %v: %w", name, cfg, n.err)
	}
	ps := b.Learnables()
	if _, err := G.Grad(out.loss, ps...); err != nil {
		return nil, fmt.Errorf("models: %s: differentiating the loss: %w", name, err)
	}
	m = &Model{Graph: g, Input: x, Labels: y, Loss: out.loss, Learnables: ps, Name: name, Config: cfg,
		Logits: out.logits, BatchNorms: b.BatchNorms(), Generated: out.generated}
	if a.tokens {
		m.vocab = cfg.Classes
	}
	return m, nil
}

// crossEntropy is the mean softmax cross-entropy of logits against one-hot targets, per image or
// (pixel) per pixel.
func (n *net) crossEntropy(logits, y *G.Node, pixel bool) *G.Node {
	return n.do("loss", func() (*G.Node, error) {
		if pixel {
			return layers.PixelSoftmaxCrossEntropy(logits, y)
		}
		return layers.SoftmaxCrossEntropy(logits, y)
	})
}

// net wraps a layers.Builder so architectures read as straight-line code: the first error is
// kept (with the layer's name) and every later call does nothing and returns nil.
type net struct {
	b   *layers.Builder
	div int
	err error
}

// ch is a layer width after the test-only width divisor.
func (n *net) ch(c int) int { return max(c/n.div, 1) }

func (n *net) do(name string, f func() (*G.Node, error)) *G.Node {
	if n.err != nil {
		return nil
	}
	y, err := f()
	if err != nil {
		n.err = fmt.Errorf("%s: %w", name, err)
		return nil
	}
	return y
}

func (n *net) input(name string, shape ...int) *G.Node {
	return n.do(name, func() (*G.Node, error) { return n.b.Input(name, shape...) })
}

// conv is a bias-free k x k convolution with torchvision's name "<name>.weight".
func (n *net) conv(x *G.Node, out, k, stride, pad int, name string) *G.Node {
	return n.do(name, func() (*G.Node, error) { return n.b.Conv(x, n.ch(out), k, stride, pad, name) })
}

// convBias is a k x k convolution with a bias (VGG, U-Net).
func (n *net) convBias(x *G.Node, out, k, stride, pad int, name string) *G.Node {
	return n.do(name, func() (*G.Node, error) { return n.b.ConvBias(x, n.ch(out), k, stride, pad, name) })
}

func (n *net) convTranspose(x *G.Node, out, k, stride int, name string) *G.Node {
	return n.do(name, func() (*G.Node, error) { return n.b.ConvTranspose(x, n.ch(out), k, stride, name) })
}

func (n *net) bn(x *G.Node, name string) *G.Node {
	return n.do(name, func() (*G.Node, error) { return n.b.BN(x, name) })
}

func (n *net) relu(x *G.Node) *G.Node {
	return n.do("relu", func() (*G.Node, error) { return layers.ReLU(x) })
}

func (n *net) add(a, b *G.Node, name string) *G.Node {
	return n.do(name, func() (*G.Node, error) { return G.Add(a, b) })
}

func (n *net) maxPool(x *G.Node, k, stride, pad int, name string) *G.Node {
	return n.do(name, func() (*G.Node, error) { return layers.MaxPool2D(x, k, stride, pad) })
}

func (n *net) avgPool(x *G.Node, k, stride int, name string) *G.Node {
	return n.do(name, func() (*G.Node, error) { return layers.AvgPool2D(x, k, stride, 0) })
}

func (n *net) globalAvgPool(x *G.Node) *G.Node {
	return n.do("avgpool", func() (*G.Node, error) { return layers.GlobalAvgPool2D(x) })
}

func (n *net) concat(name string, xs ...*G.Node) *G.Node {
	return n.do(name, func() (*G.Node, error) { return layers.Concat(xs...) })
}

// flatten reshapes (N, C, H, W) to (N, C*H*W).
func (n *net) flatten(x *G.Node) *G.Node {
	return n.do("flatten", func() (*G.Node, error) {
		s := x.Shape()
		return G.Reshape(x, tensor.Shape{s[0], s.TotalSize() / s[0]})
	})
}

// linear is PyTorch's nn.Linear with its default initialisation.
func (n *net) linear(x *G.Node, out int, name string) *G.Node {
	return n.do(name, func() (*G.Node, error) { return n.b.Linear(x, out, name) })
}

// linearWith is a linear layer with chosen initialisers.
func (n *net) linearWith(x *G.Node, out int, name string, w, b func() float64) *G.Node {
	return n.do(name, func() (*G.Node, error) { return n.b.LinearWith(x, out, name, w, b) })
}

// convOut is the output length of a convolution or pooling window along one axis (0 if none).
func convOut(in, k, stride, pad int) int {
	if in+2*pad < k {
		return 0
	}
	return (in+2*pad-k)/stride + 1
}

// ---- smallcnn ----

func smallCNNCheck(cfg Config) error {
	if cfg.Height%4 != 0 || cfg.Width%4 != 0 {
		return fmt.Errorf("height and width must be multiples of 4 (two 2x2 max-pools)")
	}
	return nil
}

// smallCNN is a quick CPU model: conv-bn-relu, a residual block, max-pooling, a conv-bn-relu
// whose output is concatenated with its input, max-pooling again and a linear classifier over
// the flattened 32 x H/4 x W/4 features.
func smallCNN(n *net, x *G.Node, cfg Config) *G.Node {
	const c = 16
	h := n.relu(n.bn(n.conv(x, c, 3, 1, 1, "conv1"), "bn1"))
	r := n.relu(n.bn(n.conv(h, c, 3, 1, 1, "block.conv1"), "block.bn1"))
	r = n.bn(n.conv(r, c, 3, 1, 1, "block.conv2"), "block.bn2")
	h = n.relu(n.add(r, h, "block.add"))
	h = n.maxPool(h, 2, 2, 0, "pool1")
	h2 := n.relu(n.bn(n.conv(h, c, 3, 1, 1, "conv2"), "bn2"))
	h = n.concat("concat", h, h2)
	h = n.maxPool(h, 2, 2, 0, "pool2")
	return n.linear(n.flatten(h), cfg.Classes, "fc")
}

// ---- ResNet (He et al. 2016; torchvision's v1.5: the stride is on the 3x3 conv) ----

func resnet(bottleneck bool, blocks ...int) arch {
	return arch{
		init: layers.KaimingFanOut,
		forward: func(n *net, x *G.Node, cfg Config) *G.Node {
			h, _ := n.resnetStages(n.resnetStem(x, ""), bottleneck, blocks, "", nil)
			return n.linear(n.globalAvgPool(h), cfg.Classes, "fc")
		},
	}
}

// resnetStem is torchvision's conv1, bn1, ReLU and 3x3/2 max-pool: a quarter of the input size.
func (n *net) resnetStem(x *G.Node, prefix string) *G.Node {
	h := n.relu(n.bn(n.conv(x, 64, 7, 2, 3, prefix+"conv1"), prefix+"bn1"))
	return n.maxPool(h, 3, 2, 1, prefix+"maxpool")
}

// resnetStages appends torchvision's layer1, layer2, ... with the given block counts and returns
// the last stage's output and the first's (DeepLab's low-level features). dilations, if not nil,
// holds per stage the dilation of each block's 3x3 convolution (nil for an ordinary stage); a
// dilated stage keeps its input's resolution (stride 1), as DeepLab's atrous backbone.
func (n *net) resnetStages(h *G.Node, bottleneck bool, blocks []int, prefix string, dilations [][]int) (out, first *G.Node) {
	expansion := 1
	if bottleneck {
		expansion = 4
	}
	in := 64
	for stage, count := range blocks {
		width := 64 << stage
		var dil []int
		if stage < len(dilations) {
			dil = dilations[stage]
		}
		for i := 0; i < count; i++ {
			stride, d := 1, 1
			if i == 0 && stage > 0 && dil == nil {
				stride = 2
			}
			if dil != nil {
				d = dil[i%len(dil)]
			}
			name := fmt.Sprintf("%slayer%d.%d", prefix, stage+1, i)
			var y *G.Node
			if bottleneck {
				y = n.relu(n.bn(n.conv(h, width, 1, 1, 0, name+".conv1"), name+".bn1"))
				y = n.relu(n.bn(n.conv3(y, width, stride, d, name+".conv2"), name+".bn2"))
				y = n.bn(n.conv(y, width*4, 1, 1, 0, name+".conv3"), name+".bn3")
			} else {
				y = n.relu(n.bn(n.conv3(h, width, stride, d, name+".conv1"), name+".bn1"))
				y = n.bn(n.conv3(y, width, 1, d, name+".conv2"), name+".bn2")
			}
			shortcut := h
			if stride != 1 || in != width*expansion {
				shortcut = n.bn(n.conv(h, width*expansion, 1, stride, 0, name+".downsample.0"), name+".downsample.1")
			}
			h = n.relu(n.add(y, shortcut, name+".add"))
			in = width * expansion
		}
		if stage == 0 {
			first = h
		}
	}
	return h, first
}

// conv3 is a bias-free 3x3 convolution at the given stride whose taps are dil pixels apart,
// padded by dil so a stride-1 convolution keeps the size (dil 1: an ordinary 3x3 convolution).
func (n *net) conv3(x *G.Node, out, stride, dil int, name string) *G.Node {
	return n.do(name, func() (*G.Node, error) {
		p := layers.ConvParams{StrideH: stride, StrideW: stride, PadH: dil, PadW: dil, DilationH: dil, DilationW: dil}
		return n.b.ConvWith(x, n.ch(out), 3, 3, p, false, name)
	})
}

// ---- DenseNet-BC (Huang et al. 2017; torchvision: growth 32, bottleneck 4x, compression 0.5) ----

func densenet(initFeatures int, blocks ...int) arch {
	const growth, bnSize = 32, 4
	return arch{
		init: layers.KaimingFanIn,
		check: func(cfg Config) error {
			// Stem: 7x7/2 conv and 3x3/2 max-pool; then a 2x2/2 average pool after every block but the last.
			fits := func(s int) bool {
				s = convOut(convOut(s, 7, 2, 3), 3, 2, 1)
				for i := 0; i < len(blocks)-1; i++ {
					s = convOut(s, 2, 2, 0)
				}
				return s >= 1
			}
			if !fits(cfg.Height) || !fits(cfg.Width) {
				least := 1
				for !fits(least) {
					least++
				}
				return fmt.Errorf("the stem and %d transition pools leave no pixels: height and width must be at least %d", len(blocks)-1, least)
			}
			return nil
		},
		forward: func(n *net, x *G.Node, cfg Config) *G.Node {
			h := n.conv(x, initFeatures, 7, 2, 3, "features.conv0")
			h = n.relu(n.bn(h, "features.norm0"))
			h = n.maxPool(h, 3, 2, 1, "features.pool0")
			for bi, count := range blocks {
				feats := []*G.Node{h}
				for li := 0; li < count; li++ {
					name := fmt.Sprintf("features.denseblock%d.denselayer%d", bi+1, li+1)
					cat := n.concat(name+".cat", feats...)
					y := n.relu(n.bn(cat, name+".norm1"))
					y = n.conv(y, bnSize*growth, 1, 1, 0, name+".conv1")
					y = n.relu(n.bn(y, name+".norm2"))
					y = n.conv(y, growth, 3, 1, 1, name+".conv2")
					feats = append(feats, y)
				}
				h = n.concat(fmt.Sprintf("features.denseblock%d.cat", bi+1), feats...)
				if bi != len(blocks)-1 {
					name := fmt.Sprintf("features.transition%d", bi+1)
					y := n.relu(n.bn(h, name+".norm"))
					c := 0
					if n.err == nil {
						c = y.Shape()[1] / 2 // compression 0.5 (already narrowed: not divided again)
					}
					y = n.do(name+".conv", func() (*G.Node, error) { return n.b.Conv(y, c, 1, 1, 0, name+".conv") })
					h = n.avgPool(y, 2, 2, name+".pool")
				}
			}
			h = n.relu(n.bn(h, "features.norm5"))
			h = n.globalAvgPool(h)
			in := 1
			if n.err == nil {
				in = h.Shape()[1]
			}
			return n.linearWith(h, cfg.Classes, "classifier", n.b.Uniform(1/math.Sqrt(float64(in))), layers.Constant(0))
		},
	}
}

// ---- VGG-16 (Simonyan and Zisserman 2015, configuration D, no batch norm) ----

// vggCfg is configuration D: conv widths, 0 for a 2x2 max-pool.
var vggCfg = []int{64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0}

func vggCheck(cfg Config) error {
	if cfg.Height < 32 || cfg.Width < 32 {
		return fmt.Errorf("five 2x2 max-pools need height and width of at least 32")
	}
	return nil
}

// vgg16 is torchvision's vgg16 without dropout. torchvision pools the last feature map adaptively
// to 7x7 before the classifier; here a map whose sides are equal multiples of 7 is average-pooled
// to 7x7 (the same thing), and any other map is flattened as it is, so the first classifier layer
// has 512*h*w inputs (512 at 32x32, as the CIFAR variants of VGG).
func vgg16(n *net, x *G.Node, cfg Config) *G.Node {
	h := x
	idx := 0 // torchvision numbers the conv, ReLU and pool modules of one Sequential
	for _, c := range vggCfg {
		if c == 0 {
			h = n.maxPool(h, 2, 2, 0, fmt.Sprintf("features.%d", idx))
			idx++
			continue
		}
		h = n.relu(n.convBias(h, c, 3, 1, 1, fmt.Sprintf("features.%d", idx)))
		idx += 2
	}
	if n.err == nil {
		s := h.Shape()
		if s[2] == s[3] && s[2] > 7 && s[2]%7 == 0 {
			k := s[2] / 7
			h = n.avgPool(h, k, k, "avgpool")
		}
	}
	h = n.flatten(h)
	normal := n.b.Normal(0.01)
	h = n.relu(n.linearWith(h, 4096/n.div, "classifier.0", normal, layers.Constant(0)))
	h = n.relu(n.linearWith(h, 4096/n.div, "classifier.3", normal, layers.Constant(0)))
	return n.linearWith(h, cfg.Classes, "classifier.6", normal, layers.Constant(0))
}

// ---- U-Net (Ronneberger et al. 2015, with padded convolutions) ----

func unetCheck(cfg Config) error {
	if cfg.Height%16 != 0 || cfg.Width%16 != 0 {
		return fmt.Errorf("four 2x2 max-pools and up-convolutions need height and width divisible by 16")
	}
	return nil
}

// unet: four levels of two 3x3 conv + ReLU with a 2x2 max-pool between them (64, 128, 256, 512
// channels), a 1024-channel bottom, and four levels up, each a 2x2 up-convolution halving the
// channels, concatenation with the skip connection of the same level and two 3x3 conv + ReLU;
// then a 1x1 convolution to Classes per-pixel scores.
func unet(n *net, x *G.Node, cfg Config) *G.Node {
	double := func(x *G.Node, c int, name string) *G.Node {
		x = n.relu(n.convBias(x, c, 3, 1, 1, name+".conv1"))
		return n.relu(n.convBias(x, c, 3, 1, 1, name+".conv2"))
	}
	var skips []*G.Node
	h := x
	for i := 0; i < 4; i++ {
		h = double(h, 64<<i, fmt.Sprintf("down%d", i+1))
		skips = append(skips, h)
		h = n.maxPool(h, 2, 2, 0, fmt.Sprintf("pool%d", i+1))
	}
	h = double(h, 1024, "bottom")
	for i := 3; i >= 0; i-- {
		name := fmt.Sprintf("up%d", 4-i)
		u := n.convTranspose(h, 64<<i, 2, 2, name+".upconv")
		h = double(n.concat(name+".cat", skips[i], u), 64<<i, name)
	}
	return n.do("outc", func() (*G.Node, error) { return n.b.ConvBias(h, cfg.Classes, 1, 1, 0, "outc") })
}
