package prealloc

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

var unaries = map[string]func(*G.Node) (*G.Node, error){
	"Abs": G.Abs, "Sign": G.Sign, "Ceil": G.Ceil, "Floor": G.Floor, "Sin": G.Sin, "Cos": G.Cos,
	"Exp": G.Exp, "Log": G.Log, "Log2": G.Log2, "Neg": G.Neg, "Square": G.Square, "Sqrt": G.Sqrt,
	"Inverse": G.Inverse, "InverseSqrt": G.InverseSqrt, "Cube": G.Cube, "Tanh": G.Tanh,
	"Sigmoid": G.Sigmoid, "Log1p": G.Log1p, "Expm1": G.Expm1, "Softplus": G.Softplus,
}

func TestElemUnary(t *testing.T) {
	for name, f := range unaries {
		for _, dt := range floats {
			t.Run(fmt.Sprintf("%s/%v", name, dt), func(t *testing.T) {
				g := G.NewGraph()
				n := G.Must(f(input(g, dt, "x", 4, 8, 3, 3)))
				require.Equal(t, "gorgonia.elemUnaryOp", fmt.Sprintf("%T", n.Op()))
				ins := []G.Value{special(filled(dt, 1, 4, 8, 3, 3))}
				runBoth(t, n.Op(), ins, dt, n.Shape())
				// In place, with out shaped as after a reshape.
				checkInPlace(t, n.Op(), ins, 0, dt, tensor.Shape{4, 72})
				checkInPlace(t, n.Op(), ins, 0, dt, n.Shape())
			})
		}
	}
}

type binCase struct {
	name string
	f    func(a, b *G.Node) (*G.Node, error)
}

func binaries() []binCase {
	cmp := func(f func(a, b *G.Node, same bool) (*G.Node, error), same bool) func(a, b *G.Node) (*G.Node, error) {
		return func(a, b *G.Node) (*G.Node, error) { return f(a, b, same) }
	}
	cs := []binCase{
		{"Add", G.Add}, {"Sub", G.Sub}, {"HadamardProd", G.HadamardProd}, {"HadamardDiv", G.HadamardDiv}, {"Pow", G.Pow},
	}
	for _, same := range []bool{true, false} {
		cs = append(cs,
			binCase{fmt.Sprint("Lt", same), cmp(G.Lt, same)}, binCase{fmt.Sprint("Gt", same), cmp(G.Gt, same)},
			binCase{fmt.Sprint("Lte", same), cmp(G.Lte, same)}, binCase{fmt.Sprint("Gte", same), cmp(G.Gte, same)},
			binCase{fmt.Sprint("Eq", same), cmp(G.Eq, same)}, binCase{fmt.Sprint("Ne", same), cmp(G.Ne, same)})
	}
	return cs
}

func TestElemBinary(t *testing.T) {
	shape := []int{4, 8, 3, 3}
	for _, c := range binaries() {
		for _, dt := range floats {
			for _, form := range []string{"tensor-tensor", "tensor-scalar", "scalar-tensor"} {
				t.Run(fmt.Sprintf("%s/%v/%s", c.name, dt, form), func(t *testing.T) {
					g := G.NewGraph()
					var a, b *G.Node
					var ins []G.Value
					x := special(filled(dt, 1, shape...))
					y := filled(dt, 2, shape...)
					// Make some elements equal so == and <= are tested both ways.
					copy(y.Raw[:len(y.Raw)/4], x.Raw[:len(x.Raw)/4])
					s := scalarOf(dt, 0.75)
					switch form {
					case "tensor-tensor":
						a, b = input(g, dt, "a", shape...), input(g, dt, "b", shape...)
						ins = []G.Value{x, y}
					case "tensor-scalar":
						a, b = input(g, dt, "a", shape...), G.NewScalar(g, dt, G.WithName("s"))
						ins = []G.Value{x, s}
					case "scalar-tensor":
						a, b = G.NewScalar(g, dt, G.WithName("s")), input(g, dt, "b", shape...)
						ins = []G.Value{s, y}
					}
					n, err := c.f(a, b)
					require.NoError(t, err)
					require.Equal(t, "gorgonia.elemBinOp", fmt.Sprintf("%T", n.Op()))
					runBoth(t, n.Op(), ins, n.Dtype(), n.Shape())
					if n.Dtype() != dt {
						return // a Bool result cannot share an operand's memory
					}
					for k, in := range ins {
						if _, ok := in.(*tensor.Dense); ok {
							checkInPlace(t, n.Op(), ins, k, dt, tensor.Shape{4, 72})
						}
					}
				})
			}
		}
	}
}

// The comparison that motivated the mirrored path: tensor's same-type
// comparison with its result over the right operand reads b after
// overwriting it with a. Gorgonia's own UsePreallocDo gets it wrong.
func TestCompareOverRightOperand(t *testing.T) {
	g := G.NewGraph()
	a, b := input(g, tensor.Float64, "a", 3, 4), input(g, tensor.Float64, "b", 3, 4)
	n := G.Must(G.Gt(a, b, true))
	x, y := filled(tensor.Float64, 1, 3, 4), filled(tensor.Float64, 2, 3, 4)
	want, err := n.Op().Do(x, y)
	require.NoError(t, err)

	y2 := y.Clone().(*tensor.Dense)
	out := over(y2.Raw, tensor.Float64, 3, 4)
	_, err = n.Op().(G.UsePreallocDoer).UsePreallocDo(out, x, y2)
	require.NoError(t, err)
	require.NotEqual(t, bytesOf(t, want), bytesOf(t, out), "gorgonia's in-place comparison over b compares a with itself")

	checkInPlace(t, n.Op(), []G.Value{x, y}, 1, tensor.Float64, tensor.Shape{3, 4})
}

// x op x: both operands are one tensor, and out is it too.
func TestElemBinarySameOperand(t *testing.T) {
	for _, c := range binaries() {
		g := G.NewGraph()
		a := input(g, tensor.Float64, "a", 3, 4)
		n, err := c.f(a, a)
		require.NoError(t, err)
		if n.Dtype() != tensor.Float64 {
			continue
		}
		f, ok := For(n.Op())
		require.True(t, ok)
		x := special(filled(tensor.Float64, 1, 3, 4))
		want, err := n.Op().Do(x.Clone().(*tensor.Dense), x.Clone().(*tensor.Dense))
		require.NoError(t, err)
		mine := x.Clone().(*tensor.Dense)
		out := over(mine.Raw, tensor.Float64, 12)
		require.NoError(t, f(out, mine, mine), c.name)
		requireBits(t, want, out)
	}
}

func TestMinMaxBetween(t *testing.T) {
	for _, dt := range floats {
		for name, f := range map[string]func(a, b *G.Node) (*G.Node, error){"min": G.MinBetween, "max": G.MaxBetween} {
			g := G.NewGraph()
			n := G.Must(f(input(g, dt, "a", 3, 5), input(g, dt, "b", 3, 5)))
			ins := inputsOf(n, 1)
			special(ins[0].(*tensor.Dense))
			t.Run(fmt.Sprintf("%s/%v", name, dt), func(t *testing.T) { runBoth(t, n.Op(), ins, dt, n.Shape()) })
		}
	}
}

// Values where tensor's Vec kernels (Do) and its Recv/SV kernels
// (UsePreallocDo) part ways: zero divisors, the exponents 0 to 3 with NaNs
// of both signs and subnormal results, and a one-element tensor under a
// scalar left operand.
func TestElemBinaryKernelQuirks(t *testing.T) {
	negNaN := math.Float64frombits(0xfff8000000000000) // x86's 0/0
	bases := []float64{0, math.Copysign(0, -1), 1.5, -2.25, math.NaN(), negNaN, math.Inf(-1), 1e-160, -3e-110, 1e300, 7}
	exps := []float64{0, 1, 2, 3, 0.5, -1, math.Copysign(0, -1), 2.5, math.NaN(), -2, 4}
	for _, dt := range floats {
		n := len(bases) * len(exps)
		x, y := tensor.New(tensor.Of(dt), tensor.WithShape(n)), tensor.New(tensor.Of(dt), tensor.WithShape(n))
		for i := 0; i < n; i++ {
			b, e := bases[i/len(exps)], exps[i%len(exps)]
			if dt == tensor.Float32 {
				x.Float32s()[i], y.Float32s()[i] = float32(b), float32(e)
			} else {
				x.Float64s()[i], y.Float64s()[i] = b, e
			}
		}
		for _, c := range []binCase{{"Pow", G.Pow}, {"HadamardDiv", G.HadamardDiv}, {"Add", G.Add}, {"Sub", G.Sub}, {"HadamardProd", G.HadamardProd}} {
			t.Run(fmt.Sprintf("%s/%v", c.name, dt), func(t *testing.T) {
				g := G.NewGraph()
				vv := G.Must(c.f(input(g, dt, "a", n), input(g, dt, "b", n))).Op()
				ins := []G.Value{x, y}
				runBoth(t, vv, ins, dt, tensor.Shape{n})
				checkInPlace(t, vv, ins, 0, dt, tensor.Shape{n})
				checkInPlace(t, vv, ins, 1, dt, tensor.Shape{n})
				for _, s := range []float64{0, 2, 3, -0.5, math.NaN()} {
					sv := G.Must(c.f(G.NewScalar(g, dt, G.WithName(fmt.Sprint("s", s))), input(g, dt, "b", n))).Op()
					ins := []G.Value{scalarOf(dt, s), x}
					runBoth(t, sv, ins, dt, tensor.Shape{n})
					checkInPlace(t, sv, ins, 1, dt, tensor.Shape{n})
					vs := G.Must(c.f(input(g, dt, "a", n), G.NewScalar(g, dt, G.WithName(fmt.Sprint("t", s))))).Op()
					ins = []G.Value{x, scalarOf(dt, s)}
					runBoth(t, vs, ins, dt, tensor.Shape{n})
					checkInPlace(t, vs, ins, 0, dt, tensor.Shape{n})
				}
				// A one-element tensor under a scalar: tensor's reuse path
				// copies the scalar over the result.
				one := G.Must(c.f(G.NewScalar(g, dt, G.WithName("u")), input(g, dt, "one", 1))).Op()
				runBoth(t, one, []G.Value{scalarOf(dt, 3), filled(dt, 4, 1)}, dt, tensor.Shape{1})
				// One-element tensors on both sides: tensor's kernels take
				// them for scalars.
				vv1 := G.Must(c.f(input(g, dt, "a1", 1), input(g, dt, "b1", 1))).Op()
				for i := 0; i < n; i += 5 {
					x1, y1 := tensor.New(tensor.Of(dt), tensor.WithShape(1)), tensor.New(tensor.Of(dt), tensor.WithShape(1))
					copy(x1.Raw, x.Raw[i*int(dt.Size()):])
					copy(y1.Raw, y.Raw[i*int(dt.Size()):])
					runBoth(t, vv1, []G.Value{x1, y1}, dt, tensor.Shape{1})
					checkInPlace(t, vv1, []G.Value{x1, y1}, 1, dt, tensor.Shape{1})
				}
			})
		}
	}
}

// What the Funcs work around, shown on gorgonia's own UsePreallocDo (the
// path the VM trusts for elemBinOp): results that differ from Do.
func TestElemBinaryPreallocDiffersFromDo(t *testing.T) {
	g := G.NewGraph()
	div := G.Must(G.HadamardDiv(input(g, tensor.Float64, "a", 3), input(g, tensor.Float64, "b", 3))).Op()
	a := tensor.New(tensor.WithBacking([]float64{1, -1, 0}))
	b := tensor.New(tensor.WithBacking([]float64{0, 0, 0}))
	want, err := div.Do(a, b)
	require.NoError(t, err)
	require.Equal(t, []float64{math.Inf(1), math.Inf(1), math.Inf(1)}, want.Data(), "vecf64.Div: any x/0 is +Inf")
	got := tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(3))
	_, err = div.(G.UsePreallocDoer).UsePreallocDo(got, a, b)
	require.NoError(t, err)
	require.Equal(t, math.Inf(-1), got.Float64s()[1])
	require.True(t, math.IsNaN(got.Float64s()[2]))

	sdiv := G.Must(G.HadamardDiv(G.NewScalar(g, tensor.Float64, G.WithName("s")), input(g, tensor.Float64, "b", 3))).Op()
	bz := tensor.New(tensor.WithBacking([]float64{2, math.Copysign(0, -1), 0}))
	want, err = sdiv.Do(G.NewF64(1), bz)
	require.NoError(t, err)
	require.Equal(t, []float64{0.5, math.Inf(1), math.Inf(1)}, want.Data())
	got = tensor.New(tensor.Of(tensor.Float64), tensor.WithShape(3))
	_, err = sdiv.(G.UsePreallocDoer).UsePreallocDo(got, G.NewF64(1), bz)
	require.NoError(t, err)
	require.Equal(t, []float64{0.5, math.Inf(-1), math.Inf(1)}, got.Data())

	pow := G.Must(G.Pow(input(g, tensor.Float32, "x", 2), input(g, tensor.Float32, "y", 2))).Op()
	nan := tensor.New(tensor.WithBacking([]float32{1.5, float32(math.Float64frombits(0xfff8000000000000))}))
	two := tensor.New(tensor.WithBacking([]float32{2, 2}))
	want, err = pow.Do(nan, two)
	require.NoError(t, err)
	got = tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(2))
	_, err = pow.(G.UsePreallocDoer).UsePreallocDo(got, nan, two)
	require.NoError(t, err)
	require.NotEqual(t, bytesOf(t, want), bytesOf(t, got), "vecf32.Pow squares (keeping the NaN), math32.Pow returns its own NaN")
}

// TestTensorArithBothNaN: +, - and ⊙ of two tensors of one shape, as a loss's gradient
// multiplies them, give Do's bits where both operands are NaNs of different payloads (the
// left one's survives, as in tensor's compiled loops), written to fresh memory or over either
// operand, and allocate nothing.
func TestTensorArithBothNaN(t *testing.T) {
	for _, c := range []binCase{{"Add", G.Add}, {"Sub", G.Sub}, {"HadamardProd", G.HadamardProd}} {
		for _, dt := range floats {
			for _, shape := range [][]int{{64, 10}, {3, 5, 7}, {1}} {
				t.Run(fmt.Sprintf("%s/%v/%v", c.name, dt, shape), func(t *testing.T) {
					g := G.NewGraph()
					n, err := c.f(input(g, dt, "a", shape...), input(g, dt, "b", shape...))
					require.NoError(t, err)
					x := special(filled(dt, 1, shape...))
					y := special(filled(dt, 2, shape...))
					repayNaNs(y)
					ins := []G.Value{x, y}
					runBoth(t, n.Op(), ins, dt, n.Shape())
					checkInPlace(t, n.Op(), ins, 0, dt, n.Shape())
					checkInPlace(t, n.Op(), ins, 1, dt, n.Shape())
					f, ok := For(n.Op())
					require.True(t, ok)
					out := poisoned(dt, shape...)
					require.Zero(t, testing.AllocsPerRun(5, func() { require.NoError(t, f(out, ins...)) }), "allocations per call")
				})
			}
		}
	}
}

// repayNaNs gives every NaN of t another payload (and sign), so a result tells which
// operand's NaN it kept.
func repayNaNs(t *tensor.Dense) {
	switch t.Dtype() {
	case tensor.Float64:
		for i, v := range t.Float64s() {
			if v != v {
				t.Float64s()[i] = math.Float64frombits(math.Float64bits(v) ^ 0x8000000000000555)
			}
		}
	case tensor.Float32:
		for i, v := range t.Float32s() {
			if v != v {
				t.Float32s()[i] = math.Float32frombits(math.Float32bits(v) ^ 0x80000555)
			}
		}
	}
}

// TestTensorScalarArith: a tensor OP a scalar (the right operand), for + - ⊙ ÷ ^, gives Do's
// bits for every scalar that tells conventions apart (signed zeros, infinities, NaNs of other
// payloads than the tensor's), on a one-element tensor (where tensor's vec kernels run: x/0 is
// +Inf, powers 2 and 3 by multiplying) and on larger ones, into fresh memory or over the
// tensor, and allocates nothing.
func TestTensorScalarArith(t *testing.T) {
	arith := []binCase{{"Add", G.Add}, {"Sub", G.Sub}, {"HadamardProd", G.HadamardProd}, {"HadamardDiv", G.HadamardDiv}, {"Pow", G.Pow}}
	for _, c := range arith {
		for _, dt := range floats {
			for _, shape := range [][]int{{1}, {1, 1}, {64, 10}, {5, 7}} {
				t.Run(fmt.Sprintf("%s/%v/%v", c.name, dt, shape), func(t *testing.T) {
					g := G.NewGraph()
					n, err := c.f(input(g, dt, "a", shape...), G.NewScalar(g, dt, G.WithName("s")))
					require.NoError(t, err)
					require.Equal(t, "gorgonia.elemBinOp", fmt.Sprintf("%T", n.Op()))
					x := special(filled(dt, 1, shape...))
					for _, s := range append(scalarsOf(dt), scalarOf(dt, 2), scalarOf(dt, 3)) {
						ins := []G.Value{x, s}
						runBoth(t, n.Op(), ins, dt, n.Shape())
						checkInPlace(t, n.Op(), ins, 0, dt, n.Shape())
					}
					if len(shape) == 1 {
						// a one-element tensor's own values against every scalar
						for _, v := range scalarsOf(dt) {
							one := tensor.New(tensor.Of(dt), tensor.WithShape(1))
							copy(one.Raw, bytesOf(t, v))
							for _, s := range append(scalarsOf(dt), scalarOf(dt, 1), scalarOf(dt, 2), scalarOf(dt, 3)) {
								runBoth(t, n.Op(), []G.Value{one, s}, dt, n.Shape())
							}
						}
					}
					f, ok := For(n.Op())
					require.True(t, ok)
					out := poisoned(dt, shape...)
					ins := []G.Value{x, scalarOf(dt, 0.75)}
					require.Zero(t, testing.AllocsPerRun(5, func() { require.NoError(t, f(out, ins...)) }), "allocations per call")
				})
			}
		}
	}
}
