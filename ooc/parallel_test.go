package ooc_test

import (
	"math"
	"math/rand"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

const parBatch = 16

// parMLP builds a BN-free two-layer net at any batch; the weights come
// from one seed, so every copy starts alike.
func parMLP(dt tensor.Dtype) ooc.Builder {
	return func(batch int) (ooc.Replica, error) {
		rng := rand.New(rand.NewSource(3))
		g := G.NewGraph()
		x := G.NewMatrix(g, dt, G.WithShape(batch, 12), G.WithName("x"))
		y := G.NewMatrix(g, dt, G.WithShape(batch, 5), G.WithName("y"))
		w1 := G.NewMatrix(g, dt, G.WithShape(12, 24), G.WithName("w1"), G.WithValue(randT(rng, dt, 0.3, 12, 24)))
		b1 := G.NewMatrix(g, dt, G.WithShape(1, 24), G.WithName("b1"), G.WithValue(randT(rng, dt, 0.1, 1, 24)))
		w2 := G.NewMatrix(g, dt, G.WithShape(24, 5), G.WithName("w2"), G.WithValue(randT(rng, dt, 0.3, 24, 5)))
		h := G.Must(G.BroadcastAdd(G.Must(G.Mul(x, w1)), b1, nil, []byte{0}))
		h = G.Must(G.Tanh(h))
		cost := softmaxCE(G.Must(G.Mul(h, w2)), y)
		ps := G.Nodes{w1, b1, w2}
		if _, err := G.Grad(cost, ps...); err != nil {
			return ooc.Replica{}, err
		}
		return ooc.Replica{Graph: g, Inputs: G.Nodes{x, y}, Learnables: ps, Loss: cost}, nil
	}
}

// parCNN is a BN-free conv net: conv, ReLU, max-pool, a fully connected
// layer.
func parCNN(dt tensor.Dtype) ooc.Builder {
	return func(batch int) (ooc.Replica, error) {
		rng := rand.New(rand.NewSource(5))
		g := G.NewGraph()
		x := G.NewTensor(g, dt, 4, G.WithShape(batch, 2, 6, 6), G.WithName("x"))
		y := G.NewMatrix(g, dt, G.WithShape(batch, 3), G.WithName("y"))
		k := G.NewTensor(g, dt, 4, G.WithShape(4, 2, 3, 3), G.WithName("k"), G.WithValue(randT(rng, dt, 0.3, 4, 2, 3, 3)))
		fc := G.NewMatrix(g, dt, G.WithShape(4*3*3, 3), G.WithName("fc"), G.WithValue(randT(rng, dt, 0.2, 4*3*3, 3)))
		c := G.Must(G.Rectify(G.Must(G.Conv2d(x, k, tensor.Shape{3, 3}, []int{1, 1}, []int{1, 1}, []int{1, 1}))))
		p := G.Must(G.MaxPool2D(c, tensor.Shape{2, 2}, []int{0, 0}, []int{2, 2}))
		flat := G.Must(G.Reshape(p, tensor.Shape{batch, 4 * 3 * 3}))
		cost := softmaxCE(G.Must(G.Mul(flat, fc)), y)
		ps := G.Nodes{k, fc}
		if _, err := G.Grad(cost, ps...); err != nil {
			return ooc.Replica{}, err
		}
		return ooc.Replica{Graph: g, Inputs: G.Nodes{x, y}, Learnables: ps, Loss: cost}, nil
	}
}

// feed lets step s's batch (the same for a given seed and step) into a
// graph's inputs.
func feed(t *testing.T, r ooc.Replica, s int) {
	t.Helper()
	rng := rand.New(rand.NewSource(int64(100 + s)))
	x, y := r.Inputs[0], r.Inputs[1]
	require.NoError(t, G.Let(x, randT(rng, x.Dtype(), 1, x.Shape()...)))
	require.NoError(t, G.Let(y, onehot(rng, y.Dtype(), y.Shape()[0], y.Shape()[1])))
}

// parRun is a few SGD steps: per step the loss and gradients, as floats.
type parRun struct {
	losses []float64
	grads  [][]float64 // per step, every learnable's gradient back to back
	bits   [][]uint64  // the same as raw bits
}

func runSteps(t *testing.T, r ooc.Replica, m G.VM, steps int) parRun {
	t.Helper()
	var out parRun
	solver := G.NewVanillaSolver(G.WithLearnRate(0.5))
	for s := 0; s < steps; s++ {
		feed(t, r, s)
		require.NoError(t, m.RunAll())
		out.losses = append(out.losses, floats(r.Loss.Value())[0])
		var gs []float64
		var bs []uint64
		for _, l := range r.Learnables {
			g, err := l.Grad()
			require.NoError(t, err)
			gs = append(gs, floats(g)...)
			bs = append(bs, bits(t, g)...)
		}
		bs = append(bs, bits(t, r.Loss.Value())...)
		out.grads, out.bits = append(out.grads, gs), append(out.bits, bs)
		require.NoError(t, solver.Step(G.NodesToValueGrads(r.Learnables)))
		m.Reset()
	}
	return out
}

func floats(v G.Value) []float64 {
	switch d := v.Data().(type) {
	case []float64:
		return append([]float64(nil), d...)
	case []float32:
		out := make([]float64, len(d))
		for i, f := range d {
			out[i] = float64(f)
		}
		return out
	case float64:
		return []float64{d}
	case float32:
		return []float64{float64(d)}
	}
	return nil
}

// single is the reference: one device, the whole batch, ooc.Compile.
func single(t *testing.T, build ooc.Builder, steps int) parRun {
	r, err := build(parBatch)
	require.NoError(t, err)
	m, err := ooc.Compile(r.Graph, ooc.BindDualValues(r.Learnables...))
	require.NoError(t, err)
	defer m.Close()
	return runSteps(t, r, m, steps)
}

func cpus(t *testing.T, n int) []vm.Device {
	var ds []vm.Device
	for i := 0; i < n; i++ {
		d, err := vm.NewCPU(64 << 20)
		require.NoError(t, err)
		t.Cleanup(func() { _ = d.Close() })
		ds = append(ds, d)
	}
	return ds
}

func parallel(t *testing.T, build ooc.Builder, n, steps int, opts ...ooc.Option) parRun {
	p, err := ooc.CompileParallel(build, parBatch, cpus(t, n), append([]ooc.Option{ooc.BindDualValues()}, opts...)...)
	require.NoError(t, err)
	defer p.Close()
	return runSteps(t, p.Model(), p, steps)
}

var parNets = []struct {
	name  string
	build func(tensor.Dtype) ooc.Builder
}{{"mlp", parMLP}, {"cnn", parCNN}}

// TestParallelOneReplicaIsCompile: one replica is ooc.Compile on the
// whole batch, bit for bit, also under a budget that swaps.
func TestParallelOneReplicaIsCompile(t *testing.T) {
	for _, net := range parNets {
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			t.Run(net.name+"-"+dt.String(), func(t *testing.T) {
				want := single(t, net.build(dt), 3)
				r, err := net.build(dt)(parBatch)
				require.NoError(t, err)
				inCore, err := ooc.InCorePeak(r.Graph)
				require.NoError(t, err)
				require.Equal(t, want.bits, parallel(t, net.build(dt), 1, 3).bits)
				require.Equal(t, want.bits, parallel(t, net.build(dt), 1, 3, ooc.WithBudget(inCore*7/10)).bits)
			})
		}
	}
}

// TestParallelMatchesWholeBatch: 2 and 4 replicas give the whole batch's
// loss and gradients up to float rounding, step after step.
func TestParallelMatchesWholeBatch(t *testing.T) {
	for _, net := range parNets {
		for _, c := range []struct {
			dt  tensor.Dtype
			tol float64
		}{{tensor.Float64, 1e-12}, {tensor.Float32, 1e-5}} {
			want := single(t, net.build(c.dt), 3)
			for _, n := range []int{2, 4} {
				t.Run(net.name+"-"+c.dt.String()+"-"+string(rune('0'+n)), func(t *testing.T) {
					got := parallel(t, net.build(c.dt), n, 3)
					var worst float64
					for s := range want.grads {
						worst = max(worst, math.Abs(got.losses[s]-want.losses[s]))
						require.Len(t, got.grads[s], len(want.grads[s]))
						for i, g := range want.grads[s] {
							worst = max(worst, math.Abs(got.grads[s][i]-g))
						}
					}
					require.LessOrEqual(t, worst, c.tol)
					require.NotEqual(t, want.bits, got.bits, "the replicas' sums should round differently from one device's somewhere")
				})
			}
		}
	}
}

// TestParallelReproducible: the same run twice gives the same bits.
func TestParallelReproducible(t *testing.T) {
	a := parallel(t, parCNN(tensor.Float32), 4, 3)
	b := parallel(t, parCNN(tensor.Float32), 4, 3)
	require.Equal(t, a.bits, b.bits)
}

// TestParallelReplicaOutOfMemory: memory another user holds on one device
// fails the step there, naming the replica and device; the script's
// gradients are untouched and the next step, once the memory is back,
// is the step a fresh run makes.
func TestParallelReplicaOutOfMemory(t *testing.T) {
	build := parMLP(tensor.Float64)
	devs := cpus(t, 2)
	p, err := ooc.CompileParallel(build, parBatch, devs, ooc.BindDualValues())
	require.NoError(t, err)
	defer p.Close()
	r := p.Model()
	mem := devs[1].Memory()
	seg, err := mem.AllocSegment(mem.Capacity() - mem.Used())
	require.NoError(t, err)
	feed(t, r, 0)
	err = p.RunAll()
	require.Error(t, err)
	require.Contains(t, err.Error(), "replica 1 of 2 (cpu)")
	require.NotContains(t, err.Error(), "replica 0")
	g, _ := r.Learnables[0].Grad()
	require.Nil(t, g, "a failed step must not hand out gradients")
	require.NoError(t, mem.FreeSegment(seg))
	got := runSteps(t, r, p, 2)
	require.Equal(t, parallel(t, build, 2, 2).bits, got.bits)
}

func TestCompileParallelRefusesBadInput(t *testing.T) {
	good := parMLP(tensor.Float64)
	noGrad := func(batch int) (ooc.Replica, error) {
		r, err := good(batch)
		r.Learnables = append(r.Learnables, r.Inputs[0])
		return r, err
	}
	shrink := func(batch int) (ooc.Replica, error) {
		if batch < parBatch {
			return parCNN(tensor.Float64)(batch)
		}
		return good(batch)
	}
	for _, c := range []struct {
		name  string
		build ooc.Builder
		batch int
		devs  []vm.Device
		want  string
	}{
		{"nil builder", nil, parBatch, cpus(t, 2), "nil builder"},
		{"no devices", good, parBatch, nil, "no devices"},
		{"uneven batch", good, 15, cpus(t, 2), "does not split evenly among 2"},
		{"nil device", good, parBatch, []vm.Device{nil}, "device 0 is nil"},
		{"no gradient", noGrad, parBatch, cpus(t, 1), "no gradient node"},
		{"replicas differ", shrink, parBatch, cpus(t, 2), "replica 0 of 2"},
		{"zero batch", good, 0, cpus(t, 1), "does not split evenly"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := ooc.CompileParallel(c.build, c.batch, c.devs)
			require.Nil(t, p)
			require.ErrorContains(t, err, c.want)
		})
	}
	sim, err := vm.NewDevice("sim:v100-pcie", 0)
	require.NoError(t, err)
	_, err = ooc.CompileParallel(good, parBatch, append(cpus(t, 1), sim))
	require.ErrorContains(t, err, "simulated and real")
	p, err := ooc.CompileParallel(good, parBatch, cpus(t, 2))
	require.NoError(t, err)
	err = p.RunAll()
	require.ErrorContains(t, err, "x has no value")
	require.NoError(t, p.Close())
	require.ErrorContains(t, p.RunAll(), "closed")
	require.True(t, strings.Contains(ooc.HostAllReduce{}.AllReduceMean(tensor.Int, [][]byte{{1}}).Error(), "not supported"))
}

// TestParallelReplicaWorkers: however many goroutines the replicas' GEMMs
// split over, the step's bits are the same.
func TestParallelReplicaWorkers(t *testing.T) {
	want := parallel(t, parCNN(tensor.Float32), 2, 2)
	for _, w := range []int{1, 3, -1} {
		require.Equal(t, want.bits, parallel(t, parCNN(tensor.Float32), 2, 2, ooc.WithReplicaWorkers(w)).bits, "workers %d", w)
	}
}

// TestParallelSchedulersKeepTheBits: replicas that swap (the window
// scheduler, vDNN, vDNN with the cap and trigger search, planned from the
// first step's measured times, and the planners with the transfer cap)
// compute what in-core replicas compute.
func TestParallelSchedulersKeepTheBits(t *testing.T) {
	build := parCNN(tensor.Float32)
	want := parallel(t, build, 2, 3, ooc.Baseline())
	r, err := build(parBatch / 2)
	require.NoError(t, err)
	peak, err := ooc.InCorePeak(r.Graph)
	require.NoError(t, err)
	for _, c := range []struct {
		sc      ooc.Scheduler
		percent int64
	}{{ooc.Window{}, 90}, {ooc.MultiVDNN{}, 95}, {ooc.MultiVDNN{Cap: true, Tune: true}, 90},
		{ooc.Window{Cap: true}, 90}, {ooc.Greedy{Cap: true}, 90}, {ooc.DynProg{Cap: true}, 90}} {
		t.Run(c.sc.Name(), func(t *testing.T) {
			p, err := ooc.CompileParallel(build, parBatch, cpus(t, 2), ooc.BindDualValues(), ooc.WithScheduler(c.sc), ooc.WithBudget(peak*c.percent/100))
			require.NoError(t, err)
			defer p.Close()
			require.Equal(t, want.bits, runSteps(t, p.Model(), p, 3).bits)
			for i, m := range p.Machines() {
				require.Positive(t, m.Stats().SwapOutBytes, "replica %d swapped nothing", i)
			}
		})
	}
}

// worldReduce stands for a communicator across processes in one process:
// each rank's rankReducer gives its replicas' buffers, and the last to come
// averages all of them, in global replica order, with HostAllReduce.
type worldReduce struct {
	mu             sync.Mutex
	cond           *sync.Cond
	local          int
	bufs           [][]byte
	arrived, round int
	err            error
}

type rankReducer struct {
	w    *worldReduce
	rank int
}

func (r rankReducer) Name() string { return "world" }

func (r rankReducer) AllReduceMean(dt tensor.Dtype, bufs [][]byte) error {
	w := r.w
	w.mu.Lock()
	defer w.mu.Unlock()
	round := w.round
	copy(w.bufs[r.rank*w.local:], bufs)
	if w.arrived++; w.arrived*w.local == len(w.bufs) {
		w.err = ooc.HostAllReduce{}.AllReduceMean(dt, w.bufs)
		w.arrived = 0
		w.round++
		w.cond.Broadcast()
	}
	for w.round == round {
		w.cond.Wait()
	}
	return w.err
}

// TestParallelWorld: two ranks (WithWorld), each with two CPU devices and
// the whole batch fed, compute together what one process computes on four:
// every step's loss and gradients, on every rank, bit for bit. Each rank's
// replicas take their global share of the batch, and the loss is averaged
// through the reducer.
func TestParallelWorld(t *testing.T) {
	const ranks, local, steps = 2, 2, 2
	build := parCNN(tensor.Float32)
	want := parallel(t, build, ranks*local, steps)
	w := &worldReduce{local: local, bufs: make([][]byte, ranks*local)}
	w.cond = sync.NewCond(&w.mu)
	got := make([]parRun, ranks)
	errs := make([]error, ranks)
	var wg sync.WaitGroup
	for r := range ranks {
		p, err := ooc.CompileParallel(build, parBatch, cpus(t, local), ooc.BindDualValues(), ooc.WithAllReducer(rankReducer{w, r}), ooc.WithWorld(r, ranks))
		require.NoError(t, err)
		defer p.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[r], errs[r] = worldSteps(t, p, steps)
		}()
	}
	wg.Wait()
	for r := range ranks {
		require.NoError(t, errs[r], "rank %d", r)
		require.Equal(t, want.bits, got[r].bits, "rank %d", r)
	}

	for _, c := range []struct {
		opts []ooc.Option
		want string
	}{
		{[]ooc.Option{ooc.WithWorld(2, 2)}, "want rank 0 to worldSize-1"},
		{[]ooc.Option{ooc.WithWorld(1, 2)}, "needs WithAllReducer"},
		{[]ooc.Option{ooc.WithWorld(1, 2), ooc.WithAllReducer(ooc.HostAllReduce{})}, "averages in this process only"},
		{[]ooc.Option{ooc.WithWorld(1, 3), ooc.WithAllReducer(rankReducer{w, 1})}, "does not split evenly among 6 replicas (2 devices on each of 3 ranks)"},
	} {
		_, err := ooc.CompileParallel(build, parBatch, cpus(t, local), c.opts...)
		require.ErrorContains(t, err, c.want)
	}
}

// worldSteps is runSteps for a rank on a goroutine of its own: errors, not
// test failures.
func worldSteps(t *testing.T, p *ooc.Parallel, steps int) (parRun, error) {
	var out parRun
	r := p.Model()
	solver := G.NewVanillaSolver(G.WithLearnRate(0.5))
	for s := 0; s < steps; s++ {
		rng := rand.New(rand.NewSource(int64(100 + s)))
		x, y := r.Inputs[0], r.Inputs[1]
		if err := G.Let(x, randT(rng, x.Dtype(), 1, x.Shape()...)); err != nil {
			return out, err
		}
		if err := G.Let(y, onehot(rng, y.Dtype(), y.Shape()[0], y.Shape()[1])); err != nil {
			return out, err
		}
		if err := p.RunAll(); err != nil {
			return out, err
		}
		var bs []uint64
		for _, l := range r.Learnables {
			g, err := l.Grad()
			if err != nil {
				return out, err
			}
			bs = append(bs, bits(t, g)...)
		}
		out.bits = append(out.bits, append(bs, bits(t, r.Loss.Value())...))
		if err := solver.Step(G.NodesToValueGrads(r.Learnables)); err != nil {
			return out, err
		}
		p.Reset()
	}
	return out, nil
}
