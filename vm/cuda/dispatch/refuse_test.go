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
// host memory instead. The integer forms refused are those gorgonia's Do
// lacks: the CPU device fails on them at Run (checked here).
func TestUnsupportedOpIsACompileError(t *testing.T) {
	d := openFake(t)
	for _, c := range []struct {
		name     string
		build    func(g *G.ExprGraph, x *G.Node) (*G.Node, error)
		want     []string
		cpuFails bool // the CPU device fails too: the refusal loses nothing
	}{
		{"transpose of more axes than a layout walks", func(g *G.ExprGraph, x *G.Node) (*G.Node, error) {
			s := tensor.Shape{2, 2, 2, 2, 2, 2, 2}
			x7 := G.NewTensor(g, tensor.Float32, 7, G.WithShape(s...), G.WithName("x7"), G.WithValue(tensor.New(tensor.WithShape(s...), tensor.Of(tensor.Float32))))
			return G.Transpose(x7, 6, 5, 4, 3, 2, 1, 0)
		}, []string{"no CUDA implementation", "transposeOp", "at most 6 axes"}, false},
		{"power of Int tensors (tensor has none: the CPU device fails at Run)", func(g *G.ExprGraph, x *G.Node) (*G.Node, error) {
			i := G.NewMatrix(g, tensor.Int, G.WithShape(2, 3), G.WithName("i"), G.WithValue(tensor.New(tensor.WithShape(2, 3), tensor.Of(tensor.Int))))
			return G.Pow(i, i)
		}, []string{"no CUDA implementation", "elemBinOp", "on Int tensors", "no Int ^"}, true},
		{"an Int tensor times an Int scalar (gorgonia's Do has no such form)", func(g *G.ExprGraph, x *G.Node) (*G.Node, error) {
			i := G.NewMatrix(g, tensor.Int, G.WithShape(2, 3), G.WithName("i"), G.WithValue(tensor.New(tensor.WithShape(2, 3), tensor.Of(tensor.Int))))
			return G.HadamardProd(i, G.NewScalar(g, tensor.Int, G.WithName("s"), G.WithValue(2)))
		}, []string{"no CUDA implementation", "elemBinOp", "integer tensor with an integer scalar"}, true},
		{"MaxBetween of Int scalars (gorgonia's Do has none)", func(g *G.ExprGraph, x *G.Node) (*G.Node, error) {
			return G.MaxBetween(G.NewScalar(g, tensor.Int, G.WithName("s"), G.WithValue(2)), G.NewScalar(g, tensor.Int, G.WithName("u"), G.WithValue(3)))
		}, []string{"no CUDA implementation", "maxBetween", "integer scalars"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := G.NewGraph()
			x := G.NewMatrix(g, tensor.Float32, G.WithShape(2, 3), G.WithName("x"), G.WithValue(tensor.New(tensor.WithShape(2, 3), tensor.Of(tensor.Float32))))
			y, err := c.build(g, x)
			if err != nil {
				t.Fatal(err)
			}
			if m, err := ooc.Compile(g, ooc.Inference()); err == nil { // the CPU device cannot run these either
				err = m.RunAll()
				m.Close()
				if err == nil && c.cpuFails {
					t.Errorf("the CPU device runs %v: the CUDA device should plan it", y)
				}
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
