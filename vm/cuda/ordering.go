package cuda

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"
)

// addOnePTX is the kernel of the ordering check, x[i] += 1 for i < n, compiled from
// checkdata/add_one.cu by clang for sm_60 (see that file).
//
//go:embed checkdata/add_one.ptx
var addOnePTX []byte

// checkKernel loads add_one. The fake driver takes the PTX as it is and runs the host
// build ooc_host_add_one of the library named by OOC_FAKECUDA_KERNELS.
func (d *Device) checkKernel() (*Function, error) {
	m, err := d.LoadModule(addOnePTX)
	if err != nil {
		return nil, err
	}
	return m.Function("add_one")
}

// orderingStart queues one round of the swap protocol around a kernel: in (n float32s)
// is copied into block on the host-to-device stream, compute waits for that copy (if
// waitIn) and runs add_one over the block, and the block is copied into out on the
// device-to-host stream after compute's work (if waitOut). Before all that the block is
// set to -1000, so a kernel that runs before its input lands, or a copy out that runs
// before the kernel, shows. It returns the copy out's event. in holds 2n floats: the
// round's input, then the -1000s.
//
// The -1000s go in by an asynchronous copy from that pinned memory on the compute stream,
// which the copy in then waits for (it comes after compute's work so far), so they land
// before the input and the kernel whatever the waits under test. A synchronous
// cuMemcpyHtoD from pageable memory would not do: it returns once its source is staged,
// and its copy runs on the legacy stream, which the device's non-blocking streams do not
// wait for, so it could land after the input and fail a device that orders correctly.
func (d *Device) orderingStart(f *Function, block uintptr, in, out *HostBuffer, n int, waitIn, waitOut bool) (*Event, error) {
	bytes := 4 * n
	if len(in.Bytes) < 2*bytes || len(out.Bytes) < bytes {
		return nil, fmt.Errorf("cuda: ordering check: buffers of %d and %d bytes for %d floats", len(in.Bytes), len(out.Bytes), n)
	}
	stale := in.Bytes[bytes : 2*bytes]
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(stale[4*i:], math.Float32bits(-1000))
		binary.LittleEndian.PutUint32(in.Bytes[4*i:], math.Float32bits(float32(i%4096)))
		binary.LittleEndian.PutUint32(out.Bytes[4*i:], math.Float32bits(float32(math.NaN())))
	}
	if err := d.do(func(drv *driver) error { return memcpyIn(block, stale)(drv, d.streams[Compute]) }); err != nil {
		return nil, err
	}
	evIn, err := d.copy(HostToDevice, bytes, memcpyIn(block, in.Bytes[:bytes]), true)
	if err != nil {
		return nil, err
	}
	if waitIn {
		if err := d.WaitFor(evIn); err != nil {
			return nil, err
		}
	}
	const threads = 256
	grid := Dim3{X: uint32((n + threads - 1) / threads)}
	if err := d.Launch(f, grid, Dim3{X: threads}, 0, block, uint32(n)); err != nil {
		return nil, err
	}
	return d.copy(DeviceToHost, bytes, memcpyOut(out.Bytes[:bytes], block), waitOut)
}

// orderingEnd waits for the round's copy out, ends the step, and returns how many floats
// of out are not in+1.
func (d *Device) orderingEnd(evOut *Event, out *HostBuffer, n int) (int, error) {
	if err := evOut.Wait(); err != nil {
		return 0, err
	}
	if _, err := d.EndStep(); err != nil {
		return 0, err
	}
	wrong := 0
	for i := 0; i < n; i++ {
		if math.Float32frombits(binary.LittleEndian.Uint32(out.Bytes[4*i:])) != float32(i%4096)+1 {
			wrong++
		}
	}
	return wrong, nil
}

// checkOrdering runs the ordering check rounds times over n floats in device memory from
// the best-fit allocator.
func (d *Device) checkOrdering(n, rounds int) error {
	f, err := d.checkKernel()
	if err != nil {
		return err
	}
	defer f.m.Unload()
	seg, err := d.mem.AllocSegment(int64(4 * n))
	if err != nil {
		return err
	}
	defer d.mem.FreeSegment(seg)
	in, err := d.pinned.Get(int64(8 * n)) // the input, then the -1000s
	if err != nil {
		return err
	}
	defer d.pinned.Put(in)
	out, err := d.pinned.Get(int64(4 * n))
	if err != nil {
		return err
	}
	defer d.pinned.Put(out)
	for r := 0; r < rounds; r++ {
		ev, err := d.orderingStart(f, seg.Addr, in, out, n, true, true)
		if err != nil {
			return err
		}
		wrong, err := d.orderingEnd(ev, out, n)
		if err != nil {
			return err
		}
		if wrong > 0 {
			return fmt.Errorf("round %d: %d of %d floats are wrong after copy in, add_one, copy out", r, wrong, n)
		}
	}
	return nil
}
