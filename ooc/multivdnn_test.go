package ooc_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// simReplicas compiles n replicas of one small model (one shared graph:
// nothing is computed on a simulated device) on a group of simulated
// devices and runs one co-simulated step.
func simReplicas(t *testing.T, model, profile string, n int, sc ooc.Scheduler, budgetPercent int64) (*ooc.Parallel, time.Duration) {
	t.Helper()
	m, err := models.Build(model, models.Config{Batch: 64, Channels: 3, Height: 32, Width: 32, Classes: 10, Seed: 1})
	require.NoError(t, err)
	peak, err := ooc.InCorePeak(m.Graph)
	require.NoError(t, err)
	prof, err := vm.LookupProfile(profile)
	require.NoError(t, err)
	sims, err := vm.NewSimGroup(prof, n)
	require.NoError(t, err)
	devs := make([]vm.Device, n)
	for i, s := range sims {
		devs[i] = s
		t.Cleanup(func() { _ = s.Close() })
	}
	build := func(int) (ooc.Replica, error) {
		return ooc.Replica{Graph: m.Graph, Inputs: G.Nodes{m.Input, m.Labels}, Learnables: m.Learnables, Loss: m.Loss}, nil
	}
	p, err := ooc.CompileParallel(build, 64*n, devs, ooc.WithScheduler(sc), ooc.WithBudget(peak*budgetPercent/100))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	require.NoError(t, p.RunAll())
	for _, mm := range p.Machines() {
		require.Equal(t, 1, mm.Stats().Steps, "co-simulation counts one step")
	}
	st := p.Stats()
	require.True(t, st.Simulated)
	return p, st.StepTime
}

// swapped lists the variables a replica's tape swaps out.
func swapped(m *vm.Machine) map[string]bool {
	out := map[string]bool{}
	prog := m.Program()
	for _, in := range prog.Instrs {
		if in.Op == vm.SwapOut {
			out[prog.Vars[in.Var].Name] = true
		}
	}
	return out
}

// TestMultiVDNNCapStaggers: under the cap, the replicas of one switch swap
// the same number of layers but not the same ones; without it, all swap
// every layer.
func TestMultiVDNNCapStaggers(t *testing.T) {
	capped, _ := simReplicas(t, "resnet18", "titanxp-switch", 2, ooc.MultiVDNN{Cap: true}, 90)
	a, b := swapped(capped.Machines()[0]), swapped(capped.Machines()[1])
	require.NotEmpty(t, a)
	require.Equal(t, len(a), len(b))
	require.NotEqual(t, a, b)
	orig, _ := simReplicas(t, "resnet18", "titanxp-switch", 2, ooc.MultiVDNN{}, 90)
	all0, all1 := swapped(orig.Machines()[0]), swapped(orig.Machines()[1])
	require.Equal(t, all0, all1)
	require.Greater(t, len(all0), len(a))
	require.Equal(t, "vdnn-cap-tuned", ooc.MultiVDNN{Cap: true, Tune: true}.Name())
}

// TestSharedLinkSlowsSwapping: four replicas swapping through one switch
// take longer per step than one alone; the cap and the trigger search give
// some of it back.
func TestSharedLinkSlowsSwapping(t *testing.T) {
	_, alone := simReplicas(t, "smallcnn", "titanxp-switch", 1, ooc.MultiVDNN{}, 70)
	_, shared := simReplicas(t, "smallcnn", "titanxp-switch", 4, ooc.MultiVDNN{}, 70)
	_, tuned := simReplicas(t, "smallcnn", "titanxp-switch", 4, ooc.MultiVDNN{Cap: true, Tune: true}, 70)
	t.Logf("simulated step (titanxp-switch): original vDNN alone %v, 4 sharing %v; capped+tuned 4 sharing %v", alone, shared, tuned)
	require.Greater(t, shared, alone)
	require.Less(t, tuned, shared)
	// Devices with links of their own do not slow each other.
	_, own1 := simReplicas(t, "smallcnn", "titanxp-pcie", 1, ooc.MultiVDNN{}, 70)
	own4p, own4 := simReplicas(t, "smallcnn", "titanxp-pcie", 4, ooc.MultiVDNN{}, 70)
	require.Equal(t, own1+own4p.Stats().AllReduceTime, own4)
}
