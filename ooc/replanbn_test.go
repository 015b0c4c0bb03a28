package ooc_test

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// TestLayersBatchNormThroughReplan: a hybrid machine on the CPU device runs
// its first step on the window scheduler's tape while it measures op times,
// then replans; models/layers' batch norm keeps the running statistics, and
// the loss, the window scheduler's machine gives (float64, bit for bit).
// TestGorgoniaBatchNormThroughReplan does the same for gorgonia's own
// BatchNorm against TapeMachine.
func TestLayersBatchNormThroughReplan(t *testing.T) {
	run := func(sc ooc.Scheduler) (mean []float64, loss float64, timing string) {
		m, err := models.Build("smallcnn", models.Config{Batch: 8, Channels: 3, Height: 16, Width: 16, Classes: 4, Dtype: tensor.Float64, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		peak, err := ooc.InCorePeak(m.Graph)
		if err != nil {
			t.Fatal(err)
		}
		mach, err := ooc.Compile(m.Graph, ooc.BindDualValues(m.Learnables...), ooc.WithBudget(peak/2), ooc.WithScheduler(sc))
		if err != nil {
			t.Fatal(err)
		}
		defer mach.Close()
		x := tensor.New(tensor.WithShape(8, 3, 16, 16), tensor.Of(tensor.Float64))
		for i := range x.Data().([]float64) {
			x.Data().([]float64)[i] = float64(i%7) / 7
		}
		y := tensor.New(tensor.WithShape(8, 4), tensor.Of(tensor.Float64))
		for i := 0; i < 8; i++ {
			y.Data().([]float64)[i*4+i%4] = 1
		}
		s := G.NewVanillaSolver(G.WithLearnRate(0.1))
		for st := 0; st < 3; st++ {
			if err := G.Let(m.Input, x); err != nil {
				t.Fatal(err)
			}
			if err := G.Let(m.Labels, y); err != nil {
				t.Fatal(err)
			}
			if err := mach.RunAll(); err != nil {
				t.Fatal(err)
			}
			if err := s.Step(G.NodesToValueGrads(m.Learnables)); err != nil {
				t.Fatal(err)
			}
			mach.Reset()
		}
		for _, n := range m.Graph.AllNodes() {
			if rs, ok := n.Op().(vm.RunningStatser); ok {
				mv, vv := rs.RunningStats()
				mean = append(append(mean, mv...), vv...)
			}
		}
		return mean, m.Loss.Value().Data().(float64), mach.Program().Timing
	}
	wantMean, wantLoss, _ := run(ooc.Window{})
	gotMean, gotLoss, timing := run(ooc.Hybrid{})
	if !strings.Contains(timing, "measured on cpu") {
		t.Fatalf("hybrid's tape was not replanned from measured times: %q", timing)
	}
	if len(wantMean) == 0 || len(gotMean) != len(wantMean) {
		t.Fatalf("%d and %d running statistics", len(wantMean), len(gotMean))
	}
	for i := range wantMean {
		if math.Float64bits(gotMean[i]) != math.Float64bits(wantMean[i]) {
			t.Fatalf("running statistic %d: %v after the replan, %v under window", i, gotMean[i], wantMean[i])
		}
	}
	if math.Float64bits(gotLoss) != math.Float64bits(wantLoss) {
		t.Errorf("loss %v after the replan, %v under window", gotLoss, wantLoss)
	}
}

// TestPlanningLeavesBatchNormAlone: planning runs no op, so it leaves
// gorgonia's BatchNorm as it found it: its running statistics and its
// training mode. Auto and LeastBudget time or replay tapes on machines over
// a simulated device; such a machine used to put the graph's ops in its
// program's mode as a TapeMachine does when it is made, and gorgonia's op
// resets its running statistics on SetTraining(true): a Compile that
// replanned after its first step (Hybrid, Auto on the CPU device) lost the
// first step's statistics (TestGorgoniaBatchNormThroughReplan).
func TestPlanningLeavesBatchNormAlone(t *testing.T) {
	build := func() (*net, *G.BatchNormOp, G.Value) {
		n, op, _ := bnNet(tensor.Float64)
		x := tensor.New(tensor.WithShape(4, 3, 5, 5), tensor.WithBacking(make([]float64, 4*3*5*5)))
		for i := range x.Data().([]float64) {
			x.Data().([]float64)[i] = float64(i%11) / 11
		}
		return n, op, x
	}
	peakNet, _, _ := build()
	peak, err := ooc.InCorePeak(peakNet.g)
	if err != nil {
		t.Fatal(err)
	}
	least := minFeasible(t, func(dt tensor.Dtype, _ int64) *net { n, _, _ := bnNet(dt); return n }, tensor.Float64, peak)
	cases := []struct {
		name string
		plan func(g *G.ExprGraph) (string, error)
	}{
		{"Plan, Auto simulating both tapes", func(g *G.ExprGraph) (string, error) {
			p, err := ooc.Plan(g, ooc.WithBudget(least))
			if err != nil {
				return "", err
			}
			return p.Timing, nil
		}},
		{"LeastBudget replaying the tape", func(g *G.ExprGraph) (string, error) {
			_, err := ooc.LeastBudget(g)
			return "simulated", err
		}},
		{"LeastBudget replaying the inference tape", func(g *G.ExprGraph) (string, error) {
			_, err := ooc.LeastBudget(g, ooc.Inference())
			return "simulated", err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, op, x := build()
			mean := tensor.New(tensor.WithShape(3), tensor.WithBacking([]float64{0.25, -0.5, 0.75}))
			variance := tensor.New(tensor.WithShape(3), tensor.WithBacking([]float64{2, 3, 4}))
			if err := op.SetStats(mean, variance); err != nil {
				t.Fatal(err)
			}
			timing, err := c.plan(n.g)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(timing, "simulated") {
				t.Fatalf("nothing was simulated (%q): the case tests nothing", timing)
			}
			gotMean, gotVar := op.Stats()
			want := [][]uint64{bits(t, mean), bits(t, variance)}
			if got := [][]uint64{bits(t, gotMean), bits(t, gotVar)}; !reflect.DeepEqual(got, want) {
				t.Fatalf("running statistics %v after planning, %v before", got, want)
			}
			// Still in training mode: a forward advances the statistics.
			if _, err := op.Do(x); err != nil {
				t.Fatal(err)
			}
			if m, _ := op.Stats(); reflect.DeepEqual(bits(t, m), want[0]) {
				t.Fatal("a forward after planning left the running mean: planning switched the op to evaluation")
			}
		})
	}
}

// TestGorgoniaBatchNormThroughReplan: gorgonia's BatchNorm trained three
// steps by machines that measure op times in their first step and replan
// after it (Hybrid; Auto where the in-core peak exceeds the budget) on the
// CPU device ends with TapeMachine's running statistics, losses,
// predictions and learnables, bit for bit, in core and at the least budget.
// The replan simulated tapes on machines that reset the op's statistics
// (TestPlanningLeavesBatchNormAlone); Compile used not to replan such a
// graph for that.
func TestGorgoniaBatchNormThroughReplan(t *testing.T) {
	run := func(n *net, op *G.BatchNormOp, pred *G.Value, m G.VM) [][]uint64 {
		solver := G.NewMomentum(G.WithLearnRate(0.05))
		var out [][]uint64
		for s := 0; s < 4; s++ {
			if err := m.RunAll(); err != nil {
				t.Fatal(err)
			}
			mean, variance := op.Stats()
			out = append(out, bits(t, n.cost.Value()), bits(t, *pred), bits(t, mean), bits(t, variance))
			if err := solver.Step(G.NodesToValueGrads(n.params)); err != nil {
				t.Fatal(err)
			}
			m.Reset()
		}
		for _, p := range n.params {
			out = append(out, bits(t, p.Value()))
		}
		return out
	}
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		ref, op, pred := bnNet(dt)
		tm := G.NewTapeMachine(ref.g, G.BindDualValues(ref.params...))
		want := run(ref, op, pred, tm)
		if err := tm.Close(); err != nil {
			t.Fatal(err)
		}
		build := func(dt tensor.Dtype, _ int64) *net { n, _, _ := bnNet(dt); return n }
		peak, err := ooc.InCorePeak(build(dt, 0).g)
		if err != nil {
			t.Fatal(err)
		}
		least := minFeasible(t, build, dt, peak)
		cases := []struct {
			sc     ooc.Scheduler
			budget int64
		}{{ooc.Hybrid{}, peak}, {ooc.Hybrid{}, least}, {nil, least}}
		for _, c := range cases {
			n, op, pred := bnNet(dt)
			opts := []ooc.Option{ooc.BindDualValues(n.params...), ooc.WithPoison(), ooc.WithBudget(c.budget)}
			if c.sc != nil {
				opts = append(opts, ooc.WithScheduler(c.sc))
			}
			m, err := ooc.Compile(n.g, opts...)
			if err != nil {
				t.Fatal(err)
			}
			got := run(n, op, pred, m)
			timing := m.Program().Timing
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			name := "default"
			if c.sc != nil {
				name = c.sc.Name()
			}
			what := fmt.Sprintf("%v, scheduler %s, budget %d of peak %d", dt, name, c.budget, peak)
			if !strings.Contains(timing, "measured on cpu") && !strings.Contains(timing, "measured-cpu") {
				t.Fatalf("%s: the tape was not replanned from measured times: %q", what, timing)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: the steps differ from TapeMachine's:\n got %v\nwant %v", what, got, want)
			}
		}
	}
}
