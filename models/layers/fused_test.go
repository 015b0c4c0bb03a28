package layers

// The pooling and batch-norm kernels visit memory in fewer passes than they used to; every
// element must still come out of the same floating-point operations. The previous kernels are
// kept here, as they were, to compare against bit for bit on inputs with ties, NaNs, -0 and
// channels of fewer and more elements than sumLanes.

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// prevMaxPool is maxPoolExec before the one-pass 2x2 kernel: clear, then argmax by window().
func prevMaxPool[T float](g poolGeom, x, dy []T, xs, ys tensor.Shape) []T {
	H, W, OH, OW := xs[2], xs[3], ys[2], ys[3]
	res := make([]T, ys.TotalSize())
	if dy != nil {
		res = make([]T, xs.TotalSize())
	}
	for p := 0; p < xs[0]*xs[1]; p++ {
		xp := x[p*H*W : (p+1)*H*W]
		for oh := 0; oh < OH; oh++ {
			for ow := 0; ow < OW; ow++ {
				h0, h1, w0, w1 := g.window(oh, ow, H, W)
				bi := h0*W + w0
				best := xp[bi]
				for h := h0; h < h1; h++ {
					for w := w0; w < w1; w++ {
						i := h*W + w
						if v := xp[i]; v > best || (v != v && best == best) {
							best, bi = v, i
						}
					}
				}
				o := p*OH*OW + oh*OW + ow
				if dy != nil {
					res[p*H*W+bi] += dy[o]
				} else {
					res[o] = best
				}
			}
		}
	}
	return res
}

// prevLanesTotal is lanes.total before it skipped the lanes no element reached.
func prevLanesTotal(l *lanes) float64 {
	for s := sumLanes / 2; s > 0; s >>= 1 {
		for t := 0; t < s; t++ {
			l[t] += l[t+s]
		}
	}
	return l[0]
}

// prevBN is the batch-norm forward (y), dx and dgamma before the per-channel fusion and the
// AVX2 kernels: statistics for all channels first, full lane trees, then the outputs, every lane
// sum a plain loop (element j of a channel to lane j mod sumLanes).
func prevBN[T float](x, gamma, beta, dy []T, N, C, plane int, eps float64) (y, dx, dgamma []T) {
	// each calls f with channel c's elements in order and their index j in the channel.
	each := func(c int, f func(j, i int)) {
		for n := 0; n < N; n++ {
			for p := 0; p < plane; p++ {
				f(n*plane+p, (n*C+c)*plane+p)
			}
		}
	}
	mean, invStd := make([]float64, C), make([]float64, C)
	for c := 0; c < C; c++ {
		var s, q lanes
		each(c, func(j, i int) { s[j%sumLanes] += float64(x[i]) })
		m := float64(N * plane)
		mean[c] = prevLanesTotal(&s) / m
		each(c, func(j, i int) {
			d := float64(x[i]) - mean[c]
			q[j%sumLanes] += d * d
		})
		invStd[c] = 1 / math.Sqrt(prevLanesTotal(&q)/m+eps)
	}
	y, dx, dgamma = make([]T, len(x)), make([]T, len(x)), make([]T, C)
	cnt := float64(N * plane)
	for c := 0; c < C; c++ {
		m, a, b := T(mean[c]), T(float64(gamma[c])*invStd[c]), beta[c]
		var sa, sb lanes
		each(c, func(j, i int) {
			y[i] = (x[i]-m)*a + b
			sa[j%sumLanes] += float64(dy[i])
			sb[j%sumLanes] += float64(dy[i]) * (float64(x[i]) - mean[c])
		})
		is := invStd[c]
		sdy, sdxh := prevLanesTotal(&sa), prevLanesTotal(&sb)*is
		dgamma[c] = T(sdxh)
		mdy, k := T(sdy/cnt), T(sdxh/cnt*is)
		mt, at := T(mean[c]), T(float64(gamma[c])*is)
		each(c, func(_, i int) { dx[i] = at * (dy[i] - mdy - (x[i]-mt)*k) })
	}
	return y, dx, dgamma
}

// awkward fills n values with ties, exact zeros of both signs and, if nan, a few NaNs.
func awkward[T float](rng *rand.Rand, n int, nan bool) []T {
	v := make([]T, n)
	for i := range v {
		switch r := rng.Intn(10); {
		case r < 3:
			v[i] = T(rng.Intn(3)) // ties
		case r == 3:
			v[i] = T(math.Copysign(0, -1))
		case r == 4 && nan && rng.Intn(20) == 0:
			v[i] = T(math.NaN())
		default:
			v[i] = T(rng.NormFloat64())
		}
	}
	return v
}

func sameBits[T float](t *testing.T, what string, got, want []T) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float64bits(float64(got[i])) != math.Float64bits(float64(want[i])) {
			t.Fatalf("%s: element %d is %v, the previous kernel gave %v", what, i, got[i], want[i])
		}
	}
}

func TestMaxPoolSameBitsAsBefore(t *testing.T) {
	for _, c := range []struct {
		xs tensor.Shape
		g  poolGeom
	}{
		{sh(2, 3, 8, 8), poolGeom{2, 2, 2, 2, 0, 0}},
		{sh(3, 2, 7, 9), poolGeom{2, 2, 2, 2, 0, 0}}, // odd rows and columns outside every window
		{sh(64, 16, 28, 28), poolGeom{2, 2, 2, 2, 0, 0}},
		{sh(64, 32, 14, 14), poolGeom{2, 2, 2, 2, 0, 0}}, // 7 windows a row: all in the padded tail
		{sh(2, 3, 6, 35), poolGeom{2, 2, 2, 2, 0, 0}},    // 16 windows a row, then 1, then an odd column
		{sh(1, 2, 4, 16), poolGeom{2, 2, 2, 2, 0, 0}},    // one whole vector a row
		{sh(3, 1, 5, 2), poolGeom{2, 2, 2, 2, 0, 0}},     // one window a row
		{sh(2, 3, 9, 9), poolGeom{3, 3, 2, 2, 1, 1}},     // ResNet's stem pool
		{sh(4, 8, 16, 16), poolGeom{3, 3, 2, 2, 1, 1}},   // ResNet-18's at 32x32: 7 vector windows a row
		{sh(1, 2, 112, 112), poolGeom{3, 3, 2, 2, 1, 1}}, // at 224x224: whole vectors, then a padded one
		{sh(2, 2, 35, 38), poolGeom{3, 3, 2, 2, 1, 1}},   // odd rows, a clipped last column window
		{sh(1, 1, 4, 4), poolGeom{3, 3, 2, 2, 1, 1}},     // one vector window
		{sh(1, 1, 3, 3), poolGeom{3, 3, 2, 2, 1, 1}},     // none
		{sh(1, 2, 6, 5), poolGeom{2, 3, 1, 2, 1, 1}},
	} {
		t.Run(fmt.Sprintf("%v_%v", c.xs, c.g), func(t *testing.T) {
			testMaxPoolBits[float32](t, c.xs, c.g, tensor.Float32)
			testMaxPoolBits[float64](t, c.xs, c.g, tensor.Float64)
		})
	}
}

func testMaxPoolBits[T float](t *testing.T, xs tensor.Shape, g poolGeom, dt tensor.Dtype) {
	rng := rand.New(rand.NewSource(int64(xs.TotalSize())))
	ys, err := g.out(xs)
	if err != nil {
		t.Fatal(err)
	}
	x, dy := awkward[T](rng, xs.TotalSize(), true), awkward[T](rng, ys.TotalSize(), true)
	fwd, bwd := &maxPoolOp{g: g}, &maxPoolGradOp{g: g}
	y := tensor.New(tensor.Of(dt), tensor.WithShape(ys...))
	dx := tensor.New(tensor.Of(dt), tensor.WithShape(xs...))
	// Garbage in the outputs: the kernels must write every element.
	fill(y.Data().([]T), T(math.NaN()))
	fill(dx.Data().([]T), T(7))
	xv := tensor.New(tensor.WithShape(xs...), tensor.WithBacking(x))
	dyv := tensor.New(tensor.WithShape(ys...), tensor.WithBacking(dy))
	if err := fwd.DoWorkspace(y, nil, xv); err != nil {
		t.Fatal(err)
	}
	if err := bwd.DoWorkspace(dx, nil, xv, dyv); err != nil {
		t.Fatal(err)
	}
	sameBits(t, "forward", y.Data().([]T), prevMaxPool(g, x, nil, xs, ys))
	sameBits(t, "backward", dx.Data().([]T), prevMaxPool(g, x, dy, xs, ys))
}

// Every ordering of special values in a 2x2 window, each position of a vector and of the
// padded tail: the AVX2 pool's compares and blends pick what takes picks.
func TestMaxPool2x2SpecialsSameBits(t *testing.T) {
	special := []float32{float32(math.NaN()), -float32(math.NaN()), float32(math.Copysign(0, -1)), 0, 1, -1,
		float32(math.Inf(1)), float32(math.Inf(-1))}
	k := len(special)
	windows := k * k * k * k
	ow := windows + 5 // a tail of 5 windows after the whole vectors
	W := 2*ow + 1     // and an odd column
	x := make([]float32, 2*W)
	dy := make([]float32, ow)
	for j := 0; j < ow; j++ {
		c := j % windows
		x[2*j], x[2*j+1] = special[c%k], special[c/k%k]
		x[W+2*j], x[W+2*j+1] = special[c/(k*k)%k], special[c/(k*k*k)]
		dy[j] = special[(j/3)%k]
	}
	xs, g := sh(1, 1, 2, W), poolGeom{2, 2, 2, 2, 0, 0}
	ys, err := g.out(xs)
	if err != nil {
		t.Fatal(err)
	}
	poolSameBits(t, "", g, xs, ys, x, dy)
}

// The stem pool's AVX2 windows on planes of special values drawn at random (NaNs of both signs
// often, signed zeros, infinities, ties): the same maxima, the same argmaxes.
func TestMaxPoolStemSpecialsSameBits(t *testing.T) {
	special := []float32{float32(math.NaN()), -float32(math.NaN()), float32(math.Copysign(0, -1)), 0, 1, -1,
		float32(math.Inf(1)), float32(math.Inf(-1)), 1, 1}
	rng := rand.New(rand.NewSource(3))
	g := poolGeom{3, 3, 2, 2, 1, 1}
	for _, xs := range []tensor.Shape{sh(2, 2, 16, 16), sh(1, 3, 41, 40), sh(1, 1, 7, 50)} {
		ys, err := g.out(xs)
		if err != nil {
			t.Fatal(err)
		}
		x, dy := make([]float32, xs.TotalSize()), make([]float32, ys.TotalSize())
		for i := range x {
			x[i] = special[rng.Intn(len(special))]
		}
		for i := range dy {
			dy[i] = special[rng.Intn(len(special))]
		}
		poolSameBits(t, fmt.Sprint(xs, " "), g, xs, ys, x, dy)
	}
}

func fill[T float](v []T, x T) {
	for i := range v {
		v[i] = x
	}
}

func TestBatchNormSameBitsAsBefore(t *testing.T) {
	for _, xs := range []tensor.Shape{
		sh(32, 8, 2, 2),    // 128 elements a channel: most lanes empty
		sh(3, 5, 7, 11),    // 231: not a multiple of anything
		sh(4, 3, 16, 16),   // 1024: every lane four times
		sh(64, 16, 28, 28), // the Fashion-MNIST model's
		sh(1, 2, 1, 1),     // one element a channel
		sh(300, 3, 4, 4),   // small planes gathered in several chunks
		sh(40, 2, 7, 7),    // 49-pixel planes: chunks of 20 planes, lanes carried across
		sh(5, 2, 63, 1),    // the largest gathered plane
	} {
		t.Run(fmt.Sprint(xs), func(t *testing.T) {
			testBNBits[float32](t, xs, tensor.Float32)
			testBNBits[float64](t, xs, tensor.Float64)
		})
	}
}

func testBNBits[T float](t *testing.T, xs tensor.Shape, dt tensor.Dtype) {
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
	xv, dyv := tensor.New(tensor.WithShape(xs...), tensor.WithBacking(x)), tensor.New(tensor.WithShape(xs...), tensor.WithBacking(dy))
	y, err := op.Do(xv, vec(gamma), vec(beta))
	if err != nil {
		t.Fatal(err)
	}
	dx, err := (&bnGradOp{bn: op}).Do(xv, vec(gamma), dyv)
	if err != nil {
		t.Fatal(err)
	}
	dg, err := (&bnGradOp{bn: op, wrtGamma: true}).Do(xv, dyv)
	if err != nil {
		t.Fatal(err)
	}
	wy, wdx, wdg := prevBN(x, gamma, beta, dy, N, C, plane, 1e-5)
	sameBits(t, "y", y.Data().([]T), wy)
	sameBits(t, "dx", dx.Data().([]T), wdx)
	sameBits(t, "dgamma", dg.Data().([]T), wdg)
	// dx in place of dy and of x, as the VM may run it (bnGradOp.InPlaceSafe).
	clone := func(v []T) *tensor.Dense {
		return tensor.New(tensor.WithShape(xs...), tensor.WithBacking(append([]T(nil), v...)))
	}
	over := clone(dy)
	if _, err := (&bnGradOp{bn: op}).UsePreallocDo(over, xv, vec(gamma), over); err != nil {
		t.Fatal(err)
	}
	sameBits(t, "dx over dy", over.Data().([]T), wdx)
	over = clone(x)
	if _, err := (&bnGradOp{bn: op}).UsePreallocDo(over, over, vec(gamma), dyv); err != nil {
		t.Fatal(err)
	}
	sameBits(t, "dx over x", over.Data().([]T), wdx)
}

// totalN skips only lanes that hold +0, so it equals the full tree for every count.
func TestLanesTotalNSameBits(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, n := range []int{1, 2, 3, 5, 64, 127, 128, 129, 200, 255, 256, 257, 1000} {
		xs := awkward[float64](rng, n, false)
		var a, b lanes
		for i := range b {
			b[i] = math.NaN() // reset must clear what the sum uses
		}
		laneSum(&a, 0, xs)
		b.reset(n)
		laneSum(&b, 0, xs)
		if got, want := b.totalN(n), prevLanesTotal(&a); math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("%d elements: totalN %v, the full tree %v", n, got, want)
		}
	}
}

// reluMask32's vector prefix and scalar tail give the branches' bits on every special value in
// every position of a vector, in place too.
func TestReLUMask32LongSameBits(t *testing.T) {
	special := []float32{-1, float32(math.Copysign(0, -1)), 0, 1, float32(math.NaN()), float32(math.Inf(1)),
		float32(math.Inf(-1)), math.Float32frombits(1), math.Float32frombits(1 | 1<<31), 3.5, -2.25}
	n := 8*len(special) + 3
	x, dy := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], dy[i] = special[i%len(special)], special[(i/3)%len(special)]
	}
	for _, inPlace := range []bool{false, true} {
		got := make([]float32, n)
		if inPlace {
			copy(got, x)
			reluMask32(got, got, nil)
		} else {
			reluMask32(got, x, nil)
		}
		for i, v := range x {
			want := float32(0)
			if v > 0 || v != v {
				want = v
			}
			if math.Float32bits(got[i]) != math.Float32bits(want) {
				t.Fatalf("in place %v: relu(%v) at %d = %v, want %v", inPlace, v, i, got[i], want)
			}
		}
		if inPlace {
			copy(got, dy)
			reluMask32(got, x, got)
		} else {
			reluMask32(got, x, dy)
		}
		for i, v := range x {
			want := float32(0)
			if v > 0 {
				want = dy[i]
			}
			if math.Float32bits(got[i]) != math.Float32bits(want) {
				t.Fatalf("in place %v: relu'(%v)*%v at %d = %v, want %v", inPlace, v, dy[i], i, got[i], want)
			}
		}
	}
}

// poolSameBits runs max pooling g and its gradient on x and dy (float32, shapes xs and ys) and
// checks both against prevMaxPool bit for bit; dx starts as garbage, so every element must be
// written.
func poolSameBits(t *testing.T, name string, g poolGeom, xs, ys tensor.Shape, x, dy []float32) {
	t.Helper()
	y := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(ys...))
	dx := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(xs...))
	fill(dx.Data().([]float32), 7)
	xv := tensor.New(tensor.WithShape(xs...), tensor.WithBacking(x))
	if err := (&maxPoolOp{g: g}).DoWorkspace(y, nil, xv); err != nil {
		t.Fatal(err)
	}
	if err := (&maxPoolGradOp{g: g}).DoWorkspace(dx, nil, xv, tensor.New(tensor.WithShape(ys...), tensor.WithBacking(dy))); err != nil {
		t.Fatal(err)
	}
	sameBits(t, name+"forward", y.Data().([]float32), prevMaxPool(g, x, nil, xs, ys))
	sameBits(t, name+"backward", dx.Data().([]float32), prevMaxPool(g, x, dy, xs, ys))
}
