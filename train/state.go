package train

import (
	"fmt"
	"reflect"
	"strings"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/solvers"
)

// Optimizers, with the learning rate each uses when -lr is 0.
var optimizers = []struct {
	name string
	lr   float64
	// slots names the per-learnable state tensors the solver keeps.
	slots []string
}{
	{"sgd", 0.01, nil},
	{"momentum", 0.01, []string{"velocity"}},
	{"adam", 0.001, []string{"mean", "variance"}},
}

// OptimizerNames lists the optimizers Config.Optimizer takes.
func OptimizerNames() string {
	var n []string
	for _, o := range optimizers {
		n = append(n, o.name)
	}
	return strings.Join(n, ", ")
}

func optimizerSlots(name string) ([]string, bool) {
	for _, o := range optimizers {
		if o.name == name {
			return o.slots, true
		}
	}
	return nil, false
}

// DefaultLR is the learning rate an optimizer uses when Config.LR is 0.
func DefaultLR(name string) float64 {
	for _, o := range optimizers {
		if o.name == name {
			return o.lr
		}
	}
	return 0
}

// Solver implementations Config.Solver takes.
const (
	// FastSolver is package solvers' in-place, multi-core rewrite of gorgonia's
	// solvers: the same bits, a fraction of the time.
	FastSolver = "fast"
	// GorgoniaSolver is gorgonia's own solvers.
	GorgoniaSolver = "gorgonia"
)

// newSolver returns the solver for the optimizer name, from package solvers
// (impl "fast") or gorgonia's own ("gorgonia"): sgd is G.VanillaSolver,
// momentum G.Momentum (momentum 0.9), adam G.AdamSolver (beta1 0.9, beta2
// 0.999, eps 1e-8), or their bit-identical rewrites in solvers.
func newSolver(name, impl string, lr float64) (G.Solver, error) {
	if impl != FastSolver && impl != GorgoniaSolver {
		return nil, fmt.Errorf("unknown solver %q (want %s or %s)", impl, FastSolver, GorgoniaSolver)
	}
	fast := impl == FastSolver
	switch name {
	case "sgd":
		if fast {
			return solvers.NewSGD(G.WithLearnRate(lr)), nil
		}
		return G.NewVanillaSolver(G.WithLearnRate(lr)), nil
	case "momentum":
		if fast {
			return solvers.NewMomentum(G.WithLearnRate(lr)), nil
		}
		return G.NewMomentum(G.WithLearnRate(lr)), nil
	case "adam":
		if fast {
			return solvers.NewAdam(G.WithLearnRate(lr)), nil
		}
		return G.NewAdamSolver(G.WithLearnRate(lr)), nil
	}
	return nil, fmt.Errorf("unknown optimizer %q (want %s)", name, OptimizerNames())
}

// setLearnRate changes the solver's learning rate from the next step on.
// gorgonia.WithLearnRate knows only gorgonia's solvers and silently leaves
// others alone, hence the case for ours.
func setLearnRate(s G.Solver, lr float64) {
	if f, ok := s.(*solvers.Solver); ok {
		f.SetLearnRate(lr)
		return
	}
	G.WithLearnRate(lr)(s)
}

// solverState is the state a gorgonia solver keeps between steps: for each
// learnable (by position) its slot tensors, and Adam's step count.
type solverState struct {
	Iter  int
	Slots [][]*tensor.Dense // nil before the first step
}

// gorgonia v0.9.18's solvers keep their state in unexported fields and offer
// no way to save or restore it: Momentum and AdamSolver hold
// `cache []*dualValue` (dualValue is {Value; d Value}: the velocity in Value
// for Momentum, the first and second moments in Value and d for Adam), and
// AdamSolver counts steps in `iter int`. VanillaSolver keeps nothing. Reading
// and writing those fields through reflect lets a checkpoint hold the exact
// state, so that a resumed run steps exactly as the uninterrupted one would.
// The field layout is checked on every access; TestSolverStateRoundTrip
// fails if a gorgonia upgrade changes it.

// field returns a settable view of a (possibly unexported) field of the
// struct v points into.
func field(v reflect.Value, name string) (reflect.Value, error) {
	f := v.FieldByName(name)
	if !f.IsValid() {
		return reflect.Value{}, fmt.Errorf("gorgonia's %v has no field %q (the solver's layout changed; this ooc knows gorgonia v0.9.18)", v.Type(), name)
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem(), nil
}

// solverCache returns the solver's cache field, or ok=false for a stateless solver.
func solverCache(s G.Solver) (cache reflect.Value, adam, ok bool, err error) {
	switch s.(type) {
	case *G.VanillaSolver:
		return reflect.Value{}, false, false, nil
	case *G.Momentum:
	case *G.AdamSolver:
		adam = true
	default:
		return reflect.Value{}, false, false, fmt.Errorf("cannot save the state of a %T", s)
	}
	cache, err = field(reflect.ValueOf(s).Elem(), "cache")
	if err != nil {
		return reflect.Value{}, false, false, err
	}
	t := cache.Type()
	if t.Kind() != reflect.Slice || t.Elem().Kind() != reflect.Pointer || t.Elem().Elem().Kind() != reflect.Struct {
		return reflect.Value{}, false, false, fmt.Errorf("gorgonia's %T.cache is a %v, not a []*dualValue", s, t)
	}
	return cache, adam, true, nil
}

// exportSolver returns the solver's state in gorgonia's form whichever
// solver it is (Iter only for Adam, no slots for sgd), so that a checkpoint
// of one continues with the other. The tensors are the solver's own.
func exportSolver(s G.Solver, learnables G.Nodes) (solverState, error) {
	var st solverState
	if f, ok := s.(*solvers.Solver); ok {
		return exportFast(f, learnables)
	}
	cache, adam, ok, err := solverCache(s)
	if err != nil || !ok {
		return st, err
	}
	if adam {
		it, err := field(reflect.ValueOf(s).Elem(), "iter")
		if err != nil {
			return st, err
		}
		st.Iter = int(it.Int())
	}
	if cache.IsNil() {
		return st, nil
	}
	names := []string{"Value"}
	if adam {
		names = append(names, "d")
	}
	for i := 0; i < cache.Len(); i++ {
		dv := cache.Index(i)
		if dv.IsNil() {
			return st, fmt.Errorf("%T: no state for learnable %d", s, i)
		}
		var slot []*tensor.Dense
		for _, n := range names {
			f, err := field(dv.Elem(), n)
			if err != nil {
				return st, err
			}
			t, ok := f.Interface().(*tensor.Dense)
			if !ok {
				return st, fmt.Errorf("%T: state %s of learnable %d is a %T, not a *tensor.Dense", s, n, i, f.Interface())
			}
			slot = append(slot, t) // the solver's own tensor: copy it before the next Step

		}
		st.Slots = append(st.Slots, slot)
	}
	return st, nil
}

// exportFast is exportSolver for package solvers' solver: its state vectors
// as tensors of the learnables' shapes, sharing their memory.
func exportFast(s *solvers.Solver, learnables G.Nodes) (solverState, error) {
	var st solverState
	fs := s.State()
	if s.Kind() == solvers.Adam {
		st.Iter = fs.Iter
	}
	if fs.Slots == nil || s.Kind().Slots() == 0 {
		return st, nil
	}
	if len(fs.Slots) != len(learnables) {
		return st, fmt.Errorf("%v solver holds state for %d learnables, the model has %d", s.Kind(), len(fs.Slots), len(learnables))
	}
	for i, vs := range fs.Slots {
		w := learnables[i]
		var slot []*tensor.Dense
		for _, v := range vs {
			t := tensor.New(tensor.WithShape(w.Shape().Clone()...), tensor.WithBacking(v))
			if t.Dtype() != w.Dtype() {
				return st, fmt.Errorf("%v solver's state of %s is %v, the learnable is %v", s.Kind(), w.Name(), t.Dtype(), w.Dtype())
			}
			slot = append(slot, t)
		}
		st.Slots = append(st.Slots, slot)
	}
	return st, nil
}

// checkSlots checks that st has the optimizer's state tensors for each
// learnable, each of the learnable's shape and type.
func checkSlots(st solverState, learnables G.Nodes, want int) error {
	if len(st.Slots) != len(learnables) {
		return fmt.Errorf("optimizer state for %d learnables, the model has %d", len(st.Slots), len(learnables))
	}
	for i, slot := range st.Slots {
		if len(slot) != want {
			return fmt.Errorf("optimizer state of learnable %d has %d tensors, want %d", i, len(slot), want)
		}
		w := learnables[i]
		for _, t := range slot {
			if !t.Shape().Eq(w.Shape()) || t.Dtype() != w.Dtype() {
				return fmt.Errorf("optimizer state of %s is %v %v, the learnable is %v %v", w.Name(), t.Dtype(), t.Shape(), w.Dtype(), w.Shape())
			}
		}
	}
	return nil
}

// importFast is importSolver for package solvers' solver (SetState copies).
func importFast(s *solvers.Solver, st solverState, learnables G.Nodes) error {
	fs := solvers.State{Iter: st.Iter}
	if s.Kind().Slots() == 0 && len(st.Slots) > 0 {
		return fmt.Errorf("%v keeps no state, but the checkpoint holds some", s.Kind())
	}
	if st.Slots != nil {
		if err := checkSlots(st, learnables, s.Kind().Slots()); err != nil {
			return err
		}
		for _, slot := range st.Slots {
			var vs []any
			for _, t := range slot {
				vs = append(vs, t.Data())
			}
			fs.Slots = append(fs.Slots, vs)
		}
	}
	return s.SetState(fs)
}

// importSolver installs st into a solver that has not stepped yet.
func importSolver(s G.Solver, st solverState, learnables G.Nodes) error {
	if f, ok := s.(*solvers.Solver); ok {
		return importFast(f, st, learnables)
	}
	cache, adam, ok, err := solverCache(s)
	if err != nil {
		return err
	}
	if !ok {
		if len(st.Slots) > 0 {
			return fmt.Errorf("%T keeps no state, but the checkpoint holds some", s)
		}
		return nil
	}
	if adam {
		it, err := field(reflect.ValueOf(s).Elem(), "iter")
		if err != nil {
			return err
		}
		it.SetInt(int64(st.Iter))
	}
	if st.Slots == nil {
		cache.Set(reflect.Zero(cache.Type()))
		return nil
	}
	want := 1
	if adam {
		want = 2
	}
	if err := checkSlots(st, learnables, want); err != nil {
		return err
	}
	fresh := reflect.MakeSlice(cache.Type(), len(st.Slots), len(st.Slots))
	for i, slot := range st.Slots {
		w := learnables[i]
		dv := reflect.New(cache.Type().Elem().Elem())
		val, err := field(dv.Elem(), "Value")
		if err != nil {
			return err
		}
		d, err := field(dv.Elem(), "d")
		if err != nil {
			return err
		}
		val.Set(reflect.ValueOf(slot[0].Clone().(*tensor.Dense)))
		second := tensor.New(tensor.Of(w.Dtype()), tensor.WithShape(w.Shape().Clone()...)) // gorgonia's zeroed, unused d for Momentum
		if adam {
			second = slot[1].Clone().(*tensor.Dense)
		}
		d.Set(reflect.ValueOf(second))
		fresh.Index(i).Set(dv)
	}
	cache.Set(fresh)
	return nil
}

// batchNorm is one batch-norm op's running statistics, whichever kind it is.
type batchNorm struct {
	name string
	get  func() (mean, variance *tensor.Dense, err error)
	set  func(mean, variance *tensor.Dense) error
}

// The lean batch norm of models/layers keeps float64 running statistics.
type leanBN interface {
	RunningStats() (mean, variance []float64)
	SetRunningStats(mean, variance []float64) error
}

// gorgonia's own BatchNormOp keeps them as tensors of the graph's dtype.
type gorgoniaBN interface {
	Stats() (runningMean, runningVariance tensor.Tensor)
	SetStats(runningMean, runningVariance tensor.Tensor) error
}

// modelBatchNorms lists the model's batch-norm ops: its BatchNorms field
// where it has one, else those found in its graph.
func modelBatchNorms(m *models.Model) []batchNorm {
	f := reflect.ValueOf(m).Elem().FieldByName("BatchNorms")
	if !f.IsValid() || f.Kind() != reflect.Slice {
		return findBatchNorms(m.Graph)
	}
	var out []batchNorm
	for i := 0; i < f.Len(); i++ {
		if bn, ok := asBatchNorm(f.Index(i).Interface(), fmt.Sprintf("BatchNorms[%d]", i)); ok {
			out = append(out, bn)
		}
	}
	return out
}

// findBatchNorms lists the graph's batch-norm ops in node order (the same
// order on every build of a model), each once.
func findBatchNorms(g *G.ExprGraph) []batchNorm {
	var out []batchNorm
	seen := map[uintptr]bool{}
	for _, n := range g.AllNodes() {
		key, ok := opIdentity(n.Op())
		if !ok || seen[key] {
			continue
		}
		if bn, ok := asBatchNorm(n.Op(), n.Name()); ok {
			seen[key] = true
			out = append(out, bn)
		}
	}
	return out
}

// asBatchNorm wraps a batch-norm op of either kind.
func asBatchNorm(op any, name string) (batchNorm, bool) {
	switch bn := op.(type) {
	case leanBN:
		return batchNorm{
			name: name,
			get: func() (*tensor.Dense, *tensor.Dense, error) {
				m, v := bn.RunningStats()
				return tensor.New(tensor.WithShape(len(m)), tensor.WithBacking(m)),
					tensor.New(tensor.WithShape(len(v)), tensor.WithBacking(v)), nil
			},
			set: func(m, v *tensor.Dense) error {
				md, ok1 := m.Data().([]float64)
				vd, ok2 := v.Data().([]float64)
				if !ok1 || !ok2 {
					return fmt.Errorf("running statistics are %v, want float64", m.Dtype())
				}
				return bn.SetRunningStats(md, vd)
			},
		}, true
	case gorgoniaBN:
		return batchNorm{
			name: name,
			get: func() (*tensor.Dense, *tensor.Dense, error) {
				m, v := bn.Stats()
				md, ok1 := m.(*tensor.Dense)
				vd, ok2 := v.(*tensor.Dense)
				if !ok1 || !ok2 {
					return nil, nil, fmt.Errorf("running statistics of type %T", m)
				}
				return md.Clone().(*tensor.Dense), vd.Clone().(*tensor.Dense), nil
			},
			set: func(m, v *tensor.Dense) error { return bn.SetStats(m, v) },
		}, true
	}
	return batchNorm{}, false
}

type bnSnapshot [][2]*tensor.Dense

func snapshotBN(bns []batchNorm) (bnSnapshot, error) {
	s := make(bnSnapshot, len(bns))
	for i, b := range bns {
		m, v, err := b.get()
		if err != nil {
			return nil, fmt.Errorf("batch norm %d (%s): %w", i, b.name, err)
		}
		s[i] = [2]*tensor.Dense{m, v}
	}
	return s, nil
}

func (s bnSnapshot) restore(bns []batchNorm) error {
	for i, b := range bns {
		if err := b.set(s[i][0], s[i][1]); err != nil {
			return fmt.Errorf("batch norm %d (%s): %w", i, b.name, err)
		}
	}
	return nil
}

// captureTensors collects the learnables' values, the batch norms' running
// statistics and the solver's state, as checkpoint sections. The learnables'
// and the solver's tensors are the live ones: write them before the next step.
func captureTensors(learnables G.Nodes, bns []batchNorm, solver G.Solver, optimizer string) ([]NamedTensor, int, error) {
	var out []NamedTensor
	for _, w := range learnables {
		t, ok := w.Value().(*tensor.Dense)
		if !ok {
			return nil, 0, fmt.Errorf("learnable %s holds a %T, not a tensor", w.Name(), w.Value())
		}
		// The live tensors, not copies: the checkpoint is written before the next step.
		out = append(out, NamedTensor{"param/" + w.Name(), t})
	}
	snap, err := snapshotBN(bns)
	if err != nil {
		return nil, 0, err
	}
	for i, s := range snap {
		out = append(out, NamedTensor{fmt.Sprintf("bn/%d/mean", i), s[0]}, NamedTensor{fmt.Sprintf("bn/%d/variance", i), s[1]})
	}
	st, err := exportSolver(solver, learnables)
	if err != nil {
		return nil, 0, err
	}
	slots, _ := optimizerSlots(optimizer)
	for i, sl := range st.Slots {
		for j, t := range sl {
			out = append(out, NamedTensor{fmt.Sprintf("opt/%d/%s", i, slots[j]), t})
		}
	}
	return out, st.Iter, nil
}

// restoreTensors is captureTensors backwards; every mismatch names the file.
func restoreTensors(file string, c *Checkpoint, learnables G.Nodes, bns []batchNorm, solver G.Solver) error {
	ts := c.Tensors
	bad := func(format string, args ...any) error {
		return fmt.Errorf("checkpoint %s does not fit this model: "+format, append([]any{file}, args...)...)
	}
	take := func(name string) (*tensor.Dense, error) {
		if len(ts) == 0 || ts[0].Name != name {
			got := "nothing"
			if len(ts) > 0 {
				got = fmt.Sprintf("%q", ts[0].Name)
			}
			return nil, bad("expected section %q, found %s", name, got)
		}
		t := ts[0].T
		ts = ts[1:]
		return t, nil
	}
	for _, w := range learnables {
		t, err := take("param/" + w.Name())
		if err != nil {
			return err
		}
		if !t.Shape().Eq(w.Shape()) || t.Dtype() != w.Dtype() {
			return bad("%s is %v %v in the checkpoint, %v %v in the model", w.Name(), t.Dtype(), t.Shape(), w.Dtype(), w.Shape())
		}
		dst, ok := w.Value().(*tensor.Dense)
		if !ok {
			return bad("learnable %s holds a %T", w.Name(), w.Value())
		}
		// Copy in place: the evaluation graph shares these tensors.
		if err := tensor.Copy(dst, t); err != nil {
			return bad("%s: %v", w.Name(), err)
		}
	}
	snap := make(bnSnapshot, len(bns))
	for i := range bns {
		m, err := take(fmt.Sprintf("bn/%d/mean", i))
		if err != nil {
			return err
		}
		v, err := take(fmt.Sprintf("bn/%d/variance", i))
		if err != nil {
			return err
		}
		snap[i] = [2]*tensor.Dense{m, v}
	}
	if err := snap.restore(bns); err != nil {
		return bad("%v", err)
	}
	slots, ok := optimizerSlots(c.Meta.Optimizer)
	if !ok {
		return bad("unknown optimizer %q", c.Meta.Optimizer)
	}
	st := solverState{Iter: c.Meta.OptimizerIter}
	if len(ts) > 0 && len(slots) > 0 {
		for i := range learnables {
			var sl []*tensor.Dense
			for _, s := range slots {
				t, err := take(fmt.Sprintf("opt/%d/%s", i, s))
				if err != nil {
					return err
				}
				sl = append(sl, t)
			}
			st.Slots = append(st.Slots, sl)
		}
	}
	if len(ts) > 0 {
		return bad("unexpected section %q", ts[0].Name)
	}
	if err := importSolver(solver, st, learnables); err != nil {
		return bad("optimizer state: %v", err)
	}
	return nil
}

// opIdentity identifies an op held by pointer (stateful ops are); ok is false
// for value ops, which hold no state worth saving.
func opIdentity(op any) (uintptr, bool) {
	if op == nil {
		return 0, false
	}
	v := reflect.ValueOf(op)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return 0, false
	}
	return v.Pointer(), true
}
