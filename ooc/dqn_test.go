package ooc_test

import (
	bin "encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models"
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
			ooc.WithScheduler(ooc.DQN{}), ooc.WithPlanningTimes(slow))
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

// TestDQNShippedWeights: the weights shipped in the package decode (a file
// of version 1, whose networks read other features, is refused), and
// planning with them, as DQN{} does, fits real models' steps (simulated,
// gtx1080ti) and plans the same tape as the same weights saved and
// reloaded.
func TestDQNShippedWeights(t *testing.T) {
	w, err := ooc.DefaultDQNWeights()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "shipped.weights")
	require.NoError(t, ooc.SaveDQNWeights(path, w))
	back, err := ooc.LoadDQNWeights(path)
	require.NoError(t, err)

	b, err := os.ReadFile(path)
	require.NoError(t, err)
	bin.LittleEndian.PutUint32(b[8:], 1)
	bin.LittleEndian.PutUint32(b[len(b)-4:], crc32.ChecksumIEEE(b[:len(b)-4]))
	old := filepath.Join(t.TempDir(), "v1.weights")
	require.NoError(t, os.WriteFile(old, b, 0o644))
	_, err = ooc.LoadDQNWeights(old)
	require.ErrorContains(t, err, "version 1 at offset 8")

	dev, err := vm.NewDevice("sim:gtx1080ti", 0)
	require.NoError(t, err)
	defer dev.Close()
	for _, tc := range []struct {
		model string
		cfg   models.Config
		fracs []float64 // budgets, of the in-core peak (this small U-Net needs 75% under any plan: one convolution filter gradient holds that much; at 80% the network's own swaps do not fit)
	}{
		{"resnet50", models.Config{Batch: 8, Channels: 3, Height: 64, Width: 64, Classes: 10, Dtype: tensor.Float32}, []float64{0.5, 0.7}},
		{"unet", models.Config{Batch: 2, Channels: 3, Height: 64, Width: 64, Classes: 2, Dtype: tensor.Float32}, []float64{0.9}},
	} {
		m, err := models.Build(tc.model, tc.cfg)
		require.NoError(t, err)
		peak, err := ooc.InCorePeak(m.Graph)
		require.NoError(t, err)
		for _, frac := range tc.fracs {
			budget := int64(frac * float64(peak))
			a, err := ooc.Plan(m.Graph, ooc.WithDevice(dev), ooc.WithBudget(budget), ooc.WithScheduler(ooc.DQN{}))
			require.NoError(t, err, "%s at %.0f%%", tc.model, 100*frac)
			require.LessOrEqual(t, a.Peak, budget)
			_, err = ooc.Verify(a, budget)
			require.NoError(t, err)
			c, err := ooc.Plan(m.Graph, ooc.WithDevice(dev), ooc.WithBudget(budget), ooc.WithScheduler(ooc.DQN{Weights: back}))
			require.NoError(t, err)
			require.Equal(t, a.Instrs, c.Instrs, "%s at %.0f%%: reloaded weights plan the same tape", tc.model, 100*frac)
			t.Logf("%s at %.0f%% of the in-core peak: %s", tc.model, 100*frac, a.Timing)
		}
	}
}
