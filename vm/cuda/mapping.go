package cuda

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// Map maps chunks back to back into r from offset: one cuMemMap per chunk (the driver maps
// one handle per call, at handle offset 0) and one cuMemSetAccess for the whole span, since
// a mapping starts with no access at all. If any call fails, what this call mapped is
// unmapped again.
func (m *memory) Map(r alloc.Range, offset int64, chunks []alloc.Chunk) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	rs, err := m.rangeOf(r)
	if err != nil {
		return err
	}
	cs := make([]*chunk, len(chunks))
	end := offset
	for i, c := range chunks {
		if cs[i], err = m.chunk(c); err != nil {
			return err
		}
		end += cs[i].Size
	}
	if offset < 0 || offset%m.gran != 0 || end > rs.Size {
		return fmt.Errorf("cuda: %s: cannot map [%d, %d) into a range of %d bytes", m, offset, end, rs.Size)
	}
	for _, mp := range rs.maps {
		if mp.off < end && offset < mp.off+mp.c.Size {
			return fmt.Errorf("cuda: %s: [%d, %d) of range %d is mapped already", m, offset, end, r.Handle)
		}
	}
	if len(cs) == 0 {
		return nil
	}
	err = m.d.do(func(drv *driver) error {
		at := rs.Addr + uintptr(offset)
		for _, c := range cs {
			m.stats.Maps++
			if err := drv.check(fnMemMap, drv.call(fnMemMap, at, uintptr(c.Size), 0, uintptr(c.h), 0)); err != nil {
				return errors.Join(err, m.unmapSpan(drv, rs.Addr+uintptr(offset), at-rs.Addr-uintptr(offset)))
			}
			at += uintptr(c.Size)
		}
		desc := memAccessDesc{location: memLocation{typ: memLocationTypeDevice, id: m.d.dev}, flags: memAccessFlagsProtReadWrite}
		m.stats.SetAccesses++
		span := uintptr(end - offset)
		if err := drv.check(fnMemSetAccess, drv.call(fnMemSetAccess, rs.Addr+uintptr(offset), span, uintptr(unsafe.Pointer(&desc)), 1)); err != nil {
			return errors.Join(err, m.unmapSpan(drv, rs.Addr+uintptr(offset), span))
		}
		return nil
	})
	if err != nil {
		return err
	}
	off := offset
	for _, c := range cs {
		rs.maps = append(rs.maps, mapping{off, c})
		c.maps++
		off += c.Size
	}
	slices.SortFunc(rs.maps, func(a, b mapping) int { return cmp.Compare(a.off, b.off) })
	return nil
}

// unmapSpan undoes a partial Map: the chunks mapped so far are adjacent.
func (m *memory) unmapSpan(drv *driver, at, size uintptr) error {
	if size == 0 {
		return nil
	}
	m.stats.Unmaps++
	return drv.check(fnMemUnmap, drv.call(fnMemUnmap, at, size))
}

// Unmap unmaps every chunk mapped in [offset, offset+size) of r, one cuMemUnmap per run of
// adjacent mappings: the driver unmaps whole mappings only, and no hole may lie inside one
// call's span.
func (m *memory) Unmap(r alloc.Range, offset, size int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	rs, err := m.rangeOf(r)
	if err != nil {
		return err
	}
	end := offset + size
	if offset < 0 || size <= 0 || end > rs.Size {
		return fmt.Errorf("cuda: %s: cannot unmap [%d, %d) of a range of %d bytes", m, offset, end, rs.Size)
	}
	var inside []mapping
	for _, mp := range rs.maps {
		overlaps := mp.off < end && offset < mp.off+mp.c.Size
		if overlaps && (mp.off < offset || mp.off+mp.c.Size > end) {
			return fmt.Errorf("cuda: %s: unmapping [%d, %d) would cut a chunk", m, offset, end)
		}
		if overlaps {
			inside = append(inside, mp)
		}
	}
	err = m.d.do(func(drv *driver) error {
		if len(inside) == 0 {
			return nil
		}
		if err := m.waitFence(drv, rs.Addr); err != nil {
			return err
		}
		return m.unmapRuns(drv, rs, inside)
	})
	if err != nil {
		return err
	}
	kept := rs.maps[:0]
	for _, mp := range rs.maps {
		if mp.off >= offset && mp.off < end {
			mp.c.maps--
			continue
		}
		kept = append(kept, mp)
	}
	rs.maps = kept
	return nil
}

// unmapRuns unmaps the given mappings of rs (sorted by offset) in runs of adjacent ones.
func (m *memory) unmapRuns(drv *driver, rs *vrange, maps []mapping) error {
	for i := 0; i < len(maps); {
		start, end := maps[i].off, maps[i].off+maps[i].c.Size
		j := i + 1
		for j < len(maps) && maps[j].off == end {
			end += maps[j].c.Size
			j++
		}
		m.stats.Unmaps++
		if err := drv.check(fnMemUnmap, drv.call(fnMemUnmap, rs.Addr+uintptr(start), uintptr(end-start))); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// Close returns everything still held, in the order the driver needs (unmap, then
// release), and makes the memory unusable. On a device whose context was lost there is
// nothing to return: the context takes it all when the device closes.
func (m *memory) Close() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	err := m.d.do(m.release)
	m.closed = true
	m.ranges, m.chunks, m.segments = map[uint64]*vrange{}, map[uint64]*chunk{}, map[uint64]alloc.Segment{}
	m.used = 0
	return closeError(err)
}

// closeError drops what a close cannot help: the device closed or its context lost first.
func closeError(err error) error {
	if errors.Is(err, ErrClosed) || errors.Is(err, ErrContextLost) {
		return nil
	}
	return err
}

// release returns every byte held to the driver, with m.mu held and the context current.
func (m *memory) release(drv *driver) error {
	var errs []error
	for _, rs := range m.ranges {
		errs = append(errs, m.unmapRuns(drv, rs, rs.maps))
		for _, mp := range rs.maps {
			mp.c.maps--
		}
		rs.maps = nil
		m.stats.AddressFrees++
		errs = append(errs, drv.check(fnMemAddressFree, drv.call(fnMemAddressFree, rs.Addr, uintptr(rs.Size))))
	}
	for _, c := range m.chunks {
		m.stats.Releases++
		errs = append(errs, drv.check(fnMemRelease, drv.call(fnMemRelease, uintptr(c.h))))
	}
	for _, s := range m.segments {
		m.stats.Frees++
		errs = append(errs, drv.check(fnMemFree, drv.call(fnMemFree, s.Addr)))
	}
	errs = append(errs, m.destroyFences(drv))
	return errors.Join(errs...)
}
