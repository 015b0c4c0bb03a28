package vm_test

import (
	"errors"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

func chain(t *testing.T) (*G.ExprGraph, *G.Node) {
	t.Helper()
	g := G.NewGraph()
	rng := rand.New(rand.NewSource(3))
	data := make([]float64, 64*32)
	for i := range data {
		data[i] = rng.NormFloat64()
	}
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(64, 32), G.WithName("x"), G.WithValue(tensor.New(tensor.WithShape(64, 32), tensor.WithBacking(data))))
	w := G.NewMatrix(g, tensor.Float64, G.WithShape(32, 32), G.WithName("w"), G.WithInit(G.GlorotN(1)))
	h := x
	for i := 0; i < 4; i++ {
		h = G.Must(G.Tanh(G.Must(G.Mul(h, w))))
	}
	cost := G.Must(G.Mean(G.Must(G.Sum(h, 1))))
	_, err := G.Grad(cost, w)
	require.NoError(t, err)
	return g, cost
}

func TestMachineEnforcesItsBudget(t *testing.T) {
	g, _ := chain(t)
	p, err := ooc.Plan(g, ooc.Baseline())
	require.NoError(t, err)
	dev, err := vm.NewCPU(64 << 20)
	require.NoError(t, err)
	defer dev.Close()
	al, err := alloc.NewVA(dev.Memory(), alloc.Granularity)
	require.NoError(t, err)
	// The tape needs p.Peak bytes; a machine held to one byte less must
	// fail the way a device out of memory does.
	m, err := vm.New(p, vm.Config{Device: dev, Allocator: al, Budget: p.Peak - 1})
	require.NoError(t, err)
	defer m.Close()
	err = m.RunAll()
	require.Error(t, err)
	require.True(t, errors.Is(err, alloc.ErrOutOfMemory), "%v", err)
	require.Contains(t, err.Error(), "budget")
}

func TestMachineReportsAllocatorOutOfMemory(t *testing.T) {
	g, _ := chain(t)
	p, err := ooc.Plan(g, ooc.Baseline())
	require.NoError(t, err)
	// Each of the tape's many small variables takes a whole 2 MiB chunk
	// only if the small-block pool is missing; a device of one chunk still
	// cannot hold the big ones at once.
	dev, err := vm.NewCPU(alloc.Granularity)
	require.NoError(t, err)
	defer dev.Close()
	al := alloc.NewBestFit(dev.Memory())
	m, err := vm.New(p, vm.Config{Device: dev, Allocator: al})
	require.NoError(t, err)
	defer m.Close()
	if p.Peak < alloc.Granularity/2 {
		require.NoError(t, m.RunAll())
		return
	}
	err = m.RunAll()
	require.True(t, errors.Is(err, alloc.ErrOutOfMemory), "%v", err)
}

func TestMachineStatsAndClose(t *testing.T) {
	g, cost := chain(t)
	m, err := ooc.Compile(g, ooc.Baseline())
	require.NoError(t, err)
	require.NoError(t, m.RunAll())
	require.NoError(t, m.RunAll(), "a RunAll without Reset does nothing, as TapeMachine's")
	require.Equal(t, 1, m.Stats().Steps)
	m.Reset()
	require.NoError(t, m.RunAll())
	st := m.Stats()
	require.Equal(t, 2, st.Steps)
	require.Equal(t, m.Program().Peak, st.PeakDeviceBytes, "the machine's peak is the verifier's")
	require.GreaterOrEqual(t, st.ReservedBytes, st.PeakDeviceBytes)
	require.Positive(t, st.ComputeTime)
	require.Zero(t, st.SwapInBytes)
	require.Zero(t, st.Allocator.Requested, "every block is freed at the end of a step")
	require.NotNil(t, cost.Value())
	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "Close is idempotent")
	require.ErrorContains(t, m.RunAll(), "closed machine")
}

// TestLeafViewsFollowTheirBase: a view of a leaf (here a reshape of the input) keeps its
// header across steps, and still follows the base when the user lets a new tensor, or changes
// the bound one's numbers in place, as a fresh view would.
func TestLeafViewsFollowTheirBase(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("x"),
		G.WithValue(tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{1, 2, 3, 4, 5, 6}))))
	w := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 2), G.WithName("w"),
		G.WithValue(tensor.New(tensor.WithShape(3, 2), tensor.WithBacking([]float64{1, 10, 100, 1000, 1e4, 1e5}))))
	y := G.Must(G.Reshape(x, tensor.Shape{3, 2}))
	cost := G.Must(G.Sum(G.Must(G.HadamardProd(y, w))))
	m, err := ooc.Compile(g, ooc.Baseline())
	require.NoError(t, err)
	defer m.Close()
	step := func() float64 {
		t.Helper()
		require.NoError(t, m.RunAll())
		v := cost.Value().Data().(float64)
		m.Reset()
		return v
	}
	require.Equal(t, 654321.0, step())
	require.Equal(t, 654321.0, step())
	x.Value().Data().([]float64)[0] = 2
	require.Equal(t, 654322.0, step(), "the bound tensor changed in place")
	require.NoError(t, G.Let(x, tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{0, 0, 0, 0, 0, 7}))))
	require.Equal(t, 700000.0, step(), "a new tensor let")
	require.NoError(t, G.Let(x, tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{1, 0, 0, 0, 0, 0}))))
	require.Equal(t, 1.0, step())
}
