package kernelcheck

import (
	"fmt"
	"math/rand"

	G "gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// caseGorgoniaGroupNorm: g_groupnorm and g_groupnorm_grad against
// gorgonia's GroupNormOp and groupNormDiffOp, bit for bit, for rows short
// enough for one chunk and long enough for the op's merge stack (and its
// fold) at depths 2 and 5, with a tail past the last 8-lane vector.
func caseGorgoniaGroupNorm[T float32 | float64](t TB, m *Mem) {
	for _, c := range []struct {
		shape  []int
		groups int
	}{{[]int{2, 6, 5, 7}, 3}, {[]int{2, 4, 16, 16}, 2}, {[]int{1, 8, 30, 30}, 2}, {[]int{3, 4, 3, 3}, 4}} {
		testGGroupNorm[T](t, m, c.shape, c.groups)
	}
}

func testGGroupNorm[T float32 | float64](t TB, m *Mem, shape []int, groups int) {
	s := suffix[T]()
	name := fmt.Sprintf("%v groups %d %s", shape, groups, s)
	rng := rand.New(rand.NewSource(37))
	x := randn[T](rng, prod(shape), 2)
	for i := range x {
		x[i] += 3 // a mean far from 0: the moments' merges matter
	}
	g := G.NewGraph()
	xn := input[T](g, "x", shape...)
	if _, err := G.GroupNorm(xn, input[T](g, "scale", shape...), input[T](g, "bias", shape...), groups, shape[1], 1e-5); err != nil {
		t.Fatal(err)
	}
	var gn *G.Node
	for _, n := range g.AllNodes() {
		if _, ok := n.Op().(*G.GroupNormOp); ok {
			gn = n
		}
	}
	if gn == nil {
		t.Fatal("no GroupNormOp in gorgonia.GroupNorm's graph")
	}
	dyn := input[T](g, "dy", shape...)
	grads, err := gn.Op().(G.SDOp).SymDiff(G.Nodes{xn}, gn, dyn)
	if err != nil {
		t.Fatal(err)
	}
	dy := randn[T](rng, len(x), 1)
	want := data[T](t, do(t, gn.Op(), dense(x, shape...)))
	wantDX := data[T](t, do(t, grads[0].Op(), dense(x, shape...), dense(dy, shape...)))
	rows, d, plane := shape[0]*groups, shape[1]/groups, prod(shape[2:])
	geo := []kernels.Arg{kernels.Int(int64(rows)), kernels.Int(int64(d)), kernels.Int(int64(plane)), kernels.Float(1e-5)}
	yb := newOut[T](m, len(x))
	m.launch("g_groupnorm_"+s, append([]kernels.Arg{p(yb), p(put(m, x))}, geo...)...)
	sameBits(t, m, "g_groupnorm "+name, get[T](yb), want)
	dx := newOut[T](m, len(x))
	m.launch("g_groupnorm_grad_"+s, append([]kernels.Arg{p(dx), p(put(m, x)), p(put(m, dy))}, geo...)...)
	sameBits(t, m, "g_groupnorm_grad "+name, get[T](dx), wantDX)
}
