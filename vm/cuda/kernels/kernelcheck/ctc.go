package kernelcheck

import (
	"fmt"
	"math"
	"math/rand"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// TestCTC: CTCLoss (sum and mean) and its gradient against gorgonia's
// ctcLossOp and ctcLossDiffOp Do, with targets as a (B, S) matrix and as
// concatenated sequences, target lengths 0 to S, repeated labels and inputs
// shorter than T (whose gradient rows stay -Inf, as the CPU op leaves them):
// float64 bit for bit, float32 within 1e-5 elementwise.
func testCTC[T float32 | float64](t TB, m *Mem) {
	rng := rand.New(rand.NewSource(29))
	sfx := suffix[T]()
	const Tn, B, C, S = 6, 3, 5, 3
	for _, c := range []struct {
		tdims     int
		reduction G.Reduction
	}{{2, G.ReductionMean}, {2, G.ReductionSum}, {1, G.ReductionMean}} {
		lp := randn[T](rng, Tn*B*C, 1)
		tgtLen := []int{2, 3, 0}
		inLen := []int{6, 4, 5}
		var targets []int
		var tshape []int
		if c.tdims == 2 {
			targets = []int{1, 1, 4, 2, 3, 3, 0, 0, 0} // a repeat, then a padded row
			tshape = []int{B, S}
		} else {
			targets = []int{1, 1, 2, 3, 3}
			tshape = []int{len(targets)}
		}
		g := G.NewGraph()
		lpN := G.NewTensor(g, dtOf[T](), 3, G.WithShape(Tn, B, C), G.WithName("lp"))
		tN := G.NewTensor(g, tensor.Int, len(tshape), G.WithShape(tshape...), G.WithName("targets"))
		iN := G.NewVector(g, tensor.Int, G.WithShape(B), G.WithName("inLen"))
		lN := G.NewVector(g, tensor.Int, G.WithShape(B), G.WithName("tgtLen"))
		loss := must(t)(G.CTCLoss(lpN, tN, iN, lN, c.reduction))
		if _, err := G.Grad(loss, lpN); err != nil {
			t.Fatal(err)
		}
		var diff G.Op
		for _, n := range g.AllNodes() {
			if n.Op() != nil && n.Op().String() == "ctcLossDiff{}()" {
				diff = n.Op()
			}
		}
		ints := func(v []int, shape ...int) *tensor.Dense {
			return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]int(nil), v...)))
		}
		vals := []G.Value{dense(lp, Tn, B, C), ints(targets, tshape...), ints(inLen, B), ints(tgtLen, B)}
		var wantLoss []T
		switch d := do(t, loss.Op(), vals...).Data().(type) {
		case T:
			wantLoss = []T{d}
		case []T:
			wantLoss = d
		}
		gradOut := T(0.75)
		wantGrad := data[T](t, do(t, diff, append(vals, scalarValue(gradOut))...))

		lpB, tB, iB, lB := put(m, lp), putInts(m, targets), putInts(m, inLen), putInts(m, tgtLen)
		nll, alpha := newOut[T](m, B), newOut[T](m, Tn*B*(2*S+1))
		rowLen := int64(len(targets)) // S: a row of (B, S) targets, or all of them concatenated
		if c.tdims == 2 {
			rowLen = S
		}
		geo := []kernels.Arg{kernels.Int(Tn), kernels.Int(B), kernels.Int(C), kernels.Int(int64(c.tdims)), kernels.Int(rowLen)}
		m.launch("ctc_alpha_"+sfx, append([]kernels.Arg{p(nll), p(alpha), p(lpB), p(tB), p(iB), p(lB)}, geo...)...)
		got := newOut[T](m, 1)
		mean := int64(0)
		if c.reduction == G.ReductionMean {
			mean = 1
		}
		m.launch("ctc_reduce_"+sfx, p(got), p(nll), p(lB), kernels.Int(B), kernels.Int(mean))
		name := fmt.Sprintf("ctc %s tdims %d reduction %d", sfx, c.tdims, c.reduction)
		compare(t, m, name+" loss", get[T](got), wantLoss, false)
		if sfx == "f64" {
			sameBits(t, m, name+" loss", get[T](got), wantLoss)
		}

		grad := newOut[T](m, Tn*B*C)
		m.launch("fill_"+sfx, p(grad), kernels.Float(math.Inf(-1)), kernels.Int(Tn*B*C))
		beta := newOut[T](m, Tn*B*(2*S+1))
		m.launch("ctc_grad_"+sfx, append([]kernels.Arg{p(grad), p(beta), p(alpha), p(nll), p(lpB), p(tB), p(iB), p(lB), p(put(m, []T{gradOut}))}, geo...)...)
		compare(t, m, name+" gradient", get[T](grad), wantGrad, false)
		if c.tdims == 2 { // a label outside [0, C): the CPU op panics; the kernel gives NaN, never reads outside lp
			bad := append([]int(nil), targets...)
			bad[0] = C
			m.launch("ctc_alpha_"+sfx, append([]kernels.Arg{p(nll), p(alpha), p(lpB), p(putInts(m, bad)), p(iB), p(lB)}, geo...)...)
			if v := get[T](nll); !math.IsNaN(float64(v[0])) || math.IsNaN(float64(v[1])) {
				t.Errorf("%s: a label of %d gives losses %v, want NaN for the first element only", name, C, v)
			}
		}
		if sfx == "f64" { // float32 log is math32's on the CPU, float64's rounded here: an ulp apart at times
			sameBits(t, m, name+" gradient", get[T](grad), wantGrad)
		}
	}
}
