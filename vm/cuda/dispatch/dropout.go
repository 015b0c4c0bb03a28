package dispatch

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"unsafe"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// gorgonia's Dropout draws its mask from the op's own generator (a closure
// in an unexported field; clock-seeded by gorgonia.Dropout): the device
// cannot reproduce it, so each training run draws the mask on the host, one
// number per element in the order Do draws them, with Do's comparison in
// the element type, and uploads it into the result, which g_dropout turns
// into x / keep or 0. The same generator state thus gives the CPU device's
// values. Not training, or at probability 0, the op is a copy of x (Do
// returns x itself). The gradient needs no generator: g_dropout_grad keys on
// the result, as the CPU op does.

// fieldPtr is the address of an op's unexported field of the given kind.
func fieldPtr(op any, name string, kind reflect.Kind) (unsafe.Pointer, reflect.Type, error) {
	v := reflect.ValueOf(op)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, nil, fmt.Errorf("%T is not a pointer to a struct", op)
	}
	f := v.Elem().FieldByName(name)
	if !f.IsValid() || f.Kind() != kind {
		return nil, nil, fmt.Errorf("%T has no %v field %s (another gorgonia version?)", op, kind, name)
	}
	return unsafe.Pointer(f.UnsafeAddr()), f.Type(), nil
}

// dropoutOf is the dropoutOp of a dropoutOp or a dropoutDiffOp (which
// embeds a pointer to it).
func dropoutOf(op any) any {
	v := reflect.ValueOf(op)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() == reflect.Struct {
		if f := v.FieldByName("dropoutOp"); f.IsValid() && f.Kind() == reflect.Pointer && !f.IsNil() {
			return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface()
		}
	}
	return op
}

// upload copies host bytes into device memory at dst, ordered after the
// compute issued so far and before the compute issued next.
func (r *Runner) upload(dst uintptr, b []byte) error {
	w, err := r.CopyIn(dst, b)
	if err != nil {
		return err
	}
	return r.WaitFor(w)
}

func planDropout(_ *Runner, c fn) (plan, error) {
	op := dropoutOf(c.f.Op)
	prob, err := floatField(op, "probability")
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	n := total(c.out.Shape)
	if total(c.in(0)) != n {
		return plan{}, c.unsupported(fmt.Sprintf("dropout of %v gives %v", c.in(0), c.out.Shape))
	}
	sfx := c.sfx
	if op != any(c.f.Op) { // the gradient: (x, y, dy)
		if len(c.ins) != 3 {
			return plan{}, c.unsupported("a dropout gradient without (x, y, dy)")
		}
		return plan{run: func(r *Runner, a addrs) error {
			return r.launch("g_dropout_grad_"+sfx, ptr(a.out), ptr(a.in[1]), ptr(a.in[2]), i64(n), flt(prob))
		}}, nil
	}
	trainingP, _, err := fieldPtr(op, "isTraining", reflect.Bool)
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	genP, genT, err := fieldPtr(op, "rndGen", reflect.Func)
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	if genT.NumIn() != 0 || genT.NumOut() != 1 || genT.Out(0).Kind() != reflect.Float64 || genT.IsVariadic() {
		return plan{}, c.unsupported(fmt.Sprintf("dropout's generator is a %v, not a func() float64", genT))
	}
	training, gen := (*bool)(trainingP), (*func() float64)(genP)
	keep := 1 - prob
	var mask []byte
	return plan{run: func(r *Runner, a addrs) error {
		if prob == 0 || !*training {
			return copyLaunch(r, sfx, a.out, a.in[0], n, kernels.Contiguous())
		}
		if *gen == nil {
			return fmt.Errorf("dispatch: dropout at node %s has no generator", c.out.Name)
		}
		mask = dropoutMask(mask[:0], *gen, n, sfx == "f32", keep)
		if err := r.upload(a.out, mask); err != nil {
			return err
		}
		return r.launch("g_dropout_"+sfx, ptr(a.out), ptr(a.in[0]), i64(n), flt(keep))
	}}, nil
}

// dropoutMask draws n numbers from gen and appends 1 (kept) or 0 per
// element to b in the element type, comparing as the op's Do does.
func dropoutMask(b []byte, gen func() float64, n int64, f32 bool, keep float64) []byte {
	for i := int64(0); i < n; i++ {
		r := gen()
		if f32 {
			v := float32(0)
			if float32(r) < float32(keep) {
				v = 1
			}
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
			continue
		}
		v := 0.0
		if r < keep {
			v = 1
		}
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}
