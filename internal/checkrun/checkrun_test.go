package checkrun

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	for _, c := range []struct {
		name    string
		check   func(TB)
		timeout bool   // the check must end with ErrTimeout
		err     string // else the error must contain this ("" : none)
	}{
		{"passes", func(t TB) { t.Helper(); t.Logf("fine") }, false, ""},
		{"Errorf goes on", func(t TB) { t.Errorf("a %d", 1); t.Errorf("b") }, false, "a 1; b"},
		{"Fatal stops", func(t TB) { t.Fatal("stop", 2); t.Errorf("not reached") }, false, "stop 2"},
		{"Fatalf stops", func(t TB) { t.Fatalf("x=%d", 3); t.Errorf("not reached") }, false, "x=3"},
		{"a panic is a failure", func(t TB) { panic("boom") }, false, "panic: boom"},
		// A check that only ever calls Helper stops once its deadline passes.
		{"the deadline stops Helper", func(t TB) {
			for start := time.Now(); time.Since(start) < 5*time.Second; {
				t.Helper()
				time.Sleep(time.Millisecond)
			}
			t.Errorf("not reached: Helper never stopped the check")
		}, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			cleaned := false
			res := Run(ctx, func(tb TB) {
				tb.Cleanup(func() { cleaned = true })
				c.check(tb)
			})
			if !cleaned {
				t.Error("the cleanup did not run")
			}
			switch {
			case c.timeout:
				if !errors.Is(res.Err, ErrTimeout) {
					t.Errorf("Err = %v, want ErrTimeout", res.Err)
				}
			case c.err == "":
				if res.Err != nil {
					t.Errorf("Err = %v, want none", res.Err)
				}
			case res.Err == nil || !strings.Contains(res.Err.Error(), c.err) || strings.Contains(res.Err.Error(), "not reached"):
				t.Errorf("Err = %v, want %q", res.Err, c.err)
			}
		})
	}
}
