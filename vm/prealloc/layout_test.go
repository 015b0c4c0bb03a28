package prealloc

import (
	"encoding/binary"
	"math/rand"
	"testing"
)

// copyLayout walks trailing axes that both sides store as one run as a single run; every
// element must still land where the element-by-element definition puts it, for views whose
// axes merge, partly merge and do not (permuted, strided, padded, size-1 and broadcast axes).
func TestCopyLayoutMergedRuns(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 300; trial++ {
		d := 1 + rng.Intn(4)
		shape := make([]int, d)
		for i := range shape {
			shape[i] = 1 + rng.Intn(4)
		}
		src, srcN := randomLayout(rng, shape)
		if rng.Intn(4) == 0 {
			src.strides[rng.Intn(d)] = 0 // a broadcast axis
		}
		dst, dstN := randomLayout(rng, shape)
		src.data = make([]byte, 4*srcN)
		for i := 0; i < srcN; i++ {
			binary.LittleEndian.PutUint32(src.data[4*i:], uint32(i+1))
		}
		dst.data = make([]byte, 4*dstN)
		want := make([]byte, 4*dstN)
		// The definition: every index, its source element to its destination.
		idx := make([]int, d)
		for {
			so, do := 0, 0
			for i := range idx {
				so += idx[i] * src.strides[i]
				do += idx[i] * dst.strides[i]
			}
			copy(want[4*do:4*do+4], src.data[4*so:4*so+4])
			k := d - 1
			for ; k >= 0; k-- {
				if idx[k]++; idx[k] < shape[k] {
					break
				}
				idx[k] = 0
			}
			if k < 0 {
				break
			}
		}
		if err := copyLayout(dst, src); err != nil {
			t.Fatalf("shape %v src strides %v dst strides %v: %v", shape, src.strides, dst.strides, err)
		}
		if string(dst.data) != string(want) {
			t.Fatalf("shape %v src strides %v dst strides %v: elements land elsewhere", shape, src.strides, dst.strides)
		}
	}
}

// randomLayout is a layout of shape over a larger buffer, row-major in a padded box with its
// axes permuted or not, and the buffer's length in elements.
func randomLayout(rng *rand.Rand, shape []int) (layout, int) {
	d := len(shape)
	box := make([]int, d)
	for i := range box {
		box[i] = shape[i] + rng.Intn(2) // padding: runs that do not merge
	}
	perm := rng.Perm(d)
	if rng.Intn(2) == 0 {
		for i := range perm {
			perm[i] = i // plain order: runs that merge
		}
	}
	strides := make([]int, d)
	acc := 1
	for i := d - 1; i >= 0; i-- {
		strides[perm[i]] = acc
		acc *= box[perm[i]]
	}
	return layout{es: 4, shape: shape, strides: strides}, acc
}
