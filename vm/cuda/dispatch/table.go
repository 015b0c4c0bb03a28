package dispatch

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/gorgonia-ooc/outofcore/vm"
)

// LaunchesOf returns the launch table of a machine that computes through
// this package (ok false otherwise): every kernel launch and cuBLAS call of
// the functions run so far, in program order.
func LaunchesOf(m *vm.Machine) (ls []Launch, ok bool) {
	r, ok := m.Runner().(*Runner)
	if !ok {
		return nil, false
	}
	return r.Launches(), true
}

// WriteLaunchTable prints launches as a table: per function and kernel the
// launch configuration, how many launches of it one run makes, and the bytes
// each moves and the floating-point operations each does (as the kernels'
// Specs count them; for cuBLAS the three matrices once each). A GPU run's
// kernel times can be read against these and the simulator's roofline.
func WriteLaunchTable(w io.Writer, ls []Launch) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "func\tkernel\tgrid\tblock\tlaunches\tbytes\tFLOPs\tnode\t")
	var bytes, flops, n int64
	for _, l := range ls {
		grid, block := "cuBLAS", "cuBLAS"
		if l.Block[0] > 0 {
			grid = fmt.Sprintf("%dx%dx%d", l.Grid[0], l.Grid[1], l.Grid[2])
			block = fmt.Sprintf("%dx%dx%d", l.Block[0], l.Block[1], l.Block[2])
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t\n", l.Func, l.Kernel, grid, block, l.Count, l.Bytes, l.FLOPs, l.Node)
		n += int64(l.Count)
		bytes += int64(l.Count) * l.Bytes
		flops += int64(l.Count) * l.FLOPs
	}
	fmt.Fprintf(tw, "total\t\t\t\t%d\t%d\t%d\t\t\n", n, bytes, flops)
	return tw.Flush()
}
