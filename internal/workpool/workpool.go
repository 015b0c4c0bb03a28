package workpool

import (
	"sync"
	"sync/atomic"
)

// Job is work split into items. Run is called once for every item in [0, n), from up to
// `workers` goroutines at once; worker is in [0, workers) and no two goroutines running at the
// same time have the same one, so a job may keep per-worker scratch indexed by it.
type Job interface{ Run(item, worker int) }

// team is one call's shared state; teams are reused, so a call allocates none.
type team struct {
	j    Job
	n    int64
	next atomic.Int64 // next item to hand out
	wid  atomic.Int64 // next worker number for a helper
	wg   sync.WaitGroup
}

var (
	teams   = sync.Pool{New: func() any { return new(team) }}
	handoff = make(chan *team)
)

// Run calls j.Run(item, worker) for every item in [0, n) on up to workers goroutines, the
// caller's among them (as worker 0), handing items out in order, and returns when all are done.
func Run(workers, n int, j Job) {
	workers = min(workers, n)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			j.Run(i, 0)
		}
		return
	}
	t := teams.Get().(*team)
	t.j, t.n = j, int64(n)
	t.next.Store(0)
	t.wid.Store(1)
	t.wg.Add(workers - 1)
	for w := 1; w < workers; w++ {
		select {
		case handoff <- t:
		default: // none idle: start one, which stays for later calls
			go helper(t)
		}
	}
	t.drain(0)
	t.wg.Wait()
	t.j = nil
	teams.Put(t)
}

func (t *team) drain(worker int) {
	for {
		i := t.next.Add(1) - 1
		if i >= t.n {
			return
		}
		t.j.Run(int(i), worker)
	}
}

// helper works on t, then waits for the next call's team.
func helper(t *team) {
	for {
		t.drain(int(t.wid.Add(1) - 1))
		t.wg.Done()
		t = <-handoff
	}
}
