package ooc

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorgonia-ooc/outofcore/models"
)

// Every release rule of step 2 plans tapes the verifier accepts, at the
// same budgets as the paper's rule: which pending swap-out goes first
// changes what crosses the link, not whether the budget can be met (with
// nothing pending every rule falls back on the same eviction).
func TestWindowReleaseRules(t *testing.T) {
	m, err := models.Build("smallcnn", models.Config{Batch: 8, Channels: 3, Height: 16, Width: 16, Classes: 4, Seed: 7})
	require.NoError(t, err)
	tr, err := NewTrace(m.Graph)
	require.NoError(t, err)
	peak, err := tracePeak(tr)
	require.NoError(t, err)
	for _, pct := range []int64{20, 30, 50, 70, 90} {
		budget := peak * pct / 100
		_, paperErr := planWindow(tr, budget, AutoWindow(budget), releaseOldest, nil)
		for _, rule := range []release{releaseOldest, releaseFurthest, releaseFit, releaseCapped} {
			t.Run(fmt.Sprintf("rule%d/%d%%", rule, pct), func(t *testing.T) {
				s, err := planWindow(tr, budget, AutoWindow(budget), rule, nil)
				require.Equal(t, paperErr == nil, err == nil, "feasible with the paper's rule: %v; with this one: %v", paperErr, err)
				if err != nil {
					var be *BudgetError
					require.ErrorAs(t, err, &be, "an infeasible budget is reported as such")
					return
				}
				prog, err := Lower(tr, s)
				require.NoError(t, err)
				got, err := Verify(prog, budget)
				require.NoError(t, err)
				require.LessOrEqual(t, got, budget)
			})
		}
	}
}
