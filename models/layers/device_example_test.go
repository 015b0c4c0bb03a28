package layers_test

import (
	"fmt"
	"log"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models/layers"
)

// What a device backend learns of a layers op: here a strided convolution.
func ExampleDescribe() {
	g := G.NewGraph()
	x := G.NewTensor(g, tensor.Float32, 4, G.WithShape(2, 3, 8, 8), G.WithName("x"))
	w := G.NewTensor(g, tensor.Float32, 4, G.WithShape(4, 3, 3, 3), G.WithName("w"))
	y, err := layers.Conv2D(x, w, nil, layers.Square(2, 1))
	if err != nil {
		log.Fatal(err)
	}
	d, ok := layers.Describe(y.Op())
	fmt.Println(ok, d.Kind == layers.DevConv, d.Conv.StrideH, d.Conv.PadW, d.Conv.DilationH, d.Bias)
	_, ok = layers.Describe(G.NewConstant(1.0).Op())
	fmt.Println(ok)
	// Output:
	// true true 2 1 1 false
	// false
}
