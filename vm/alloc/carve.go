package alloc

import (
	"cmp"
	"slices"
)

// region is a contiguous stretch of memory carved into pieces: a best-fit segment, or a VA
// pool chunk.
type region struct {
	addr uintptr
	data []byte
	size int64
	pool *pool    // where its free pieces go
	seg  Segment  // best-fit
	rng  *vaRange // VA pool
}

// piece is a stretch of a region, free or in use. Neighbours are linked so that a freed piece
// merges with free neighbours in constant time, as PyTorch's Block prev/next.
type piece struct {
	reg        *region
	off, size  int64
	prev, next *piece
	free       bool
}

func (p *piece) addr() uintptr { return p.reg.addr + uintptr(p.off) }

// whole reports whether the piece is its entire region, i.e. the region is unsplit.
func (p *piece) whole() bool { return p.prev == nil && p.next == nil }

// block makes the Block handed out for an in-use piece, from spare when it has one; the piece
// may be larger than size.
func (p *piece) block(spare *spareBlocks, owner any, size int64) *Block {
	b := spare.newBlock(Block{owner: owner, addr: p.addr(), size: size, mapped: p.size, piece: p})
	if p.reg.data != nil {
		b.data = p.reg.data[p.off : p.off+size]
	}
	return b
}

// pool is a set of free pieces ordered by (size, address), so the smallest fitting piece is
// a binary search away and ties go to the lowest address, as PyTorch's BlockComparator.
// A sorted slice is plenty: pools hold hundreds of pieces, not millions.
type pool struct {
	free []*piece
	// splitMin is the least remainder worth keeping as a free piece when splitting.
	splitMin int64
	// spare are pieces a merge made unused, for split to take again: a training step splits
	// and merges as often as it allocates, and a new piece each time was a heap allocation
	// per tensor per step. No one else points to them: the block of a merged piece is freed,
	// and Free no longer follows its link (it forgets it).
	spare     spares[piece]
	spareRegs spares[region] // regions dropped whole (VA's small pool returns them every step)
}

// newPiece is a piece with the given fields, a spare one when there is one.
func (p *pool) newPiece(v piece) *piece { return p.spare.take(v) }

// retire keeps a piece a merge absorbed for newPiece.
func (p *pool) retire(x *piece) { p.spare.keep(x) }

func comparePieces(a, b *piece) int {
	return cmp.Or(cmp.Compare(a.size, b.size), cmp.Compare(a.addr(), b.addr()))
}

func (p *pool) insert(x *piece) {
	x.free = true
	i, _ := slices.BinarySearchFunc(p.free, x, comparePieces)
	p.free = slices.Insert(p.free, i, x)
}

func (p *pool) remove(x *piece) {
	i, found := slices.BinarySearchFunc(p.free, x, comparePieces)
	if !found {
		panic("alloc: free piece missing from its pool") // an internal invariant, not a user error
	}
	p.free = slices.Delete(p.free, i, i+1)
	x.free = false
}

// bestFit removes and returns the smallest free piece of at least size bytes, or nil.
func (p *pool) bestFit(size int64) *piece {
	i, _ := slices.BinarySearchFunc(p.free, size, func(x *piece, size int64) int { return cmp.Compare(x.size, size) })
	if i == len(p.free) {
		return nil
	}
	x := p.free[i]
	p.free = slices.Delete(p.free, i, i+1)
	x.free = false
	return x
}

// newRegion makes a region of the pool and returns its single piece, in use, for the caller
// to split.
func (p *pool) newRegion(addr uintptr, data []byte, size int64) *piece {
	reg := p.spareRegs.take(region{addr: addr, data: data, size: size, pool: p})
	return p.newPiece(piece{reg: reg, size: size})
}

// retireRegion keeps a whole piece, out of the pool, and its region for newRegion: the
// caller has given the region's memory back.
func (p *pool) retireRegion(x *piece) {
	p.spareRegs.keep(x.reg)
	p.retire(x)
}

// split trims an in-use piece to size, keeping the rest as a free piece when the rest is
// at least splitMin; otherwise the whole piece is handed out and the rest is internal
// fragmentation.
func (p *pool) split(x *piece, size int64) {
	rest := x.size - size
	if rest < p.splitMin || rest <= 0 {
		return
	}
	tail := p.newPiece(piece{reg: x.reg, off: x.off + size, size: rest, prev: x, next: x.next})
	if x.next != nil {
		x.next.prev = tail
	}
	x.next = tail
	x.size = size
	p.insert(tail)
}

// release frees an in-use piece, merges it with free neighbours and returns the merged piece,
// which is in the pool.
func (p *pool) release(x *piece) *piece {
	if prev := x.prev; prev != nil && prev.free {
		p.remove(prev)
		prev.size += x.size
		prev.next = x.next
		if x.next != nil {
			x.next.prev = prev
		}
		p.retire(x)
		x = prev
	}
	if next := x.next; next != nil && next.free {
		p.remove(next)
		x.size += next.size
		x.next = next.next
		if next.next != nil {
			next.next.prev = x
		}
		p.retire(next)
	}
	p.insert(x)
	return x
}
