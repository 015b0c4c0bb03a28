package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// Without PyTorch the command skips, naming the install command.
func TestSkipsWithoutTorch(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-python", "/nonexistent/python3"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), installHint) {
		t.Errorf("output %q does not name %q", out.String(), installHint)
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-rounds", "0"}, {"-malloc", "jemalloc"}, {"-steps", "-1"}, {"-omp", "busy"}} {
		if err := run(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
