package cuda_test

import (
	"fmt"
	"log"

	"github.com/gorgonia-ooc/outofcore/vm/cuda"
)

// The swap protocol of a VM step, on a machine with a GPU: a swap-in the kernel waits for
// where it reads it, a swap-out whose block is freed once its copy is done, and one host
// synchronization at the end of the step.
func Example() {
	d, err := cuda.Open(0) // cuda:0 through libcuda.so.1; fails clearly on a machine without one
	if err != nil {
		log.Fatal(err) // e.g. cuda: no NVIDIA driver: tried $OOC_CUDA_LIBRARY (unset), the loader's path (libcuda.so.1), ...
	}
	defer d.Close()
	a, err := d.NewVA(40 << 20) // VA over cuMemCreate/cuMemMap (best-fit on a device without VMM)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	x, _ := a.Alloc(64 << 20)
	host, _ := d.Pinned().Get(64 << 20) // pinned: the copies overlap compute

	in, _ := d.CopyIn(x.Addr(), host.Bytes) // swap-in, queued on the host-to-device stream
	// ... kernels that do not read x run meanwhile ...
	_ = d.WaitFor(in) // compute waits on the device, at the first kernel that reads x
	// ... kernels that read x ...
	out, _ := d.CopyOut(host.Bytes, x.Addr()) // swap-out, after the kernels issued so far
	_ = out.Wait()                            // x's block may be reused only once its copy is done
	_ = a.Free(x)
	step, _ := d.EndStep() // one host synchronization; times measured with events
	fmt.Println(step.Stall, d.Info().Name)
}

// A search with one more toolkit root and no Python: the driver, cuBLAS and NCCL are
// looked for under /opt/cuda* as under /usr/local/cuda*. It needs a GPU: not run here.
func ExampleWithSearch() {
	s := cuda.DefaultSearch()
	s.Roots = append(s.Roots, "/opt") // /opt/cuda-13.0/lib64, /opt/cuda/lib64, ...
	s.Python = ""                     // no site-packages
	d, err := cuda.Open(0, cuda.WithSearch(s))
	if err != nil {
		log.Fatal(err) // lists every place tried, and what to install
	}
	defer d.Close()
	b, err := d.OpenBLAS() // cuBLAS by the same search
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	fmt.Println(d.Info().Library, b.Library(), b.Version())
}
