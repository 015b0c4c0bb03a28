package dispatch

import (
	"fmt"
	"reflect"
	"strings"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models/layers"
	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// addrs are a function's device addresses for one run.
type addrs struct {
	out   uintptr
	in    []uintptr
	ws    uintptr
	fixed uintptr // the plan's own bytes of the runner's segment (plan.fixed); 0 when none
	work  uintptr // plan.work's bytes: the function's workspace, or the runner's scratch
}

// plan is how one function runs: its launches, decided from shapes once.
type plan struct {
	run     func(r *Runner, a addrs) error
	scratch int64 // bytes of the runner's scratch the function uses
	// fixed is bytes of the runner's segment that are the function's alone, kept
	// from one run to the next (outside the budget, like batch norm's statistics):
	// a batched product's matrix addresses.
	fixed   int64
	fixedAt int64 // its offset in the segment, set by bind
	// work is scratch bytes one call needs, in the function's workspace:
	// Backend.Workspace reports them to the trace, which counts them inside
	// the budget. A program traced without that (its Func.Workspace short of
	// work) gets them in the runner's scratch instead, outside the budget.
	work      int64
	workInSeg bool // set by bind: work lives in the runner's scratch
}

// fn gives a planner what it needs of one function.
type fn struct {
	p   *vm.Program
	f   *vm.Func
	out *vm.Var
	ins []*vm.Var // operands, as the op sees them
	es  int64     // element size
	sfx string    // kernel suffix: f32 or f64
}

func (c fn) in(k int) tensor.Shape { return c.ins[k].Shape }

// unsupported is the error of an op with no CUDA implementation.
func (c fn) unsupported(why string) error {
	return fmt.Errorf("op %v (%T) at node %s has no CUDA implementation: %s", c.f.Op, c.f.Op, c.out.Name, why)
}

// planFunc plans function i.
func planFunc(r *Runner, p *vm.Program, i int) (plan, error) {
	f := &p.Funcs[i]
	c := fn{p: p, f: f, out: &p.Vars[f.Output]}
	for _, vi := range f.Operands() {
		c.ins = append(c.ins, &p.Vars[vi])
	}
	if isCTC(f.Op) {
		return planCTC(c) // float log-probabilities, Int targets and lengths
	}
	if isConvType(f.Op) {
		return planConvType(c) // a float type <-> Int: operand and result types differ
	}
	dt := c.out.Dtype
	if dt == tensor.Bool && len(c.ins) > 0 {
		dt = c.ins[0].Dtype // a comparison's bool result: the kernel runs in its operands' type
	}
	switch dt {
	case tensor.Float32:
		c.es, c.sfx = 4, "f32"
	case tensor.Float64:
		c.es, c.sfx = 8, "f64"
	case tensor.Int, tensor.Int64:
		c.es = 8 // Go's int (int64 on the platforms the device runs on); planInt picks the kernels
	case tensor.Int32:
		c.es = 4
	case tensor.Uint8:
		c.es = 1 // gorgonia's Byte
	case tensor.Bool:
		c.es = 1 // Go's bool; planBool picks the kernels
	default:
		return plan{}, c.unsupported(fmt.Sprintf("the kernels are float32 and float64 (Int, Int64, Int32, Byte and Bool for some ops), this op computes in %v", dt))
	}
	for _, v := range c.ins {
		if v.Dtype != dt && !isSizeOperand(f.Op, v) && !isIndexOperand(f.Op, v) {
			return plan{}, c.unsupported(fmt.Sprintf("operand %s is %v, the result %v", v.Name, v.Dtype, c.out.Dtype))
		}
	}
	switch dt {
	case tensor.Int, tensor.Int64, tensor.Int32, tensor.Uint8:
		return planInt(c)
	case tensor.Bool:
		return planBool(c)
	}
	if d, ok := layers.Describe(f.Op); ok {
		return planLayer(r, c, d)
	}
	if pf, ok := gorgoniaFamilies[strings.TrimPrefix(fmt.Sprintf("%T", f.Op), "*")]; ok {
		return pf(r, c)
	}
	return planGorgonia(c)
}

// isSizeOperand reports the count operand of gorgonia's Repeat, which the
// kernels never read (the repeat count is in the shapes).
func isSizeOperand(op gorgonia.Op, v *vm.Var) bool {
	return strings.HasPrefix(fmt.Sprint(op), "Repeat") && v.Shape.IsScalar()
}

// total is a shape's element count (1 for a scalar).
func total(s tensor.Shape) int64 {
	n := int64(1)
	for _, d := range s {
		n *= int64(d)
	}
	return n
}

// strides are row-major strides of a shape, in elements.
func strides(s tensor.Shape) []int64 {
	st := make([]int64, len(s))
	acc := int64(1)
	for d := len(s) - 1; d >= 0; d-- {
		st[d] = acc
		acc *= int64(s[d])
	}
	return st
}

// intField reads an unexported int field of a gorgonia op by reflection (the
// ops keep their axes to themselves).
func intField(op any, name string) (int, error) {
	v := reflect.ValueOf(op)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return 0, fmt.Errorf("%T is not a struct", op)
	}
	f := v.FieldByName(name)
	if !f.IsValid() || f.Kind() != reflect.Int {
		return 0, fmt.Errorf("%T has no int field %s (another gorgonia version?)", op, name)
	}
	return int(f.Int()), nil
}

// intsField reads an unexported []int-like field.
func intsField(op any, name string) ([]int, error) {
	v := reflect.ValueOf(op)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%T is not a struct", op)
	}
	f := v.FieldByName(name)
	if !f.IsValid() || f.Kind() != reflect.Slice || f.Type().Elem().Kind() != reflect.Int {
		return nil, fmt.Errorf("%T has no []int field %s (another gorgonia version?)", op, name)
	}
	out := make([]int, f.Len())
	for i := range out {
		out[i] = int(f.Index(i).Int())
	}
	return out, nil
}

// ptr, i64, flt shorten kernel arguments.
func ptr(a uintptr) kernels.Arg { return kernels.Ptr(a) }
func i64(v int64) kernels.Arg   { return kernels.Int(v) }
func flt(v float64) kernels.Arg { return kernels.Float(v) }
