package ooc_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorgonia-ooc/outofcore/ooc"
)

// TestTransferCapOption: Greedy, DynProg and Window with Cap, on two
// replicas sharing a switch (simulated, titanxp-switch), swap no layer
// both replicas swap and still fit the budget (the step runs), where the
// plain planners swap the same layers on both; on one device the cap
// changes nothing.
func TestTransferCapOption(t *testing.T) {
	for _, tc := range []struct {
		plain, capped ooc.Scheduler
		name          string
	}{
		{ooc.Greedy{}, ooc.Greedy{Cap: true}, "greedy-cap"},
		{ooc.DynProg{}, ooc.DynProg{Cap: true}, "dynprog-cap"},
		{ooc.Window{}, ooc.Window{Cap: true}, "window-cap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.name, tc.capped.Name())
			p, _ := simReplicas(t, "smallcnn", "titanxp-switch", 2, tc.capped, 80)
			a, b := swapped(p.Machines()[0]), swapped(p.Machines()[1])
			require.NotEmpty(t, a, "replica 0 swaps nothing")
			require.NotEmpty(t, b, "replica 1 swaps nothing")
			for v := range a {
				require.False(t, b[v], "both replicas swap %s", v)
			}
			plain, _ := simReplicas(t, "smallcnn", "titanxp-switch", 2, tc.plain, 80)
			pa, pb := swapped(plain.Machines()[0]), swapped(plain.Machines()[1])
			require.Equal(t, pa, pb, "without the cap both replicas swap the same layers")
			one, _ := simReplicas(t, "smallcnn", "titanxp-switch", 1, tc.capped, 80)
			alone, _ := simReplicas(t, "smallcnn", "titanxp-switch", 1, tc.plain, 80)
			require.Equal(t, alone.Machines()[0].Program().Instrs, one.Machines()[0].Program().Instrs)
		})
	}
}
