package ooc_test

import (
	"math/rand"
	"strconv"
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
)

// smallMLP is a graph far smaller than cuBLAS's workspace.
func smallMLP() (*G.ExprGraph, G.Nodes) {
	rng := rand.New(rand.NewSource(9))
	dt := tensor.Float32
	g := G.NewGraph()
	x := G.NewMatrix(g, dt, G.WithShape(8, 6), G.WithName("x"), G.WithValue(randT(rng, dt, 1, 8, 6)))
	w1 := G.NewMatrix(g, dt, G.WithShape(6, 5), G.WithName("w1"), G.WithValue(randT(rng, dt, 0.3, 6, 5)))
	w2 := G.NewMatrix(g, dt, G.WithShape(5, 3), G.WithName("w2"), G.WithValue(randT(rng, dt, 0.3, 5, 3)))
	cost := G.Must(G.Sum(G.Must(G.Mul(G.Must(G.Tanh(G.Must(G.Mul(x, w1)))), w2))))
	if _, err := G.Grad(cost, w1, w2); err != nil {
		panic(err)
	}
	return g, G.Nodes{w1, w2}
}

// TestInCorePeakOnCUDA: on a CUDA device, InCorePeak's figure as the budget
// of a graph smaller than cuBLAS's workspace is refused with the budget to
// pass, which InCorePeakOn gives: with it the graph runs in core (nothing
// swapped). On the CPU device the two agree.
func TestInCorePeakOnCUDA(t *testing.T) {
	dev := fakeCUDA(t)
	g, ls := smallMLP()
	peak, err := ooc.InCorePeak(g)
	if err != nil {
		t.Fatal(err)
	}
	if cpu, err := ooc.InCorePeakOn(g, nil); err != nil || cpu != peak {
		t.Fatalf("InCorePeakOn(g, nil) = %d, %v; InCorePeak %d", cpu, err, peak)
	}
	on, err := ooc.InCorePeakOn(g, dev.d)
	if err != nil {
		t.Fatal(err)
	}
	if on != peak+dev.reserve() {
		t.Fatalf("InCorePeakOn = %d, want the peak %d plus the reserve %d", on, peak, dev.reserve())
	}
	_, err = ooc.Compile(g, ooc.BindDualValues(ls...), ooc.WithDevice(dev.d), ooc.WithBudget(peak))
	if err == nil || !strings.Contains(err.Error(), "InCorePeakOn") || !strings.Contains(err.Error(), strconv.FormatInt(on, 10)) {
		t.Fatalf("WithBudget(InCorePeak(g)) on CUDA: %v; want a refusal naming InCorePeakOn's %d bytes", err, on)
	}
	m, err := ooc.Compile(g, ooc.BindDualValues(ls...), ooc.WithDevice(dev.d), ooc.WithBudget(on))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.RunAll(); err != nil {
		t.Fatal(err)
	}
	if st := m.Stats(); st.SwapInBytes != 0 || st.SwapOutBytes != 0 || st.PeakDeviceBytes > peak {
		t.Errorf("at InCorePeakOn's budget: swapped in %d, out %d bytes, device peak %d (in-core peak %d)", st.SwapInBytes, st.SwapOutBytes, st.PeakDeviceBytes, peak)
	}
}
