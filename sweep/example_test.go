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

// With StopAtOOM and UntilStop a row is tried at no batch past the first it
// failed at, and the sweep adds batches until every row has failed: here the
// in-core baseline stops at batch 112 (64 + 48, the last step) in a simulated 64 MiB device, and the
// sweep with it. A TimeLimit would end it earlier, returning the points run
// and a *sweep.TimeLimitError; OnPoint sees each point as it comes.
func ExampleConfig_stopAtOOM() {
	cfg := sweep.Config{Model: "smallcnn", Image: 32, Classes: 4, Batches: []int{16, 64}, UntilStop: true, StopAtOOM: true,
		Device: "sim:v100-pcie", Capacity: 64 << 20, ChunkSize: 2 << 20, Schedulers: []string{"baseline"}, Allocators: []string{"va"}}
	cfg.OnPoint = func(sofar []sweep.Result) {
		r := sofar[len(sofar)-1]
		fmt.Printf("batch %d %s: ran %v\n", r.Batch, r.Scheduler, r.OK)
	}
	if _, err := sweep.Run(cfg); err != nil {
		log.Fatal(err)
	}
	// Output:
	// batch 16 baseline: ran true
	// batch 64 baseline: ran true
	// batch 112 baseline: ran false
}
