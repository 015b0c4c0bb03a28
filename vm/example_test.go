package vm_test

import (
	"fmt"
	"log"

	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models/layers"
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

// Allocators for a device are made through it: vm.NewVA asks the device when it makes its
// own (a CUDA device without working virtual memory management gives best-fit), and makes
// package alloc's VA allocator over the device's memory otherwise, as here on the CPU device.
func ExampleNewVA() {
	d, err := vm.NewCPU(64 << 20)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	va, err := vm.NewVA(d, 2<<20)
	if err != nil {
		log.Fatal(err)
	}
	b, err := va.Alloc(3 << 20)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(va.Name(), b.Size(), va.Stats().Mapped)
	_ = va.Free(b)
	_ = va.Close()
	bf := vm.NewBestFit(d)
	fmt.Println(bf.Name())
	_ = bf.Close()
	// Output:
	// va 3145728 4194304
	// bestfit
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

// A training loop hands each next batch over before the step that precedes
// it: on a CUDA device the machine then copies it in (from pinned memory, on
// the host-to-device stream) right after that step's last read of x, beside
// the rest of its work. The script still lets each batch before its step.
// On the CPU device, as here, leaves are read where the script keeps them,
// so StageNext only checks its arguments and the results are the same.
func ExampleMachine_StageNext() {
	g := gorgonia.NewGraph()
	x := gorgonia.NewMatrix(g, tensor.Float64, gorgonia.WithShape(2, 2), gorgonia.WithName("x"))
	cost := gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.Mul(x, x))))
	m, err := ooc.Compile(g, ooc.WithOutputs(cost))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	batches := make([]*tensor.Dense, 3)
	for i := range batches {
		batches[i] = tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float64{1, 2, 3, float64(i)}))
	}
	for i, b := range batches {
		if err := gorgonia.Let(x, b); err != nil {
			log.Fatal(err)
		}
		if i+1 < len(batches) {
			if err := m.StageNext(x, batches[i+1]); err != nil {
				log.Fatal(err)
			}
		}
		if err := m.RunAll(); err != nil {
			log.Fatal(err)
		}
		fmt.Println("step", i+1, "cost", cost.Value())
		m.Reset() // as with TapeMachine, the next RunAll runs only after Reset
	}
	// Output:
	// step 1 cost 18
	// step 2 cost 24
	// step 3 cost 32
}

// On the CPU device a machine runs a batch norm and the ReLU after it as one pass where nothing
// else sees the batch norm's output (vm.Fuser); the tape stays as planned, and so do the bits.
// Binding the forward's values to their nodes (ooc's default, for small graphs) hands that
// output to the user, so this compiles with none bound, as package train does.
func ExampleMachine_Fused() {
	g := gorgonia.NewGraph()
	x := gorgonia.NewTensor(g, tensor.Float32, 4, gorgonia.WithShape(2, 3, 4, 4), gorgonia.WithName("x"), gorgonia.WithInit(gorgonia.RangedFrom(0)))
	gamma := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(3), gorgonia.WithName("gamma"), gorgonia.WithInit(gorgonia.Ones()))
	beta := gorgonia.NewVector(g, tensor.Float32, gorgonia.WithShape(3), gorgonia.WithName("beta"), gorgonia.WithInit(gorgonia.Zeroes()))
	bn, _, err := layers.BatchNorm(x, gamma, beta, 0.1, 1e-5)
	if err != nil {
		log.Fatal(err)
	}
	y, err := layers.ReLU(bn)
	if err != nil {
		log.Fatal(err)
	}
	gorgonia.Must(gorgonia.Sum(gorgonia.Must(gorgonia.Reshape(y, tensor.Shape{96}))))
	m, err := ooc.Compile(g, ooc.Baseline(), ooc.WithNodeValues(0))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	p := m.Program()
	for _, f := range m.Fused() {
		fmt.Printf("%v with %v\n", p.Funcs[f.Head].Op, p.Funcs[f.Tail].Op)
	}
	m.SetFusion(false)
	fmt.Println(len(m.Fused()), "fused")
	// Output:
	// BatchNorm{C=3 momentum=0.1 eps=1e-05} with ReLU
	// 0 fused
}
