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
		{"transpose", func(g *G.ExprGraph, x *G.Node) (*G.Node, error) {
			y, err := G.Transpose(x, 1, 0)
			if err != nil {
				return nil, err
			}
			return G.Sum(y)
		}, []string{"no CUDA implementation", "transposeOp", "Aᵀ"}},
		{"comparison with a bool result", func(g *G.ExprGraph, x *G.Node) (*G.Node, error) {
			return G.Gt(x, x, false)
		}, []string{"no CUDA implementation", "elemBinOp", "bool"}},
		{"sum over two apart axes", func(g *G.ExprGraph, x *G.Node) (*G.Node, error) {
			x3, err := G.Reshape(x, tensor.Shape{2, 3, 1})
			if err != nil {
				return nil, err
			}
			return G.Sum(x3, 0, 2)
		}, []string{"no CUDA implementation", "sumOp", "adjacent axes"}},
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
