package kernelcheck_test

import (
	"fmt"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels/kernelcheck"
)

// A group's cases, one per dtype, and the tolerances a GPU is held to: each
// case runs on a Mem over a Device (the kernels' tests: the host build; ooc
// doctor: a GPU).
func ExampleGroup() {
	for _, c := range kernelcheck.Group("relu") {
		fmt.Println(c.Name())
	}
	fmt.Println(kernelcheck.Tolerance(4), kernelcheck.Tolerance(8))
	// Output:
	// relu f32
	// relu f64
	// 1e-05 1e-12
}
