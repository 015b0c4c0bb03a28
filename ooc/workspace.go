package ooc

import (
	"errors"
	"slices"

	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm"
)

// planTiled plans t under budget. When that fails and no WithWorkspaceLimit
// was given, it shrinks the workspaces of tiling functions that cannot run
// within the budget and plans again: first every function whose own
// resident need (operands, output, workspace) exceeds the budget, by its
// excess, then the function each failed plan names, by what it lacked,
// until a plan succeeds or the named function is no tiling one or is at its
// least workspace. Tiles give the same bits (vm.TiledWorkspaceOp), so only
// feasibility and speed change. It returns the trace planned, the one with
// shrunk workspaces if those were needed, so replanning keeps them.
func planTiled(t *Trace, budget int64, s *settings) (*vm.Program, *Trace, error) {
	p, err := plan(t, budget, s)
	if err == nil || s.wsSet || s.baseline {
		return p, t, err
	}
	tiled := t.shrinkWorkspaces(budget)
	if tiled == nil {
		return nil, t, err
	}
	for range len(tiled.Funcs) + 1 {
		p, err := plan(tiled, budget, s)
		if err == nil {
			return p, tiled, nil
		}
		var be *BudgetError
		if !errors.As(err, &be) || !tiled.shrinkWorkspace(be.Index, be.Func, be.Need-be.Budget) {
			return nil, t, err
		}
	}
	return nil, t, err
}

// minWorkspace is the least workspace of function i if its op tiles.
func (t *Trace) minWorkspace(i int) (int64, bool) {
	f := &t.Funcs[i]
	tw, ok := f.Op.(vm.TiledWorkspaceOp)
	if !ok || f.Workspace <= 0 {
		return 0, false
	}
	ops := f.Operands()
	shapes := make([]tensor.Shape, len(ops))
	for k, v := range ops {
		shapes[k] = t.Vars[v].Shape
	}
	return tw.MinWorkspaceBytes(t.Vars[f.Output].Dtype, shapes), true
}

// shrinkWorkspaces returns a copy of t in which every tiling function whose
// Need exceeds budget has its workspace lowered by the excess (not below its
// least), or nil if no workspace changes.
func (t *Trace) shrinkWorkspaces(budget int64) *Trace {
	var c *Trace
	for i := range t.Funcs {
		if excess := t.Need(i) - budget; excess > 0 {
			if c == nil {
				x := *t
				x.Funcs = slices.Clone(t.Funcs)
				c = &x
			}
			c.shrinkWorkspace(i, t.Funcs[i].Node.Name(), excess)
		}
	}
	if c == nil || slices.EqualFunc(c.Funcs, t.Funcs, func(a, b vm.Func) bool { return a.Workspace == b.Workspace }) {
		return nil
	}
	return c
}

// shrinkWorkspace lowers function i's workspace by up to by bytes, not below
// its least, and reports whether it changed. name guards against an index of
// another sequence (a scheduler that rewrote the trace).
func (t *Trace) shrinkWorkspace(i int, name string, by int64) bool {
	if i < 0 || i >= len(t.Funcs) || by <= 0 || t.Funcs[i].Node.Name() != name {
		return false
	}
	least, ok := t.minWorkspace(i)
	f := &t.Funcs[i]
	if !ok || f.Workspace <= least {
		return false
	}
	f.Workspace = max(least, f.Workspace-by)
	return true
}
