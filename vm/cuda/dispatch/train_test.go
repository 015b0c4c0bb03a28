package dispatch_test

import (
	"math/rand"
	"testing"

	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models"
)

// TestSmallCNNStep: smallcnn trains three steps on the fake CUDA device
// (every op through the kernels' host builds via cuLaunchKernel, GEMMs in the
// fake cuBLAS) and matches the CPU device step by step: loss, gradients,
// batch-norm running statistics and weights after an Adam step.
func TestSmallCNNStep(t *testing.T) {
	d := openFake(t)
	for _, tc := range []struct {
		dt  tensor.Dtype
		tol float64
	}{{tensor.Float64, 1e-12}, {tensor.Float32, 1e-5}} {
		cfg := models.Config{Batch: 2, Channels: 3, Height: 8, Width: 8, Classes: 10, Dtype: tc.dt, Seed: 3}
		p := newPair(t, d, zooCase{Name: "smallcnn", Cfg: cfg})
		rng := rand.New(rand.NewSource(1))
		for s := 0; s < 3; s++ {
			p.Step(t, rng)
		}
		p.Check(t, "smallcnn "+tc.dt.String(), tc.tol)
	}
}
