package ooc

import "sort"

// seqIndex answers the window scheduler's questions about a trace's
// variable-sequence by binary search instead of by walking a window. The
// automatic mode tries windows of up to 16 x the budget, and such a window
// can span the rest of the sequence from every function: walking it at
// each function (for the window's end, what it holds and what to prefetch)
// made planning quadratic in the sequence's length, minutes for the LSTM's
// compare cells, where Hybrid plans a dozen derived traces 40 times each.
type seqIndex struct {
	t    *Trace
	size []int64 // size[v]: t.DeviceBytes(v)
	pre  []int64 // pre[k]: the device bytes of t.Seq[:k] (non-decreasing)
	occ  [][]int // occ[v]: v's positions in t.Seq, ascending
}

func newSeqIndex(t *Trace) *seqIndex {
	ix := &seqIndex{t: t, size: make([]int64, len(t.Vars)), pre: make([]int64, len(t.Seq)+1), occ: make([][]int, len(t.Vars))}
	for v := range ix.size {
		ix.size[v] = t.DeviceBytes(v)
	}
	for k, v := range t.Seq {
		ix.pre[k+1] = ix.pre[k] + ix.size[v]
		ix.occ[v] = append(ix.occ[v], k)
	}
	return ix
}

// windowEnd is e_i + 1 for the schedule-window W: the exclusive end in Seq
// of f_i's window, which runs from start(i) while its bytes sum to at most
// W and never ends inside V(f_i). The first position k at or past
// start(i+1) where the bytes of Seq[start(i)..k] pass W ends it; sizes are
// not negative, so the sums grow with k and the search may bisect.
func (ix *seqIndex) windowEnd(i int, W int64) int {
	lo, base := ix.t.Start[i+1], ix.pre[ix.t.Start[i]]
	return lo + sort.Search(len(ix.t.Seq)-lo, func(j int) bool { return ix.pre[lo+j+1]-base > W })
}

// windowEnds are windowEnd(i, W) for every function i.
func (ix *seqIndex) windowEnds(W int64) []int {
	out := make([]int, len(ix.t.Funcs))
	for i := range out {
		out[i] = ix.windowEnd(i, W)
	}
	return out
}

// firstIn is v's first position in Seq[a:b], or -1 if it has none there.
func (ix *seqIndex) firstIn(v, a, b int) int {
	o := ix.occ[v]
	if j := sort.SearchInts(o, a); j < len(o) && o[j] < b {
		return o[j]
	}
	return -1
}
