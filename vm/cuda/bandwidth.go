package cuda

import (
	"errors"
	"fmt"
)

// Bandwidth is what copies between pinned host memory and the device reach, in bytes/s,
// each way, timed with events on the copy streams.
type Bandwidth struct {
	HostToDevice, DeviceToHost float64
	// Bytes is the size of each copy, Copies how many were timed each way.
	Bytes  int64
	Copies int
}

func (b Bandwidth) String() string {
	return fmt.Sprintf("host-to-device %.1f GB/s, device-to-host %.1f GB/s (%d copies of %s each way)",
		b.HostToDevice/1e9, b.DeviceToHost/1e9, b.Copies, formatBytes(b.Bytes))
}

// MeasureBandwidth copies size bytes between a pinned buffer and device memory copies
// times each way, back to back on the stream of that direction, and times each batch with
// a pair of events. The memory comes from the device's Memory and PinnedPool and goes back.
func (d *Device) MeasureBandwidth(size int64, copies int) (Bandwidth, error) {
	bw := Bandwidth{Bytes: size, Copies: copies}
	if size <= 0 || copies <= 0 {
		return bw, fmt.Errorf("cuda: %s: bandwidth of %d copies of %d bytes", d.name, copies, size)
	}
	seg, err := d.mem.AllocSegment(size)
	if err != nil {
		return bw, err
	}
	host, err := d.pinned.Get(size)
	if err != nil {
		return bw, errors.Join(err, d.mem.FreeSegment(seg))
	}
	for _, dir := range []struct {
		k      StreamKind
		copy   func(*driver, *Stream) error
		result *float64
	}{
		{HostToDevice, memcpyIn(seg.Addr, host.Bytes), &bw.HostToDevice},
		{DeviceToHost, memcpyOut(host.Bytes, seg.Addr), &bw.DeviceToHost},
	} {
		if err == nil {
			*dir.result, err = d.timeCopies(dir.k, dir.copy, size, copies)
		}
	}
	return bw, errors.Join(err, d.pinned.Put(host), d.mem.FreeSegment(seg))
}

// timeCopies queues n copies on stream k between two timing events and returns bytes/s.
// An untimed copy first touches both buffers, whose pages may not exist yet.
func (d *Device) timeCopies(k StreamKind, copy func(*driver, *Stream) error, size int64, n int) (float64, error) {
	start, err := d.events.get(true)
	if err != nil {
		return 0, err
	}
	end, err := d.events.get(true)
	if err != nil {
		return 0, err
	}
	defer d.events.put(start, end) // waited for below, or unused: no step holds them
	s := d.streams[k]
	var rate float64
	err = d.do(func(drv *driver) error {
		if err := copy(drv, s); err != nil {
			return err
		}
		if err := recordOn(drv, start, s); err != nil {
			return err
		}
		for range n {
			if err := copy(drv, s); err != nil {
				return err
			}
		}
		if err := recordOn(drv, end, s); err != nil {
			return err
		}
		if err := drv.check(fnEventSynchronize, drv.call(fnEventSynchronize, end.h)); err != nil {
			return err
		}
		t, err := elapsed(drv, start, end)
		if err != nil {
			return err
		}
		rate = float64(size) * float64(n) / max(t.Seconds(), 1e-9)
		return nil
	})
	return rate, err
}

// formatBytes writes a byte count in the largest binary unit that keeps it above 1.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, u := float64(n), 0
	for f >= unit && u < 4 {
		f /= unit
		u++
	}
	return fmt.Sprintf("%.4g %ciB", f, "KMGT"[u-1])
}
