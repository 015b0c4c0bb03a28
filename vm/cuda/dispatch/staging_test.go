package dispatch_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/cuda"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/dispatchtest"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/internal/fakecuda"
)

// stagingCase is smallcnn in float32 at half its in-core peak with the VA
// allocator, the configuration the staging tests train.
var stagingCase = zooCase{Name: "smallcnn", Cfg: models.Config{Batch: 4, Channels: 3, Height: 16, Width: 16, Classes: 4, Dtype: tensor.Float32, Seed: 2}}

// openFakeTraced opens the fake device as openFake does and returns the
// controls of its driver too.
func openFakeTraced(t testing.TB) (*cuda.Device, *fakecuda.Fake) {
	t.Helper()
	lib := dispatchtest.Setenv(t)
	f := fakecuda.Open(t, lib)
	d, err := cuda.Open(0, cuda.WithLibrary(lib), cuda.WithCapacity(2<<30))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("closing the fake device: %v", err)
		}
	})
	return d, f
}

// trainee is one smallcnn on the fake device with its machine and solver.
type trainee struct {
	m    *models.Model
	mach *vm.Machine
	s    G.Solver
	loss G.Value
}

func newTrainee(t testing.TB, d *cuda.Device, c zooCase) *trainee {
	t.Helper()
	peak, err := ooc.InCorePeak(c.Build(t).Graph)
	if err != nil {
		t.Fatal(err)
	}
	tr := &trainee{m: c.Build(t), s: G.NewAdamSolver(G.WithLearnRate(1e-3))}
	G.Read(tr.m.Loss, &tr.loss)
	tr.mach, err = ooc.Compile(tr.m.Graph, ooc.BindDualValues(tr.m.Learnables...), ooc.WithDevice(d),
		ooc.WithAllocator(ooc.VA), ooc.WithBudget(peak/2+dispatch.For(d).Reserve()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.mach.Close() })
	return tr
}

// run runs one step on batch (x, y), after staging next (nil: nothing).
func (tr *trainee) run(t testing.TB, x, y *tensor.Dense, next *[2]*tensor.Dense) {
	t.Helper()
	if err := G.Let(tr.m.Input, x); err != nil {
		t.Fatal(err)
	}
	if err := G.Let(tr.m.Labels, y); err != nil {
		t.Fatal(err)
	}
	if next != nil {
		if err := tr.mach.StageNext(tr.m.Input, next[0]); err != nil {
			t.Fatal(err)
		}
		if err := tr.mach.StageNext(tr.m.Labels, next[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.mach.RunAll(); err != nil {
		t.Fatal(err)
	}
	if err := tr.s.Step(G.NodesToValueGrads(tr.m.Learnables)); err != nil {
		t.Fatal(err)
	}
	tr.mach.Reset()
}

// bits are the loss, gradients and weights after a step, as bytes.
func (tr *trainee) bits(t testing.TB) []byte {
	t.Helper()
	var b bytes.Buffer
	fmt.Fprint(&b, floats(t, tr.loss))
	for _, l := range tr.m.Learnables {
		g, err := l.Grad()
		if err != nil {
			t.Fatal(err)
		}
		b.Write(g.(*tensor.Dense).Raw)
		b.Write(l.Value().(*tensor.Dense).Raw)
	}
	return b.Bytes()
}

// batches makes n random batches for the case's model.
func batches(t testing.TB, m *models.Model, n int) [][2]*tensor.Dense {
	rng := rand.New(rand.NewSource(7))
	out := make([][2]*tensor.Dense, n)
	for i := range out {
		out[i][0], out[i][1] = batch(t, rng, m)
	}
	return out
}

// TestStagedUploadBits: smallcnn (float32, half its in-core peak, VA) trains
// on the fake CUDA device with each next batch staged, and with each batch
// uploaded at its step's start; loss, gradients and weights are the same
// bits at every step, under the fake's copy and kernel delays (a copy that
// overtook a reader or a reader that did not wait would show). Each step
// after the first takes both inputs from copies made during the step before.
func TestStagedUploadBits(t *testing.T) {
	d, f := openFakeTraced(t)
	f.Set(t, "copy_delay_us", 300)
	f.Set(t, "kernel_delay_us", 20)
	plain, staged := newTrainee(t, d, stagingCase), newTrainee(t, d, stagingCase)
	bs := batches(t, plain.m, 4)
	for k, b := range bs {
		plain.run(t, b[0], b[1], nil)
		var next *[2]*tensor.Dense
		if k+1 < len(bs) {
			next = &bs[k+1]
		}
		staged.run(t, b[0], b[1], next)
		if !bytes.Equal(plain.bits(t), staged.bits(t)) {
			t.Fatalf("step %d: the staged run's loss, gradients or weights differ from the plain run's", k+1)
		}
	}
	st := staged.mach.Stats()
	in := int64(len(bs[0][0].Raw) + len(bs[0][1].Raw))
	if st.StagedInputs != 2*(len(bs)-1) || st.StagedAheadBytes != int64(len(bs)-1)*in {
		t.Errorf("staged %d inputs, %d bytes ahead; want %d and %d", st.StagedInputs, st.StagedAheadBytes, 2*(len(bs)-1), int64(len(bs)-1)*in)
	}
	if ps := plain.mach.Stats(); ps.StagedInputs != 0 {
		t.Errorf("the plain machine staged %d inputs", ps.StagedInputs)
	}
}

// TestStagedUploadChanges: the script may let another batch than the one it
// staged, stage late (after letting it, before the run), stage twice, stop
// staging, or close the machine with a copy for a run that never comes;
// every sequence gives the plain machine's bits for the batches it let.
func TestStagedUploadChanges(t *testing.T) {
	d, _ := openFakeTraced(t)
	type step struct{ let, stage int } // batch indices; stage -1: none
	for _, tc := range []struct {
		name  string
		steps []step
		twice bool // stage the batch after next first, then replace it
	}{
		{"another batch than staged", []step{{0, 1}, {2, -1}, {1, 3}, {3, -1}}, false},
		{"staged late", []step{{0, 0}, {1, 1}, {2, 2}}, false},
		{"restaged", []step{{0, 1}, {1, 2}, {2, -1}}, true},
		{"staging stops and resumes", []step{{0, 1}, {1, -1}, {2, 3}, {3, -1}}, false},
		{"closed with a copy queued", []step{{0, 1}, {1, 2}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plain, staged := newTrainee(t, d, stagingCase), newTrainee(t, d, stagingCase)
			bs := batches(t, plain.m, 4)
			for k, s := range tc.steps {
				plain.run(t, bs[s.let][0], bs[s.let][1], nil)
				if tc.twice && s.stage >= 0 {
					other := bs[(s.stage+1)%len(bs)]
					if err := staged.mach.StageNext(staged.m.Input, other[0]); err != nil {
						t.Fatal(err)
					}
				}
				var next *[2]*tensor.Dense
				if s.stage >= 0 {
					next = &bs[s.stage]
				}
				staged.run(t, bs[s.let][0], bs[s.let][1], next)
				if !bytes.Equal(plain.bits(t), staged.bits(t)) {
					t.Fatalf("step %d (batch %d, staging %d): the bits differ from the plain run's", k+1, s.let, s.stage)
				}
			}
		})
	}
}

// TestStagedUploadAfterFailure: a run that fails at its start (an upload
// the fake driver refuses) after taking its staged batch leaves the batch
// staged: the retry uploads it from its pinned buffer, and the retry and the
// run after give the plain machine's bits.
func TestStagedUploadAfterFailure(t *testing.T) {
	d, f := openFakeTraced(t)
	plain, staged := newTrainee(t, d, stagingCase), newTrainee(t, d, stagingCase)
	bs := batches(t, plain.m, 3)
	plain.run(t, bs[0][0], bs[0][1], nil)
	staged.run(t, bs[0][0], bs[0][1], &bs[1])
	if err := G.Let(staged.m.Input, bs[1][0]); err != nil {
		t.Fatal(err)
	}
	if err := G.Let(staged.m.Labels, bs[1][1]); err != nil {
		t.Fatal(err)
	}
	f.Fail("cuMemcpyHtoDAsync_v2", 1) // CUDA_ERROR_INVALID_VALUE, not sticky
	if err := staged.mach.RunAll(); err == nil || !strings.Contains(err.Error(), "cuMemcpyHtoDAsync_v2") {
		t.Fatalf("the run with a refused upload: %v", err)
	}
	staged.mach.Reset()
	before := staged.mach.Stats().StagedInputs
	for k := 1; k < len(bs); k++ {
		plain.run(t, bs[k][0], bs[k][1], nil)
		staged.run(t, bs[k][0], bs[k][1], nil) // the retry, then a plain run
		if !bytes.Equal(plain.bits(t), staged.bits(t)) {
			t.Fatalf("step %d after the failed run: the bits differ from the plain run's", k+1)
		}
		if k == 1 {
			if got := staged.mach.Stats().StagedInputs - before; got != 2 {
				t.Errorf("the retry took %d inputs from their staged buffers, want 2", got)
			}
		}
	}
}

// TestStagedUploadOrder reads the fake driver's trace of two steps of a
// staged run: in step N the next batch's copy into the input's device
// memory is queued on the host-to-device stream behind a wait for an event
// that compute recorded after every kernel reading the input and before the
// step's end; in step N+1 nothing is uploaded into the input at its start,
// and compute waits for that copy's event before its first kernel that
// reads the input.
func TestStagedUploadOrder(t *testing.T) {
	d, f := openFakeTraced(t)
	tr := newTrainee(t, d, stagingCase)
	bs := batches(t, tr.m, 4)
	tr.run(t, bs[0][0], bs[0][1], &bs[1])
	addr, err := tr.mach.LeafAddr(tr.m.Input)
	if err != nil {
		t.Fatal(err)
	}
	f.Set(t, "watch_lo", int64(addr))
	f.Set(t, "watch_hi", int64(addr)+int64(len(bs[0][0].Raw)))
	var traces [2][]fakecuda.TraceEntry
	for k := range traces {
		f.Set(t, "trace", 1)
		tr.run(t, bs[k+1][0], bs[k+1][1], &bs[k+2])
		traces[k] = f.Trace(t)
	}
	f.Set(t, "trace", 0)
	n := int64(len(bs[0][0].Raw))
	stepN, stepN1 := checkStagedCopy(t, traces[0], uint64(addr), n), checkStagedCopy(t, traces[1], uint64(addr), n)
	checkWaitedBeforeRead(t, traces[1], stepN.done, stepN1.compute)
	t.Logf("fake CUDA driver, smallcnn f32 at 50%%, one step: the input's %d-byte copy for the next step is queued after kernel %d of %d, "+
		"so it may overlap the last %d kernels (%.0f%% of the step's kernels)",
		n, stepN.after, stepN.kernels, stepN.kernels-stepN.after, 100*float64(stepN.kernels-stepN.after)/float64(stepN.kernels))
}

// stagedCopy is a step's copy for the next step into one input, found in
// the fake driver's trace.
type stagedCopy struct {
	at, rec        int       // trace entries of the copy and of the event its stream waits for
	n              int64     // bytes
	compute        uint64    // the compute stream
	done           [2]uint64 // the copy's event and record number
	after, kernels int       // kernels queued before the event it waits for, and in all
}

// findStagedCopy finds the one copy into addr in a step's trace, the event
// on compute it waits for, and the event recorded after it on its stream.
func findStagedCopy(t testing.TB, tr []fakecuda.TraceEntry, addr uint64) stagedCopy {
	t.Helper()
	c := stagedCopy{at: -1, rec: -1}
	for i, e := range tr {
		switch {
		case e.Kind == fakecuda.TraceKernel:
			if c.compute != 0 && e.Stream != c.compute {
				t.Fatalf("kernels on two streams")
			}
			c.compute = e.Stream
			c.kernels++
		case e.Kind == fakecuda.TraceHtoD && e.Addr == addr:
			if c.at >= 0 {
				t.Fatalf("trace entries %d and %d: two copies into %#x in one step", c.at, i, addr)
			}
			c.at, c.n = i, e.N
		}
	}
	if c.at < 0 {
		t.Fatalf("no copy into %#x in the step", addr)
	}
	h2d := tr[c.at].Stream
	if h2d == c.compute {
		t.Fatalf("the copy is on the compute stream")
	}
	// The copy's stream waits, just before it, for an event compute recorded.
	w := c.at - 1
	for w >= 0 && tr[w].Stream != h2d {
		w--
	}
	if w < 0 || tr[w].Kind != fakecuda.TraceWait {
		t.Fatalf("the copy into %#x is not behind a wait on its stream", addr)
	}
	for i := w - 1; i >= 0; i-- {
		if tr[i].Kind == fakecuda.TraceRecord && tr[i].Event == tr[w].Event && tr[i].Seq == tr[w].Seq {
			c.rec = i
			break
		}
	}
	if c.rec < 0 || tr[c.rec].Stream != c.compute {
		t.Fatalf("the event the copy into %#x waits for was not recorded on compute in the step", addr)
	}
	for i := c.at + 1; i < len(tr); i++ {
		if tr[i].Stream == h2d && tr[i].Kind == fakecuda.TraceRecord {
			c.done = [2]uint64{tr[i].Event, tr[i].Seq}
			break
		}
	}
	if c.done[0] == 0 {
		t.Fatalf("no event recorded after the copy into %#x on its stream", addr)
	}
	for _, e := range tr[:c.rec] {
		if e.Kind == fakecuda.TraceKernel {
			c.after++
		}
	}
	return c
}

// checkStagedCopy checks a step's copy for the next step into the input at
// addr: n bytes, behind an event compute recorded after every kernel that
// reads the input and before the step's last host wait (its end).
func checkStagedCopy(t *testing.T, tr []fakecuda.TraceEntry, addr uint64, n int64) stagedCopy {
	t.Helper()
	c := findStagedCopy(t, tr, addr)
	end, lastRead := -1, -1
	for i, e := range tr {
		if e.Kind == fakecuda.TraceKernel && e.Watched {
			lastRead = i
		}
		if e.Kind == fakecuda.TraceHostWait {
			end = i
		}
	}
	switch {
	case c.n != n:
		t.Errorf("the copy into the input is of %d bytes, want %d", c.n, n)
	case lastRead < 0:
		t.Errorf("no kernel reads the input")
	case c.rec < lastRead:
		t.Errorf("the copy's event was recorded (entry %d) before the last kernel reading the input (entry %d)", c.rec, lastRead)
	case c.at > end:
		t.Errorf("the copy was queued (entry %d) after the step's end (entry %d)", c.at, end)
	}
	return c
}

// checkWaitedBeforeRead checks that compute waits for the copy's event
// (done) in the step before its first kernel reading the input.
func checkWaitedBeforeRead(t *testing.T, tr []fakecuda.TraceEntry, done [2]uint64, compute uint64) {
	t.Helper()
	for i, e := range tr {
		if e.Kind == fakecuda.TraceWait && e.Stream == compute && e.Event == done[0] && e.Seq == done[1] {
			return
		}
		if e.Kind == fakecuda.TraceKernel && e.Watched {
			t.Fatalf("trace entry %d: a kernel reads the input before compute waited for the copy made in the step before", i)
		}
	}
	t.Fatalf("compute never waited for the copy made in the step before")
}

// TestStageNextRefuses: staging what is not an input batch of the program
// is an error naming the problem, on the fake CUDA device and on the CPU
// device alike, and leaves the machine usable.
func TestStageNextRefuses(t *testing.T) {
	d, _ := openFakeTraced(t)
	cpu := stagingCase.Build(t)
	mc, err := ooc.Compile(cpu.Graph, ooc.BindDualValues(cpu.Learnables...))
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	gpu := newTrainee(t, d, stagingCase)
	for _, dev := range []struct {
		name string
		m    *models.Model
		mach *vm.Machine
	}{{"cpu", cpu, mc}, {"fake cuda", gpu.m, gpu.mach}} {
		m := dev.m
		x, _ := batch(t, rand.New(rand.NewSource(1)), m)
		other := G.NewTensor(G.NewGraph(), tensor.Float32, 2, G.WithShape(2, 2), G.WithName("stranger"))
		for _, tc := range []struct {
			name string
			n    *G.Node
			v    G.Value
			want string
		}{
			{"wrong shape", m.Input, tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(1, 3, 16, 16)), "compiled for (4, 3, 16, 16) float32"},
			{"wrong dtype", m.Input, tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(4, 3, 16, 16)), "a (4, 3, 16, 16) float64 value"},
			{"a scalar", m.Input, G.NewF32(1), "*tensor.Dense"},
			{"no value", m.Input, nil, "*tensor.Dense"},
			{"a learnable", m.Learnables[0], x, "a learnable, not an input"},
			{"a computed node", m.Loss, x, "computed by the graph"},
			{"a node of another graph", other, x, "not a variable of the program"},
			{"a nil node", nil, x, "nil node"},
		} {
			err := dev.mach.StageNext(tc.n, tc.v)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: StageNext of %s: %v, want an error saying %q", dev.name, tc.name, err, tc.want)
			}
		}
		if err := dev.mach.StageNext(m.Input, x); err != nil {
			t.Errorf("%s: StageNext of a good batch after the refusals: %v", dev.name, err)
		}
	}
}

// BenchmarkStagedUploadFakeCUDA trains smallcnn (float32, half its in-core
// peak, VA) on the fake CUDA driver with the update on the device and each
// next batch staged, and reports from the driver's trace, per step, the
// bytes of input and labels copied for the next step and the fraction of
// the step's kernels (the run and the update) queued after each copy may
// start: the part of the step it overlaps. These are counts of queued work
// on a fake driver, not times: no GPU has run this.
func BenchmarkStagedUploadFakeCUDA(b *testing.B) {
	d, f := openFakeTraced(b)
	tr := newTrainee(b, d, stagingCase)
	ds, err := dispatch.NewSolver(tr.mach, tr.s, tr.m.Learnables...)
	if err != nil {
		b.Fatal(err)
	}
	defer ds.Close()
	bs := batches(b, tr.m, 2)
	var addrs [2]uint64
	for k, n := range []*G.Node{tr.m.Input, tr.m.Labels} {
		a, err := tr.mach.LeafAddr(n)
		if err != nil {
			b.Fatal(err)
		}
		addrs[k] = uint64(a)
	}
	var bytesAhead, tail, kernels [2]float64
	step := func(k int, trace bool) {
		cur, next := bs[k%2], bs[(k+1)%2]
		// Fresh tensors each step, as a loader gives: staging recognises a
		// batch by identity.
		if trace {
			f.Set(b, "trace", 1)
		}
		x, y := cur[0], cur[1]
		if err := G.Let(tr.m.Input, x); err != nil {
			b.Fatal(err)
		}
		if err := G.Let(tr.m.Labels, y); err != nil {
			b.Fatal(err)
		}
		nx, ny := next[0].Clone().(*tensor.Dense), next[1].Clone().(*tensor.Dense)
		for i, v := range []*tensor.Dense{nx, ny} {
			if err := tr.mach.StageNext([]*G.Node{tr.m.Input, tr.m.Labels}[i], v); err != nil {
				b.Fatal(err)
			}
		}
		bs[(k+1)%2] = [2]*tensor.Dense{nx, ny}
		if err := tr.mach.RunAll(); err != nil {
			b.Fatal(err)
		}
		if err := ds.Step(); err != nil {
			b.Fatal(err)
		}
		tr.mach.Reset()
		if !trace {
			return
		}
		log := f.Trace(b)
		f.Set(b, "trace", 0)
		for i, a := range addrs {
			c := findStagedCopy(b, log, a)
			bytesAhead[i] += float64(c.n)
			tail[i] += float64(c.kernels - c.after)
			kernels[i] += float64(c.kernels)
		}
	}
	step(0, false) // the first batch is uploaded at its step's start
	b.ResetTimer()
	for k := 1; k <= b.N; k++ {
		step(k, true)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(bytesAhead[0]/n, "input-B/step")
	b.ReportMetric(100*tail[0]/kernels[0], "input-tail-%")
	b.ReportMetric(bytesAhead[1]/n, "labels-B/step")
	b.ReportMetric(100*tail[1]/kernels[1], "labels-tail-%")
	b.Logf("fake CUDA driver, smallcnn f32 batch 4 at 16x16, 50%% budget, VA, Adam on the device: per step the input's %.0f bytes "+
		"are copied for the next step behind %.0f%% of the step's queued kernels, the labels' %.0f bytes behind %.0f%% (queued work, not time)",
		bytesAhead[0]/n, 100*tail[0]/kernels[0], bytesAhead[1]/n, 100*tail[1]/kernels[1])
}
