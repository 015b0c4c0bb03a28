package ooc

// Devices by name: WithDevice(vm.NewDevice("cuda:1", 0)) works for every user of this
// package, which links the CUDA device in (it registers itself with vm; it loads no
// driver until a cuda device is opened).
import _ "github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch"
