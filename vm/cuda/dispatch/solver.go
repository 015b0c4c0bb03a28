package dispatch

import (
	"errors"
	"fmt"
	"math"
	"reflect"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/alloc"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// Solver runs a gorgonia solver's update on the device: the weights stay in
// the machine's device copies, each gradient is added into a device buffer
// when the step computes it (gorgonia's BindDualValues accumulation), and
// Step runs one sgd, momentum, adam or rmsprop (also AdaGrad's) kernel per learnable with the
// solver's formulas, which zero the gradient buffers as gorgonia's solvers
// zero the gradients. Nothing crosses the host link but what SyncToHost
// brings back.
//
// The hyperparameters are read from the gorgonia solver it was made from at
// every Step, so gorgonia.WithLearnRate(x)(thatSolver) works as with a host
// solver; its state (Adam's step count and moments, Momentum's velocity)
// lives on the device; State and SetState read and write it (for
// checkpoints) as gorgonia's solvers hold it: per learnable Adam's first and
// second moments, or Momentum's velocity, and Adam's step count.
//
// gorgonia's RMSPropSolver and AdaGradSolver run on the device too (their
// cache is the state). Its other solvers (AdamW, BarzilaiBorweinSolver)
// have no kernels here: they step on the host, as
// with any machine (their Step after RunAll, on the gradients the machine
// brings back; the next RunAll uploads the updated weights), which costs a
// gradient download and a weight upload per step, and gives the CPU
// device's weights (TestHostSolversOnCUDA). Kernels for them are left to do.
type Solver struct {
	m    *vm.Machine
	r    *Runner
	gs   G.Solver
	kind string
	ls   []*G.Node
	n    []int64
	dt   tensor.Dtype
	bufs []alloc.Segment // per learnable: gradient, then state slots
	iter int
	by   map[*G.Node]int
}

// slots is how many state buffers the solver keeps per learnable.
func slots(kind string) int {
	switch kind {
	case "momentum", "rmsprop", "adagrad":
		return 1
	case "adam":
		return 2
	}
	return 0
}

// NewSolver moves the update of learnables to the device of m, a machine
// computing through this package, with the formulas and settings of gs (a
// *gorgonia.VanillaSolver, *gorgonia.Momentum, *gorgonia.AdamSolver or
// *gorgonia.RMSPropSolver or *gorgonia.AdaGradSolver; tensor learnables
// for the last two).
// From now on RunAll leaves the learnables' gradients on the device and
// their weights are the device's: call Step after each RunAll instead of
// gs.Step, and SyncToHost before reading the weights on the host.
func NewSolver(m *vm.Machine, gs G.Solver, learnables ...*G.Node) (*Solver, error) {
	r, ok := m.Runner().(*Runner)
	if !ok {
		return nil, errors.New("dispatch: the machine does not compute on a CUDA device through this package")
	}
	s := &Solver{m: m, r: r, gs: gs, ls: learnables, by: map[*G.Node]int{}}
	switch gs.(type) {
	case *G.VanillaSolver:
		s.kind = "sgd"
	case *G.Momentum:
		s.kind = "momentum"
	case *G.AdamSolver:
		s.kind = "adam"
	case *G.RMSPropSolver:
		s.kind = "rmsprop"
	case *G.AdaGradSolver:
		s.kind = "adagrad"
	default:
		return nil, fmt.Errorf("dispatch: no device update for %T (sgd, momentum, adam, rmsprop and adagrad have kernels): step it on the host instead, "+
			"gs.Step after RunAll (the gradients come back to the learnables and the next run uploads the weights)", gs)
	}
	for i, l := range learnables {
		if i == 0 {
			s.dt = l.Dtype()
		}
		if l.Dtype() != s.dt || (s.dt != tensor.Float32 && s.dt != tensor.Float64) {
			return nil, fmt.Errorf("dispatch: learnable %s is %v: the solver kernels take one float type", l.Name(), l.Dtype())
		}
		if _, err := m.LeafAddr(l); err != nil {
			return nil, err
		}
		if (s.kind == "rmsprop" || s.kind == "adagrad") && l.Shape().IsScalar() {
			_ = s.Close()
			return nil, fmt.Errorf("dispatch: learnable %s is a scalar, which gorgonia's %s steps with other arithmetic: step it on the host", l.Name(), s.kind)
		}
		s.by[l] = i
		n := int64(l.Shape().TotalSize())
		s.n = append(s.n, n)
		seg, err := r.d.Memory().AllocSegment(alignUp(int64(1+slots(s.kind)) * n * int64(s.dt.Size())))
		if err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("dispatch: gradient and optimizer state of %s: %w", l.Name(), err)
		}
		s.bufs = append(s.bufs, seg)
		if err := r.launch("fill_"+s.sfx(), ptr(seg.Addr), flt(0), i64(int64(1+slots(s.kind))*n)); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	if err := errors.Join(m.KeepOnDevice(learnables...), m.SetGradientSink(s)); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Solver) sfx() string {
	if s.dt == tensor.Float64 {
		return "f64"
	}
	return "f32"
}

// slot is the device address of learnable i's buffer k (0: the gradient).
func (s *Solver) slot(i, k int) uintptr {
	return s.bufs[i].Addr + uintptr(int64(k)*s.n[i]*int64(s.dt.Size()))
}

// Gradient is the device address and element count of learnable i's
// gradient buffer (in NewSolver's order), where RunAll accumulates it and
// Step reads and zeroes it: data-parallel training averages it across the
// replicas' devices in place between the two.
func (s *Solver) Gradient(i int) (addr uintptr, n int64) { return s.slot(i, 0), s.n[i] }

// TakeGradient implements vm.GradientSink: the gradient is added into the
// learnable's device buffer.
func (s *Solver) TakeGradient(l *G.Node, addr uintptr) (bool, error) {
	i, ok := s.by[l]
	if !ok {
		return false, nil
	}
	g := s.slot(i, 0)
	return true, s.r.launch("binary_"+s.sfx(), i64(int64(kernels.BinaryAdd)), ptr(g), ptr(g), ptr(addr), i64(s.n[i]), kernels.LayoutArg(kernels.Contiguous()))
}

// settings reads the gorgonia solver's hyperparameters.
type settings struct {
	eta, eps, beta1, beta2, momentum, clip, l1, l2, batch, decay, omDecay float64
	useClip, useL1, useL2                                                 bool
}

func (s *Solver) settings() (st settings, err error) {
	v := reflect.ValueOf(s.gs).Elem()
	f := func(name string) float64 {
		x := v.FieldByName(name)
		if !x.IsValid() || x.Kind() != reflect.Float64 {
			err = fmt.Errorf("dispatch: gorgonia's %T has no %s (this package knows gorgonia v0.9.18)", s.gs, name)
			return 0
		}
		return x.Float()
	}
	b := func(name string) bool {
		x := v.FieldByName(name)
		if !x.IsValid() || x.Kind() != reflect.Bool {
			err = fmt.Errorf("dispatch: gorgonia's %T has no %s (this package knows gorgonia v0.9.18)", s.gs, name)
			return false
		}
		return x.Bool()
	}
	switch s.kind { // no L1 and no batch scaling in gorgonia's RMSProp and AdaGrad
	case "rmsprop":
		st = settings{eta: f("eta"), eps: f("eps"), decay: f("decay"), clip: f("clip"), l2: f("l2reg"), useClip: b("useClip"), useL2: b("useL2Reg")}
		st.omDecay = 1.0 - st.decay
		return st, err
	case "adagrad": // RMSProp's update with no decay: the cache adds g² as it is
		st = settings{eta: f("eta"), eps: f("eps"), decay: 1, omDecay: 1, clip: f("clip"), l2: f("l2reg"), useClip: b("useClip"), useL2: b("useL2Reg")}
		return st, err
	}
	st = settings{eta: f("eta"), clip: f("clip"), l1: f("l1reg"), l2: f("l2reg"), batch: f("batch"),
		useClip: b("useClip"), useL1: b("useL1Reg"), useL2: b("useL2Reg")}
	switch s.kind {
	case "momentum":
		st.momentum = f("momentum")
	case "adam":
		st.eps, st.beta1, st.beta2 = f("eps"), f("beta1"), f("beta2")
	}
	return st, err
}

// Step runs one update of every learnable on the device, as the gorgonia
// solver's Step would on the host.
func (s *Solver) Step() error {
	st, err := s.settings()
	if err != nil {
		return err
	}
	if s.kind == "rmsprop" || s.kind == "adagrad" {
		return s.stepRMSProp(st)
	}
	var flags kernels.OptFlags
	if st.useL1 {
		flags |= kernels.OptL1
	}
	if st.useL2 {
		flags |= kernels.OptL2
	}
	if st.batch > 1 {
		flags |= kernels.OptBatch
	}
	if st.useClip && st.clip > 0 {
		flags |= kernels.OptClip
	}
	// Constants as gorgonia's Step computes them in the learnables' type.
	c := func(v float64) kernels.Arg {
		if s.dt == tensor.Float32 {
			return flt(float64(float32(v)))
		}
		return flt(v)
	}
	f32 := s.dt == tensor.Float32
	opb := 1.0
	if st.batch != 0 {
		opb = 1 / st.batch
		if f32 {
			opb = float64(float32(1) / float32(st.batch))
		}
	}
	reg := []kernels.Arg{c(st.l1), c(st.l2), flt(opb), c(-st.clip), c(st.clip)}
	var extra []kernels.Arg
	switch s.kind {
	case "sgd":
		extra = []kernels.Arg{c(-st.eta)}
	case "momentum":
		extra = []kernels.Arg{c(-st.eta), c(st.momentum)}
	case "adam":
		s.iter++
		corr1, corr2 := 1-math.Pow(st.beta1, float64(s.iter)), 1-math.Pow(st.beta2, float64(s.iter))
		if f32 {
			extra = []kernels.Arg{flt(float64(float32(1) - float32(st.beta1))), flt(float64(float32(1) - float32(st.beta2))),
				c(st.beta1), c(st.beta2), c(st.eps), flt(float64(-float32(st.eta))),
				flt(float64(float32(1) / float32(corr1))), flt(float64(float32(1) / float32(corr2)))}
		} else {
			extra = []kernels.Arg{flt(1 - st.beta1), flt(1 - st.beta2), flt(st.beta1), flt(st.beta2), flt(st.eps), flt(-st.eta),
				flt(1 / corr1), flt(1 / corr2)}
		}
	}
	for i, l := range s.ls {
		w, err := s.m.LeafAddr(l)
		if err != nil {
			return err
		}
		args := []kernels.Arg{ptr(w), ptr(s.slot(i, 0))}
		for k := 1; k <= slots(s.kind); k++ {
			args = append(args, ptr(s.slot(i, k)))
		}
		args = append(args, i64(s.n[i]), i64(int64(flags)))
		if err := s.r.launch(s.kind+"_"+s.sfx(), append(append(args, reg...), extra...)...); err != nil {
			return fmt.Errorf("dispatch: update of %s: %w", l.Name(), err)
		}
	}
	return nil
}

// stepRMSProp is Step for gorgonia's RMSPropSolver: its constants in the
// learnables' type as its Step computes them (1-decay in float64, then
// converted), clipping whenever useClip is set. AdaGradSolver's Step is the
// same sequence of operations with decay and 1-decay both 1 (c·1 + g²·1 is
// c + g², exactly).
func (s *Solver) stepRMSProp(st settings) error {
	var flags kernels.OptFlags
	if st.useL2 {
		flags |= kernels.OptL2
	}
	if st.useClip {
		flags |= kernels.OptClip
	}
	c := func(v float64) kernels.Arg {
		if s.dt == tensor.Float32 {
			return flt(float64(float32(v)))
		}
		return flt(v)
	}
	consts := []kernels.Arg{c(st.decay), c(st.omDecay), c(st.eps), c(st.l2), c(-st.clip), c(st.clip), c(-st.eta)}
	for i, l := range s.ls {
		w, err := s.m.LeafAddr(l)
		if err != nil {
			return err
		}
		args := []kernels.Arg{ptr(w), ptr(s.slot(i, 0)), ptr(s.slot(i, 1)), i64(s.n[i]), i64(int64(flags))}
		if err := s.r.launch("rmsprop_"+s.sfx(), append(args, consts...)...); err != nil {
			return fmt.Errorf("dispatch: update of %s: %w", l.Name(), err)
		}
	}
	return nil
}

// SyncToHost copies the weights from the device into the learnables' host
// values (after the updates queued so far).
func (s *Solver) SyncToHost() error { return s.m.SyncToHost(s.ls...) }

// State downloads the solver's state: Adam's step count and, per learnable,
// its state tensors in the order gorgonia keeps them (none for sgd).
func (s *Solver) State() (iter int, state [][]*tensor.Dense, err error) {
	for i, l := range s.ls {
		var row []*tensor.Dense
		for k := 1; k <= slots(s.kind); k++ {
			t := tensor.New(tensor.Of(s.dt), tensor.WithShape(l.Shape().Clone()...))
			w, err := s.r.CopyOut(t.Raw, s.slot(i, k))
			if err != nil {
				return 0, nil, err
			}
			if err := w.Wait(); err != nil {
				return 0, nil, err
			}
			row = append(row, t)
		}
		state = append(state, row)
	}
	return s.iter, state, nil
}

// SetState uploads a state State gave (or a gorgonia solver held).
func (s *Solver) SetState(iter int, state [][]*tensor.Dense) error {
	if len(state) != len(s.ls) {
		return fmt.Errorf("dispatch: state for %d learnables, the solver has %d", len(state), len(s.ls))
	}
	for i, row := range state {
		if len(row) != slots(s.kind) {
			return fmt.Errorf("dispatch: %d state tensors for %s, %s keeps %d", len(row), s.ls[i].Name(), s.kind, slots(s.kind))
		}
		for k, t := range row {
			if t.Dtype() != s.dt || int64(t.Shape().TotalSize()) != s.n[i] {
				return fmt.Errorf("dispatch: state %d of %s is %v %v, want %v %v", k, s.ls[i].Name(), t.Dtype(), t.Shape(), s.dt, s.ls[i].Shape())
			}
			w, err := s.r.CopyIn(s.slot(i, k+1), t.Raw)
			if err != nil {
				return err
			}
			if err := w.Wait(); err != nil {
				return err
			}
		}
	}
	s.iter = iter
	return nil
}

// Close frees the gradient and state buffers and gives the gradients back
// to the host.
func (s *Solver) Close() error {
	var errs []error
	if s.m != nil {
		errs = append(errs, s.m.SetGradientSink(nil))
	}
	for _, b := range s.bufs {
		errs = append(errs, s.r.d.Memory().FreeSegment(b))
	}
	s.bufs = nil
	return errors.Join(errs...)
}
