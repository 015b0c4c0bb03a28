package dispatch_test

import (
	"strings"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm/cuda"
)

// TestIntDivideByZero: an Int ÷ by zero does on the fake CUDA device what
// it does on the CPU device. Between tensors, tensor's preallocated Div
// writes 0 there and reports nothing (TestCoverage's "Int div" rows have
// zero divisors); between two Int scalars gorgonia uses Go's /, which
// panics, and the CPU device's run fails: so does the CUDA device's, with
// an error that says so.
func TestIntDivideByZero(t *testing.T) {
	d := openFake(t)
	run := func(dev *cuda.Device, a, b int) (G.Value, error) {
		g := G.NewGraph()
		x := G.NewScalar(g, tensor.Int, G.WithName("a"), G.WithValue(a))
		y := G.NewScalar(g, tensor.Int, G.WithName("b"), G.WithValue(b))
		q, err := G.HadamardDiv(x, y)
		if err != nil {
			t.Fatal(err)
		}
		var out G.Value
		G.Read(q, &out)
		opts := []ooc.Option{ooc.Inference()}
		if dev != nil {
			opts = append(opts, ooc.WithDevice(dev))
		}
		m, err := ooc.Compile(g, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		err = m.RunAll()
		return out, err
	}
	for _, c := range []struct{ a, b int }{{-7, 2}, {7, -2}, {5, 0}} {
		want, cerr := run(nil, c.a, c.b)
		got, gerr := run(d, c.a, c.b)
		if c.b == 0 {
			if cerr == nil || gerr == nil || !strings.Contains(gerr.Error(), "integer divide by zero") {
				t.Errorf("%d ÷ %d: CPU device %v, fake CUDA device %v: want both to fail, integer divide by zero", c.a, c.b, cerr, gerr)
			}
			continue
		}
		if cerr != nil || gerr != nil {
			t.Fatalf("%d ÷ %d: CPU device %v, fake CUDA device %v", c.a, c.b, cerr, gerr)
		}
		if got.Data() != want.Data() {
			t.Errorf("%d ÷ %d: fake CUDA device %v, CPU device %v", c.a, c.b, got.Data(), want.Data())
		}
	}
}
