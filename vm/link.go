package vm

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// hostSwitch is the host link that the simulated devices behind one PCIe
// switch share: each direction carries Bandwidth bytes/s in all, divided
// equally among the transfers in flight on it at any moment (each still
// capped by its own device's link).
type hostSwitch struct {
	bandwidth float64
	mu        sync.Mutex
	members   []*Sim
}

// span is one transfer on a copy engine: [from, to) of a step's clock.
type span struct{ from, to time.Duration }

const (
	dirD2H = iota
	dirH2D
)

// linkState is a grouped Sim's record of its transfers: those of the step
// running now, and those of its last finished step, which the other
// devices of the switch see.
type linkState struct {
	cur, last [2][]span
}

// GroupSize is how many devices share this device's host link (its
// switch), 0 for a device with a link of its own.
func (s *Sim) GroupSize() int {
	if s.sw == nil {
		return 0
	}
	return len(s.sw.members)
}

// NewSimGroup makes n simulated devices of one profile, placed behind
// switches of p.DevicesPerSwitch devices each (the last may have fewer),
// whose host links each carry p.SwitchBandwidth in all. A profile with no
// DevicesPerSwitch gives each device its own link.
func NewSimGroup(p Profile, n int) ([]*Sim, error) {
	if n <= 0 {
		return nil, fmt.Errorf("vm: a group of %d simulated devices", n)
	}
	out := make([]*Sim, 0, n)
	var sw *hostSwitch
	for i := 0; i < n; i++ {
		s, err := NewSim(p)
		if err != nil {
			return nil, err
		}
		if p.DevicesPerSwitch > 0 {
			if i%p.DevicesPerSwitch == 0 {
				bw := p.SwitchBandwidth
				if bw <= 0 {
					bw = p.LinkBandwidth
				}
				sw = &hostSwitch{bandwidth: bw}
			}
			sw.members = append(sw.members, s)
			s.sw = sw
		}
		out = append(out, s)
	}
	return out, nil
}

// NewDevices makes the devices of a list: "cpu,cpu", "sim:PROFILE*4" (four
// simulated devices grouped by the profile's switches), "cuda:0,cuda:1",
// "cpu*2". Each name is as NewDevice takes it.
func NewDevices(spec string, capacity int64) ([]Device, error) {
	var out []Device
	fail := func(err error) ([]Device, error) {
		for _, d := range out {
			_ = d.Close()
		}
		return nil, err
	}
	for _, part := range strings.Split(spec, ",") {
		name, count := strings.TrimSpace(part), 1
		if a, b, ok := strings.Cut(name, "*"); ok {
			n, err := strconv.Atoi(b)
			if err != nil || n <= 0 {
				return fail(fmt.Errorf("vm: device list %q: %q is not NAME*COUNT with a positive count", spec, part))
			}
			name, count = a, n
		}
		if name == "" {
			return fail(fmt.Errorf("vm: device list %q has an empty name", spec))
		}
		if prof, ok := strings.CutPrefix(name, "sim:"); ok {
			p, err := LookupProfile(prof)
			if err != nil {
				return fail(err)
			}
			if capacity > 0 {
				p.Capacity = capacity
			}
			sims, err := NewSimGroup(p, count)
			if err != nil {
				return fail(err)
			}
			for _, s := range sims {
				out = append(out, s)
			}
			continue
		}
		for i := 0; i < count; i++ {
			d, err := NewDevice(name, capacity)
			if err != nil {
				return fail(err)
			}
			out = append(out, d)
		}
	}
	return out, nil
}

// transfer is when a copy of n bytes that starts at start on this
// device's copy engine for dir lands. On a shared switch the other
// devices' transfers of their last step share the bandwidth.
func (s *Sim) transfer(dir int, start time.Duration, n int64) time.Duration {
	if s.sw == nil {
		return start + s.CopyTime(n)
	}
	end := s.sw.finish(s, dir, start, float64(n))
	s.link.cur[dir] = append(s.link.cur[dir], span{start, end})
	return end
}

// finish integrates the bandwidth left to one device over time: at each
// moment it gets min(its link, switch / transfers in flight).
func (sw *hostSwitch) finish(self *Sim, dir int, start time.Duration, bytes float64) time.Duration {
	sw.mu.Lock()
	var edges []span // the other devices' transfers that end after start
	for _, o := range sw.members {
		if o == self {
			continue
		}
		for _, sp := range o.link.last[dir] {
			if sp.to > start {
				edges = append(edges, sp)
			}
		}
	}
	sw.mu.Unlock()
	// Breakpoints where the number in flight changes.
	var points []time.Duration
	for _, e := range edges {
		points = append(points, e.from, e.to)
	}
	sort.Slice(points, func(a, b int) bool { return points[a] < points[b] })
	t := start
	own := self.prof.LinkBandwidth
	for _, next := range append(points, -1) {
		if next >= 0 && next <= t {
			continue
		}
		busy := 1
		for _, e := range edges {
			if e.from <= t && t < e.to {
				busy++
			}
		}
		rate := min(own, sw.bandwidth/float64(busy)) / 1e9 // bytes per ns
		if next < 0 || float64(next-t)*rate >= bytes {
			return t + time.Duration(bytes/rate+0.5)
		}
		bytes -= float64(next-t) * rate
		t = next
	}
	return t // unreachable: the last segment is open-ended
}

func (s *Sim) beginStep() {
	s.link.cur = [2][]span{}
}

// endStep publishes this step's transfers to the switch.
func (s *Sim) endStep() {
	if s.sw == nil {
		return
	}
	s.sw.mu.Lock()
	s.link.last = s.link.cur
	s.sw.mu.Unlock()
}

// ReplicaError is a step that failed on one of CoSimulate's machines.
type ReplicaError struct {
	Replica int
	Err     error
}

func (e *ReplicaError) Error() string { return fmt.Sprintf("replica %d: %v", e.Replica, e.Err) }
func (e *ReplicaError) Unwrap() error { return e.Err }

// coSimPasses bounds CoSimulate's fixed-point passes.
const coSimPasses = 12

// CoSimulate runs one step on machines over simulated devices that may
// share host links, and returns each one's simulated step time. A
// transfer's speed depends on the other devices' transfers at the same
// moment, and theirs on its: the step is run again on every machine in
// turn, each seeing the others' latest transfers, until no step time
// changes (by 1e-4 of itself; at most coSimPasses passes). The machines'
// Stats count the one step.
func CoSimulate(ms []*Machine) ([]time.Duration, error) {
	if len(ms) == 0 {
		return nil, errors.New("vm: CoSimulate of no machines")
	}
	for i, m := range ms {
		if m.sim == nil {
			return nil, &ReplicaError{i, fmt.Errorf("%s is not a simulated device", m.dev.Name())}
		}
	}
	start := make([]Stats, len(ms))
	for i, m := range ms {
		start[i] = m.stats
	}
	times := make([]time.Duration, len(ms))
	var before []Stats
	for pass := 0; pass < coSimPasses; pass++ {
		before = make([]Stats, len(ms))
		settled := pass > 0
		for i, m := range ms {
			before[i] = m.stats
			m.Reset()
			if err := m.RunAll(); err != nil {
				return nil, &ReplicaError{i, err}
			}
			d := m.stats.StepTime - before[i].StepTime
			if diff := d - times[i]; diff > d/10000 || -diff > d/10000 {
				settled = false
			}
			times[i] = d
		}
		if settled || len(ms) == 1 || allOwnLinks(ms) {
			break
		}
	}
	for i, m := range ms {
		m.stats = start[i].plus(m.stats, before[i])
	}
	return times, nil
}

func allOwnLinks(ms []*Machine) bool {
	for _, m := range ms {
		if m.sim.sw != nil {
			return false
		}
	}
	return true
}

// plus is s with the counters that grew from b to a added: the one step
// between two snapshots.
func (s Stats) plus(a, b Stats) Stats {
	s.Steps += a.Steps - b.Steps
	s.SwapIns += a.SwapIns - b.SwapIns
	s.SwapOuts += a.SwapOuts - b.SwapOuts
	s.SwapInBytes += a.SwapInBytes - b.SwapInBytes
	s.SwapOutBytes += a.SwapOutBytes - b.SwapOutBytes
	s.ComputeTime += a.ComputeTime - b.ComputeTime
	s.StallTime += a.StallTime - b.StallTime
	s.StepTime += a.StepTime - b.StepTime
	s.PersistentBytes, s.LeafBytes = a.PersistentBytes, a.LeafBytes
	return s
}

// AllReduceTime is the simulated time to average the gradients of
// machines on simulated devices through the host (the paper aggregates
// on the CPU): every device sends its gradients up its link and gets the
// mean back, and the devices behind one switch share its bandwidth each
// way. Switches work in parallel; the host's own summing is not counted.
func AllReduceTime(ms []*Machine) time.Duration {
	if len(ms) < 2 {
		return 0
	}
	var worst time.Duration
	for _, m := range ms {
		if m.sim == nil {
			continue
		}
		var grads int64
		for i := range m.prog.Vars {
			if v := &m.prog.Vars[i]; v.Role == Gradient {
				grads += v.Bytes
			}
		}
		rate := m.sim.prof.LinkBandwidth
		if sw := m.sim.sw; sw != nil {
			rate = min(rate, sw.bandwidth/float64(len(sw.members)))
		}
		worst = max(worst, 2*seconds(float64(grads)/rate))
	}
	return worst
}

// Alone is the same device (profile and memory) with a host link of its
// own: planners simulate candidate tapes on it without the other devices'
// traffic, and without showing them theirs.
func (s *Sim) Alone() *Sim {
	if s.sw == nil {
		return s
	}
	return &Sim{prof: s.prof, mem: s.mem}
}
