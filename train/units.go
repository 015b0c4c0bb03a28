package train

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseBytes reads "1536", "512KiB", "64MiB", "1.5GiB", "2GB" (decimal units too).
func ParseBytes(s string) (int64, error) {
	orig := s
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   float64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
	}
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, fmt.Errorf("%q is not a byte size (e.g. 1048576, 512MiB, 16GiB)", orig)
	}
	b := f * mult
	if b >= math.MaxInt64 {
		return 0, fmt.Errorf("%q is too large a byte size", orig)
	}
	return int64(b), nil
}

// Budget is a device-memory budget given in bytes or as a percentage of the
// in-core peak (ooc.Plan with ooc.Baseline). The zero Budget means the
// device's capacity.
type Budget struct {
	Bytes   int64   `json:"bytes,omitempty"`
	Percent float64 `json:"percent,omitempty"` // > 0 when given as "N%"
}

// ParseBudget reads "64MiB", "1048576" or "50%".
func ParseBudget(s string) (Budget, error) {
	t := strings.TrimSpace(s)
	if strings.HasSuffix(t, "%") {
		p, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(t, "%")), 64)
		if err != nil || math.IsNaN(p) || math.IsInf(p, 0) || p <= 0 {
			return Budget{}, fmt.Errorf("-budget %q: want bytes (e.g. 64MiB) or a positive percentage of the in-core peak (e.g. 50%%)", s)
		}
		return Budget{Percent: p}, nil
	}
	b, err := ParseBytes(t)
	if err != nil {
		return Budget{}, fmt.Errorf("-budget: %w, or a percentage of the in-core peak (e.g. 50%%)", err)
	}
	return Budget{Bytes: b}, nil
}

// Resolve turns the budget into bytes given the in-core peak.
func (b Budget) Resolve(peak int64) int64 {
	if b.Percent > 0 {
		return int64(float64(peak) * b.Percent / 100)
	}
	return b.Bytes
}

func (b Budget) String() string {
	if b.Percent > 0 {
		return strconv.FormatFloat(b.Percent, 'g', -1, 64) + "%"
	}
	if b.Bytes == 0 {
		return "device capacity"
	}
	return FormatBytes(b.Bytes)
}

// Flag is the budget as a -budget flag takes it.
func (b Budget) Flag() string {
	if b.Percent > 0 {
		return b.String()
	}
	return strconv.FormatInt(b.Bytes, 10)
}

// FormatBytes prints n as "1.50 MiB".
func FormatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// withCommas prints 27962 as 27,962.
func withCommas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
