package checkrun_test

import (
	"context"
	"fmt"

	"github.com/gorgonia-ooc/outofcore/internal/checkrun"
)

// checkSum is a check written as a test helper: a test passes its *testing.T.
func checkSum(t checkrun.TB, got, want int) {
	t.Helper()
	if got != want {
		t.Fatalf("sum is %d, want %d", got, want)
	}
}

func ExampleRun() {
	res := checkrun.Run(context.Background(), func(t checkrun.TB) { checkSum(t, 2+2, 4) })
	fmt.Println(res.Err)
	res = checkrun.Run(context.Background(), func(t checkrun.TB) { checkSum(t, 2+2, 5) })
	fmt.Println(res.Err)
	// Output:
	// <nil>
	// sum is 4, want 5
}
