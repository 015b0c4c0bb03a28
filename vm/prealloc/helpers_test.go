package prealloc

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

func init() {
	// A pooled header handed out again while a test still holds it would
	// make two tensors share memory.
	tensor.DontUsePool()
}

var floats = []tensor.Dtype{tensor.Float32, tensor.Float64}

// filled is a tensor of varied values: signs, magnitudes, no two alike.
func filled(dt tensor.Dtype, seed int, shape ...int) *tensor.Dense {
	t := tensor.New(tensor.Of(dt), tensor.WithShape(shape...))
	n := tensor.Shape(shape).TotalSize()
	for i := 0; i < n; i++ {
		v := math.Sin(float64(i+1)*0.731+float64(seed)*1.37) * 3 * (1 + float64(i%7)/3)
		switch dt {
		case tensor.Float64:
			t.Float64s()[i] = v
		case tensor.Float32:
			t.Float32s()[i] = float32(v)
		case tensor.Int:
			t.Ints()[i] = int(v * 10)
		default:
			panic(dt)
		}
	}
	return t
}

// special puts the values that tell summation orders and comparison
// conventions apart (signed zeros, NaN, infinities, tiny and huge values)
// among ordinary ones.
func special(t *tensor.Dense) *tensor.Dense {
	vals := []float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1), 1e-30, 1e30, -1e30, 0, 0}
	n := t.Shape().TotalSize()
	for i := 0; i < n; i += 3 {
		k := (i / 3) % len(vals)
		v := vals[k]
		switch t.Dtype() {
		case tensor.Float64:
			t.Float64s()[i] = v
			switch k {
			case 8:
				t.Float64s()[i] = math.Float64frombits(0x7ff0000000000011) // signaling
			case 9:
				t.Float64s()[i] = math.Float64frombits(0xfff8000000000022) // another payload, negative
			}
		case tensor.Float32:
			t.Float32s()[i] = float32(v)
			switch k {
			case 8:
				t.Float32s()[i] = math.Float32frombits(0x7f800011)
			case 9:
				t.Float32s()[i] = math.Float32frombits(0xffc00022)
			}
		}
	}
	return t
}

// poisoned is out as the caller's allocator may hand it over: every byte
// 0xFF (NaNs for floats).
func poisoned(dt tensor.Dtype, shape ...int) *tensor.Dense {
	// The bytes come from a heap tensor: a plain make() that only reaches
	// over() may live on the stack (it does not escape as a uintptr).
	b := tensor.New(tensor.Of(dt), tensor.WithShape(shape...)).Raw
	for i := range b {
		b[i] = 0xFF
	}
	return over(b, dt, shape...)
}

// over is a tensor header over the given bytes, as the VM makes them
// (they must be heap or foreign memory).
func over(b []byte, dt tensor.Dtype, shape ...int) *tensor.Dense {
	return tensor.New(tensor.Of(dt), tensor.WithShape(shape...),
		tensor.FromMemory(uintptr(unsafe.Pointer(&b[0])), uintptr(len(b))))
}

func scalarOf(dt tensor.Dtype, v float64) G.Value {
	if dt == tensor.Float32 {
		return G.NewF32(float32(v))
	}
	return G.NewF64(v)
}

// cloneValue deep-copies a value so Do and the Func get equal but
// separate inputs.
func cloneValue(t *testing.T, v G.Value) G.Value {
	t.Helper()
	c, err := G.CloneValue(v)
	require.NoError(t, err)
	return c
}

func cloneAll(t *testing.T, vs []G.Value) []G.Value {
	out := make([]G.Value, len(vs))
	for i, v := range vs {
		out[i] = cloneValue(t, v)
	}
	return out
}

// bytesOf is a value's elements in row-major order, as bytes.
func bytesOf(t *testing.T, v G.Value) []byte {
	t.Helper()
	switch x := v.(type) {
	case *tensor.Dense:
		if x.IsMaterializable() {
			x = x.Materialize().(*tensor.Dense)
		}
		return append([]byte(nil), x.Raw[:x.Shape().TotalSize()*int(x.Dtype().Size())]...)
	case G.Scalar:
		l, err := valueLayout(v)
		require.NoError(t, err)
		return append([]byte(nil), l.data...)
	}
	t.Fatalf("value of type %T", v)
	return nil
}

// requireBits fails unless got holds want's elements bit for bit.
func requireBits(t *testing.T, want G.Value, got *tensor.Dense) {
	t.Helper()
	w := bytesOf(t, want)
	g := bytesOf(t, got)
	require.Equal(t, len(w), len(g), "result sizes differ: want %v, got %v", want.Shape(), got.Shape())
	require.Equal(t, want.Dtype(), got.Dtype())
	if string(w) == string(g) {
		return
	}
	es := int(got.Dtype().Size())
	for i := 0; i < len(w); i += es {
		if raceEnabled && isNaN(w[i:i+es], got.Dtype()) && isNaN(g[i:i+es], got.Dtype()) {
			continue // which NaN an instrumented kernel keeps is the compiler's choice
		}
		if string(w[i:i+es]) != string(g[i:i+es]) {
			t.Fatalf("element %d of %d differs: want %s, got %s", i/es, len(w)/es, elem(w[i:i+es], got.Dtype()), elem(g[i:i+es], got.Dtype()))
		}
	}
}

func isNaN(b []byte, dt tensor.Dtype) bool {
	switch dt {
	case tensor.Float64:
		return math.IsNaN(*(*float64)(unsafe.Pointer(&b[0])))
	case tensor.Float32:
		v := *(*float32)(unsafe.Pointer(&b[0]))
		return v != v
	}
	return false
}

func elem(b []byte, dt tensor.Dtype) string {
	switch dt {
	case tensor.Float64:
		v := *(*float64)(unsafe.Pointer(&b[0]))
		return fmt.Sprintf("%v (%#016x)", v, math.Float64bits(v))
	case tensor.Float32:
		v := *(*float32)(unsafe.Pointer(&b[0]))
		return fmt.Sprintf("%v (%#08x)", v, math.Float32bits(v))
	}
	return fmt.Sprintf("% x", b)
}

// inputsOf gives every child of n a fresh value of its type: filled
// tensors, or scalars. Leaves with a value keep it (indices, lengths).
func inputsOf(n *G.Node, seed int) []G.Value {
	var ins []G.Value
	it := n.Graph().From(n.ID())
	for i := 0; it.Next(); i++ {
		c := it.Node().(*G.Node)
		if c.Value() != nil && (c.Dtype() == tensor.Int || c.IsScalar()) {
			ins = append(ins, c.Value())
			continue
		}
		if c.IsScalar() {
			ins = append(ins, scalarOf(c.Dtype(), 0.5+float64(seed+i)))
			continue
		}
		ins = append(ins, filled(c.Dtype(), seed+17*i, c.Shape()...))
	}
	return ins
}

// findOp is the node of the graph whose op has the given type.
func findOp(t *testing.T, g *G.ExprGraph, typ string) *G.Node {
	t.Helper()
	var found []*G.Node
	for _, n := range g.AllNodes() {
		if n.Op() != nil && fmt.Sprintf("%T", n.Op()) == typ {
			found = append(found, n)
		}
	}
	require.NotEmpty(t, found, "no %s in the graph", typ)
	return found[len(found)-1]
}

// findOps is every node of the graph whose op has the given type.
func findOps(g *G.ExprGraph, typ string) []*G.Node {
	var found []*G.Node
	for _, n := range g.AllNodes() {
		if n.Op() != nil && fmt.Sprintf("%T", n.Op()) == typ {
			found = append(found, n)
		}
	}
	return found
}

// gradOf differentiates the sum of n·w (w fixed, so every element of n
// gets its own gradient) with respect to xs.
func gradOf(t *testing.T, n *G.Node, xs ...*G.Node) {
	t.Helper()
	g := n.Graph()
	w := G.NewTensor(g, n.Dtype(), n.Dims(), G.WithShape(n.Shape().Clone()...), G.WithName(fmt.Sprintf("w%d", n.ID())),
		G.WithValue(filled(n.Dtype(), 99, n.Shape()...)))
	cost := G.Must(G.Sum(G.Must(G.HadamardProd(n, w))))
	_, err := G.Grad(cost, xs...)
	require.NoError(t, err)
}

// input makes a named tensor node.
func input(g *G.ExprGraph, dt tensor.Dtype, name string, shape ...int) *G.Node {
	return G.NewTensor(g, dt, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(filled(dt, len(name), shape...)))
}

// runBoth runs op.Do and For(op) on copies of the same inputs and requires
// equal bits. It returns Do's result.
func runBoth(t *testing.T, op G.Op, ins []G.Value, dt tensor.Dtype, shape tensor.Shape) G.Value {
	t.Helper()
	f, ok := For(op)
	require.True(t, ok, "For(%T) declined", op)
	want, err := op.Do(cloneAll(t, ins)...)
	require.NoError(t, err)
	out := poisoned(dt, shape...)
	require.NoError(t, f(out, cloneAll(t, ins)...))
	requireBits(t, want, out)
	require.Equal(t, []int(shape), []int(out.Shape()), "out keeps its shape")
	return want
}

// runBothOrFail is runBoth, except that where Do fails or panics the Func
// must return an error.
func runBothOrFail(t *testing.T, op G.Op, ins []G.Value, dt tensor.Dtype, shape tensor.Shape) {
	t.Helper()
	failed := func() (bad bool) {
		defer func() {
			if recover() != nil {
				bad = true
			}
		}()
		_, err := op.Do(cloneAll(t, ins)...)
		return err != nil
	}()
	if !failed {
		runBoth(t, op, ins, dt, shape)
		return
	}
	f, ok := For(op)
	require.True(t, ok)
	require.Error(t, f(poisoned(dt, shape...), cloneAll(t, ins)...), "Do fails; so must the Func")
}

// checkNode is runBoth on a graph node's op with fresh inputs.
func checkNode(t *testing.T, n *G.Node, seed int) {
	t.Helper()
	runBoth(t, n.Op(), inputsOf(n, seed), n.Dtype(), n.Shape())
}

// checkInPlace runs the Func with out over the memory of input k (for the
// elementwise ops), given as a tensor of shape outShape, and compares with
// Do on untouched inputs.
func checkInPlace(t *testing.T, op G.Op, ins []G.Value, k int, dt tensor.Dtype, outShape tensor.Shape) {
	t.Helper()
	f, ok := For(op)
	require.True(t, ok)
	want, err := op.Do(cloneAll(t, ins)...)
	require.NoError(t, err)
	mine := cloneAll(t, ins)
	xk := mine[k].(*tensor.Dense)
	require.Equal(t, dt, xk.Dtype())
	out := over(xk.Raw, dt, outShape...)
	require.NoError(t, f(out, mine...))
	requireBits(t, want, out)
}

// state is every tensor and plain field an op holds, recursively, as text:
// two ops with equal state print equal.
func state(op any) string {
	var b strings.Builder
	v := reflect.ValueOf(op)
	if v.Kind() != reflect.Pointer {
		p := reflect.New(v.Type())
		p.Elem().Set(v)
		v = p
	}
	dumpState(&b, v.Elem(), "", 0)
	return b.String()
}

var denseT = reflect.TypeOf((*tensor.Dense)(nil))

func dumpState(b *strings.Builder, v reflect.Value, path string, depth int) {
	if depth > 6 {
		return
	}
	if v.CanAddr() && !v.CanInterface() {
		v = reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			dumpState(b, v.Field(i), path+"."+v.Type().Field(i).Name, depth+1)
		}
	case reflect.Interface:
		if !v.IsNil() {
			dumpState(b, v.Elem(), path, depth+1)
		}
	case reflect.Pointer:
		if v.IsNil() {
			fmt.Fprintf(b, "%s=nil\n", path)
			return
		}
		if v.Type() == denseT {
			d := v.Interface().(*tensor.Dense)
			fmt.Fprintf(b, "%s=%v % x\n", path, d.Shape(), d.Raw)
			return
		}
		dumpState(b, v.Elem(), path, depth+1)
	case reflect.Func:
		fmt.Fprintf(b, "%s=func\n", path)
	case reflect.Slice, reflect.Array:
		fmt.Fprintf(b, "%s=%v\n", path, v.Interface())
	default:
		if v.CanInterface() {
			fmt.Fprintf(b, "%s=%v\n", path, v.Interface())
		}
	}
}
