package train

import (
	"math"
	"strings"
	"testing"
)

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"0", 0, false},
		{"1536", 1536, false},
		{"512KiB", 512 << 10, false},
		{"64MiB", 64 << 20, false},
		{"1.5GiB", 3 << 29, false},
		{"2GB", 2e9, false},
		{" 7 B ", 7, false},
		{"", 0, true},
		{"lots", 0, true},
		{"-1MiB", 0, true},
		{"NaN", 0, true},
		{"Inf", 0, true},
		{"1e30TiB", 0, true},
		{"64XB", 0, true},
	} {
		got, err := ParseBytes(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.err)
		}
		if err != nil && !strings.Contains(err.Error(), tc.in) {
			t.Errorf("ParseBytes(%q): error %q does not quote the input", tc.in, err)
		}
	}
}

func TestParseBudget(t *testing.T) {
	for _, tc := range []struct {
		in   string
		peak int64
		want int64
		err  string
	}{
		{"60%", 1000, 600, ""},
		{"25.5%", 1000, 255, ""},
		{"150%", 1000, 1500, ""},
		{"64MiB", 1, 64 << 20, ""},
		{"0", 1000, 0, ""},
		{"0%", 0, 0, "positive percentage"},
		{"-5%", 0, 0, "positive percentage"},
		{"x%", 0, 0, "positive percentage"},
		{"NaN%", 0, 0, "positive percentage"},
		{"sixty", 0, 0, `"sixty" is not a byte size`},
	} {
		b, err := ParseBudget(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseBudget(%q): error %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseBudget(%q): %v", tc.in, err)
			continue
		}
		if got := b.Resolve(tc.peak); got != tc.want {
			t.Errorf("ParseBudget(%q).Resolve(%d) = %d, want %d", tc.in, tc.peak, got, tc.want)
		}
	}
}

func TestLearningRate(t *testing.T) {
	for _, c := range []struct {
		drops []int
		epoch int
		want  float64
	}{{nil, 3, 1e-3}, {[]int{2}, 2, 1e-3}, {[]int{2}, 3, 1e-4}, {[]int{1, 2}, 3, 1e-5}} {
		if got := learningRate(1e-3, c.drops, c.epoch); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("drops %v, epoch %d: rate %v, want %v", c.drops, c.epoch, got, c.want)
		}
	}
}
