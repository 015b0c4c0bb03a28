package ooc_test

import (
	"math/rand"
	"os"
	"strings"
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
// tiles), or cut automatically where the budget needs it (no WithWorkspaceLimit), a zoo CNN trains
// as TapeMachine does, bit for bit, at least feasible budgets below the one with whole-image
// workspaces (WithWorkspaceLimit(0)).
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
			before := minFeasibleWith(t, build, dt, peak, ooc.WithWorkspaceLimit(0))
			after := minFeasibleWith(t, build, dt, peak, ooc.WithWorkspaceLimit(1))
			auto := minFeasible(t, build, dt, peak)
			t.Logf("in-core peak %d B; least feasible budget %d B with whole-image workspaces, %d B with tiles, %d B automatic", peak, before, after, auto)
			require.Less(t, after, before)
			require.Less(t, auto, before)
			_, err = ooc.Plan(build(dt, 1).g, ooc.WithBudget(auto), ooc.WithWorkspaceLimit(0))
			require.Error(t, err, "whole-image workspaces at the automatic least budget")

			for _, c := range []struct {
				budget int64
				opts   []ooc.Option
			}{{after, []ooc.Option{ooc.WithWorkspaceLimit(1)}}, {auto, nil}} {
				got := build(dt, 1)
				m, err := ooc.Compile(got.g, append(c.opts, ooc.BindDualValues(got.params...), ooc.WithBudget(c.budget), ooc.WithPoison())...)
				require.NoError(t, err)
				gotL, gotG, gotW := trainSteps(t, got, m, 2)
				require.Equal(t, wantL, gotL, "loss")
				require.Equal(t, wantG, gotG, "gradients")
				require.Equal(t, wantW, gotW, "weights after 2 Adam steps")
				require.LessOrEqual(t, m.Stats().PeakDeviceBytes, c.budget)
				m.Close()
			}
		})
	}
	_, err := ooc.Plan(build(tensor.Float32, 1).g, ooc.WithWorkspaceLimit(-1))
	require.Error(t, err)
}

// TestLeastBudgetTiles reports, for U-Net (224x224, 2 classes, batch 1), ResNet-18 and VGG-16
// (32x32, 10 classes, batch 32) and ResNet-18 at 224x224 (batch 4), float32, the least feasible budget with whole-image convolution
// workspaces (WithWorkspaceLimit(0)), with 256-pixel tiles (WithWorkspaceLimit(1)) and with the
// automatic limit (no option), and the largest batch each plans in a fixed budget (plans only,
// no run). Opt in with OOC_LEAST_BUDGET=1 (-run TestLeastBudgetTiles/resnet18 for one model):
// every model takes minutes of planning.
func TestLeastBudgetTiles(t *testing.T) {
	if os.Getenv("OOC_LEAST_BUDGET") == "" {
		t.Skip("set OOC_LEAST_BUDGET=1 to measure least feasible budgets and largest batches with and without tiles")
	}
	for _, c := range []struct {
		model    string
		cfg      models.Config
		budget   int64 // for the largest batch
		maxBatch int
	}{
		{"unet", models.Config{Batch: 1, Channels: 3, Height: 224, Width: 224, Classes: 2}, 512 << 20, 32},
		{"resnet18", models.Config{Batch: 32, Channels: 3, Height: 32, Width: 32, Classes: 10}, 16 << 20, 512},
		{"resnet18-224", models.Config{Batch: 4, Channels: 3, Height: 224, Width: 224, Classes: 10}, 64 << 20, 64},
		{"vgg16", models.Config{Batch: 32, Channels: 3, Height: 32, Width: 32, Classes: 10}, 128 << 20, 512},
	} {
		name, _, _ := strings.Cut(c.model, "-")
		t.Run(c.model, func(t *testing.T) {
			build := zooNet(name, c.cfg)
			start := time.Now()
			peak, err := ooc.InCorePeak(build(tensor.Float32, 1).g)
			require.NoError(t, err)
			before := minFeasibleWith(t, build, tensor.Float32, peak, ooc.WithWorkspaceLimit(0))
			after := minFeasibleWith(t, build, tensor.Float32, peak, ooc.WithWorkspaceLimit(1))
			auto := minFeasible(t, build, tensor.Float32, peak)
			pct := func(b int64) float64 { return 100 * float64(b) / float64(peak) }
			t.Logf("%s %dx%d batch %d float32: in-core peak %d B; least feasible budget %d B (%.1f%%) with whole-image workspaces, %d B (%.1f%%) with 256-pixel tiles, %d B (%.1f%%) automatic (%v)",
				c.model, c.cfg.Height, c.cfg.Width, c.cfg.Batch, peak, before, pct(before), after, pct(after), auto, pct(auto), time.Since(start))
			// Tiles lower a convolution's own need only: where the floor is a
			// weight gradient (ResNet-18 at 32x32: 512x512x3x3), they change nothing.
			require.LessOrEqual(t, after, before)
			require.LessOrEqual(t, auto, before)

			largest := func(opts ...ooc.Option) int {
				lo, hi := 0, c.maxBatch+1 // lo plans (0: none known), hi does not
				for hi-lo > 1 {
					mid := (lo + hi) / 2
					cfg := c.cfg
					cfg.Batch = mid
					b := zooNet(name, cfg)(tensor.Float32, 1)
					if _, err := ooc.Plan(b.g, append([]ooc.Option{ooc.WithBudget(c.budget)}, opts...)...); err == nil {
						lo = mid
					} else {
						hi = mid
					}
				}
				return lo
			}
			whole, tiled, autoBatch := largest(ooc.WithWorkspaceLimit(0)), largest(ooc.WithWorkspaceLimit(1)), largest()
			t.Logf("%s %dx%d float32 in %d MiB: largest batch %d with whole-image workspaces, %d with tiles, %d automatic (%v)",
				c.model, c.cfg.Height, c.cfg.Width, c.budget>>20, whole, tiled, autoBatch, time.Since(start))
			require.GreaterOrEqual(t, tiled, whole)
			require.GreaterOrEqual(t, autoBatch, whole)
		})
	}
}
