package zoocheck_test

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/zoocheck"
)

// The zoo's default cases (the rest are Deep) and the tolerance a GPU is
// held to per dtype.
func ExampleCases() {
	for _, c := range zoocheck.Cases {
		if !c.Deep {
			fmt.Println(c.Label())
		}
	}
	fmt.Println(zoocheck.Tolerance(tensor.Float32, false), zoocheck.Tolerance(tensor.Float64, false))
	// Output:
	// smallcnn float64 batch 4
	// smallcnn float32 batch 4
	// smallcnn float64 batch 2
	// lstm float32 batch 4
	// lstm float64 batch 4
	// 1e-05 1e-12
}
