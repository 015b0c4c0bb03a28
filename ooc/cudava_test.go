package ooc_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm/cuda"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/dispatchtest"
)

// TestCompileUsesDeviceAllocator: Compile makes its VA allocator through the device, so a
// CUDA device whose VMM failed its trial at Open (here cuMemMap refused, as under a GPU
// proxy) trains on the device's best-fit fallback instead of failing at its first chunk.
func TestCompileUsesDeviceAllocator(t *testing.T) {
	driver := dispatchtest.Setenv(t)
	dispatchtest.FailAt(t, driver, "cuMemMap", 801, 0, -1)
	var log bytes.Buffer
	d, err := cuda.Open(0, cuda.WithLibrary(driver), cuda.WithLog(&log))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	require.False(t, d.Info().VMM, "the VMM trial should have failed")
	require.Contains(t, d.Info().NoVMMReason, "cuMemMap")

	r, err := mseMLP(parBatch)
	require.NoError(t, err)
	m, err := ooc.Compile(r.Graph, ooc.BindDualValues(r.Learnables...), ooc.WithDevice(d))
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	got := runSteps(t, r, m, 2)
	require.Len(t, got.losses, 2)
	require.Less(t, got.losses[1], got.losses[0], "the second step's loss should be below the first's")
}
