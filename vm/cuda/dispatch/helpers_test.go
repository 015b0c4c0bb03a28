package dispatch_test

import (
	"math"
	"math/rand"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/cuda"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/dispatchtest"
)

// openFake opens cuda:0 of a fresh fake driver whose kernels are the host
// builds of the CUDA sources and whose cuBLAS is the fake's host GEMM. The
// test cannot be parallel (it sets environment variables).
func openFake(t testing.TB) *cuda.Device {
	t.Helper()
	lib := dispatchtest.Setenv(t)
	d, err := cuda.Open(0, cuda.WithLibrary(lib), cuda.WithCapacity(2<<30))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("closing the fake device: %v", err)
		}
	})
	return d
}

// relErr is the normwise relative difference max|a-b| / max|b| (absolute
// when b is all zeros), NaN-aware: a NaN where the other has none is +Inf.
func relErr(a, b []float64) float64 {
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

// floats reads a value as float64s.
func floats(t testing.TB, v G.Value) []float64 {
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
func batch(t testing.TB, rng *rand.Rand, m *models.Model) (x, y *tensor.Dense) {
	dt := m.Input.Dtype()
	xs, ys := m.Input.Shape(), m.Labels.Shape()
	x = tensor.New(tensor.Of(dt), tensor.WithShape(xs...))
	y = tensor.New(tensor.Of(dt), tensor.WithShape(ys...))
	classes := ys[1]
	per := ys.TotalSize() / (ys[0] * classes) // pixels per image (1 for classifiers)
	for i := 0; i < xs.TotalSize(); i++ {
		if v := m.Config.Vocab; v > 0 { // lstm: token ids
			set(x, i, float64(rng.Intn(v)))
		} else {
			set(x, i, rng.NormFloat64())
		}
	}
	for n := 0; n < ys[0]; n++ {
		for p := 0; p < per; p++ {
			set(y, (n*classes+rng.Intn(classes))*per+p, 1)
		}
	}
	return x, y
}

func set(d *tensor.Dense, i int, v float64) {
	switch s := d.Data().(type) {
	case []float32:
		s[i] = float32(v)
	case []float64:
		s[i] = v
	}
}

// pair is one model built twice (equal weights): once for the CPU device,
// once for the fake CUDA device.
type pair struct {
	cpu, gpu  *models.Model
	mc, mg    *vm.Machine
	sc, sg    G.Solver
	cpuLoss   G.Value
	gpuLoss   G.Value
	sameStart bool // each step starts from the CPU side's weights (align)
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
// in the last bits (TestZooOnFakeDevice says which), and a model whose results amplify
// rounding takes each to its own float32 answer, both about equally far from
// the exact one. Twice as far is still "as accurate as float32 allows"; a
// kernel bug is O(1) away.
const refFactor = 2

// newPair compiles both machines with the given options (a budget, a
// scheduler) added to the binding of the learnables.
func newPair(t testing.TB, d *cuda.Device, c zooCase, opts ...ooc.Option) *pair {
	t.Helper()
	return newPairWith(t, d, c, opts, opts)
}

// newPairAt compiles both machines to plan the program for budget bytes: the
// CUDA machine's budget also holds its backend's reserve (cuBLAS's workspace,
// which ooc counts inside the budget), so both plan the same tape.
func newPairAt(t testing.TB, d *cuda.Device, c zooCase, budget int64, opts ...ooc.Option) *pair {
	t.Helper()
	return newPairWith(t, d, c, append(opts, ooc.WithBudget(budget)), append(opts, ooc.WithBudget(budget+dispatch.For(d).Reserve())))
}

func newPairWith(t testing.TB, d *cuda.Device, c zooCase, cpuOpts, gpuOpts []ooc.Option) *pair {
	t.Helper()
	p := &pair{worst: map[string]float64{}, refRatio: map[string]float64{}, cpu: c.build(t), gpu: c.build(t)}
	var err error
	G.Read(p.cpu.Loss, &p.cpuLoss)
	G.Read(p.gpu.Loss, &p.gpuLoss)
	if p.mc, err = ooc.Compile(p.cpu.Graph, append([]ooc.Option{ooc.BindDualValues(p.cpu.Learnables...)}, cpuOpts...)...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.mc.Close() })
	if p.mg, err = ooc.Compile(p.gpu.Graph, append([]ooc.Option{ooc.BindDualValues(p.gpu.Learnables...), ooc.WithDevice(d)}, gpuOpts...)...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.mg.Close() })
	p.sc = G.NewAdamSolver(G.WithLearnRate(1e-3))
	p.sg = G.NewAdamSolver(G.WithLearnRate(1e-3))
	return p
}

// align starts the CUDA side's step from the CPU side's weights and
// batch-norm statistics, so that a step's differences are that step's alone:
// over several steps, float32 rounding moves a max-pool's argmax or a ReLU's
// sign somewhere in a deep model, which changes that gradient element by
// O(1) on one side only (resnet18 at batch 8: gradients 1.3e-6 apart after
// one step, 6e-3 after two from diverged weights).
func (p *pair) align(t testing.TB) {
	t.Helper()
	for i, l := range p.cpu.Learnables {
		src, dst := l.Value().(*tensor.Dense), p.gpu.Learnables[i].Value().(*tensor.Dense)
		copy(dst.Raw, src.Raw)
	}
	for i, bn := range p.cpu.BatchNorms {
		m, v := bn.RunningStats()
		if err := p.gpu.BatchNorms[i].SetRunningStats(m, v); err != nil {
			t.Fatal(err)
		}
	}
}

// withReference adds the float64 reference of a float32 pair.
func (p *pair) withReference(t testing.TB, c zooCase) {
	t.Helper()
	c.cfg.Dtype = tensor.Float64
	p.ref = c.build(t)
	G.Read(p.ref.Loss, &p.refLoss)
	var err error
	if p.mr, err = ooc.Compile(p.ref.Graph, ooc.BindDualValues(p.ref.Learnables...)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.mr.Close() })
}

// seedReference starts the float64 model's step from the float32 CPU
// side's weights and batch-norm statistics, before the CPU side runs it.
func (p *pair) seedReference(t testing.TB) {
	t.Helper()
	for i, l := range p.cpu.Learnables {
		copy(p.ref.Learnables[i].Value().(*tensor.Dense).Data().([]float64), floats(t, l.Value()))
	}
	for i, bn := range p.cpu.BatchNorms {
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
func (p *pair) reference(t testing.TB, x, y *tensor.Dense) {
	t.Helper()
	to64 := func(v G.Value, dst *tensor.Dense) {
		copy(dst.Data().([]float64), floats(t, v))
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
		g, w := floats(t, gr), floats(t, l.Value())
		for j := range w {
			w[j] -= lr * g[j]
		}
		p.refGrads, p.refWeights = append(p.refGrads, g), append(p.refWeights, w)
	}
	p.compare("loss", floats(t, p.gpuLoss), floats(t, p.cpuLoss), floats(t, p.refLoss))
	for i, bn := range p.ref.BatchNorms {
		mr, vr := bn.RunningStats()
		mc, vc := p.cpu.BatchNorms[i].RunningStats()
		mg, vg := p.gpu.BatchNorms[i].RunningStats()
		p.compare("running statistics", append(mg, vg...), append(mc, vc...), append(mr, vr...))
	}
}

// compare records, for one tensor, the CUDA side's error against the float64
// reference over the CPU side's (or over 1e-5 when the CPU side is nearer):
// 1 or less means the CUDA device is as close to exact arithmetic as the CPU
// device is.
func (p *pair) compare(what string, gpu, cpu, ref []float64) {
	p.refRatio[what] = max(p.refRatio[what], relErr(gpu, ref)/max(relErr(cpu, ref), 1e-5))
}

// sgd makes both solvers plain SGD. Adam divides each gradient element by
// the root of its running square, so an element that is rounding noise on
// both devices (a gradient that is zero in exact arithmetic) becomes a full
// step of ±lr with a sign of its own on each: weights after Adam compare
// rounding, not kernels (resnet18 at batch 8: gradients within 1.3e-6,
// weights after one Adam step 1.8e-3 apart).
func (p *pair) sgd() {
	p.sc = G.NewVanillaSolver(G.WithLearnRate(lr))
	p.sg = G.NewVanillaSolver(G.WithLearnRate(lr))
}

// step runs one training step on both devices with the same batch and
// records the worst relative differences of the loss, the gradients, the
// batch-norm running statistics and (after the solver) the weights.
func (p *pair) step(t testing.TB, rng *rand.Rand) {
	t.Helper()
	if p.sameStart {
		p.align(t)
	}
	x, y := batch(t, rng, p.cpu)
	for _, m := range []*models.Model{p.cpu, p.gpu} {
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
	if err := p.mc.RunAll(); err != nil {
		t.Fatal("cpu:", err)
	}
	if err := p.mg.RunAll(); err != nil {
		t.Fatal("cuda:", err)
	}
	p.note("loss", floats(t, p.gpuLoss), floats(t, p.cpuLoss))
	if p.ref != nil {
		p.reference(t, x, y)
	}
	for i, l := range p.cpu.Learnables {
		gc, err := l.Grad()
		if err != nil {
			t.Fatal(err)
		}
		gg, err := p.gpu.Learnables[i].Grad()
		if err != nil {
			t.Fatal(err)
		}
		p.note("gradients", floats(t, gg), floats(t, gc))
		if p.ref != nil {
			p.compare("gradients", floats(t, gg), floats(t, gc), p.refGrads[i])
		}
	}
	for i, bn := range p.cpu.BatchNorms {
		mc, vc := bn.RunningStats()
		mg, vg := p.gpu.BatchNorms[i].RunningStats()
		p.note("running statistics", append(mg, vg...), append(mc, vc...))
	}
	if err := p.sc.Step(G.NodesToValueGrads(p.cpu.Learnables)); err != nil {
		t.Fatal(err)
	}
	if err := p.sg.Step(G.NodesToValueGrads(p.gpu.Learnables)); err != nil {
		t.Fatal(err)
	}
	p.mc.Reset()
	p.mg.Reset()
	for i, l := range p.cpu.Learnables {
		wg, wc := floats(t, p.gpu.Learnables[i].Value()), floats(t, l.Value())
		p.note("weights", wg, wc)
		if p.ref != nil {
			p.compare("weights", wg, wc, p.refWeights[i])
		}
	}
}

func (p *pair) note(what string, got, want []float64) {
	if len(got) != len(want) {
		p.worst[what] = math.Inf(1)
		return
	}
	p.worst[what] = max(p.worst[what], relErr(got, want))
}

// check fails the test when a difference exceeds tol, unless, with a
// float64 reference, the CUDA side is at most refFactor times as far from it
// as the CPU side (or as 1e-5): the difference is then float32's, the same
// on both devices, not a kernel's.
func (p *pair) check(t testing.TB, label string, tol float64) {
	t.Helper()
	for _, what := range []string{"loss", "gradients", "running statistics", "weights"} {
		e, ok := p.worst[what]
		if !ok {
			continue
		}
		t.Logf("%s: %s differ by at most %.2g (normwise relative, fake CUDA vs CPU device)", label, what, e)
		r, withRef := p.refRatio[what]
		if withRef {
			t.Logf("%s: %s against the float64 reference: the fake CUDA device at worst %.3g times as far as the CPU device (or as 1e-5)", label, what, r)
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
