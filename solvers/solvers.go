package solvers

import (
	"fmt"
	"math"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Kind names an update rule.
type Kind int

// The update rules, each matching the gorgonia solver named in its comment.
const (
	SGD      Kind = iota // gorgonia.VanillaSolver
	Momentum             // gorgonia.Momentum
	Adam                 // gorgonia.AdamSolver
	RMSProp              // gorgonia.RMSPropSolver
)

func (k Kind) String() string {
	switch k {
	case SGD:
		return "sgd"
	case Momentum:
		return "momentum"
	case Adam:
		return "adam"
	case RMSProp:
		return "rmsprop"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// settings are the hyper-parameters, read off a gorgonia solver built with the same options so
// defaults and option semantics cannot drift from gorgonia's.
type settings struct {
	eta, eps, beta1, beta2, decay, momentum, clip, l1reg, l2reg, batch float64
	useClip, useL1Reg, useL2Reg                                        bool
}

// readSettings copies the fields gorgonia's solver has (unexported, so by reflection; reading
// is all it does).
func readSettings(gs any) (settings, error) {
	s := settings{batch: 1}
	v := reflect.ValueOf(gs).Elem()
	floats := map[string]*float64{
		"eta": &s.eta, "eps": &s.eps, "beta1": &s.beta1, "beta2": &s.beta2, "decay": &s.decay,
		"momentum": &s.momentum, "clip": &s.clip, "l1reg": &s.l1reg, "l2reg": &s.l2reg, "batch": &s.batch,
	}
	bools := map[string]*bool{"useClip": &s.useClip, "useL1Reg": &s.useL1Reg, "useL2Reg": &s.useL2Reg}
	found := 0
	for i := 0; i < v.NumField(); i++ {
		f, name := v.Field(i), v.Type().Field(i).Name
		if p, ok := floats[name]; ok && f.Kind() == reflect.Float64 {
			*p = f.Float()
			found++
		}
		if p, ok := bools[name]; ok && f.Kind() == reflect.Bool {
			*p = f.Bool()
		}
	}
	if found == 0 || v.FieldByName("eta").Kind() != reflect.Float64 {
		return s, fmt.Errorf("solvers: cannot read the settings of %T (gorgonia version other than v0.9.18?)", gs)
	}
	return s, nil
}

// Solver updates parameters in place with one of gorgonia's update rules, bit for bit as
// gorgonia's solver of the same kind and options, spread over GOMAXPROCS goroutines. After the
// first step (which allocates the optimizer state) Step allocates nothing. It implements
// gorgonia.Solver. Like gorgonia's, its state is indexed by position: pass the same parameters
// in the same order every step.
type Solver struct {
	kind Kind
	set  settings
	err  error
	iter int

	params []param
	chunks []chunk

	// per-step values shared with the workers
	c32 coeffs[float32]
	c64 coeffs[float64]

	next atomic.Int64
	wg   sync.WaitGroup
}

type param struct {
	dt     tensor.Dtype
	f32    vecs[float32]
	f64    vecs[float64]
	length int
}

// vecs are one parameter's weights, gradient and state.
type vecs[T float] struct {
	w, g []T
	a    []T // first state vector: Adam's mean, Momentum's velocity, RMSProp's cache
	b    []T // Adam's variance
}

// bind points v at this step's weights and gradient and allocates the state on the first step.
func (v *vecs[T]) bind(w, g []T, first, adam bool) {
	v.w, v.g = w, g
	if first {
		v.a = make([]T, len(w))
		if adam {
			v.b = make([]T, len(w))
		}
	}
}

// chunk is a range of one parameter's elements: the unit of work of one goroutine.
type chunk struct{ p, lo, hi int }

const chunkLen = 1 << 14

func newSolver(k Kind, gs any) *Solver {
	s := &Solver{kind: k}
	s.set, s.err = readSettings(gs)
	return s
}

// NewSGD is gorgonia.NewVanillaSolver(opts...) updating in place on all cores.
func NewSGD(opts ...G.SolverOpt) *Solver { return newSolver(SGD, G.NewVanillaSolver(opts...)) }

// NewMomentum is gorgonia.NewMomentum(opts...) updating in place on all cores. As gorgonia's,
// its L1 and L2 terms use the velocity, not the weights.
func NewMomentum(opts ...G.SolverOpt) *Solver { return newSolver(Momentum, G.NewMomentum(opts...)) }

// NewAdam is gorgonia.NewAdamSolver(opts...) updating in place on all cores.
func NewAdam(opts ...G.SolverOpt) *Solver { return newSolver(Adam, G.NewAdamSolver(opts...)) }

// NewRMSProp is gorgonia.NewRMSPropSolver(opts...) updating in place on all cores.
func NewRMSProp(opts ...G.SolverOpt) *Solver { return newSolver(RMSProp, G.NewRMSPropSolver(opts...)) }

// SetLearnRate changes the learning rate from the next step on, as gorgonia.WithLearnRate does
// to gorgonia's solvers (it does nothing to this one, which it does not know).
func (s *Solver) SetLearnRate(eta float64) { s.set.eta = eta }

// Kind reports the update rule.
func (s *Solver) Kind() Kind { return s.kind }

// Step applies one update to every parameter and zeroes its gradient, as gorgonia's solvers do.
// Parameters must be dense float32 or float64 tensors (gorgonia's scalar values are refused).
func (s *Solver) Step(model []G.ValueGrad) error {
	if s.err != nil {
		return s.err
	}
	if err := s.bind(model); err != nil {
		return err
	}
	s.iter++
	s.c32 = makeCoeffs[float32](s.kind, &s.set, s.iter)
	s.c64 = makeCoeffs[float64](s.kind, &s.set, s.iter)

	workers := min(runtime.GOMAXPROCS(0), len(s.chunks))
	s.next.Store(0)
	if workers > 1 {
		startPool()
		workers = min(workers, poolSize+1)
		s.wg.Add(workers - 1)
		for w := 1; w < workers; w++ {
			jobs <- s
		}
	}
	s.work()
	s.wg.Wait()
	return nil
}

// bind reads each parameter's weight and gradient slices, allocating the state on the first step
// and checking on later ones that the model is the same shape.
func (s *Solver) bind(model []G.ValueGrad) (err error) {
	first := s.params == nil
	if first {
		s.params = make([]param, len(model))
		defer func() {
			if err != nil { // a failed first step leaves no half-bound state behind
				s.params, s.chunks = nil, nil
			}
		}()
	} else if len(model) != len(s.params) {
		return fmt.Errorf("solvers: %v step with %d parameters, earlier steps had %d", s.kind, len(model), len(s.params))
	}
	for i, n := range model {
		w, ok := n.Value().(*tensor.Dense)
		if !ok {
			return fmt.Errorf("solvers: parameter %d (%v) holds a %T, not a dense tensor", i, n, n.Value())
		}
		gv, err := n.Grad()
		if err != nil {
			return fmt.Errorf("solvers: parameter %d (%v) has no gradient: %w", i, n, err)
		}
		g, ok := gv.(*tensor.Dense)
		if !ok {
			return fmt.Errorf("solvers: gradient of parameter %d (%v) is a %T, not a dense tensor", i, n, gv)
		}
		if w.Dtype() != g.Dtype() || w.Len() != g.Len() {
			return fmt.Errorf("solvers: parameter %d (%v): weights %v %v, gradient %v %v", i, n, w.Dtype(), w.Shape(), g.Dtype(), g.Shape())
		}
		if w.IsView() || g.IsView() {
			return fmt.Errorf("solvers: parameter %d (%v): weights or gradient is a view", i, n)
		}
		p := &s.params[i]
		if !first && (p.dt != w.Dtype() || p.length != w.Len()) {
			return fmt.Errorf("solvers: parameter %d (%v) is %v of %d elements, earlier steps had %v of %d", i, n, w.Dtype(), w.Len(), p.dt, p.length)
		}
		p.dt, p.length = w.Dtype(), w.Len()
		// Float32s and Float64s, unlike Data, do not allocate.
		switch w.Dtype() {
		case tensor.Float32:
			p.f32.bind(w.Float32s(), g.Float32s(), first, s.kind == Adam)
		case tensor.Float64:
			p.f64.bind(w.Float64s(), g.Float64s(), first, s.kind == Adam)
		default:
			return fmt.Errorf("solvers: parameter %d (%v) is %v; only float32 and float64 are supported", i, n, w.Dtype())
		}
	}
	if first {
		s.makeChunks()
	}
	return nil
}

func (s *Solver) makeChunks() {
	for i, p := range s.params {
		for lo := 0; lo < p.length; lo += chunkLen {
			s.chunks = append(s.chunks, chunk{i, lo, min(p.length, lo+chunkLen)})
		}
	}
}

func (s *Solver) work() {
	for {
		i := int(s.next.Add(1) - 1)
		if i >= len(s.chunks) {
			return
		}
		c := s.chunks[i]
		p := &s.params[c.p]
		if p.dt == tensor.Float32 {
			v, lo := &p.f32, c.lo
			if s.kind == Adam {
				lo += adamFast(&s.c32, v.w[lo:c.hi], v.g[lo:c.hi], v.a[lo:c.hi], v.b[lo:c.hi])
			}
			update(s.kind, &s.c32, v.w[lo:c.hi], v.g[lo:c.hi], v.a[lo:c.hi], sub(v.b, lo, c.hi))
		} else {
			v := &p.f64
			update(s.kind, &s.c64, v.w[c.lo:c.hi], v.g[c.lo:c.hi], v.a[c.lo:c.hi], sub(v.b, c.lo, c.hi))
		}
	}
}

func sub[T float](x []T, lo, hi int) []T {
	if x == nil {
		return nil
	}
	return x[lo:hi]
}

// The pool's goroutines live for the program: starting goroutines every step would allocate.
var (
	poolOnce sync.Once
	poolSize int
	jobs     chan *Solver
)

func startPool() {
	poolOnce.Do(func() {
		poolSize = max(1, runtime.NumCPU()-1)
		jobs = make(chan *Solver)
		for range poolSize {
			go func() {
				for s := range jobs {
					s.work()
					s.wg.Done()
				}
			}()
		}
	})
}

type float interface{ float32 | float64 }

// coeffs are the constants of one step in the element type, computed exactly as gorgonia's
// solvers compute them (float32 ones from float64 settings the same way).
type coeffs[T float] struct {
	negEta, l1, l2, clip, negClip, onePerBatch                        T
	momentum, beta1, beta2, omb1, omb2, cv1, cv2, eps, decay, omdecay T
	useL1, useL2, useBatch, useClip                                   bool
}

func makeCoeffs[T float](k Kind, s *settings, iter int) coeffs[T] {
	c := coeffs[T]{
		negEta: T(-s.eta), l1: T(s.l1reg), l2: T(s.l2reg), clip: T(s.clip), negClip: T(-s.clip),
		onePerBatch: T(1) / T(s.batch), momentum: T(s.momentum), beta1: T(s.beta1), beta2: T(s.beta2),
		omb1: T(1) - T(s.beta1), omb2: T(1) - T(s.beta2), eps: T(s.eps), decay: T(s.decay),
		omdecay: T(1.0 - s.decay), useL1: s.useL1Reg, useL2: s.useL2Reg, useBatch: s.batch > 1,
		useClip: s.useClip && s.clip > 0,
	}
	if k == Adam {
		c.cv1 = T(1) / T(1-math.Pow(s.beta1, float64(iter)))
		c.cv2 = T(1) / T(1-math.Pow(s.beta2, float64(iter)))
	}
	if k == RMSProp {
		c.useClip = s.useClip // RMSProp clamps whenever asked, even with clip <= 0
	}
	return c
}

// sign is tensor.Sign: -1, 1, or the value itself (zeros and NaN).
func sign[T float](x T) T {
	if x < 0 {
		return -1
	} else if x > 0 {
		return 1
	}
	return x
}

// clamp is tensor.Clamp, infinities included (they differ only when a bound is NaN).
func clamp[T float](x, lo, hi T) T {
	if x < lo || (x < 0 && x-x != 0) {
		return lo
	}
	if x > hi || (x > 0 && x-x != 0) {
		return hi
	}
	return x
}

// sqrt equals gorgonia's math32.Sqrt on float32: a square root correctly rounded to float64 and
// then to float32 is the correctly rounded float32 square root (float64 has more than twice the
// bits), and math.Sqrt compiles to one instruction.
func sqrt[T float](x T) T { return T(math.Sqrt(float64(x))) }

// update is gorgonia's tensor-at-a-time step fused into one pass per element. Each gorgonia
// tensor op is one rounded operation here, in the same order; the explicit conversions keep the
// compiler from fusing a multiply into an add where gorgonia's are separate tensor ops. With the
// default GOAMD64=v1 nothing fuses and every rule matches gorgonia; built with GOAMD64=v3 the
// compiler fuses multiply-adds in gorgonia's loops and here, and Adam then differs from gorgonia
// in the last bits (SGD, Momentum and RMSProp still match).
func update[T float](k Kind, c *coeffs[T], w, g, a, b []T) {
	g = g[:len(w)]
	a = a[:len(w)]
	switch k {
	case SGD:
		for i, wi := range w {
			gi := c.prep(g[i], wi)
			gi = T(gi * c.negEta)
			w[i] = wi + gi
			g[i] = 0
		}
	case Momentum:
		for i, wi := range w {
			v := a[i]
			gi := c.prep(g[i], v)
			gi = T(gi * c.negEta)
			v = T(v * c.momentum)
			v = v + gi
			a[i] = v
			w[i] = wi + v
			g[i] = 0
		}
	case Adam:
		b = b[:len(w)]
		for i, wi := range w {
			gi := c.prep(g[i], wi)
			// As tensor's MulIncr loop (incr[i] += a[i]*b), which a compiler that fuses
			// multiply-adds treats the same way.
			t1 := gi * c.omb1
			g2 := gi * gi
			g2 = g2 * c.omb2
			t1 += a[i] * c.beta1
			g2 += b[i] * c.beta2
			a[i], b[i] = t1, g2
			mh := t1 * c.cv1
			vh := g2 * c.cv2
			vh = sqrt(vh)
			vh = vh + c.eps
			mh = mh * c.negEta
			mh = mh / vh
			w[i] = wi + mh
			g[i] = 0
		}
	case RMSProp:
		for i, wi := range w {
			gi := g[i]
			gt2 := gi * gi
			v := T(a[i] * c.decay)
			gt2 = T(gt2 * c.omdecay)
			v = v + gt2
			a[i] = v
			if c.useClip {
				gi = clamp(gi, c.negClip, c.clip)
			}
			upd := v + c.eps
			upd = T(1) / sqrt(upd)
			gi = gi * c.negEta
			upd = T(upd * gi)
			if c.useL2 {
				upd = upd - T(wi*c.l2)
			}
			w[i] = wi + upd
			g[i] = 0
		}
	}
}

// prep is the gradient preparation SGD, Momentum and Adam share: L1 and L2 terms of r (the
// weights, or Momentum's velocity), the 1/batch scaling and the clip.
func (c *coeffs[T]) prep(gi, r T) T {
	if c.useL1 {
		gi = gi + T(c.l1*sign(r))
	}
	if c.useL2 {
		gi = gi + T(r*c.l2)
	}
	if c.useBatch {
		gi = T(gi * c.onePerBatch)
	}
	if c.useClip {
		gi = clamp(gi, c.negClip, c.clip)
	}
	return gi
}
