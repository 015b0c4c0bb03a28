package ooc

import (
	"testing"

	"github.com/stretchr/testify/require"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestGorgoniaViews: isView holds exactly for the nodes whose op's Do
// returns a tensor over its operand's memory, among every gorgonia op that
// changes only a tensor's shape or layout, so tapeClobbers and the trace
// know each view TapeMachine's register allocator does not.
func TestGorgoniaViews(t *testing.T) {
	g := gorgonia.NewGraph()
	mat := func(name string, shape ...int) *gorgonia.Node {
		return gorgonia.NewTensor(g, tensor.Float64, len(shape), gorgonia.WithShape(shape...), gorgonia.WithName(name),
			gorgonia.WithValue(tensor.New(tensor.WithShape(shape...), tensor.WithBacking(make([]float64, tensor.Shape(shape).TotalSize())))))
	}
	x, y, row := mat("x", 4, 6), mat("y", 4, 6), mat("row", 1, 6)
	for _, tc := range []struct {
		name string
		n    *gorgonia.Node
	}{
		{"reshape", gorgonia.Must(gorgonia.Reshape(x, tensor.Shape{6, 4}))},
		{"ravel", gorgonia.Must(gorgonia.Ravel(x))},
		{"concat-of-one", gorgonia.Must(gorgonia.Concat(1, x))},
		{"concat-of-two", gorgonia.Must(gorgonia.Concat(1, x, y))},
		{"transpose", gorgonia.Must(gorgonia.Transpose(x))},
		{"transpose-row", gorgonia.Must(gorgonia.Transpose(row))},
		{"slice-whole", gorgonia.Must(gorgonia.Slice(x, gorgonia.S(0, 4)))},
		{"slice-rows", gorgonia.Must(gorgonia.Slice(x, gorgonia.S(1, 3)))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops := operands(tc.n)
			var in []gorgonia.Value
			for _, o := range ops {
				in = append(in, o.Value())
			}
			out, err := tc.n.Op().Do(in...)
			require.NoError(t, err)
			shares := false
			for _, o := range ops {
				shares = shares || out.(tensor.Tensor).Uintptr() == o.Value().(tensor.Tensor).Uintptr()
			}
			require.Equal(t, shares, isView(tc.n), "%v: Do's result shares an operand's memory: %v", tc.n.Op(), shares)
		})
	}
}
