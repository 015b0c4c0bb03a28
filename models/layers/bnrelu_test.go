package layers

import (
	"fmt"
	"math"
	"math/rand"
	"runtime"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// bnReLUInputs are x, gamma and beta for shape s: normal values with, per channel in turn, a
// constant channel (every element ties with the mean: BN gives beta exactly), -0 and +0
// elements, a NaN (the whole channel's statistics are NaN) and an infinity; gamma takes negative
// and zero values, beta -0, +0 and negative ones, so BN's outputs include -0, +0, NaN and ties.
func bnReLUInputs[T float](rng *rand.Rand, s tensor.Shape) (x, gamma, beta []T) {
	N, C, plane := s[0], s[1], s.TotalSize()/(s[0]*s[1])
	x = make([]T, s.TotalSize())
	for i := range x {
		x[i] = T(rng.NormFloat64())
	}
	at := func(n, c, p int) *T { return &x[(n*C+c)*plane+p] }
	for c := 0; c < C; c++ {
		switch c % 5 {
		case 0: // a constant channel: v - mean is +0 everywhere
			for n := 0; n < N; n++ {
				for p := 0; p < plane; p++ {
					*at(n, c, p) = 0.75
				}
			}
		case 1:
			*at(0, c, 0) = T(math.Copysign(0, -1))
			*at(N-1, c, plane-1) = 0
		case 2:
			*at(N-1, c, 0) = T(math.NaN())
		case 3:
			*at(0, c, plane-1) = T(math.Inf(1))
		}
	}
	gamma, beta = make([]T, C), make([]T, C)
	for c := range gamma {
		// The constant channel: (+0)·(-0.5) + (-0) is -0.
		gamma[c] = T([]float64{-0.5, 1.5, 0, 2, -1}[c%5])
		beta[c] = T([]float64{math.Copysign(0, -1), 0.25, -0.3, 0, math.Copysign(0, -1)}[c%5])
	}
	return x, gamma, beta
}

// TestBNReLUFusedSameBits: the fused pass (bnReLUOp) gives the bits of BatchNormOp and then
// reluOp written over its output, as the VM runs them unfused, in both dtypes and modes, at
// GOMAXPROCS 1 and 2, on planes smaller than a vector, of a vector and a remainder, and large
// enough to split over workers; the running statistics and the dgamma that takes the forward's
// statistics come out the same too.
func TestBNReLUFusedSameBits(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2} {
		runtime.GOMAXPROCS(procs)
		for _, s := range []tensor.Shape{{2, 5, 1, 1}, {4, 5, 2, 2}, {3, 6, 5, 5}, {2, 5, 9, 9}, {32, 5, 16, 16}} {
			for _, training := range []bool{true, false} {
				t.Run(fmt.Sprintf("%v/training=%v/procs=%d", s, training, procs), func(t *testing.T) {
					checkBNReLUFused[float32](t, tensor.Float32, s, training)
					checkBNReLUFused[float64](t, tensor.Float64, s, training)
				})
			}
		}
	}
}

func checkBNReLUFused[T float](t *testing.T, dt tensor.Dtype, s tensor.Shape, training bool) {
	t.Helper()
	rng := rand.New(rand.NewSource(int64(s.TotalSize())))
	xd, gd, bd := bnReLUInputs[T](rng, s)
	dyd := make([]T, len(xd))
	for i := range dyd {
		dyd[i] = T(rng.NormFloat64())
	}
	C := s[1]
	dense := func(d []T, sh ...int) *tensor.Dense {
		return tensor.New(tensor.WithShape(sh...), tensor.WithBacking(d))
	}
	x, gamma, beta, dy := dense(xd, s...), dense(gd, C), dense(bd, C), dense(dyd, s...)
	negZeros := 0 // of the batch norm alone, which ReLU must make +0
	run := func(fused bool) (y []T, runMean, runVar []float64, dgamma []T) {
		op, err := NewBatchNormOp(4, C, 0.1, 1e-5)
		if err != nil {
			t.Fatal(err)
		}
		rm, rv := make([]float64, C), make([]float64, C)
		for c := range rm {
			rm[c], rv[c] = 0.1*float64(c), 1+0.5*float64(c)
			if c%5 == 0 {
				rm[c] = 0.75 // the constant channel's value: inference gives -0 there too
			}
		}
		if err := op.SetRunningStats(rm, rv); err != nil {
			t.Fatal(err)
		}
		if err := op.SetTraining(training); err != nil {
			t.Fatal(err)
		}
		out := newDense(dt, s)
		ws := make([]byte, op.WorkspaceBytes(dt, []tensor.Shape{s, {C}, {C}}))
		var k G.Op = op
		if fused {
			k = op.FuseNext(&reluOp{})
		}
		if err := k.(interface {
			DoWorkspace(G.Value, []byte, ...G.Value) error
		}).DoWorkspace(out, ws, x, gamma, beta); err != nil {
			t.Fatal(err)
		}
		if !fused {
			for _, v := range out.Data().([]T) {
				if v == 0 && math.Signbit(float64(v)) {
					negZeros++
				}
			}
			// ReLU in place over the batch norm's output, as the VM runs it.
			if err := (&reluOp{}).DoWorkspace(out, nil, out); err != nil {
				t.Fatal(err)
			}
		}
		dg := newDense(dt, tensor.Shape{C})
		if err := (&bnGradOp{bn: op, wrtGamma: true}).DoWorkspace(dg, ws, x, dy); err != nil {
			t.Fatal(err)
		}
		runMean, runVar = op.RunningStats()
		return append([]T(nil), out.Data().([]T)...), runMean, runVar, dg.Data().([]T)
	}
	y0, m0, v0, g0 := run(false)
	y1, m1, v1, g1 := run(true)
	sameBits(t, "fused y", y1, y0)
	sameBits(t, "running mean after the fused pass", m1, m0)
	sameBits(t, "running variance after the fused pass", v1, v0)
	sameBits(t, "dgamma after the fused pass", g1, g0)
	if n := countNaN(y0); n == 0 || negZeros == 0 {
		t.Fatalf("%v: the batch norm gave ReLU %d NaNs and %d -0s: the test lost its edge cases", s, n, negZeros)
	}
}

// countNaN counts the NaNs among ReLU's outputs (it keeps them).
func countNaN[T float](y []T) int {
	n := 0
	for _, v := range y {
		if v != v {
			n++
		}
	}
	return n
}
