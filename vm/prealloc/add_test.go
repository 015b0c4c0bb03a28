package prealloc

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// a + b of two tensors runs through blas.Add (addVV): the bits of gorgonia's Do, NaN payloads
// included where both operands are NaN, for every special value against every other, in each
// place out may be (its own memory, over a, over b, a and b one tensor), over vector bodies and
// tails; and, unlike tensor's path, without allocating.
func TestAddVVSameBits(t *testing.T) {
	for _, dt := range floats {
		for _, n := range []int{1, 7, 100, 1027} {
			t.Run(fmt.Sprint(dt, n), func(t *testing.T) {
				g := G.NewGraph()
				a, b := input(g, dt, "a", n), input(g, dt, "b", n)
				node := G.Must(G.Add(a, b))
				x, y := specials(dt, n, 0), specials(dt, n, 1)
				ins := []G.Value{x, y}
				runBoth(t, node.Op(), ins, dt, tensor.Shape{n})
				checkInPlace(t, node.Op(), ins, 0, dt, tensor.Shape{n})
				checkInPlace(t, node.Op(), ins, 1, dt, tensor.Shape{n})

				f, ok := For(node.Op())
				require.True(t, ok)
				want, err := node.Op().Do(x.Clone().(*tensor.Dense), x.Clone().(*tensor.Dense))
				require.NoError(t, err)
				mine := x.Clone().(*tensor.Dense)
				require.NoError(t, f(mine, mine, mine))
				requireBits(t, want, mine)

				out := poisoned(dt, n)
				allocs := testing.AllocsPerRun(5, func() {
					if err := f(out, ins...); err != nil {
						t.Fatal(err)
					}
				})
				require.Zero(t, allocs, "allocations per a + b")
			})
		}
	}
}

// specials is n values cycling through the special ones (NaNs of several payloads and signs,
// infinities, zeros of both signs, subnormals), shifted by k so two of them pair every value
// with every other.
func specials(dt tensor.Dtype, n, k int) *tensor.Dense {
	v32 := []float32{math.Float32frombits(0x7fc00001), math.Float32frombits(0xffc00022), math.Float32frombits(0x7f800011),
		float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), math.Float32frombits(1), 1.5, -2.25, 3e38}
	v64 := []float64{math.Float64frombits(0x7ff8000000000001), math.Float64frombits(0xfff8000000000022), math.Float64frombits(0x7ff0000000000011),
		math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), math.Float64frombits(1), 1.5, -2.25, 1.7e308}
	t := tensor.New(tensor.Of(dt), tensor.WithShape(n))
	for i := 0; i < n; i++ {
		j := i % len(v32)
		if k > 0 {
			j = (i / len(v32)) % len(v32)
		}
		if dt == tensor.Float32 {
			t.Float32s()[i] = v32[j]
		} else {
			t.Float64s()[i] = v64[j]
		}
	}
	return t
}
