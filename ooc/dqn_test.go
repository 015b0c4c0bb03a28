package ooc_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// slowLink is the gtx1080ti profile with no launch cost and a 100 MB/s
// host link: on the tiny chains below, swapping stalls, so the choice
// between swapping and recomputing matters.
func slowLink(t *testing.T) *vm.Sim {
	t.Helper()
	prof, err := vm.LookupProfile("gtx1080ti")
	require.NoError(t, err)
	prof.Launch, prof.LinkBandwidth = 0, 1e8
	sim, err := vm.NewSim(prof)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	return sim
}

// TestDQNMatchesTapeMachine: the DQN's tape, planned at 3/4 of the in-core
// peak with the slow link's times, passes the verifier and trains on the
// CPU device bit for bit as gorgonia's TapeMachine.
func TestDQNMatchesTapeMachine(t *testing.T) {
	build := func(dt tensor.Dtype) *net { return elementwiseChain(dt, 4, true, 4, 16, 16) }
	slow := slowLink(t)
	for _, dt := range []tensor.Dtype{tensor.Float32} { // float64 plans the same; the DQN's training costs seconds
		ref := build(dt)
		tm := G.NewTapeMachine(ref.g, G.BindDualValues(ref.params...))
		wantL, wantG, wantW := trainSteps(t, ref, tm, 3)
		tm.Close()
		inCore, err := ooc.Plan(build(dt).g, ooc.Baseline())
		require.NoError(t, err)
		budget := inCore.Peak * 3 / 4
		got := build(dt)
		m, err := ooc.Compile(got.g, ooc.BindDualValues(got.params...), ooc.WithPoison(), ooc.WithBudget(budget),
			ooc.WithScheduler(ooc.DQN{Episodes: 20, Seed: 1}), ooc.WithPlanningTimes(slow))
		require.NoError(t, err)
		peak, err := ooc.Verify(m.Program(), budget)
		require.NoError(t, err, "the verifier passes the DQN's tape")
		gotL, gotG, gotW := trainSteps(t, got, m, 3)
		require.Equal(t, wantL, gotL, "loss")
		require.Equal(t, wantG, gotG, "gradients")
		require.Equal(t, wantW, gotW, "weights after 3 Adam steps")
		st := m.Stats()
		t.Logf("%v budget %d of %d: verified peak %d, run peak %d, %d recomputes, %d B swapped in (%s)",
			dt, budget, inCore.Peak, peak, st.PeakDeviceBytes, st.Recomputes, st.SwapInBytes, m.Program().Timing)
		require.LessOrEqual(t, st.PeakDeviceBytes, budget)
		m.Close()
	}
}

// TestDQNWeightsRoundTrip: weights trained, saved and loaded plan the same
// tape (fine-tuned for 5 seeded episodes on the problem, so that a plan
// that fits is found); a damaged file is an error naming the offset.
func TestDQNWeightsRoundTrip(t *testing.T) {
	slow := slowLink(t)
	n := elementwiseChain(tensor.Float32, 4, false, 4, 16, 16)
	tr, err := ooc.NewTrace(n.g)
	require.NoError(t, err)
	inCore, err := ooc.Plan(n.g, ooc.Baseline())
	require.NoError(t, err)
	p := &ooc.Problem{Trace: tr, Budget: inCore.Peak * 3 / 4, Device: slow}
	w, err := ooc.TrainDQN(p, nil, 10, 1)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "dqn.weights")
	require.NoError(t, ooc.SaveDQNWeights(path, w))
	back, err := ooc.LoadDQNWeights(path)
	require.NoError(t, err)
	require.Equal(t, w, back)
	plan := func(w *ooc.DQNWeights) *vm.Program {
		prog, err := ooc.Plan(n.g, ooc.WithBudget(p.Budget), ooc.WithScheduler(ooc.DQN{Weights: w, Episodes: 5, Seed: 2}), ooc.WithPlanningTimes(slow))
		require.NoError(t, err)
		return prog
	}
	a, b := plan(w), plan(back)
	require.Equal(t, a.Instrs, b.Instrs, "the reloaded weights plan the same tape")

	good, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		edit func([]byte) []byte
		want string
	}{
		{"flipped weight byte", func(b []byte) []byte { b[40] ^= 1; return b }, "checksum at offset"},
		{"truncated", func(b []byte) []byte { return b[:30] }, "offset"},
		{"not a weights file", func(b []byte) []byte { return append([]byte("hello\n"), b...) }, "offset 0"},
		{"empty", func([]byte) []byte { return nil }, "offset 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := filepath.Join(t.TempDir(), "bad")
			require.NoError(t, os.WriteFile(bad, tc.edit(append([]byte(nil), good...)), 0o644))
			_, err := ooc.LoadDQNWeights(bad)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
