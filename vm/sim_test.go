package vm_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

func TestProfiles(t *testing.T) {
	for _, name := range []string{"v100-nvlink", "v100-pcie", "p100-pcie", "titanxp-pcie", "h100-pcie", "gtx1080ti"} {
		p, err := vm.LookupProfile(name)
		require.NoError(t, err, name)
		require.Equal(t, name, p.Name)
		require.NotEmpty(t, p.Source)
		require.Positive(t, p.Capacity)
	}
	_, err := vm.LookupProfile("a100-magic")
	require.ErrorContains(t, err, `unknown device profile "a100-magic"`)
	_, err = vm.LookupProfile("measured:/nonexistent/file.json")
	require.ErrorContains(t, err, "measured profile")
}

// TestSimulatedStep: the same tape runs on the simulated device with
// virtual times: compute is the sum of the modelled op times, copies
// overlap compute, and a slower link stalls compute more.
func TestSimulatedStep(t *testing.T) {
	stallWith := func(link float64) (vm.Stats, int64) {
		g, _ := chain(t)
		prof, err := vm.LookupProfile("v100-pcie")
		require.NoError(t, err)
		prof.LinkBandwidth = link
		dev, err := vm.NewSim(prof)
		require.NoError(t, err)
		inCore, err := ooc.Plan(g, ooc.Baseline(), ooc.WithDevice(dev))
		require.NoError(t, err)
		// The window scheduler, named: the default, Auto, picks by the link's
		// speed and may recompute on the slow one, and this is one tape on two links.
		m, err := ooc.Compile(g, ooc.WithDevice(dev), ooc.WithBudget(inCore.Peak/2), ooc.WithChunkSize(2<<20), ooc.WithScheduler(ooc.Window{}))
		require.NoError(t, err)
		defer m.Close()
		require.NoError(t, m.RunAll())
		st := m.Stats()
		require.True(t, st.Simulated)
		require.Positive(t, st.PersistentBytes)
		require.LessOrEqual(t, st.PeakDeviceBytes, inCore.Peak/2)
		require.Positive(t, st.SwapInBytes)
		require.GreaterOrEqual(t, st.StepTime, st.ComputeTime)
		require.Equal(t, st.StepTime, st.ComputeTime+st.StallTime, "compute never idles but on a stall")
		return st, inCore.Peak
	}
	fast, _ := stallWith(1e12)
	slow, _ := stallWith(1e6)
	require.Less(t, fast.StallTime, slow.StallTime)
	require.Equal(t, fast.ComputeTime, slow.ComputeTime)
	require.Greater(t, slow.StepTime, fast.StepTime)
}

func TestMeasuredProfileRoundTrip(t *testing.T) {
	g, _ := chain(t)
	p, err := ooc.Plan(g, ooc.Baseline())
	require.NoError(t, err)
	ops := map[string]time.Duration{}
	for i := range p.Funcs {
		ops[vm.OpKey(p, &p.Funcs[i])] = time.Millisecond
	}
	file := filepath.Join(t.TempDir(), "cpu.json")
	require.NoError(t, vm.WriteOpTimes(file, "test machine", 1<<30, 5e9, ops))
	prof, err := vm.LookupProfile("measured:" + file)
	require.NoError(t, err)
	dev, err := vm.NewSim(prof)
	require.NoError(t, err)
	m, err := ooc.Compile(g, ooc.Baseline(), ooc.WithDevice(dev))
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.RunAll())
	st := m.Stats()
	// every op takes the recorded millisecond; the update adds its own.
	require.GreaterOrEqual(t, st.ComputeTime, time.Duration(len(p.Funcs))*time.Millisecond)
	require.Less(t, st.ComputeTime, time.Duration(len(p.Funcs))*time.Millisecond+time.Millisecond)
}

func TestNewDevice(t *testing.T) {
	cases := []struct {
		spec     string
		capacity int64
		name     string
		want     int64
		sim      bool
		err      string
	}{
		{"cpu", 64 << 20, "cpu", 64 << 20, false, ""},
		{"sim:v100-pcie", 0, "sim:v100-pcie", 16 << 30, true, ""},
		{"sim:v100-pcie", 1 << 30, "sim:v100-pcie", 1 << 30, true, ""},
		{"sim:nope", 0, "", 0, false, "unknown device profile"},
		{"tpu", 0, "", 0, false, `unknown device "tpu"`},
	}
	for _, c := range cases {
		d, err := vm.NewDevice(c.spec, c.capacity)
		if c.err != "" {
			require.ErrorContains(t, err, c.err, c.spec)
			continue
		}
		require.NoError(t, err, c.spec)
		require.Equal(t, c.name, d.Name())
		require.Equal(t, c.want, d.Capacity())
		require.Equal(t, c.sim, d.Simulated())
		require.NoError(t, d.Close())
	}
}
