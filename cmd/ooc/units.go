package main

import (
	"fmt"
	"strconv"
	"strings"
)

// parseBytes reads "1536", "512KiB", "64MiB", "16GiB", "2GB" (decimal units too).
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
	}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("%q is not a byte size (e.g. 512MiB, 16GiB)", s)
	}
	return int64(f * float64(mult)), nil
}

// budgetSpec is a budget given in bytes or as a percentage of the in-core peak.
type budgetSpec struct {
	bytes   int64
	percent float64 // > 0 when given as "N%"
}

func parseBudget(s string) (budgetSpec, error) {
	if strings.HasSuffix(s, "%") {
		p, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
		if err != nil || p <= 0 {
			return budgetSpec{}, fmt.Errorf("budget %q: want a positive percentage of the in-core peak, e.g. 50%%", s)
		}
		return budgetSpec{percent: p}, nil
	}
	b, err := parseBytes(s)
	return budgetSpec{bytes: b}, err
}

// resolve turns the spec into bytes given the in-core peak.
func (b budgetSpec) resolve(peak int64) int64 {
	if b.percent > 0 {
		return int64(float64(peak) * b.percent / 100)
	}
	return b.bytes
}

func formatBytes(n int64) string {
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
