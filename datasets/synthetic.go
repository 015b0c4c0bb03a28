package datasets

import (
	"fmt"
	"math"
)

// SyntheticConfig describes a generated dataset. Every example is a pure
// function of (Seed, Split, index), so the data needs no storage and two runs
// with the same seed see the same pixels.
type SyntheticConfig struct {
	Examples                         int
	Channels, Height, Width, Classes int
	Seed                             int64
	// Split selects an independent set of examples drawn from the same classes:
	// the class patterns depend on Seed only, so a model trained on Train
	// generalises to Test.
	Split Split
	// Segmentation makes examples carry masks: rectangles of random classes on
	// a class-0 background, each class with its own colour.
	Segmentation bool
}

// protoGrid is the coarse random grid from which a class pattern is upsampled;
// smooth patterns are what convolutions learn quickly.
const protoGrid = 4

type synthetic struct {
	cfg    SyntheticConfig
	protos []float64 // Classes x Channels x protoGrid x protoGrid
	colors []float64 // Classes x Channels (segmentation)
}

// Synthetic returns a generated dataset. Classification examples are a
// class-specific smooth pattern plus per-example noise, learnable by any of
// the model zoo's networks in a few steps.
func Synthetic(cfg SyntheticConfig) (Dataset, error) {
	switch {
	case cfg.Examples <= 0:
		return nil, fmt.Errorf("datasets: synthetic: Examples must be positive, got %d", cfg.Examples)
	case cfg.Channels <= 0 || cfg.Height <= 0 || cfg.Width <= 0:
		return nil, fmt.Errorf("datasets: synthetic: image size %dx%dx%d must be positive", cfg.Channels, cfg.Height, cfg.Width)
	case int64(cfg.Channels)*int64(cfg.Height)*int64(cfg.Width) > maxPixels:
		return nil, fmt.Errorf("datasets: synthetic: image size %dx%dx%d too large", cfg.Channels, cfg.Height, cfg.Width)
	case cfg.Classes <= 0 || cfg.Classes > 1<<16:
		return nil, fmt.Errorf("datasets: synthetic: Classes must be in 1..65536, got %d", cfg.Classes)
	case int64(cfg.Classes)*int64(cfg.Channels) > 1<<20:
		// The class patterns are stored, Classes x Channels x 16 values.
		return nil, fmt.Errorf("datasets: synthetic: %d classes x %d channels too many", cfg.Classes, cfg.Channels)
	case cfg.Split != Train && cfg.Split != Test:
		return nil, fmt.Errorf("datasets: synthetic: unknown split %v", cfg.Split)
	}
	s := &synthetic{cfg: cfg}
	seed := uint64(cfg.Seed)
	if cfg.Segmentation {
		s.colors = make([]float64, cfg.Classes*cfg.Channels)
		for i := range s.colors {
			r := rng{mix(seed, tagColor, uint64(i))}
			s.colors[i] = 0.1 + 0.8*r.float64()
		}
	} else {
		g := protoGrid * protoGrid
		s.protos = make([]float64, cfg.Classes*cfg.Channels*g)
		for kc := 0; kc < cfg.Classes*cfg.Channels; kc++ {
			r := rng{mix(seed, tagProto, uint64(kc))}
			for j := 0; j < g; j++ {
				s.protos[kc*g+j] = r.float64()
			}
		}
	}
	return s, nil
}

func (s *synthetic) Info() Info {
	c := s.cfg
	return Info{Name: "synthetic", Split: c.Split, Examples: c.Examples, Classes: c.Classes,
		Channels: c.Channels, Height: c.Height, Width: c.Width, Segmentation: c.Segmentation}
}

func (s *synthetic) Load(i int) (Example, error) {
	c := s.cfg
	if err := checkIndex("synthetic", i, c.Examples); err != nil {
		return Example{}, err
	}
	r := rng{mix(uint64(c.Seed), tagExample, uint64(c.Split), uint64(i))}
	plane := c.Height * c.Width
	pix := make([]float32, c.Channels*plane)
	if c.Segmentation {
		mask := make([]int, plane)
		if c.Classes > 1 {
			for n := 1 + r.intn(3); n > 0; n-- {
				k := 1 + r.intn(c.Classes-1)
				rh := max(1, c.Height/4+r.intn(max(1, c.Height/4)+1))
				rw := max(1, c.Width/4+r.intn(max(1, c.Width/4)+1))
				y0, x0 := r.intn(c.Height-min(rh, c.Height)+1), r.intn(c.Width-min(rw, c.Width)+1)
				for y := y0; y < min(y0+rh, c.Height); y++ {
					for x := x0; x < min(x0+rw, c.Width); x++ {
						mask[y*c.Width+x] = k
					}
				}
			}
		}
		for ch := 0; ch < c.Channels; ch++ {
			for p := 0; p < plane; p++ {
				v := s.colors[mask[p]*c.Channels+ch] + 0.3*(r.float64()-0.5)
				pix[ch*plane+p] = clamp01(v)
			}
		}
		return Example{Image: pix, Channels: c.Channels, Height: c.Height, Width: c.Width, Label: -1, Mask: mask}, nil
	}
	label := r.intn(c.Classes)
	g := protoGrid * protoGrid
	for ch := 0; ch < c.Channels; ch++ {
		proto := s.protos[(label*c.Channels+ch)*g : (label*c.Channels+ch+1)*g]
		for y := 0; y < c.Height; y++ {
			gy, fy := gridCoord(y, c.Height)
			for x := 0; x < c.Width; x++ {
				gx, fx := gridCoord(x, c.Width)
				p00 := proto[gy*protoGrid+gx]
				p01 := proto[gy*protoGrid+gx+1]
				p10 := proto[(gy+1)*protoGrid+gx]
				p11 := proto[(gy+1)*protoGrid+gx+1]
				top := p00 + (p01-p00)*fx
				bot := p10 + (p11-p10)*fx
				v := 0.2 + 0.6*(top+(bot-top)*fy) + 0.4*(r.float64()-0.5)
				pix[ch*plane+y*c.Width+x] = clamp01(v)
			}
		}
	}
	return Example{Image: pix, Channels: c.Channels, Height: c.Height, Width: c.Width, Label: label}, nil
}

// gridCoord maps pixel i of n onto the prototype grid: cell index and fraction.
func gridCoord(i, n int) (int, float64) {
	if n == 1 {
		return 0, 0
	}
	p := float64(i) * float64(protoGrid-1) / float64(n-1)
	cell := int(math.Floor(p))
	if cell >= protoGrid-1 {
		cell = protoGrid - 2
	}
	return cell, p - float64(cell)
}

func clamp01(v float64) float32 {
	if v < 0 {
		return 0
	}
	if v > 1 {
		return 1
	}
	return float32(v)
}
