package ooc_test

import (
	"math/rand"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
)

// zooNet builds a model of the zoo (layers' convolutions) with random images and one-hot labels.
func zooNet(name string, cfg models.Config) builder {
	return func(dt tensor.Dtype, seed int64) *net {
		cfg.Dtype, cfg.Seed = dt, seed
		m, err := models.Build(name, cfg)
		if err != nil {
			panic(err)
		}
		rng := rand.New(rand.NewSource(seed))
		if err := G.Let(m.Input, randT(rng, dt, 1, m.Input.Shape()...)); err != nil {
			panic(err)
		}
		ls := m.Labels.Shape()
		y := tensor.New(tensor.Of(dt), tensor.WithShape(ls...))
		for i := 0; i < ls.TotalSize(); i += ls[1] { // class 0 everywhere: a valid one-hot
			y.Set(i, convertTo(dt, 1))
		}
		if err := G.Let(m.Labels, y); err != nil {
			panic(err)
		}
		return &net{g: m.Graph, x: m.Input, y: m.Labels, cost: m.Loss, params: m.Learnables}
	}
}

func convertTo(dt tensor.Dtype, v float64) any {
	if dt == tensor.Float32 {
		return float32(v)
	}
	return v
}

// TestWorkspaceLimitBitForBit: with convolution workspaces cut to their least (256-pixel im2col
// tiles), a zoo CNN trains as TapeMachine does, bit for bit, at a least feasible budget below
// the one with whole-image workspaces.
func TestWorkspaceLimitBitForBit(t *testing.T) {
	build := zooNet("smallcnn", models.Config{Batch: 2, Channels: 3, Height: 32, Width: 32, Classes: 4})
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
		t.Run(dt.String(), func(t *testing.T) {
			ref := build(dt, 1)
			tm := G.NewTapeMachine(ref.g, G.BindDualValues(ref.params...))
			wantL, wantG, wantW := trainSteps(t, ref, tm, 2)
			tm.Close()
			peak, err := ooc.InCorePeak(build(dt, 1).g)
			require.NoError(t, err)
			before := minFeasible(t, build, dt, peak)
			after := minFeasibleWith(t, build, dt, peak, ooc.WithWorkspaceLimit(1))
			t.Logf("in-core peak %d B; least feasible budget %d B with whole-image workspaces, %d B with tiles", peak, before, after)
			require.Less(t, after, before)

			got := build(dt, 1)
			m, err := ooc.Compile(got.g, ooc.BindDualValues(got.params...), ooc.WithBudget(after), ooc.WithWorkspaceLimit(1), ooc.WithPoison())
			require.NoError(t, err)
			defer m.Close()
			gotL, gotG, gotW := trainSteps(t, got, m, 2)
			require.Equal(t, wantL, gotL, "loss")
			require.Equal(t, wantG, gotG, "gradients")
			require.Equal(t, wantW, gotW, "weights after 2 Adam steps")
			require.LessOrEqual(t, m.Stats().PeakDeviceBytes, after)
		})
	}
	_, err := ooc.Plan(build(tensor.Float32, 1).g, ooc.WithWorkspaceLimit(-1))
	require.Error(t, err)
}

// TestUNetLeastBudget reports U-Net's (224x224, 2 classes, batch 1) least feasible budget with
// whole-image convolution workspaces and with tiles, and the largest batch either plans in 512 MiB
// (plans only, no run). Opt in with
// OOC_UNET_BUDGET=1: each plan of the 31-million-parameter graph takes a while.
func TestUNetLeastBudget(t *testing.T) {
	if os.Getenv("OOC_UNET_BUDGET") == "" {
		t.Skip("set OOC_UNET_BUDGET=1 to measure U-Net's least feasible budget with and without tiles")
	}
	build := zooNet("unet", models.Config{Batch: 1, Channels: 3, Height: 224, Width: 224, Classes: 2})
	start := time.Now()
	peak, err := ooc.InCorePeak(build(tensor.Float32, 1).g)
	require.NoError(t, err)
	t.Logf("in-core peak %d B (%v)", peak, time.Since(start))
	before := minFeasible(t, build, tensor.Float32, peak)
	after := minFeasibleWith(t, build, tensor.Float32, peak, ooc.WithWorkspaceLimit(1))
	t.Logf("U-Net 224x224 batch 1 float32: in-core peak %d B; least feasible budget %d B (%.1f%%) with whole-image workspaces, %d B (%.1f%%) with 256-pixel tiles (%v)",
		peak, before, 100*float64(before)/float64(peak), after, 100*float64(after)/float64(peak), time.Since(start))
	require.Less(t, after, before)

	// The largest batch that plans in 512 MiB, searched over 1..32.
	const budget = 512 << 20
	largest := func(opts ...ooc.Option) int {
		lo, hi := 0, 33 // lo plans (0: none known), hi does not
		for hi-lo > 1 {
			mid := (lo + hi) / 2
			b := zooNet("unet", models.Config{Batch: mid, Channels: 3, Height: 224, Width: 224, Classes: 2})(tensor.Float32, 1)
			if _, err := ooc.Plan(b.g, append([]ooc.Option{ooc.WithBudget(budget)}, opts...)...); err == nil {
				lo = mid
			} else {
				hi = mid
			}
		}
		return lo
	}
	whole, tiled := largest(), largest(ooc.WithWorkspaceLimit(1))
	t.Logf("U-Net 224x224 float32 in 512 MiB: largest batch %d with whole-image workspaces, %d with tiles (%v)", whole, tiled, time.Since(start))
	require.GreaterOrEqual(t, tiled, whole)
}
