package dispatch_test

import (
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
)

// TestUnsupportedOpIsACompileError: an op with no CUDA implementation stops
// Compile with an error naming the op and its node; nothing runs through
// host memory instead.
func TestUnsupportedOpIsACompileError(t *testing.T) {
	d := openFake(t)
	for _, c := range []struct {
		name  string
		build func(g *G.ExprGraph, x *G.Node) (*G.Node, error)
		want  []string
	}{
		{"transpose of more axes than a layout walks", func(g *G.ExprGraph, x *G.Node) (*G.Node, error) {
			s := tensor.Shape{2, 2, 2, 2, 2, 2, 2}
			x7 := G.NewTensor(g, tensor.Float32, 7, G.WithShape(s...), G.WithName("x7"), G.WithValue(tensor.New(tensor.WithShape(s...), tensor.Of(tensor.Float32))))
			return G.Transpose(x7, 6, 5, 4, 3, 2, 1, 0)
		}, []string{"no CUDA implementation", "transposeOp", "at most 6 axes"}},
		{"power of Int tensors (tensor has none: the CPU device fails at Run)", func(g *G.ExprGraph, x *G.Node) (*G.Node, error) {
			i := G.NewMatrix(g, tensor.Int, G.WithShape(2, 3), G.WithName("i"), G.WithValue(tensor.New(tensor.WithShape(2, 3), tensor.Of(tensor.Int))))
			return G.Pow(i, i)
		}, []string{"no CUDA implementation", "elemBinOp", "on Int tensors", "no Int ^"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewMatrix(g, tensor.Float32, G.WithShape(2, 3), G.WithName("x"), G.WithValue(tensor.New(tensor.WithShape(2, 3), tensor.Of(tensor.Float32))))
			y, err := c.build(g, x)
			if err != nil {
				t.Fatal(err)
			}
			_, err = ooc.Compile(g, ooc.WithDevice(d), ooc.Inference())
			if err == nil {
				t.Fatalf("Compile of %v on the CUDA device succeeded", y)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
			t.Log(err)
		})
	}
}
