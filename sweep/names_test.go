package sweep

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Every scheduler name the tables and commands accept resolves to the
// scheduler of that name, ooc's default (auto) included; others are refused.
func TestSchedulerNamed(t *testing.T) {
	for _, name := range AllSchedulerNames() {
		sc, err := SchedulerNamed(name)
		require.NoError(t, err, name)
		require.Equal(t, name, sc.Name())
	}
	require.Contains(t, AllSchedulerNames(), "auto")
	_, err := SchedulerNamed("fastest")
	require.ErrorContains(t, err, `unknown scheduler "fastest"`)
}
