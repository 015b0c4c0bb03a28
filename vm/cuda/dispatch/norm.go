package dispatch

import (
	"fmt"
	"reflect"
	"unsafe"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// gorgonia's BatchNorm: its BatchNormOp normalises (the scale and shift are
// broadcast products and sums of their own) and batchnormDiffOp is the x
// gradient. Both run as one thread per channel (g_batchnorm, in gbn.cu),
// summing in the element type in the CPU op's order. The op's running
// statistics go up once per step and come back at its end as models/layers'
// do (bnState); whether the op trains is read at each run, since a script
// may call SetTraining between runs.

// runningStatser is an op whose running statistics the device updates.
type runningStatser interface {
	RunningStats() (mean, variance []float64)
	SetRunningStats(mean, variance []float64) error
}

// gorgoniaBN gives gorgonia's BatchNormOp the running-statistics protocol,
// through its exported Stats and SetStats, widened to float64 (exactly).
type gorgoniaBN struct{ op *gorgonia.BatchNormOp }

func (b gorgoniaBN) RunningStats() (mean, variance []float64) {
	m, v := b.op.Stats()
	return widen(m), widen(v)
}

func (b gorgoniaBN) SetRunningStats(mean, variance []float64) error {
	m, _ := b.op.Stats()
	return b.op.SetStats(narrow(m.Dtype(), mean), narrow(m.Dtype(), variance))
}

func widen(t tensor.Tensor) []float64 {
	switch d := t.Data().(type) {
	case []float32:
		out := make([]float64, len(d))
		for i, v := range d {
			out[i] = float64(v)
		}
		return out
	case []float64:
		return append([]float64(nil), d...)
	}
	return nil
}

func narrow(dt tensor.Dtype, v []float64) tensor.Tensor {
	if dt == tensor.Float32 {
		f := make([]float32, len(v))
		for i, x := range v {
			f[i] = float32(x)
		}
		return tensor.New(tensor.WithShape(len(v)), tensor.WithBacking(f))
	}
	return tensor.New(tensor.WithShape(len(v)), tensor.WithBacking(append([]float64(nil), v...)))
}

// savedVariance is the variance the op saved in its last forward on the
// host (zeros for a new op), which its inference gradient reads: the device
// keeps it from there on.
func savedVariance(bn *gorgonia.BatchNormOp) []float64 {
	f := reflect.ValueOf(bn).Elem().FieldByName("saveVariance")
	if !f.IsValid() || f.Type() != reflect.TypeOf((*tensor.Dense)(nil)) {
		return nil
	}
	d := *(**tensor.Dense)(unsafe.Pointer(f.UnsafeAddr()))
	if d == nil {
		return nil
	}
	return widen(d)
}

func floatField(op any, name string) (float64, error) {
	v := reflect.ValueOf(op)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	f := v.FieldByName(name)
	if v.Kind() != reflect.Struct || !f.IsValid() || f.Kind() != reflect.Float64 {
		return 0, fmt.Errorf("%T has no float64 field %s (another gorgonia version?)", op, name)
	}
	return f.Float(), nil
}

// batchNormOf is the BatchNormOp of a BatchNormOp or a batchnormDiffOp
// (which embeds it).
func batchNormOf(op any) (*gorgonia.BatchNormOp, bool) {
	if bn, ok := op.(*gorgonia.BatchNormOp); ok {
		return bn, true
	}
	v := reflect.ValueOf(op)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil, false
	}
	f := v.FieldByName("BatchNormOp")
	if !f.IsValid() || !f.CanInterface() {
		return nil, false
	}
	bn, ok := f.Interface().(*gorgonia.BatchNormOp)
	return bn, ok && bn != nil
}

func planGBatchNorm(r *Runner, c fn) (plan, error) {
	bn, ok := batchNormOf(c.f.Op)
	if !ok {
		return plan{}, c.unsupported("cannot find the BatchNormOp (another gorgonia version?)")
	}
	x := c.in(0)
	if len(x) < 2 || x[0] < 1 || x[1] < 1 {
		return plan{}, c.unsupported(fmt.Sprintf("batch norm of %v: no batch and channel axes", x))
	}
	if !x.Eq(c.out.Shape) {
		return plan{}, c.unsupported(fmt.Sprintf("batch norm of %v gives %v", x, c.out.Shape))
	}
	momentum, err := floatField(bn, "momentum")
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	eps, err := floatField(bn, "epsilon")
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	if _, err := boolField(bn, "training"); err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	if m, _ := bn.Stats(); m == nil || m.Shape().TotalSize() != x[1] {
		return plan{}, c.unsupported(fmt.Sprintf("running statistics that do not have %d channels", x[1]))
	}
	if len(savedVariance(bn)) != x[1] {
		return plan{}, c.unsupported(fmt.Sprintf("a saved variance that does not have %d channels (another gorgonia version?)", x[1]))
	}
	N, C, plane := nchw(x)
	st := r.bns[bn]
	if st == nil {
		st = &bnState{op: gorgoniaBN{bn}, c: int(C), saved: savedVariance(bn)}
		r.bns[bn] = st
	}
	if st.c != int(C) {
		return plan{}, c.unsupported("one batch norm op on tensors of different channel counts")
	}
	geo := []kernels.Arg{i64(N), i64(C), i64(plane)}
	sfx := c.sfx
	diff := c.f.Op != gorgonia.Op(bn)
	return plan{run: func(r *Runner, a addrs) error {
		training, _ := boolField(bn, "training")
		if err := st.load(r); err != nil {
			return err
		}
		rm, rv := st.addr(r)
		saved := rv + uintptr(8*C)
		if !diff {
			tr := int64(0)
			if training {
				tr = 1
				st.touched = true
			}
			return r.launch("g_batchnorm_"+sfx, append(append([]kernels.Arg{ptr(a.out), ptr(a.in[0]), ptr(rm), ptr(rv), ptr(saved)}, geo...),
				flt(momentum), flt(eps), i64(tr))...)
		}
		tr := int64(0)
		if training {
			tr = 1
		}
		return r.launch("g_batchnorm_grad_"+sfx, append(append([]kernels.Arg{ptr(a.out), ptr(a.in[0]), ptr(a.in[1]), ptr(rv), ptr(saved)}, geo...),
			flt(eps), i64(tr))...)
	}}, nil
}

// planGGroupNorm plans gorgonia's GroupNorm (its GroupNormOp; the scale and
// shift are broadcast products and sums of their own) and its gradient: a
// thread per (image, group) row, the op's own moments (g_groupnorm); the
// gradient recomputes them from x instead of reading the op's saved ones.
func planGGroupNorm(_ *Runner, c fn) (plan, error) {
	groups, err := intField(c.f.Op, "numGroups")
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	eps, err := floatField(c.f.Op, "epsilon")
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	x := c.in(0)
	if len(x) < 2 || groups < 1 || x[1]%groups != 0 || !x.Eq(c.out.Shape) {
		return plan{}, c.unsupported(fmt.Sprintf("group norm of %v in %d groups into %v", x, groups, c.out.Shape))
	}
	N, C, plane := nchw(x)
	rows, d := N*int64(groups), C/int64(groups)
	geo := []kernels.Arg{i64(rows), i64(d), i64(plane), flt(eps)}
	sfx := c.sfx
	if opName(c.f.Op) == "gorgonia.groupNormDiffOp" {
		if len(c.ins) != 2 || !c.in(1).Eq(x) {
			return plan{}, c.unsupported("a group norm gradient without (x, dy) of one shape")
		}
		return plan{run: func(r *Runner, a addrs) error {
			return r.launch("g_groupnorm_grad_"+sfx, append([]kernels.Arg{ptr(a.out), ptr(a.in[0]), ptr(a.in[1])}, geo...)...)
		}}, nil
	}
	return plan{run: func(r *Runner, a addrs) error {
		return r.launch("g_groupnorm_"+sfx, append([]kernels.Arg{ptr(a.out), ptr(a.in[0])}, geo...)...)
	}}, nil
}
