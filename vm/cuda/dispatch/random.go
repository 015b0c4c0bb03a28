package dispatch

import (
	"encoding/binary"
	"fmt"
	"math"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// gorgonia's random nodes (UniformRandomNode, GaussianRandomNode,
// BinomialRandomNode: randomOp) seed a new generator from the clock at
// every Do, so no two runs agree on any device. Each run calls the op's own
// Do on the host, as the CPU device does, and uploads the values: the
// device's values are then exactly the op's draws.

func planRandom(_ *Runner, c fn) (plan, error) {
	if len(c.ins) != 0 {
		return plan{}, c.unsupported("a random node with operands")
	}
	n := total(c.out.Shape)
	var buf []byte
	return plan{run: func(r *Runner, a addrs) error {
		v, err := c.f.Op.Do()
		if err != nil {
			return fmt.Errorf("dispatch: random node %s: %w", c.out.Name, err)
		}
		if buf, err = valueBytes(buf[:0], v, c.out.Dtype, n); err != nil {
			return fmt.Errorf("dispatch: random node %s: %w", c.out.Name, err)
		}
		return r.upload(a.out, buf)
	}}, nil
}

// valueBytes appends a host value's n elements of dtype dt to b, little
// endian.
func valueBytes(b []byte, v gorgonia.Value, dt tensor.Dtype, n int64) ([]byte, error) {
	var f64 []float64
	var f32 []float32
	switch x := v.(type) {
	case *gorgonia.F64:
		f64 = []float64{float64(*x)}
	case *gorgonia.F32:
		f32 = []float32{float32(*x)}
	case *tensor.Dense:
		switch d := x.Data().(type) {
		case []float64:
			f64 = d
		case []float32:
			f32 = d
		case float64:
			f64 = []float64{d}
		case float32:
			f32 = []float32{d}
		}
	}
	switch {
	case dt == tensor.Float64 && int64(len(f64)) == n:
		for _, f := range f64 {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
		}
	case dt == tensor.Float32 && int64(len(f32)) == n:
		for _, f := range f32 {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
		}
	default:
		return nil, fmt.Errorf("Do gave a %T, want %d %v values", v, n, dt)
	}
	return b, nil
}
