package dispatch

import (
	"fmt"
	"math"
	"reflect"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// isCTC reports gorgonia's ctcLossOp or ctcLossDiffOp, whose operands mix
// float and Int tensors.
func isCTC(op gorgonia.Op) bool {
	switch fmt.Sprintf("%T", op) {
	case "*gorgonia.ctcLossOp", "*gorgonia.ctcLossDiffOp":
		return true
	}
	return false
}

// planCTC plans CTCLoss (ctc_alpha, then ctc_reduce) and its gradient
// (ctc_alpha again, a fill of -Inf, then ctc_grad). The CPU op keeps the
// forward's alpha table inside the op for the gradient; here the gradient
// recomputes it. The per-element losses and the alpha and beta tables live
// in the function's workspace (plan.work: inside the budget).
func planCTC(c fn) (plan, error) {
	diff := fmt.Sprintf("%T", c.f.Op) == "*gorgonia.ctcLossDiffOp"
	want := 4
	if diff {
		want = 5
	}
	if len(c.ins) != want {
		return plan{}, c.unsupported(fmt.Sprintf("CTC with %d operands", len(c.ins)))
	}
	switch c.ins[0].Dtype {
	case tensor.Float32:
		c.es, c.sfx = 4, "f32"
	case tensor.Float64:
		c.es, c.sfx = 8, "f64"
	default:
		return plan{}, c.unsupported(fmt.Sprintf("CTC of %v log-probabilities", c.ins[0].Dtype))
	}
	for k := 1; k <= 3; k++ {
		if c.ins[k].Dtype != tensor.Int {
			return plan{}, c.unsupported(fmt.Sprintf("CTC operand %s is %v, not Int", c.ins[k].Name, c.ins[k].Dtype))
		}
	}
	lp, tg := c.in(0), c.in(1)
	if len(lp) != 3 || (len(tg) != 1 && len(tg) != 2) || total(c.in(2)) != int64(lp[1]) || total(c.in(3)) != int64(lp[1]) {
		return plan{}, c.unsupported(fmt.Sprintf("CTC of %v log-probabilities and %v targets", lp, tg))
	}
	Tn, B, C := int64(lp[0]), int64(lp[1]), int64(lp[2])
	S := int64(tg[len(tg)-1])
	if diff && (c.ins[4].Dtype != c.ins[0].Dtype || total(c.in(4)) != 1) {
		return plan{}, c.unsupported("CTC gradient without a scalar output gradient")
	}
	mean := int64(0)
	if !diff {
		r := reflect.Indirect(reflect.ValueOf(c.f.Op)).FieldByName("reduction")
		if !r.IsValid() || r.Kind() != reflect.Uint {
			return plan{}, c.unsupported("ctcLossOp has no reduction field (another gorgonia version?)")
		}
		if gorgonia.Reduction(r.Uint()) == gorgonia.ReductionMean {
			mean = 1
		}
	}
	table := alignUp(Tn * B * (2*S + 1) * c.es)
	nllAt, alphaAt, betaAt := int64(0), alignUp(B*c.es), alignUp(B*c.es)+table
	scratch := betaAt
	if diff {
		scratch += table
	}
	tdims := int64(len(tg))
	return plan{work: scratch, run: func(r *Runner, a addrs) error {
		nll, alpha, beta := a.work+uintptr(nllAt), a.work+uintptr(alphaAt), a.work+uintptr(betaAt)
		if err := r.launch("ctc_alpha_"+c.sfx, ptr(nll), ptr(alpha), ptr(a.in[0]), ptr(a.in[1]), ptr(a.in[2]), ptr(a.in[3]),
			i64(Tn), i64(B), i64(C), i64(tdims), i64(S)); err != nil {
			return err
		}
		if !diff {
			return r.launch("ctc_reduce_"+c.sfx, ptr(a.out), ptr(nll), ptr(a.in[3]), i64(B), i64(mean))
		}
		if err := r.launch("fill_"+c.sfx, ptr(a.out), flt(math.Inf(-1)), i64(Tn*B*C)); err != nil {
			return err
		}
		return r.launch("ctc_grad_"+c.sfx, ptr(a.out), ptr(beta), ptr(alpha), ptr(nll), ptr(a.in[0]), ptr(a.in[1]), ptr(a.in[2]), ptr(a.in[3]), ptr(a.in[4]),
			i64(Tn), i64(B), i64(C), i64(tdims), i64(S))
	}}, nil
}
