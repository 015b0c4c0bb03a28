package vm

import (
	"fmt"
	"slices"
	"testing"
	"unsafe"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

type reuse int

const (
	no reuse = iota
	yes
	maybe
)

// TestHeaderReuse: a slot hands back its header only while the header still
// is exactly what denseOver builds over the same bytes; an op that reshaped,
// transposed, sliced or masked it in place, or other bytes, dtype or shape,
// get a fresh one with the right geometry.
func TestHeaderReuse(t *testing.T) {
	buf := make([]float64, 24)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(buf)*8)
	other := make([]byte, len(b))
	shape := tensor.Shape{2, 3, 4}
	for _, c := range []struct {
		name  string
		touch func(d *tensor.Dense) error // what an op did to the header
		b     []byte
		dt    tensor.Dtype
		shape tensor.Shape
		reuse reuse
	}{
		{"untouched", nil, b, tensor.Float64, shape, yes},
		{"data written", func(d *tensor.Dense) error { d.Float64s()[5] = 7; return nil }, b, tensor.Float64, shape, yes},
		{"reshaped", func(d *tensor.Dense) error { return d.Reshape(6, 4) }, b, tensor.Float64, shape, no},
		{"reshaped to the same total", func(d *tensor.Dense) error { return d.Reshape(4, 3, 2) }, b, tensor.Float64, shape, no},
		{"transposed", func(d *tensor.Dense) error { return d.T() }, b, tensor.Float64, shape, no},
		// T's reverse restores the header it backed up (tensor's UT): the
		// very header denseOver built, on its own shape and strides.
		{"transposed back", func(d *tensor.Dense) error {
			if err := d.T(); err != nil {
				return err
			}
			return d.T(2, 1, 0)
		}, b, tensor.Float64, shape, yes},
		// Reshaping back gives the same numbers on arrays from tensor's
		// pool, where the old ones went (often the same arrays again, then
		// owned by the header): reused or not, the geometry must be right.
		{"reshaped back", func(d *tensor.Dense) error {
			if err := d.Reshape(6, 4); err != nil {
				return err
			}
			return d.Reshape(2, 3, 4)
		}, b, tensor.Float64, shape, maybe},
		{"sliced", func(d *tensor.Dense) error {
			v, err := d.Slice(tensor.S(0, 1))
			if err != nil {
				return err
			}
			*d = *v.(*tensor.Dense)
			return nil
		}, b, tensor.Float64, shape, no},
		{"masked", func(d *tensor.Dense) error { d.ResetMask(false); return nil }, b, tensor.Float64, shape, no},
		{"other bytes", nil, other, tensor.Float64, shape, no},
		{"shorter bytes", nil, b[:96], tensor.Float64, tensor.Shape{12}, no},
		{"other shape", nil, b, tensor.Float64, tensor.Shape{4, 6}, no},
		{"other dtype", nil, b, tensor.Float32, tensor.Shape{2, 3, 8}, no},
	} {
		t.Run(c.name, func(t *testing.T) {
			var h header
			first := h.over(b, tensor.Float64, shape)
			if c.touch != nil {
				if err := c.touch(first); err != nil {
					t.Fatal(err)
				}
			}
			got := h.over(c.b, c.dt, c.shape)
			if reused := got == first; c.reuse != maybe && reused != (c.reuse == yes) {
				t.Fatalf("header reused: %v, want %v", reused, c.reuse == yes)
			}
			want := denseOver(c.b, c.dt, c.shape)
			if !slices.Equal(got.Shape(), want.Shape()) || !slices.Equal(got.Strides(), want.Strides()) ||
				got.Dtype() != want.Dtype() || !sameMemory(got.Raw, c.b) || len(got.Raw) != len(c.b) ||
				got.IsMaterializable() || got.IsMasked() {
				t.Fatalf("header %v strides %v over %d bytes; denseOver gives %v strides %v over %d",
					got.Shape(), got.Strides(), len(got.Raw), want.Shape(), want.Strides(), len(c.b))
			}
			if again := h.over(c.b, c.dt, c.shape); again != got {
				t.Fatal("an untouched new header was not kept")
			}
		})
	}
}

// TestHeaderNilSlot: a nil slot (hostBytes' reads) always builds afresh.
func TestHeaderNilSlot(t *testing.T) {
	b := make([]byte, 16)
	var h *header
	if h.over(b, tensor.Float32, tensor.Shape{4}) == h.over(b, tensor.Float32, tensor.Shape{4}) {
		t.Fatal("a nil slot reused a header")
	}
}

// TestLabel: an allocation's label reads in its errors as the string it
// replaced ("workspace of "+name).
func TestLabel(t *testing.T) {
	for _, c := range []struct {
		l    label
		want string
	}{{label{"workspace of ", "conv1"}, "workspace of conv1"}, {named("fc.W"), "fc.W"}} {
		if got := fmt.Sprintf("%s needs", c.l); got != c.want+" needs" {
			t.Errorf("%#v formats as %q, want %q", c.l, got, c.want+" needs")
		}
	}
}

// TestScalarSlab: every scalar the slab hands out is memory of its own, aligned for its
// dtype, never handed out again (a script keeps last run's loss while this run's is
// written), and slabRuns runs' worth of them cost one allocation.
func TestScalarSlab(t *testing.T) {
	s := scalarSlab{per: 4}
	seen := map[uintptr]bool{}
	dts := []tensor.Dtype{tensor.Float64, tensor.Float32, tensor.Int, tensor.Uint8, tensor.Bool}
	for i := 0; i < 11; i++ {
		dt := dts[i%len(dts)]
		v, err := s.next(dt)
		if err != nil {
			t.Fatal(err)
		}
		if v.Dtype() != dt {
			t.Fatalf("piece %d is %v, want %v", i, v.Dtype(), dt)
		}
		b, err := rawBytes(v)
		if err != nil {
			t.Fatal(err)
		}
		p := uintptr(unsafe.Pointer(&b[0]))
		if seen[p] {
			t.Fatalf("piece %d at %#x was handed out before", i, p)
		}
		if p%8 != 0 {
			t.Fatalf("piece %d at %#x is not 8-byte aligned", i, p)
		}
		seen[p] = true
	}
	fresh := scalarSlab{per: 4}
	if allocs := testing.AllocsPerRun(5, func() {
		for range slabRuns * fresh.per {
			if _, err := fresh.next(tensor.Float32); err != nil {
				t.Fatal(err)
			}
		}
	}); allocs != 1 {
		t.Errorf("%d runs of %d scalars made %v allocations, want 1", slabRuns, fresh.per, allocs)
	}
}

// TestLetScalar: letScalar binds as UnsafeLet does (the node's value is the
// one bound, a dual value keeps its gradient and takes the new value) and
// allocates nothing, which UnsafeLet's shape check did.
func TestLetScalar(t *testing.T) {
	g := gorgonia.NewGraph()
	x := gorgonia.NewScalar(g, gorgonia.Float64, gorgonia.WithName("x"), gorgonia.WithValue(3.0))
	y := gorgonia.Must(gorgonia.Mul(x, x))
	cost := gorgonia.Must(gorgonia.Add(y, x))
	if _, err := gorgonia.Grad(cost, x); err != nil {
		t.Fatal(err)
	}
	tm := gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(x))
	defer tm.Close()
	if err := tm.RunAll(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		n    *gorgonia.Node
		dual bool
	}{{"plain", y, false}, {"dual", x, true}} {
		t.Run(c.name, func(t *testing.T) {
			v := gorgonia.NewF64(7)
			if err := letScalar(c.n, v); err != nil {
				t.Fatal(err)
			}
			if got := c.n.Value(); got != gorgonia.Value(v) {
				t.Fatalf("%s's value is %v (%p), want the value bound, %v (%p)", c.n.Name(), got, got, v, v)
			}
			if got := dualGradient(c.n) != nil; got != c.dual {
				t.Errorf("%s bound to a dual value: %v, want %v", c.n.Name(), got, c.dual)
			}
			if !c.dual {
				w := gorgonia.NewF64(8)
				if allocs := testing.AllocsPerRun(10, func() { _ = letScalar(c.n, w) }); allocs != 0 {
					t.Errorf("letScalar made %v allocations, want 0", allocs)
				}
			}
		})
	}
	if err := letScalar(y, gorgonia.NewF32(1)); err == nil {
		t.Error("a float32 let to a float64 node was taken")
	}
}
