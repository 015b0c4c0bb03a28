package sweep_test

import (
	"fmt"
	"log"

	"github.com/gorgonia-ooc/outofcore/sweep"
)

// A batch-size sweep on a simulated device of 320 MiB (VA chunks of 2 MiB): in core (baseline)
// ResNet-18 on 32x32 images runs out of memory at batch 512, the window
// scheduler swaps and trains it. The figures are simulated (the table says
// with which profile); on the CPU device they are measured.
func ExampleRun() {
	rs, err := sweep.Run(sweep.Config{Model: "resnet18", Image: 32, Classes: 10, Batches: []int{128, 512},
		Device: "sim:v100-pcie", Capacity: 320 << 20, ChunkSize: 2 << 20, Schedulers: []string{"baseline", "window"}, Allocators: []string{"va"}})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range rs {
		fmt.Printf("batch %d %s: ran %v, simulated %v\n", r.Batch, r.Scheduler, r.OK, r.Simulated)
	}
	// Output:
	// batch 128 baseline: ran true, simulated true
	// batch 128 window: ran true, simulated true
	// batch 512 baseline: ran false, simulated true
	// batch 512 window: ran true, simulated true
}
