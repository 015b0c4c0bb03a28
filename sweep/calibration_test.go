package sweep

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCalibration re-derives vm.Efficiency: the simulated in-core ResNet-50
// at 224x224, batch 128, on v100-nvlink must train at the paper's 492
// images/s. If the cost model changes, this test says by how much the
// constant must move; it is the only figure the simulator is fitted to.
func TestCalibration(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ResNet-50 at batch 128 (a few seconds); skipped in -short")
	}
	rs, err := Run(Config{Model: "resnet50", Image: 224, Classes: 1000, Batches: []int{128},
		Device: "sim:v100-nvlink", Schedulers: []string{"baseline"}, Allocators: []string{"bestfit"}})
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.True(t, rs[0].OK, rs[0].Error)
	t.Logf("simulated in-core ResNet-50, batch 128, v100-nvlink: %.1f images/s (paper: 492)", rs[0].IPS)
	require.Less(t, math.Abs(rs[0].IPS-492)/492, 0.01)
}
