package layers

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// BN's two gradient ops of a step share their statistics and sums (bnSums): whichever runs
// first hands them to the other, which must give the bits it would have computed itself.
func TestBatchNormGradHandoff(t *testing.T) {
	for _, xs := range []tensor.Shape{sh(3, 5, 7, 11), sh(4, 3, 16, 16), sh(8, 4, 10, 10), sh(1, 2, 1, 1)} {
		for _, gammaFirst := range []bool{true, false} {
			t.Run(fmt.Sprint(xs, " gamma first ", gammaFirst), func(t *testing.T) {
				testBNHandoff[float32](t, xs, gammaFirst)
				testBNHandoff[float64](t, xs, gammaFirst)
			})
		}
	}
}

func testBNHandoff[T float](t *testing.T, xs tensor.Shape, gammaFirst bool) {
	rng := rand.New(rand.NewSource(int64(xs.TotalSize())))
	N, C := xs[0], xs[1]
	plane := xs.TotalSize() / (N * C)
	x, dy := awkward[T](rng, xs.TotalSize(), false), awkward[T](rng, xs.TotalSize(), false)
	gamma, beta := awkward[T](rng, C, false), awkward[T](rng, C, false)
	op, err := NewBatchNormOp(4, C, 0.1, 1e-5)
	if err != nil {
		t.Fatal(err)
	}
	vec := func(v []T) G.Value { return tensor.New(tensor.WithShape(len(v)), tensor.WithBacking(v)) }
	dense := func(v []T) *tensor.Dense { return tensor.New(tensor.WithShape(xs...), tensor.WithBacking(v)) }
	xv, dyv := dense(x), dense(dy)
	gx, gg := &bnGradOp{bn: op}, &bnGradOp{bn: op, wrtGamma: true}
	forward := func() {
		t.Helper()
		if _, err := op.Do(xv, vec(gamma), vec(beta)); err != nil {
			t.Fatal(err)
		}
	}
	runDx := func(x, dy G.Value) []T {
		t.Helper()
		v, err := gx.Do(x, vec(gamma), dy)
		if err != nil {
			t.Fatal(err)
		}
		return v.Data().([]T)
	}
	runDg := func(x, dy G.Value) []T {
		t.Helper()
		v, err := gg.Do(x, dy)
		if err != nil {
			t.Fatal(err)
		}
		return v.Data().([]T)
	}
	handed := func(want bool, when string) {
		t.Helper()
		op.mu.Lock()
		got := op.handoff != nil
		op.mu.Unlock()
		if got != want {
			t.Fatalf("%s: sums handed over %v, want %v", when, got, want)
		}
	}
	_, wdx, wdg := prevBN(x, gamma, beta, dy, N, C, plane, 1e-5)

	forward()
	var dx, dg []T
	if gammaFirst {
		dg = runDg(xv, dyv)
		handed(true, "after the first gradient op")
		dx = runDx(xv, dyv)
	} else {
		dx = runDx(xv, dyv)
		handed(true, "after the first gradient op")
		dg = runDg(xv, dyv)
	}
	handed(false, "after the second took them")
	sameBits(t, "dx", dx, wdx)
	sameBits(t, "dgamma", dg, wdg)

	// A forward starts a step: what the last one left is not used again.
	runDg(xv, dyv)
	forward()
	handed(false, "after a forward")

	// Other memory with the same values is not taken for the same operands, and an op never
	// takes its own kind's sums.
	runDg(xv, dyv)
	sameBits(t, "dx of a copy", runDx(dense(append([]T(nil), x...)), dyv), wdx)
	handed(true, "after a dx of other memory (its own sums)")
	sameBits(t, "dx again", runDx(xv, dyv), wdx)
	sameBits(t, "dgamma after", runDg(xv, dyv), wdg)

	// The first gradient op takes the forward's statistics of the same memory of x: poisoned,
	// they show in its result; a forward of other memory with the same values is not taken.
	poison := func() {
		op.mu.Lock()
		fill(op.fwd.mean, math.NaN())
		op.mu.Unlock()
	}
	forward()
	poison()
	if dg := runDg(xv, dyv); !math.IsNaN(float64(dg[0])) {
		t.Fatalf("dgamma %v: the forward's statistics were not taken", dg[0])
	}
	if _, err := op.Do(dense(append([]T(nil), x...)), vec(gamma), vec(beta)); err != nil {
		t.Fatal(err)
	}
	poison()
	sameBits(t, "dgamma after a forward of other memory", runDg(xv, dyv), wdg)
	sameBits(t, "dx after a forward of other memory", runDx(xv, dyv), wdx)

	// dx over dy hands nothing over: dy is gone.
	forward()
	over := dense(append([]T(nil), dy...))
	if _, err := gx.UsePreallocDo(over, xv, vec(gamma), over); err != nil {
		t.Fatal(err)
	}
	sameBits(t, "dx over dy", over.Data().([]T), wdx)
	handed(false, "after dx over dy")
}
