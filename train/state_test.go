package train

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/datasets"
)

// The solvers' hidden state survives export and import, and moves between
// the two implementations: a fresh solver of either kind given the state
// exported from either steps exactly as the original.
func TestSolverStateRoundTrip(t *testing.T) {
	impls := []string{FastSolver, GorgoniaSolver}
	for _, opt := range []string{"sgd", "momentum", "adam"} {
		for _, from := range impls {
			for _, to := range impls {
				t.Run(opt+"/"+from+"-to-"+to, func(t *testing.T) {
					testStateMove(t, opt, from, to)
				})
			}
		}
	}
}

func testStateMove(t *testing.T, opt, from, to string) {
	mk := func() (G.Nodes, []*tensor.Dense) {
		g := G.NewGraph()
		var ns G.Nodes
		var ws []*tensor.Dense
		for i, shape := range [][]int{{3, 2}, {4}} {
			w := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(seq(shape, float32(i)+0.5)))
			ns = append(ns, G.NewTensor(g, tensor.Float32, len(shape), G.WithShape(shape...), G.WithName(fmt.Sprint("w", i)), G.WithValue(w)))
			ws = append(ws, w)
		}
		return ns, ws
	}
	grads := func(ns G.Nodes, step int) []G.ValueGrad {
		var out []G.ValueGrad
		for i, n := range ns {
			d := seq(n.Shape(), float32(step*7+i)*0.37)
			out = append(out, valueGrad{n.Value(), tensor.New(tensor.WithShape(n.Shape()...), tensor.WithBacking(d))})
		}
		return out
	}
	na, wa := mk()
	a, _ := newSolver(opt, from, 0.05)
	for s := 0; s < 3; s++ {
		if err := a.Step(grads(na, s)); err != nil {
			t.Fatal(err)
		}
	}
	st, err := exportSolver(a, na)
	if err != nil {
		t.Fatal(err)
	}
	// State for each of the 2 learnables; none for sgd, as gorgonia's.
	if want := map[string]int{"sgd": 0, "momentum": 2, "adam": 2}[opt]; len(st.Slots) != want {
		t.Errorf("state of %d learnables exported, want %d", len(st.Slots), want)
	}
	if wantIter := map[bool]int{true: 3, false: 0}[opt == "adam"]; st.Iter != wantIter {
		t.Errorf("iter %d exported, want %d", st.Iter, wantIter)
	}
	nb, wb := mk()
	for i := range wa {
		tensor.Copy(wb[i], wa[i])
	}
	b, _ := newSolver(opt, to, 0.05)
	if err := importSolver(b, st, nb); err != nil {
		t.Fatal(err)
	}
	for s := 3; s < 6; s++ {
		a.Step(grads(na, s))
		b.Step(grads(nb, s))
	}
	for i := range wa {
		if !sameBits(wa[i], wb[i]) {
			t.Errorf("weight %d: %v after import, %v without", i, wb[i], wa[i])
		}
	}
}

type valueGrad struct{ v, g G.Value }

func (v valueGrad) Value() G.Value         { return v.v }
func (v valueGrad) Grad() (G.Value, error) { return v.g, nil }

func seq(shape []int, base float32) []float32 {
	n := tensor.Shape(shape).TotalSize()
	d := make([]float32, n)
	for i := range d {
		d[i] = base + float32(i)*0.25 - float32(i*i)*0.01
	}
	return d
}

func TestCountCorrect(t *testing.T) {
	for _, tc := range []struct {
		name           string
		shape          []int
		data           []float32
		labels         []int
		correct, total int64
		err            bool
	}{
		{"rows", []int{3, 2}, []float32{1, 2, 5, -1, 0, 0}, []int{1, 0, 1}, 2, 3, false}, // a tie goes to the first class
		{"padding", []int{3, 2}, []float32{1, 2, 5, -1, 0, 0}, []int{1, 0, -1}, 2, 2, false},
		{"pixels", []int{1, 2, 1, 2}, []float32{1, 0, 0, 1}, []int{0, 1}, 2, 2, false}, // (N,K,H,W): class is axis 1
		{"pixels wrong", []int{1, 2, 1, 2}, []float32{1, 0, 0, 1}, []int{1, 0}, 0, 2, false},
		{"label count", []int{2, 2}, []float32{1, 0, 0, 1}, []int{0}, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tensor.New(tensor.WithShape(tc.shape...), tensor.WithBacking(tc.data))
			c, n, err := countCorrect(v, tc.labels)
			if (err != nil) != tc.err || c != tc.correct || n != tc.total {
				t.Errorf("got %d/%d, %v; want %d/%d, error %v", c, n, err, tc.correct, tc.total, tc.err)
			}
		})
	}
}

// Evaluating switches batch norm to inference mode and back, and leaves the
// running statistics exactly as they were (gorgonia's own BatchNormOp resets
// them when switched back to training).
func TestEvaluateKeepsState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.ckpt")
	cfg := tinyConfig()
	cfg.Steps, cfg.Checkpoint = 3, path
	fit(t, cfg)
	ck, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := buildModel("smallcnn", 4, dataShape{channels: 3, height: 16, width: 16, classes: 10}, 1)
	if err != nil {
		t.Fatal(err)
	}
	bns := modelBatchNorms(m)
	if len(bns) == 0 {
		t.Fatal("no batch norms found")
	}
	ev, err := newEvaluator(m, bns)
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.compile(); err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	solver, _ := newSolver("adam", FastSolver, 0.001)
	if err := restoreTensors(path, ck, m.Learnables, bns, solver); err != nil {
		t.Fatal(err)
	}
	before, _ := snapshotBN(bns)
	trivial := true
	for _, s := range before {
		z := tensor.New(tensor.Of(s[0].Dtype()), tensor.WithShape(s[0].Shape()...))
		trivial = trivial && sameBits(s[0], z)
	}
	if trivial {
		t.Fatal("running means are all 0 after 3 steps: the statistics were not restored")
	}
	ds, err := openSplit("synthetic:n=16", datasets.Test, 16, 16, 10, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := ev.evaluate(ds, datasets.Options{BatchSize: 4, Dtype: tensor.Float32})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := snapshotBN(bns)
	for i := range before {
		if !sameBits(before[i][0], after[i][0]) || !sameBits(before[i][1], after[i][1]) {
			t.Errorf("batch norm %d: running statistics changed by evaluating", i)
		}
	}
	r2, _ := ev.evaluate(ds, datasets.Options{BatchSize: 4, Dtype: tensor.Float32})
	if r1 != r2 {
		t.Errorf("two evaluations differ: %+v, %+v", r1, r2)
	}
	for _, tm := range ev.modes {
		if tr, ok := tm.(interface{ Training() bool }); ok && !tr.Training() {
			t.Errorf("%v left in inference mode", tm)
		}
	}
}

// tinyConfig is a run small enough for tests: 16 synthetic examples of
// 3x16x16 (and 16 test examples), batches of 4, so an epoch is 4 steps.
func tinyConfig() Config {
	return Config{Model: "smallcnn", Data: "synthetic:n=16", Batch: 4, Image: 16, Seed: 1, Budget: Budget{Percent: 60}}
}

// fit opens a run of cfg (resuming cfg.Checkpoint when resume is set) and
// trains it to the end.
func fit(t *testing.T, cfg Config) (*Trainer, *Result) {
	t.Helper()
	tr, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	res, err := tr.Fit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tr, res
}
