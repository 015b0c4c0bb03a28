package ooc

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"unsafe"

	"gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/iterator"
	"gonum.org/v1/gonum/graph/topo"
	"gorgonia.org/gorgonia"
)

// Walking a gorgonia graph from outside the package.
//
// gorgonia's ExprGraph answers Node(id), From(id) and To(id) through an
// id-to-index cache that RemoveNode leaves stale (BinaryXent's stabilisation
// and Grad's pruning call it), so on ordinary graphs an id lookup can return
// another node, and gorgonia.Sort, which walks From, can order a node before
// an operand. A node's own operand list is always right, and it is what
// gorgonia's TapeMachine reads; it is unexported, so it is read here through
// reflection, checked once against the pinned gorgonia's layout.

// nodeChildren is the offset of gorgonia.Node's operand list, or an error
// saying why it could not be found.
var nodeChildren, nodeChildrenErr = fieldOffset(reflect.TypeOf(gorgonia.Node{}), "children", reflect.TypeOf(gorgonia.Nodes(nil)))

// readInto is the offset of the destination pointer in gorgonia's readOp.
var readOpType = opType("readOp", gorgonia.Read)
var readInto, readIntoErr = fieldOffset(readOpType, "into", reflect.TypeOf((*gorgonia.Value)(nil)))

// letOpType is the type of gorgonia.Set's statement op.
var letOpType = opType("letOp", gorgonia.Set)

func fieldOffset(t reflect.Type, name string, want reflect.Type) (uintptr, error) {
	if t == nil {
		return 0, fmt.Errorf("ooc: gorgonia has no type holding %s", name)
	}
	f, ok := t.FieldByName(name)
	if !ok || f.Type != want {
		return 0, fmt.Errorf("ooc: %v has no field %s of type %v: this gorgonia is not the v0.9.18 ooc was built for", t, name, want)
	}
	return f.Offset, nil
}

// opType finds the type of a statement op by building one statement in a
// scratch graph, so no name needs to be spelled.
func opType(name string, build any) (t reflect.Type) {
	defer func() {
		if recover() != nil {
			t = nil
		}
	}()
	g := gorgonia.NewGraph()
	a := gorgonia.NewScalar(g, gorgonia.Float64, gorgonia.WithName("a"))
	b := gorgonia.NewScalar(g, gorgonia.Float64, gorgonia.WithName("b"))
	var n *gorgonia.Node
	switch f := build.(type) {
	case func(*gorgonia.Node, *gorgonia.Value) *gorgonia.Node:
		var v gorgonia.Value
		n = f(a, &v)
	case func(a, b *gorgonia.Node) *gorgonia.Node:
		n = f(a, b)
	}
	t = reflect.TypeOf(n.Op())
	if t.Name() != name {
		return nil
	}
	return t
}

// Operands returns a node's operands in order, read from the node itself,
// as gorgonia's TapeMachine reads them. Use it rather than
// ExprGraph.From(n.ID()), which after a RemoveNode (gorgonia's
// stabilisations and Grad call it) can return another node's operands.
// It returns nil for a nil node or a gorgonia whose Node layout it does not
// know.
func Operands(n *gorgonia.Node) gorgonia.Nodes {
	if n == nil || nodeChildrenErr != nil {
		return nil
	}
	return slices.Clone(operands(n))
}

// operands returns a node's operand list itself (not a copy).
func operands(n *gorgonia.Node) gorgonia.Nodes {
	if nodeChildrenErr != nil {
		panic(nodeChildrenErr)
	}
	return *(*gorgonia.Nodes)(unsafe.Add(unsafe.Pointer(n), nodeChildren))
}

// readTarget returns where a gorgonia.Read statement stores its value, or
// nil if op is not a Read.
func readTarget(op gorgonia.Op) (*gorgonia.Value, error) {
	if op == nil || reflect.TypeOf(op) != readOpType {
		return nil, nil
	}
	if readIntoErr != nil {
		return nil, readIntoErr
	}
	// The op is held by value in an interface; copy it somewhere addressable.
	v := reflect.New(readOpType).Elem()
	v.Set(reflect.ValueOf(op))
	into := *(**gorgonia.Value)(unsafe.Add(unsafe.Pointer(v.UnsafeAddr()), readInto))
	if into == nil {
		return nil, errors.New("ooc: gorgonia.Read with a nil destination")
	}
	return into, nil
}

func isSet(op gorgonia.Op) bool { return op != nil && reflect.TypeOf(op) == letOpType }

// sortGraph returns every node of g, and every node their operands reach,
// in the order gorgonia.Sort gives when its cache is sound (the same
// stabilised topological sort on the same edges), roots first.
func sortGraph(g *gorgonia.ExprGraph) (gorgonia.Nodes, error) {
	og := &operandGraph{byID: map[int64]*gorgonia.Node{}, to: map[int64][]graph.Node{}}
	var add func(n *gorgonia.Node)
	add = func(n *gorgonia.Node) {
		if _, ok := og.byID[n.ID()]; ok {
			return
		}
		og.byID[n.ID()] = n
		og.all = append(og.all, n)
		for _, c := range operands(n) {
			add(c)
		}
	}
	for _, n := range g.AllNodes() {
		add(n)
	}
	for _, n := range og.all {
		for _, c := range operands(n) {
			og.to[c.ID()] = append(og.to[c.ID()], n)
		}
	}
	sorted, err := topo.SortStabilized(og, func(ns []graph.Node) {
		// gorgonia's order: by descending id (ids are unique).
		sort.Slice(ns, func(i, j int) bool { return ns[i].ID() > ns[j].ID() })
	})
	if err != nil {
		return nil, fmt.Errorf("ooc: the graph has a cycle: %w", err)
	}
	out := make(gorgonia.Nodes, len(sorted))
	for i, n := range sorted {
		out[i] = n.(*gorgonia.Node)
	}
	return out, nil
}

// operandGraph is a gonum directed graph over nodes and their own operand
// lists (an edge from each node to each operand, as gorgonia's).
type operandGraph struct {
	all  []*gorgonia.Node
	byID map[int64]*gorgonia.Node
	to   map[int64][]graph.Node
}

func (g *operandGraph) Node(id int64) graph.Node {
	if n, ok := g.byID[id]; ok {
		return n
	}
	return nil
}

func (g *operandGraph) Nodes() graph.Nodes {
	ns := make([]graph.Node, len(g.all))
	for i, n := range g.all {
		ns[i] = n
	}
	return iterator.NewOrderedNodes(ns)
}

func (g *operandGraph) From(id int64) graph.Nodes {
	n, ok := g.byID[id]
	if !ok {
		return graph.Empty
	}
	cs := operands(n)
	ns := make([]graph.Node, len(cs))
	for i, c := range cs {
		ns[i] = c
	}
	return iterator.NewOrderedNodes(ns)
}

func (g *operandGraph) To(id int64) graph.Nodes {
	return iterator.NewOrderedNodes(g.to[id])
}

func (g *operandGraph) HasEdgeFromTo(u, v int64) bool {
	n, ok := g.byID[u]
	if !ok {
		return false
	}
	for _, c := range operands(n) {
		if c.ID() == v {
			return true
		}
	}
	return false
}

func (g *operandGraph) HasEdgeBetween(x, y int64) bool {
	return g.HasEdgeFromTo(x, y) || g.HasEdgeFromTo(y, x)
}

func (g *operandGraph) Edge(u, v int64) graph.Edge {
	if !g.HasEdgeFromTo(u, v) {
		return nil
	}
	return operandEdge{g.byID[u], g.byID[v]}
}

type operandEdge struct{ f, t graph.Node }

func (e operandEdge) From() graph.Node         { return e.f }
func (e operandEdge) To() graph.Node           { return e.t }
func (e operandEdge) ReversedEdge() graph.Edge { return operandEdge{e.t, e.f} }
