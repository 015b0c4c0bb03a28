package ooc_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
)

func TestCompileRefusesBadInput(t *testing.T) {
	noCost := G.NewGraph()
	G.NewMatrix(noCost, tensor.Float64, G.WithShape(2, 2), G.WithName("a"), G.WithInit(G.Zeroes()))

	setComputed := mlp(tensor.Float64, 1)
	G.Set(setComputed.cost, setComputed.cost.Deriv())
	sim, err := vm.NewDevice("sim:v100-pcie", 0)
	require.NoError(t, err)
	defer sim.Close()

	cases := []struct {
		name string
		g    *G.ExprGraph
		opts []ooc.Option
		want string
	}{
		{"nil graph", nil, nil, "nil graph"},
		{"nothing to compute", noCost, nil, "the graph computes nothing"},
		{"negative budget", mlp(tensor.Float64, 1).g, []ooc.Option{ooc.WithBudget(-1)}, "WithBudget(-1): the budget must not be negative"},
		{"negative window", mlp(tensor.Float64, 1).g, []ooc.Option{ooc.WithWindow(-5)}, "WithWindow(-5)"},
		{"chunk of no bytes", mlp(tensor.Float64, 1).g, []ooc.Option{ooc.WithChunkSize(0)}, "WithChunkSize(0): the chunk size must be positive"},
		{"chunk not a page multiple", mlp(tensor.Float64, 1).g, []ooc.Option{ooc.WithChunkSize(3<<20 + 512)}, fmt.Sprintf("not a positive multiple of the memory's %d-byte granularity", os.Getpagesize())},
		{"chunk not 2 MiB multiple on a simulated device", mlp(tensor.Float64, 1).g, []ooc.Option{ooc.WithDevice(sim), ooc.WithChunkSize(3 << 20)},
			"device sim:v100-pcie: alloc: va chunk size 3145728 is not a positive multiple of the memory's 2097152-byte granularity"},
		{"unknown allocator", mlp(tensor.Float64, 1).g, []ooc.Option{ooc.WithAllocator(7)}, "unknown allocator"},
		{"nil scheduler", mlp(tensor.Float64, 1).g, []ooc.Option{ooc.WithScheduler(nil)}, "WithScheduler(nil)"},
		{"nil device", mlp(tensor.Float64, 1).g, []ooc.Option{ooc.WithDevice(nil)}, "WithDevice(nil)"},
		{"nil option", mlp(tensor.Float64, 1).g, []ooc.Option{nil}, "nil Option"},
		{"budget above capacity", mlp(tensor.Float64, 1).g, []ooc.Option{ooc.WithBudget(1 << 50)}, "exceeds the cpu device's capacity"},
		{"set of a computed node", setComputed.g, nil, "gorgonia.Set can assign to inputs and learnables only"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := ooc.Compile(c.g, c.opts...)
			require.Error(t, err)
			require.Nil(t, m)
			require.Contains(t, err.Error(), c.want)
		})
	}
}

func TestSetErrorNamesTheNodes(t *testing.T) {
	n := mlp(tensor.Float64, 1)
	w := n.params[0]
	st := G.Set(w, n.cost)
	_, err := ooc.Compile(n.g)
	require.ErrorContains(t, err, st.Name())
	require.ErrorContains(t, err, "cannot take the value of")
}

func TestBindDualValuesNeedsALearnable(t *testing.T) {
	n := mlp(tensor.Float64, 1)
	_, err := ooc.Compile(n.g, ooc.BindDualValues(n.x))
	require.ErrorContains(t, err, "x has no gradient in this graph")
}

func TestInfeasibleBudgetNamesTheFunction(t *testing.T) {
	n := mlp(tensor.Float64, 1)
	_, err := ooc.Compile(n.g, ooc.WithBudget(1000))
	var be *ooc.BudgetError
	require.ErrorAs(t, err, &be)
	require.Equal(t, int64(1000), be.Budget)
	require.Greater(t, be.Need, be.Budget)
	require.NotEmpty(t, be.Func)
	require.Contains(t, err.Error(), fmt.Sprintf("needs %d bytes", be.Need))

	_, err = ooc.Compile(n.g, ooc.Baseline(), ooc.WithBudget(1000))
	require.ErrorAs(t, err, &be, "the baseline is held to the budget too")
}

func TestRunAllWithoutInputValue(t *testing.T) {
	g := G.NewGraph()
	x := G.NewMatrix(g, tensor.Float64, G.WithShape(2, 3), G.WithName("unset"))
	w := G.NewMatrix(g, tensor.Float64, G.WithShape(3, 1), G.WithName("w"), G.WithInit(G.Ones()))
	cost := G.Must(G.Sum(G.Must(G.Mul(x, w))))
	_, err := G.Grad(cost, w)
	require.NoError(t, err)
	m, err := ooc.Compile(g)
	require.NoError(t, err)
	defer m.Close()
	require.ErrorContains(t, m.RunAll(), "input unset has no value")
}

func TestNoPanicCrossesRunAll(t *testing.T) {
	n := mlp(tensor.Float64, 1)
	m, err := ooc.Compile(n.g, ooc.Baseline())
	require.NoError(t, err)
	defer m.Close()
	// Corrupt the tape the way a buggy op would: run a function on an
	// operand of the wrong shape.
	p := m.Program()
	f := &p.Funcs[0]
	f.Inputs[0], f.Inputs[1] = f.Inputs[1], f.Inputs[0]
	err = m.RunAll()
	require.Error(t, err)
	require.Contains(t, err.Error(), "instruction 0 (exec")
	// The machine stays usable after a failed run.
	f.Inputs[0], f.Inputs[1] = f.Inputs[1], f.Inputs[0]
	require.NoError(t, m.RunAll())
}

func TestTraceSequences(t *testing.T) {
	n := cnn(tensor.Float64, 1)
	tr, err := ooc.NewTrace(n.g)
	require.NoError(t, err)
	require.Len(t, tr.Start, len(tr.Funcs)+1)
	for i, f := range tr.Funcs {
		v := tr.V(i)
		require.Equal(t, f.Output, v[len(v)-1], "V(f_i) ends with the output")
		require.Equal(t, f.Inputs, v[:len(v)-1], "V(f_i) starts with the inputs in operand order")
		for _, x := range v {
			require.LessOrEqual(t, tr.First[x], i)
			require.GreaterOrEqual(t, tr.Last[x], i)
		}
		require.Equal(t, i, tr.First[f.Output], "a variable is first used by its producer")
	}
	// The order is gorgonia's: Sort reversed, with the pruned nodes left out.
	sorted, err := G.Sort(n.g)
	require.NoError(t, err)
	pos := map[*G.Node]int{}
	for i, nd := range sorted {
		pos[nd] = len(sorted) - 1 - i
	}
	for i := 1; i < len(tr.Funcs); i++ {
		require.Less(t, pos[tr.Funcs[i-1].Node], pos[tr.Funcs[i].Node])
	}
	// Pruned: gorgonia emits the gradient of the input x, which nobody needs.
	for _, f := range tr.Funcs {
		require.NotSame(t, n.x.Deriv(), f.Node)
	}
	s := tr.String()
	require.Contains(t, s, "functions")
	require.Contains(t, s, tr.Funcs[0].Node.Name())
}

func TestProgramJSON(t *testing.T) {
	n := mlp(tensor.Float64, 1)
	p, err := ooc.Plan(n.g, ooc.Baseline())
	require.NoError(t, err)
	raw, err := json.Marshal(p)
	require.NoError(t, err)
	var instrs []map[string]interface{}
	require.NoError(t, json.Unmarshal(raw, &instrs))
	require.Len(t, instrs, len(p.Instrs))
	ops := map[string]bool{"exec": true, "swapin": true, "swapout": true, "wait": true, "free": true, "recompute": true}
	for i, in := range instrs {
		require.Len(t, in, 3)
		require.True(t, ops[in["op"].(string)], "op %v", in["op"])
		require.Equal(t, p.Vars[p.Instrs[i].Var].Name, in["node"])
		require.Equal(t, float64(p.Instrs[i].Bytes), in["bytes"])
	}
	require.True(t, strings.HasPrefix(p.String(), "program:"))
	execs, _ := p.Count(vm.Exec)
	frees, _ := p.Count(vm.Free)
	require.Equal(t, len(p.Funcs), execs)
	inPlace := 0
	for _, f := range p.Funcs {
		if f.InPlace >= 0 {
			inPlace++
		}
	}
	require.Positive(t, inPlace, "ReLU and the elementwise ops of the backward run in place")
	require.Equal(t, len(p.Funcs), frees+inPlace, "baseline frees every variable once, but those whose memory an in-place op took over")
}
