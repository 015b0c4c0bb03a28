package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"gorgonia.org/tensor"
)

// Doctor is the acceptance check of a machine with a GPU ("ooc doctor"): it opens device
// ordinal and reports the driver, the device, its memory and reserve, virtual memory
// management and its granularity, and the pinned bandwidth each way; then it runs the
// checks this package's tests run on the fake driver against the real one: vm/alloc's
// swap-heavy trace and a random trace through the VA allocator (2 and 40 MiB chunks) and
// the best-fit allocator, with every block's bytes written and read back through the
// driver, and the ordering of a copy in, a kernel and a copy out across the three streams.
// It returns the error that stopped it, or one naming the checks that failed.
//
// It cannot run on a machine without a GPU (it says why: no driver, no device); on such a
// machine the fake driver of internal/fakecuda stands in for the tests.
func Doctor(w io.Writer, ordinal int, opts ...Option) error {
	d, err := Open(ordinal, append([]Option{WithLog(w)}, opts...)...)
	if err != nil {
		return err
	}
	defer d.Close()
	in := d.Info()
	fmt.Fprintf(w, "driver    %s: CUDA %s (cuDriverGetVersion %d)\n", in.Library, versionString(in.DriverVersion), in.DriverVersion)
	fmt.Fprintf(w, "cublas    %s\n", blasLine(d.search))
	fmt.Fprintf(w, "nccl      %s\n", ncclLine(d.search))
	fmt.Fprintf(w, "device    %s: %s, compute capability %s, %d multiprocessors, %d copy engines\n",
		d.name, in.Name, in.ComputeCapability, in.Multiprocessors, in.AsyncEngines)
	fmt.Fprintf(w, "memory    %s total, %s free with this context; %s reserved for the driver; capacity %s\n",
		formatBytes(in.TotalMemory), formatBytes(in.FreeMemory), formatBytes(in.Reserve), formatBytes(in.Capacity))
	if in.VMM {
		fmt.Fprintf(w, "VMM       yes: granularity %s, VA chunks of %s (2 MiB asked) and %s (40 MiB asked)\n",
			formatBytes(in.Granularity), formatBytes(d.ChunkSize(2<<20)), formatBytes(d.ChunkSize(40<<20)))
	} else {
		fmt.Fprintf(w, "VMM       no: %s; the best-fit allocator only\n", in.NoVMMReason)
	}
	bw, err := d.MeasureBandwidth(64<<20, 5)
	if err != nil {
		return fmt.Errorf("pinned bandwidth: %w", err)
	}
	ps := d.Pinned().Stats()
	fmt.Fprintf(w, "pinned    %v; pool holds %s pinned, %s pageable\n", bw, formatBytes(ps.PinnedBytes), formatBytes(ps.PageableBytes))

	var failed []string
	check := func(name string, f func() (string, error)) {
		t := time.Now()
		note, err := f()
		if err != nil {
			failed = append(failed, name)
			fmt.Fprintf(w, "FAIL      %s: %v\n", name, err)
			return
		}
		fmt.Fprintf(w, "ok        %s: %s (%.2fs)\n", name, note, time.Since(t).Seconds())
	}
	kinds := []struct {
		name  string
		chunk int64
	}{{"bestfit", 0}, {"va", 2 << 20}, {"va", 40 << 20}}
	traces := []struct {
		name  string
		trace []traceOp
	}{{"vm/alloc's swap-heavy trace", swapTrace()}, {"random trace", randomTrace(1, 1500, 256<<20, 48<<20)}}
	for _, k := range kinds {
		if k.chunk > 0 && !in.VMM {
			continue
		}
		for _, tr := range traces {
			name := fmt.Sprintf("%s allocator", k.name)
			if k.chunk > 0 {
				name = fmt.Sprintf("va allocator, %s chunks", formatBytes(d.ChunkSize(k.chunk)))
			}
			check(name+", "+tr.name, func() (string, error) { return d.checkTrace(k.chunk, tr.trace) })
		}
	}
	check("ordering of copy in, kernel, copy out on three streams", func() (string, error) {
		const n, rounds = 4 << 20, 3
		return fmt.Sprintf("%d rounds of %s", rounds, formatBytes(4*n)), d.checkOrdering(n, rounds)
	})
	if _, err := findNCCL(d.search); errors.Is(err, ErrNoNCCL) {
		fmt.Fprintf(w, "nccl      none: %v; data-parallel training averages gradients on the host\n", err)
	} else {
		check("NCCL all-reduce of one rank", d.checkNCCL)
	}
	if err := d.Close(); err != nil {
		failed = append(failed, "close")
		fmt.Fprintf(w, "FAIL      close: %v\n", err)
	}
	if len(failed) > 0 {
		return fmt.Errorf("cuda: %s: %d checks failed: %v", d.name, len(failed), failed)
	}
	fmt.Fprintf(w, "all checks passed on %s (%s)\n", d.name, in.Name)
	return nil
}

// checkNCCL makes a one-rank communicator on the device and all-reduces 1 MiB of float32s
// through it: the mean of one rank is its own values.
func (d *Device) checkNCCL() (string, error) {
	c, err := NewNCCL([]*Device{d})
	if err != nil {
		return "", err
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i % 251) // float32s with no NaN: the top byte stays below 0x7f
	}
	want := append([]byte(nil), buf...)
	err = c.AllReduceMean(tensor.Float32, [][]byte{buf})
	if err = errors.Join(err, c.Close()); err != nil {
		return "", err
	}
	if !bytes.Equal(buf, want) {
		return "", errors.New("the mean of one rank is not its own values")
	}
	return fmt.Sprintf("NCCL %s from %s, 1 MiB intact", c.Version(), c.Library()), nil
}

// checkTrace replays a trace on a fresh allocator (chunk 0: best-fit) over the device's
// memory and describes how it went.
func (d *Device) checkTrace(chunk int64, trace []traceOp) (string, error) {
	a := d.NewBestFit()
	if chunk > 0 {
		var err error
		if a, err = d.NewVA(chunk); err != nil {
			return "", err
		}
	}
	c := newTraceCheck(d, a)
	err := c.run(trace)
	s, ferr := c.finish()
	if err = errors.Join(err, ferr); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d steps, bytes intact, peak reserved %s, %d out of memory", len(trace), formatBytes(s.PeakReserved), c.ooms), nil
}
