package datasets

import (
	"fmt"
	"math"
	"testing"
)

func TestSyntheticDeterministic(t *testing.T) {
	cfg := SyntheticConfig{Examples: 50, Channels: 2, Height: 5, Width: 7, Classes: 4, Seed: 3}
	a, _ := Synthetic(cfg)
	b, _ := Synthetic(cfg)
	cfg.Split = Test
	c, _ := Synthetic(cfg)
	for i := 0; i < 50; i++ {
		ea, _ := a.Load(i)
		eb, _ := b.Load(i)
		ec, _ := c.Load(i)
		if fmt.Sprint(ea) != fmt.Sprint(eb) {
			t.Fatalf("example %d differs between identical datasets", i)
		}
		if fmt.Sprint(ea.Image) == fmt.Sprint(ec.Image) {
			t.Fatalf("example %d is the same in train and test", i)
		}
		if ea.Label < 0 || ea.Label >= 4 || len(ea.Image) != 70 {
			t.Fatalf("example %d: label %d, %d values", i, ea.Label, len(ea.Image))
		}
		for _, v := range ea.Image {
			if v < 0 || v > 1 {
				t.Fatalf("value %v outside [0,1]", v)
			}
		}
	}
}

// TestSyntheticLearnable: a nearest-class-mean classifier fitted on the train
// split must classify the test split well, or models could not learn it.
func TestSyntheticLearnable(t *testing.T) {
	cfg := SyntheticConfig{Examples: 400, Channels: 3, Height: 16, Width: 16, Classes: 10, Seed: 7}
	train, _ := Synthetic(cfg)
	cfg.Split, cfg.Examples = Test, 200
	test, _ := Synthetic(cfg)
	d := 3 * 16 * 16
	means := make([][]float64, 10)
	counts := make([]int, 10)
	for k := range means {
		means[k] = make([]float64, d)
	}
	for i := 0; i < 400; i++ {
		ex, _ := train.Load(i)
		counts[ex.Label]++
		for j, v := range ex.Image {
			means[ex.Label][j] += float64(v)
		}
	}
	for k := range means {
		if counts[k] == 0 {
			t.Fatalf("class %d never drawn", k)
		}
		for j := range means[k] {
			means[k][j] /= float64(counts[k])
		}
	}
	correct := 0
	for i := 0; i < 200; i++ {
		ex, _ := test.Load(i)
		best, bestD := -1, math.Inf(1)
		for k := range means {
			s := 0.0
			for j, v := range ex.Image {
				s += (float64(v) - means[k][j]) * (float64(v) - means[k][j])
			}
			if s < bestD {
				best, bestD = k, s
			}
		}
		if best == ex.Label {
			correct++
		}
	}
	if correct < 190 {
		t.Errorf("nearest mean gets %d/200 test examples", correct)
	}
}

func TestSyntheticSegmentation(t *testing.T) {
	ds, err := Synthetic(SyntheticConfig{Examples: 20, Channels: 3, Height: 12, Width: 12, Classes: 3, Seed: 1, Segmentation: true})
	if err != nil {
		t.Fatal(err)
	}
	if !ds.Info().Segmentation {
		t.Fatal("Info().Segmentation is false")
	}
	fg := 0
	for i := 0; i < 20; i++ {
		ex, _ := ds.Load(i)
		if ex.Label != -1 || len(ex.Mask) != 144 {
			t.Fatalf("label %d, mask %d", ex.Label, len(ex.Mask))
		}
		for _, v := range ex.Mask {
			if v < 0 || v >= 3 {
				t.Fatalf("class %d", v)
			}
			if v > 0 {
				fg++
			}
		}
	}
	if fg == 0 || fg == 20*144 {
		t.Errorf("%d foreground pixels of %d", fg, 20*144)
	}
	// Tiny images and a single class still work.
	ds, err = Synthetic(SyntheticConfig{Examples: 2, Channels: 1, Height: 1, Width: 1, Classes: 1, Segmentation: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ds.Load(1); err != nil {
		t.Fatal(err)
	}
}

func TestSyntheticConfigErrors(t *testing.T) {
	for _, cfg := range []SyntheticConfig{
		{Examples: 0, Channels: 1, Height: 1, Width: 1, Classes: 1},
		{Examples: 1, Channels: 0, Height: 1, Width: 1, Classes: 1},
		{Examples: 1, Channels: 1, Height: 1 << 14, Width: 1 << 14, Classes: 1},
		{Examples: 1, Channels: 1, Height: 1, Width: 1, Classes: 0},
		{Examples: 1, Channels: 1, Height: 1, Width: 1, Classes: 1, Split: 5},
	} {
		if _, err := Synthetic(cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}
