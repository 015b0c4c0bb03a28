package ooc_test

import (
	"bytes"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/cuda"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/dispatchtest"
)

// fakeCUDAs opens n devices of a fresh fake CUDA driver (dispatchtest) and
// returns them with the driver's path.
func fakeCUDAs(t *testing.T, n int) ([]vm.Device, string) {
	t.Helper()
	driver := dispatchtest.Setenv(t)
	dispatchtest.SetDevices(t, driver, n)
	var ds []vm.Device
	for i := range n {
		d, err := cuda.Open(i, cuda.WithLibrary(driver))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, d.Close()) })
		ds = append(ds, d)
	}
	return ds, driver
}

// mseMLP is a two-layer net with a mean squared error, ops the CUDA device
// computes.
func mseMLP(batch int) (ooc.Replica, error) {
	rng := rand.New(rand.NewSource(3))
	dt := tensor.Float32
	g := G.NewGraph()
	x := G.NewMatrix(g, dt, G.WithShape(batch, 12), G.WithName("x"))
	y := G.NewMatrix(g, dt, G.WithShape(batch, 5), G.WithName("y"))
	w1 := G.NewMatrix(g, dt, G.WithShape(12, 24), G.WithName("w1"), G.WithValue(randT(rng, dt, 0.3, 12, 24)))
	w2 := G.NewMatrix(g, dt, G.WithShape(24, 5), G.WithName("w2"), G.WithValue(randT(rng, dt, 0.3, 24, 5)))
	out := G.Must(G.Mul(G.Must(G.Tanh(G.Must(G.Mul(x, w1)))), w2))
	cost := G.Must(G.Mean(G.Must(G.Square(G.Must(G.Sub(out, y))))))
	ps := G.Nodes{w1, w2}
	if _, err := G.Grad(cost, ps...); err != nil {
		return ooc.Replica{}, err
	}
	return ooc.Replica{Graph: g, Inputs: G.Nodes{x, y}, Learnables: ps, Loss: cost}, nil
}

// TestParallelNCCLOnFakeCUDA: on two CUDA devices CompileParallel averages
// with NCCL when it loads (here the fake, which sums in rank order as the
// host does, so the steps' bits are the host all-reduce's); without it, it
// says so once and averages on the host.
func TestParallelNCCLOnFakeCUDA(t *testing.T) {
	ds, driver := fakeCUDAs(t, 2)
	run := func(opts ...ooc.Option) (parRun, string) {
		p, err := ooc.CompileParallel(mseMLP, parBatch, ds, append([]ooc.Option{ooc.BindDualValues()}, opts...)...)
		require.NoError(t, err)
		defer func() { require.NoError(t, p.Close()) }()
		return runSteps(t, p.Model(), p, 2), p.AllReducer().Name()
	}
	host, name := run(ooc.WithAllReducer(ooc.HostAllReduce{}))
	require.Equal(t, "host", name)

	dispatchtest.SetenvNCCL(t, driver)
	var log bytes.Buffer
	got, name := run(ooc.WithLog(&log))
	require.Equal(t, "nccl", name)
	require.Equal(t, host.bits, got.bits)
	require.Empty(t, log.String())

	t.Setenv(cuda.NCCLLibraryEnv, filepath.Join(t.TempDir(), "libnccl.so.2"))
	ooc.ForgetNCCLNote()
	for range 2 {
		got, name = run(ooc.WithLog(&log))
		require.Equal(t, "host", name)
		require.Equal(t, host.bits, got.bits)
	}
	require.Equal(t, 1, strings.Count(log.String(), "\n"), "said once: %q", log.String())
	require.Contains(t, log.String(), "CompileParallel on 2 CUDA devices: cuda: no usable NCCL library")
	require.Contains(t, log.String(), "averaging gradients on the host instead")
}
