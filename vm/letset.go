package vm

import (
	"fmt"

	"gorgonia.org/gorgonia"
)

// Let and Set are gorgonia's TapeMachine methods of the same names, so that
// a script calling machine.Let or machine.Set (gorgonia's logistic
// regression example does both) compiles and runs unchanged when its
// machine comes from ooc.Compile.

// check says why n cannot be read or bound through this machine: it is
// of another graph, or of this one but not computed by the program.
func (m *Machine) check(what string, n *gorgonia.Node) error {
	if n == nil {
		return fmt.Errorf("vm: %s: nil node", what)
	}
	var g *gorgonia.ExprGraph
	for i := range m.prog.Vars {
		if m.prog.Vars[i].Node == n {
			return nil
		}
		if m.prog.Vars[i].Node != nil {
			g = m.prog.Vars[i].Node.Graph()
		}
	}
	if n.Graph() != g {
		return fmt.Errorf("vm: %s: node %s is not in this machine's graph", what, n.Name())
	}
	return fmt.Errorf("vm: %s: node %s is not computed by this program (neither the cost, nor an output, nor a Read "+
		"needs it): name it with ooc.WithOutputs", what, n.Name())
}

// Let binds a value to an input node, as gorgonia.Let does, after checking
// that the node is in the machine's program.
func (m *Machine) Let(n *gorgonia.Node, be interface{}) error {
	if err := m.check("Let", n); err != nil {
		return err
	}
	return gorgonia.Let(n, be)
}

// Set gives a the value b holds after a run, as TapeMachine's Set does (it
// binds a to b's value): here a gets a copy, because b's value is the host
// tensor the next run writes b's result into, and a leaf sharing it would
// change under the ops still reading a in that run. b must be a node whose
// value the run binds (the cost, an output named by WithOutputs, a Read's
// node, a gradient, a scalar of the forward).
func (m *Machine) Set(a, b *gorgonia.Node) error {
	for _, n := range []*gorgonia.Node{a, b} {
		if err := m.check("Set", n); err != nil {
			return err
		}
	}
	v := b.Value()
	if v == nil {
		return fmt.Errorf("vm: Set(%s, %s): %s holds no value after the run: name it with ooc.WithOutputs", a.Name(), b.Name(), b.Name())
	}
	c, err := gorgonia.CloneValue(v)
	if err != nil {
		return fmt.Errorf("vm: Set(%s, %s): %w", a.Name(), b.Name(), err)
	}
	return gorgonia.Let(a, c)
}
