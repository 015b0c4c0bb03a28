package vm_test

import (
	"fmt"
	"log"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

// Devices by their command-line names: a simulated GPU of a profile's
// memory, or the CPU device with a given capacity.
func ExampleNewDevice() {
	for _, spec := range []string{"sim:v100-pcie", "cpu"} {
		d, err := vm.NewDevice(spec, 0)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: simulated %v\n", d.Name(), d.Simulated())
		d.Close()
	}
	// Output:
	// sim:v100-pcie: simulated true
	// cpu: simulated false
}

// A Machine runs the tape ooc.Compile makes, here on a CPU device of 64 MiB;
// its Stats say how much device memory the step held at once: the 256 KiB
// product and a few bytes for the sum; the input x is a leaf, which the CPU
// device leaves in host memory.
func ExampleMachine() {
	g := gorgonia.NewGraph()
	x := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(256, 256), gorgonia.WithName("x"),
		gorgonia.WithInit(gorgonia.RangedFrom(0)))
	y := gorgonia.Must(gorgonia.Mul(x, x))
	cost := gorgonia.Must(gorgonia.Sum(y))
	dev, err := vm.NewCPU(64 << 20)
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	m, err := ooc.Compile(g, ooc.WithDevice(dev), ooc.WithOutputs(cost))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	if err := m.RunAll(); err != nil {
		log.Fatal(err)
	}
	st := m.Stats()
	fmt.Println("steps:", st.Steps, "device peak (bytes):", st.PeakDeviceBytes)
	// Output: steps: 1 device peak (bytes): 262152
}
