package workpool

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Job is work split into items. Run is called once for every item in [0, n), from up to
// `workers` goroutines at once; worker is in [0, workers) and no two goroutines running at the
// same time have the same one, so a job may keep per-worker scratch indexed by it.
type Job interface{ Run(item, worker int) }

// team is one call's shared state; teams are reused, so a call allocates none.
type team struct {
	j     Job
	n     int64
	next  atomic.Int64  // next item to hand out
	wid   atomic.Int64  // next worker number for a helper that joins
	state atomic.Uint64 // epoch<<32 | closed | helpers working
	epoch uint32        // this call's; a helper handed an older one finds the team moved on
	done  chan struct{} // the last helper to leave a closed team says so here

	mu       sync.Mutex
	panicked any // the first item's panic, raised again on the caller
}

const (
	closed    = 1 << 31
	countMask = closed - 1
)

// ticket is a call's invitation to a helper.
type ticket struct {
	t     *team
	epoch uint32
}

var (
	teams   = sync.Pool{New: func() any { return &team{done: make(chan struct{}, 1)} }}
	handoff = make(chan ticket)
	// helpers counts the goroutines started. Invited helpers that have not yet come back for
	// the next invitation are not idle, so fast calls would start one each; past the bound a
	// call just runs with fewer.
	helpers atomic.Int64
)

// Run calls j.Run(item, worker) for every item in [0, n) on up to workers goroutines, the
// caller's among them (as worker 0), handing items out in order, and returns when all are done.
// A panic in an item stops the handing out of items and is raised again on the caller's
// goroutine once every worker has stopped, where a recover (the VM's) can turn it into an
// error; on a helper it would end the process.
//
// The caller does not wait for a helper that has not started: on a loaded machine a woken
// goroutine's thread may wait milliseconds for a core, and a call that forks per image would
// pay that on every fork. Once the caller has taken the last item it closes the team; helpers
// that join later do nothing, and it waits only for those already working.
func Run(workers, n int, j Job) {
	workers = min(workers, n)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			j.Run(i, 0)
		}
		return
	}
	t := teams.Get().(*team)
	t.epoch++
	t.j, t.n = j, int64(n)
	t.next.Store(0)
	t.wid.Store(1)
	t.state.Store(uint64(t.epoch) << 32)
	for w := 1; w < workers; w++ {
		select {
		case handoff <- ticket{t, t.epoch}:
		default: // none idle: start one, which stays for later calls, up to a bound
			if helpers.Load() < int64(4*runtime.GOMAXPROCS(0)) {
				helpers.Add(1)
				go helper(ticket{t, t.epoch})
			}
		}
	}
	t.drain(0)
	for {
		s := t.state.Load()
		if t.state.CompareAndSwap(s, s|closed) {
			if s&countMask != 0 {
				<-t.done
			}
			break
		}
	}
	p := t.panicked
	t.j, t.panicked = nil, nil
	teams.Put(t)
	if p != nil {
		panic(p)
	}
}

func (t *team) drain(worker int) {
	defer func() {
		if r := recover(); r != nil {
			t.mu.Lock()
			if t.panicked == nil {
				t.panicked = r
			}
			t.mu.Unlock()
			t.next.Store(t.n) // the others take no more items
		}
	}()
	for {
		i := t.next.Add(1) - 1
		if i >= t.n {
			return
		}
		t.j.Run(int(i), worker)
	}
}

// join counts a helper in, unless the call it was invited to is closed or over.
func (t *team) join(epoch uint32) bool {
	for {
		s := t.state.Load()
		if uint32(s>>32) != epoch || s&closed != 0 {
			return false
		}
		if t.state.CompareAndSwap(s, s+1) {
			return true
		}
	}
}

func (t *team) leave() {
	if s := t.state.Add(^uint64(0)); s&closed != 0 && s&countMask == 0 {
		t.done <- struct{}{}
	}
}

// helper works on the calls it is invited to, waiting for the next between them.
func helper(tk ticket) {
	for {
		if t := tk.t; t.join(tk.epoch) {
			t.drain(int(t.wid.Add(1) - 1))
			t.leave()
		}
		tk = <-handoff
	}
}
