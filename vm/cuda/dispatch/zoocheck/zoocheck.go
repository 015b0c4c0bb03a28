package zoocheck

import (
	"fmt"
	"maps"
	"math"
	"math/rand"
	"runtime"
	"strings"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/internal/checkrun"
	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/cuda"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch"
)

// TB is what the checks need of a test (checkrun.TB: *testing.T has it).
type TB = checkrun.TB

// RelErr is the normwise relative difference max|a-b| / max|b| (absolute
// when b is all zeros), NaN-aware: a NaN where the other has none is +Inf.
func RelErr(a, b []float64) float64 {
	var d, m float64
	for i := range a {
		if math.IsNaN(a[i]) != math.IsNaN(b[i]) {
			return math.Inf(1)
		}
		d = max(d, math.Abs(a[i]-b[i]))
		m = max(m, math.Abs(b[i]))
	}
	if m == 0 {
		return d
	}
	return d / m
}

// Floats reads a value as float64s.
func Floats(t TB, v G.Value) []float64 {
	t.Helper()
	switch x := v.(type) {
	case *G.F32:
		return []float64{float64(*x)}
	case *G.F64:
		return []float64{float64(*x)}
	case *tensor.Dense:
		switch d := x.Data().(type) {
		case []float32:
			out := make([]float64, len(d))
			for i, f := range d {
				out[i] = float64(f)
			}
			return out
		case []float64:
			return append([]float64(nil), d...)
		case float32:
			return []float64{float64(d)}
		case float64:
			return []float64{d}
		}
	}
	t.Fatalf("cannot read %T", v)
	return nil
}

// batch fills a model's input (pixels, or token ids for a language model)
// and one-hot labels from rng.
func Batch(t TB, rng *rand.Rand, m *models.Model) (x, y *tensor.Dense) {
	dt := m.Input.Dtype()
	xs, ys := m.Input.Shape(), m.Labels.Shape()
	x = tensor.New(tensor.Of(dt), tensor.WithShape(xs...))
	y = tensor.New(tensor.Of(dt), tensor.WithShape(ys...))
	classes := ys[1]
	per := ys.TotalSize() / (ys[0] * classes) // pixels per image (1 for classifiers)
	for i := 0; i < xs.TotalSize(); i++ {
		if v := m.Config.Vocab; v > 0 { // lstm: token ids
			SetAt(x, i, float64(rng.Intn(v)))
		} else {
			SetAt(x, i, rng.NormFloat64())
		}
	}
	for n := 0; n < ys[0]; n++ {
		for p := 0; p < per; p++ {
			SetAt(y, (n*classes+rng.Intn(classes))*per+p, 1)
		}
	}
	return x, y
}

// SetAt writes v into element i of a float32 or float64 tensor.
func SetAt(d *tensor.Dense, i int, v float64) {
	switch s := d.Data().(type) {
	case []float32:
		s[i] = float32(v)
	case []float64:
		s[i] = v
	}
}

// Pair is one model built twice (equal weights): once for the CPU device,
// once for the CUDA device.
type Pair struct {
	CPU, GPU  *models.Model
	MC, MG    *vm.Machine
	SC, SG    G.Solver
	CPULoss   G.Value
	GPULoss   G.Value
	SameStart bool // each step starts from the CPU side's weights (align)
	// ref is the model in float64 on the CPU device, run from the float32
	// CPU side's weights on the same batch, for float32 comparisons where
	// the direct one is ill-conditioned (withReference).
	ref *models.Model
	mr  *vm.Machine
	// refLoss, refGrads and refWeights are ref's loss, gradients and the
	// weights after the SGD step in float64 from the step's start; refRatio
	// is, per quantity, the worst error of the CUDA side against them over
	// the CPU side's (or over 1e-5, when the CPU side is nearer).
	refLoss    G.Value
	refGrads   [][]float64
	refWeights [][]float64
	refRatio   map[string]float64
	worst      map[string]float64
}

// lr is both solvers' learning rate (sgd), which the float64 reference's
// weights step with too.
const lr = 1e-2

// refFactor is how much farther from the float64 model the CUDA device's
// float32 results may be than the CPU device's, when the two devices are
// further apart than the tolerance: the devices compute a few ops differently
// in the last bits (Run says which), and a model whose results amplify
// rounding takes each to its own float32 answer, both about equally far from
// the exact one. Twice as far is still "as accurate as float32 allows"; a
// kernel bug is O(1) away.
const refFactor = 2

// NewPair compiles both machines with the given options (a budget, a
// scheduler) added to the binding of the learnables.
func NewPair(t TB, d *cuda.Device, c Case, opts ...ooc.Option) *Pair {
	t.Helper()
	return newPairWith(t, d, c, opts, opts)
}

// NewPairAt compiles both machines to plan the program for budget bytes: the
// CUDA machine's budget also holds its backend's reserve (cuBLAS's workspace,
// which ooc counts inside the budget), so both plan the same tape.
func NewPairAt(t TB, d *cuda.Device, c Case, budget int64, opts ...ooc.Option) *Pair {
	t.Helper()
	return newPairWith(t, d, c, append(opts, ooc.WithBudget(budget)), append(opts, ooc.WithBudget(budget+dispatch.For(d).Reserve())))
}

func newPairWith(t TB, d *cuda.Device, c Case, cpuOpts, gpuOpts []ooc.Option) *Pair {
	t.Helper()
	p := &Pair{worst: map[string]float64{}, refRatio: map[string]float64{}, CPU: c.Build(t), GPU: c.Build(t)}
	var err error
	G.Read(p.CPU.Loss, &p.CPULoss)
	G.Read(p.GPU.Loss, &p.GPULoss)
	if p.MC, err = ooc.Compile(p.CPU.Graph, append([]ooc.Option{ooc.BindDualValues(p.CPU.Learnables...)}, cpuOpts...)...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.MC.Close() })
	if p.MG, err = ooc.Compile(p.GPU.Graph, append([]ooc.Option{ooc.BindDualValues(p.GPU.Learnables...), ooc.WithDevice(d)}, gpuOpts...)...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.MG.Close() })
	p.SC = G.NewAdamSolver(G.WithLearnRate(1e-3))
	p.SG = G.NewAdamSolver(G.WithLearnRate(1e-3))
	return p
}

// align starts the CUDA side's step from the CPU side's weights and
// batch-norm statistics, so that a step's differences are that step's alone:
// over several steps, float32 rounding moves a max-pool's argmax or a ReLU's
// sign somewhere in a deep model, which changes that gradient element by
// O(1) on one side only (resnet18 at batch 8: gradients 1.3e-6 apart after
// one step, 6e-3 after two from diverged weights).
func (p *Pair) align(t TB) {
	t.Helper()
	for i, l := range p.CPU.Learnables {
		src, dst := l.Value().(*tensor.Dense), p.GPU.Learnables[i].Value().(*tensor.Dense)
		copy(dst.Raw, src.Raw)
	}
	for i, bn := range p.CPU.BatchNorms {
		m, v := bn.RunningStats()
		if err := p.GPU.BatchNorms[i].SetRunningStats(m, v); err != nil {
			t.Fatal(err)
		}
	}
}

// withReference adds the float64 reference of a float32 Pair.
func (p *Pair) WithReference(t TB, c Case) {
	t.Helper()
	c.Cfg.Dtype = tensor.Float64
	p.ref = c.Build(t)
	G.Read(p.ref.Loss, &p.refLoss)
	var err error
	if p.mr, err = ooc.Compile(p.ref.Graph, ooc.BindDualValues(p.ref.Learnables...)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.mr.Close() })
}

// seedReference starts the float64 model's step from the float32 CPU
// side's weights and batch-norm statistics, before the CPU side runs it.
func (p *Pair) seedReference(t TB) {
	t.Helper()
	for i, l := range p.CPU.Learnables {
		copy(p.ref.Learnables[i].Value().(*tensor.Dense).Data().([]float64), Floats(t, l.Value()))
	}
	for i, bn := range p.CPU.BatchNorms {
		m, v := bn.RunningStats()
		if err := p.ref.BatchNorms[i].SetRunningStats(m, v); err != nil {
			t.Fatal(err)
		}
	}
}

// reference runs the float64 model (seedReference) on batch (x, y) and keeps
// its loss, gradients and the weights an SGD step would give in float64;
// compare then measures both sides against them. It runs before the solvers
// step, after both machines ran.
func (p *Pair) reference(t TB, x, y *tensor.Dense) {
	t.Helper()
	to64 := func(v G.Value, dst *tensor.Dense) {
		copy(dst.Data().([]float64), Floats(t, v))
	}
	for _, in := range []struct {
		n *G.Node
		v *tensor.Dense
	}{{p.ref.Input, x}, {p.ref.Labels, y}} {
		d := tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(in.v.Shape().Clone()...))
		to64(in.v, d)
		if err := G.Let(in.n, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.mr.RunAll(); err != nil {
		t.Fatal("float64 reference:", err)
	}
	defer p.mr.Reset()
	p.refGrads, p.refWeights = p.refGrads[:0], p.refWeights[:0]
	for _, l := range p.ref.Learnables {
		gr, err := l.Grad()
		if err != nil {
			t.Fatal(err)
		}
		g, w := Floats(t, gr), Floats(t, l.Value())
		for j := range w {
			w[j] -= lr * g[j]
		}
		p.refGrads, p.refWeights = append(p.refGrads, g), append(p.refWeights, w)
	}
	p.compare("loss", Floats(t, p.GPULoss), Floats(t, p.CPULoss), Floats(t, p.refLoss))
	for i, bn := range p.ref.BatchNorms {
		mr, vr := bn.RunningStats()
		mc, vc := p.CPU.BatchNorms[i].RunningStats()
		mg, vg := p.GPU.BatchNorms[i].RunningStats()
		p.compare("running statistics", append(mg, vg...), append(mc, vc...), append(mr, vr...))
	}
}

// compare records, for one tensor, the CUDA side's error against the float64
// reference over the CPU side's (or over 1e-5 when the CPU side is nearer):
// 1 or less means the CUDA device is as close to exact arithmetic as the CPU
// device is.
func (p *Pair) compare(what string, gpu, cpu, ref []float64) {
	p.refRatio[what] = max(p.refRatio[what], RelErr(gpu, ref)/max(RelErr(cpu, ref), 1e-5))
}

// sgd makes both solvers plain SGD. Adam divides each gradient element by
// the root of its running square, so an element that is rounding noise on
// both devices (a gradient that is zero in exact arithmetic) becomes a full
// step of ±lr with a sign of its own on each: weights after Adam compare
// rounding, not kernels (resnet18 at batch 8: gradients within 1.3e-6,
// weights after one Adam step 1.8e-3 apart).
func (p *Pair) SGD() {
	p.SC = G.NewVanillaSolver(G.WithLearnRate(lr))
	p.SG = G.NewVanillaSolver(G.WithLearnRate(lr))
}

// step runs one training step on both devices with the same batch and
// records the worst relative differences of the loss, the gradients, the
// batch-norm running statistics and (after the solver) the weights.
func (p *Pair) Step(t TB, rng *rand.Rand) {
	t.Helper()
	if p.SameStart {
		p.align(t)
	}
	x, y := Batch(t, rng, p.CPU)
	for _, m := range []*models.Model{p.CPU, p.GPU} {
		if err := G.Let(m.Input, x.Clone()); err != nil {
			t.Fatal(err)
		}
		if err := G.Let(m.Labels, y.Clone()); err != nil {
			t.Fatal(err)
		}
	}
	if p.ref != nil {
		p.seedReference(t)
	}
	if err := p.MC.RunAll(); err != nil {
		t.Fatal("cpu:", err)
	}
	if err := p.MG.RunAll(); err != nil {
		t.Fatal("cuda:", err)
	}
	p.Note("loss", Floats(t, p.GPULoss), Floats(t, p.CPULoss))
	if p.ref != nil {
		p.reference(t, x, y)
	}
	for i, l := range p.CPU.Learnables {
		gc, err := l.Grad()
		if err != nil {
			t.Fatal(err)
		}
		gg, err := p.GPU.Learnables[i].Grad()
		if err != nil {
			t.Fatal(err)
		}
		p.Note("gradients", Floats(t, gg), Floats(t, gc))
		if p.ref != nil {
			p.compare("gradients", Floats(t, gg), Floats(t, gc), p.refGrads[i])
		}
	}
	for i, bn := range p.CPU.BatchNorms {
		mc, vc := bn.RunningStats()
		mg, vg := p.GPU.BatchNorms[i].RunningStats()
		p.Note("running statistics", append(mg, vg...), append(mc, vc...))
	}
	if err := p.SC.Step(G.NodesToValueGrads(p.CPU.Learnables)); err != nil {
		t.Fatal(err)
	}
	if err := p.SG.Step(G.NodesToValueGrads(p.GPU.Learnables)); err != nil {
		t.Fatal(err)
	}
	p.MC.Reset()
	p.MG.Reset()
	for i, l := range p.CPU.Learnables {
		wg, wc := Floats(t, p.GPU.Learnables[i].Value()), Floats(t, l.Value())
		p.Note("weights", wg, wc)
		if p.ref != nil {
			p.compare("weights", wg, wc, p.refWeights[i])
		}
	}
}

func (p *Pair) Note(what string, got, want []float64) {
	if len(got) != len(want) {
		p.worst[what] = math.Inf(1)
		return
	}
	p.worst[what] = max(p.worst[what], RelErr(got, want))
}

// check fails the test when a difference exceeds tol, unless, with a
// float64 reference, the CUDA side is at most refFactor times as far from it
// as the CPU side (or as 1e-5): the difference is then float32's, the same
// on both devices, not a kernel's.
func (p *Pair) Check(t TB, label string, tol float64) {
	t.Helper()
	for _, what := range []string{"loss", "gradients", "running statistics", "weights"} {
		e, ok := p.worst[what]
		if !ok {
			continue
		}
		t.Logf("%s: %s differ by at most %.2g (normwise relative, CUDA vs CPU device)", label, what, e)
		r, withRef := p.refRatio[what]
		if withRef {
			t.Logf("%s: %s against the float64 reference: the CUDA device at worst %.3g times as far as the CPU device (or as 1e-5)", label, what, r)
		}
		switch {
		case e <= tol:
		case withRef && r <= refFactor:
		case withRef:
			t.Errorf("%s: %s differ by %.3g > %g, and the CUDA side's are %.3g times as far from float64 as the CPU side's (> %g)", label, what, e, tol, r, float64(refFactor))
		default:
			t.Errorf("%s: %s differ by %.3g > %g", label, what, e, tol)
		}
	}
}

type Case struct {
	Name  string
	Cfg   models.Config
	Div   int // width divisor (models.BuildNarrow); 0 is 1
	Steps int
	Deep  bool // only with OOC_CUDA_ZOO=1
	// ws, if set, limits every op's workspace (ooc.WithWorkspaceLimit) on
	// both devices, so that convolutions run in tiles of output pixels.
	WS int64
}

// Options are the case's compile options on both devices.
func (c Case) Options() []ooc.Option {
	if c.WS > 0 {
		return []ooc.Option{ooc.WithWorkspaceLimit(c.WS)}
	}
	return nil
}

// Build builds the case's model (narrowed by Div).
func (c Case) Build(t TB) *models.Model {
	t.Helper()
	m, err := models.BuildNarrow(c.Name, c.Cfg, max(c.Div, 1))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Cases are the models' own training-test sizes (vgg16 and unet at an
// eighth of their widths, whose full-width classifier or bottom gradients
// alone would need most of the in-core peak; inceptionv3 at a sixteenth,
// deeplabv3plus at an eighth, pix2pixhd at a sixteenth with its
// convolutions tiled, as its 7x7 column matrices alone exceed half its peak
// otherwise), small enough for the fake's host GEMM, and large enough that
// every batch norm normalises over at least 8 values (inceptionv3 and
// deeplabv3plus at batch 8 for their 1x1 feature maps): over 2 (resnet18 at
// 32x32 and batch 2, whose last stage is 1x1) its gradient amplifies
// rounding about 1e5-fold on either device (float64 gradients then differ
// by 4e-11, float32 ones by 0.1), which says nothing about the kernels.
var Cases = []Case{
	{Name: "smallcnn", Cfg: models.Config{Batch: 4, Channels: 3, Height: 16, Width: 16, Classes: 4, Dtype: tensor.Float64, Seed: 1}, Steps: 2},
	{Name: "smallcnn", Cfg: models.Config{Batch: 4, Channels: 3, Height: 16, Width: 16, Classes: 4, Seed: 2}, Steps: 2},
	// 32x32 images in a workspace of one 256-pixel tile: convolutions in tiles.
	{Name: "smallcnn", Cfg: models.Config{Batch: 2, Channels: 3, Height: 32, Width: 32, Classes: 4, Dtype: tensor.Float64, Seed: 14}, Steps: 2, WS: 1},
	{Name: "resnet18", Cfg: models.Config{Batch: 8, Channels: 3, Height: 64, Width: 64, Classes: 10, Seed: 3}, Steps: 2, Deep: true},
	{Name: "resnet50", Cfg: models.Config{Batch: 8, Channels: 3, Height: 32, Width: 32, Classes: 10, Seed: 4}, Div: 4, Steps: 2, Deep: true},
	{Name: "densenet121", Cfg: models.Config{Batch: 2, Channels: 3, Height: 64, Width: 64, Classes: 10, Seed: 5}, Steps: 2, Deep: true},
	// In float64 the whole step is the CPU device's bits (5.8e-11 apart at the
	// gradients while the kernels' exp, log and softmax maximum were not Go's).
	{Name: "densenet121", Cfg: models.Config{Batch: 2, Channels: 3, Height: 64, Width: 64, Classes: 10, Dtype: tensor.Float64, Seed: 5}, Steps: 2, Deep: true},
	{Name: "vgg16", Cfg: models.Config{Batch: 8, Channels: 3, Height: 32, Width: 32, Classes: 10, Seed: 6}, Div: 8, Steps: 2, Deep: true},
	{Name: "unet", Cfg: models.Config{Batch: 4, Channels: 3, Height: 32, Width: 32, Classes: 3, Seed: 7}, Div: 8, Steps: 2, Deep: true},
	{Name: "inceptionv3-noaux", Cfg: models.Config{Batch: 8, Channels: 3, Height: 75, Width: 75, Classes: 7, Seed: 8}, Div: 16, Steps: 2, Deep: true},
	{Name: "inceptionv3", Cfg: models.Config{Batch: 8, Channels: 3, Height: 299, Width: 299, Classes: 7, Seed: 9}, Div: 16, Steps: 2, Deep: true},
	{Name: "deeplabv3plus", Cfg: models.Config{Batch: 8, Channels: 3, Height: 33, Width: 45, Classes: 5, Seed: 10}, Div: 8, Steps: 2, Deep: true},
	{Name: "pix2pixhd", Cfg: models.Config{Batch: 1, Channels: 3, Height: 32, Width: 64, Classes: 5, Seed: 11}, Div: 16, Steps: 2, Deep: true, WS: 1},
	// The rest of the bundled models, narrowed so that each runs in 4 to 65
	// minutes here (docs/results.md); their last stages still normalise 32 (resnet34), 8 (resnet101,
	// resnet152: 1x1 maps at batch 8) and 8 (densenets: 2x2 maps at batch 2)
	// values per channel.
	{Name: "resnet34", Cfg: models.Config{Batch: 8, Channels: 3, Height: 64, Width: 64, Classes: 10, Seed: 15}, Div: 2, Steps: 2, Deep: true},
	{Name: "resnet101", Cfg: models.Config{Batch: 8, Channels: 3, Height: 32, Width: 32, Classes: 10, Seed: 16}, Div: 4, Steps: 2, Deep: true},
	{Name: "resnet152", Cfg: models.Config{Batch: 8, Channels: 3, Height: 32, Width: 32, Classes: 10, Seed: 17}, Div: 4, Steps: 2, Deep: true},
	{Name: "densenet169", Cfg: models.Config{Batch: 2, Channels: 3, Height: 64, Width: 64, Classes: 10, Seed: 18}, Div: 2, Steps: 2, Deep: true},
	{Name: "densenet201", Cfg: models.Config{Batch: 2, Channels: 3, Height: 64, Width: 64, Classes: 10, Seed: 19}, Div: 2, Steps: 2, Deep: true},
	{Name: "lstm", Cfg: models.Config{Batch: 4, SeqLen: 5, Vocab: 11, Hidden: 16, Seed: 12}, Steps: 2},
	{Name: "lstm", Cfg: models.Config{Batch: 4, SeqLen: 5, Vocab: 11, Hidden: 16, Dtype: tensor.Float64, Seed: 13}, Steps: 2},
}

// Run: each model trains a few SGD steps on the CUDA device (the fake one
// in vm/cuda/dispatch's TestZooOnFakeDevice, a GPU in "ooc doctor") and on the CPU device, from equal weights and batches, at 100% and
// 50% of its in-core peak and at the least budget both devices can plan,
// with the window scheduler and the VA allocator; below 100% the CUDA
// machine must swap and must stay within the budget.
//
// What is compared, per step: the loss, every gradient, every batch-norm
// running statistic and every weight after the SGD step, as the normwise
// relative difference max|cuda-cpu| / max|cpu| per tensor, against 1e-12
// (float64; on amd64 0, bit for bit) and 1e-5 (float32). Both devices do
// most arithmetic in the same order, so most of it gives the same bits: the fake cuBLAS does package
// blas's per-element arithmetic (dispatchtest.Setenv), small images' weight
// gradients are chunked and convolutions tiled as the CPU op does it, and
// batch norm, instance norm and ChannelSum reduce in the CUDA blocks' lane
// order on both (layers' lanes). In float64 the kernels' host build also
// computes exp and log as Go's amd64 assembly does, and the softmax kernel
// subtracts tensor's last-axis maximum (package kernels), so a float64 step
// is the CPU device's bits (densenet121 included).
// Where they still differ is float32's transcendentals: the CPU device's
// float32 exp and log are math32's amd64 assembly, the kernels' are the
// float64 functions rounded, a last-bit difference in the softmax that goes
// through the rest of the step and that a deep model amplifies. (On a real
// GPU exp, log and cuBLAS's sums differ from the CPU's in the last bits in
// both types.)
//
// So the deep float32 models also run the step in float64 on the CPU device
// from the same float32 weights and batch (Pair.reference), and a quantity
// further apart than 1e-5 passes only if the CUDA side's error against that
// float64 result is at most refFactor (2) times the CPU side's (or 1e-5):
// both devices are then as near the exact answer as float32 allows, and a
// wrong kernel, O(1) off, fails. Each such step starts from the CPU side's
// weights (Pair.align says why). The float64 models have no reference and
// must meet 1e-12 directly, and on amd64 give the CPU device's bits.
// (On a GPU the float64 rule is 1e-12, not bits: Tolerance.) exact asks for
// the fake device's bits (Tolerance).
func Run(t TB, d *cuda.Device, c Case, exact bool) {
	t.Helper()
	peak := InCorePeak(t, c)
	for _, b := range Budgets(t, d, c, peak) {
		RunAt(t, d, c, b, peak, exact)
	}
}

// InCorePeak is the case's in-core peak (ooc.InCorePeak of its graph).
func InCorePeak(t TB, c Case) int64 {
	t.Helper()
	peak, err := ooc.InCorePeak(c.Build(t).Graph)
	if err != nil {
		t.Fatal(err)
	}
	return peak
}

// Budget is one budget a case runs at.
type Budget struct {
	Label string // "100%", "50%", "least"
	Bytes int64
}

// Budgets are the budgets Run runs c at: its in-core peak, half of it, and
// the least both devices can plan (LeastBudget).
func Budgets(t TB, d *cuda.Device, c Case, peak int64) []Budget {
	t.Helper()
	return []Budget{{"100%", peak}, {"50%", peak / 2}, {"least", LeastBudget(t, d, c, peak)}}
}

// Dtype is the case's dtype (float32 unless its Config says otherwise).
func (c Case) Dtype() tensor.Dtype {
	if c.Cfg.Dtype == (tensor.Dtype{}) {
		return tensor.Float32
	}
	return c.Cfg.Dtype
}

// Label names the case: model, dtype and sizes.
func (c Case) Label() string {
	return fmt.Sprintf("%s %s batch %d", c.Name, c.Dtype(), c.Cfg.Batch)
}

// Tolerance is the normwise relative tolerance of a case's dtype: 1e-5 for
// float32, 1e-12 for float64, and 0 for float64 when exact (the fake
// device on amd64, whose host kernels compute exp and log as Go's amd64
// assembly: the CPU device's bits). On a GPU, whose exp and log are not
// Go's, a deep float64 model misses 1e-12 with every kernel right:
// densenet121's float64 gradients are 6.6e-11 apart (at 100%) on the fake
// with the PTX's portable exp and log (dispatch's TestZooWithPortableMath,
// OOC_CUDA_PORTABLE=1 OOC_CUDA_ZOO=1), its loss 1.4e-15 and its weights
// 6.1e-14: a GPU's last bits amplified by a deep float64 backward pass,
// which "ooc doctor" reports as FAIL by this rule.
func Tolerance(dt tensor.Dtype, exact bool) float64 {
	switch {
	case dt != tensor.Float64:
		return 1e-5
	case exact && runtime.GOARCH == "amd64":
		return 0
	}
	return 1e-12
}

// RunAt runs c's steps at budget b (of the in-core peak) on both devices
// and checks them (Check), and that the CUDA machine stayed within the
// budget and swapped below the peak. It returns the worst normwise
// difference of each quantity ("loss", "gradients", "running statistics",
// "weights").
func RunAt(t TB, d *cuda.Device, c Case, b Budget, peak int64, exact bool) map[string]float64 {
	t.Helper()
	dt := c.Dtype()
	// The window scheduler, named: the default, Auto, may recompute instead
	// of swapping, and every budget below the peak must swap here.
	p := NewPairAt(t, d, c, b.Bytes, append(c.Options(), ooc.WithScheduler(ooc.Window{}))...)
	defer func() {
		_ = p.MC.Close()
		_ = p.MG.Close()
	}()
	p.SGD()
	p.SameStart = c.Deep && dt == tensor.Float32
	if p.SameStart {
		p.WithReference(t, c)
	}
	rng := rand.New(rand.NewSource(c.Cfg.Seed))
	for s := 0; s < c.Steps; s++ {
		p.Step(t, rng)
	}
	st := p.MG.Stats()
	t.Logf("%s at %s (%d of %d bytes): device peak %d, swapped out %d bytes, in %d; VA reserved %d",
		c.Name, b.Label, b.Bytes, peak, st.PeakDeviceBytes, st.SwapOutBytes, st.SwapInBytes, st.ReservedBytes)
	if st.PeakDeviceBytes > b.Bytes {
		t.Errorf("%s: the device held %d bytes, over the %d-byte budget", b.Label, st.PeakDeviceBytes, b.Bytes)
	}
	if b.Bytes < peak && st.SwapOutBytes == 0 {
		t.Errorf("%s: no swapping under %d of %d bytes", b.Label, b.Bytes, peak)
	}
	if c.WS > 0 && !Tiled(p.MG) {
		t.Errorf("%s: a workspace limit of %d bytes, but no convolution ran in tiles", b.Label, c.WS)
	}
	p.Check(t, fmt.Sprintf("%s %s at %s", c.Name, dt, b.Label), Tolerance(dt, exact))
	return maps.Clone(p.worst)
}

// LeastBudget is the least budget (to 1/64 of the peak) the window scheduler
// plans the model's program for on both the CPU and the CUDA device (whose
// budget also holds cuBLAS's workspace).
func LeastBudget(t TB, d *cuda.Device, c Case, peak int64) int64 {
	t.Helper()
	lo, hi := int64(0), peak
	for hi-lo > peak/64 {
		mid := (lo + hi) / 2
		ok := true
		for _, opts := range [][]ooc.Option{
			append(c.Options(), ooc.WithBudget(mid), ooc.WithScheduler(ooc.Window{})),
			append(c.Options(), ooc.WithDevice(d), ooc.WithBudget(mid+dispatch.For(d).Reserve()), ooc.WithScheduler(ooc.Window{})), // cuBLAS's workspace beside the program
		} {
			if _, err := ooc.Plan(c.Build(t).Graph, opts...); err != nil {
				ok = false
				break
			}
		}
		if ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// Tiled reports whether a CUDA machine ran a convolution in tiles.
func Tiled(m *vm.Machine) bool {
	ls, _ := dispatch.LaunchesOf(m)
	for _, l := range ls {
		if strings.HasPrefix(l.Kernel, "im2col_tile_") {
			return true
		}
	}
	return false
}
