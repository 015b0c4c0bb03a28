package vm

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	"gorgonia.org/gorgonia"
)

// gorgonia's Grad gives two learnables one gradient node when they are the
// operands of one Add (cost = f(a + b)), so a.Deriv() == b.Deriv(). Under
// BindDualValues TapeMachine still keeps one accumulator per learnable: it
// binds each to a dual value (gorgonia's unexported dualValue: the weight
// and its own gradient) whose gradient Grad() returns, and a solver zeroes
// each after its own update. The machine does the same for the learnables
// that share a gradient node with another (Var.Shared): it makes gorgonia's
// dual value through reflection, checked once against the pinned
// gorgonia's layout, and binds it as TapeMachine does. A learnable a
// TapeMachine bound to a dual value before (a script that ran one on the
// graph first) keeps it: the machine accumulates into its gradient, which
// is what Grad() returns.

var dual struct {
	once   sync.Once
	typ    reflect.Type // *gorgonia.dualValue
	dOff   uintptr      // offset of its gradient field d
	bound  uintptr      // offset of gorgonia.Node's boundTo
	failed error
}

func initDual() {
	valueType := reflect.TypeOf((*gorgonia.Value)(nil)).Elem()
	f, ok := reflect.TypeOf(gorgonia.Node{}).FieldByName("boundTo")
	if !ok || f.Type != valueType {
		dual.failed = errors.New("vm: gorgonia.Node has no boundTo field of type Value: this gorgonia is not the v0.9.18 the machine was built for")
		return
	}
	dual.bound = f.Offset
	// A learnable bound by a TapeMachine with BindDualValues holds a dual
	// value: make one on a scratch graph to learn its type.
	g := gorgonia.NewGraph()
	x := gorgonia.NewScalar(g, gorgonia.Float64, gorgonia.WithName("x"), gorgonia.WithValue(1.0))
	y := gorgonia.Must(gorgonia.Mul(x, x))
	if _, err := gorgonia.Grad(y, x); err != nil {
		dual.failed = fmt.Errorf("vm: making a dual value: %w", err)
		return
	}
	tm := gorgonia.NewTapeMachine(g, gorgonia.BindDualValues(x))
	defer tm.Close()
	if err := tm.RunAll(); err != nil {
		dual.failed = fmt.Errorf("vm: making a dual value: %w", err)
		return
	}
	v := boundTo(x)
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Name() != "dualValue" {
		dual.failed = fmt.Errorf("vm: a learnable under BindDualValues holds a %T, not gorgonia's dualValue", v)
		return
	}
	d, ok := t.Elem().FieldByName("d")
	if !ok || d.Type != valueType {
		dual.failed = errors.New("vm: gorgonia's dualValue has no field d of type Value")
		return
	}
	if _, ok := t.Elem().FieldByName("Value"); !ok {
		dual.failed = errors.New("vm: gorgonia's dualValue does not embed Value")
		return
	}
	dual.typ, dual.dOff = t, d.Offset
}

// boundField is n's unexported boundTo field, which initDual located.
func boundField(n *gorgonia.Node) *gorgonia.Value {
	return (*gorgonia.Value)(unsafe.Add(unsafe.Pointer(n), dual.bound))
}

func boundTo(n *gorgonia.Node) gorgonia.Value { return *boundField(n) }

// isDual tells whether v is gorgonia's dual value (after initDual succeeded).
func isDual(v gorgonia.Value) bool { return v != nil && reflect.TypeOf(v) == dual.typ }

// letScalar binds the scalar v to the scalar node n as UnsafeLet does,
// without UnsafeLet's shape check, which clones n's shape: that was the
// last allocation of a steady step, once per scalar node per run. A node
// bound to a dual value (by a TapeMachine's BindDualValues) goes through
// UnsafeLet, which replaces the dual value's Value as gorgonia's bind does.
func letScalar(n *gorgonia.Node, v gorgonia.Value) error {
	dual.once.Do(initDual)
	if dual.failed != nil || !n.IsScalar() || n.Dtype() != v.Dtype() {
		return gorgonia.UnsafeLet(n, v)
	}
	p := boundField(n)
	if isDual(*p) {
		return gorgonia.UnsafeLet(n, v)
	}
	*p = v
	return nil
}

// dualGradient is the gradient of a node bound to a dual value (by a
// TapeMachine with BindDualValues that ran on the graph, or by
// bindGradient), or nil.
func dualGradient(n *gorgonia.Node) gorgonia.Value {
	dual.once.Do(initDual)
	if dual.failed != nil {
		return nil
	}
	cur := boundTo(n)
	if !isDual(cur) {
		return nil
	}
	return *(*gorgonia.Value)(unsafe.Add(reflect.ValueOf(cur).UnsafePointer(), dual.dOff))
}

// bindGradient makes n hold its own gradient acc, as TapeMachine's
// BindDualValues does: afterwards n.Value() is its weight and n.Grad() is
// acc. A node bound to a dual value already gets acc as its gradient.
func bindGradient(n *gorgonia.Node, acc gorgonia.Value) error {
	dual.once.Do(initDual)
	if dual.failed != nil {
		return dual.failed
	}
	if cur := boundTo(n); isDual(cur) {
		*(*gorgonia.Value)(unsafe.Add(reflect.ValueOf(cur).UnsafePointer(), dual.dOff)) = acc
		return nil
	}
	w := n.Value()
	if w == nil {
		return fmt.Errorf("vm: learnable %s has no value", n.Name())
	}
	dv := reflect.New(dual.typ.Elem())
	dv.Elem().FieldByName("Value").Set(reflect.ValueOf(&w).Elem())
	*(*gorgonia.Value)(unsafe.Add(dv.UnsafePointer(), dual.dOff)) = acc
	return gorgonia.UnsafeLet(n, dv.Interface())
}
