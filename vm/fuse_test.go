package vm_test

import (
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models/layers"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/alloc"
)

// bnReLUNet is x -> batch norm -> ReLU -> mean of per-image sums, with the batch norm's output
// also added to the ReLU's when shared (a second reader), or read by a gorgonia.Read when read.
type bnReLUNet struct {
	g           *G.ExprGraph
	cost        *G.Node
	gamma, beta *G.Node
	read        G.Value
}

func newBNReLUNet(t *testing.T, shared, read bool) *bnReLUNet {
	t.Helper()
	const N, C, H = 4, 3, 6
	rng := rand.New(rand.NewSource(5))
	data := make([]float64, N*C*H*H)
	for i := range data {
		data[i] = rng.NormFloat64()
	}
	n := &bnReLUNet{g: G.NewGraph()}
	g := n.g
	x := G.NewTensor(g, tensor.Float64, 4, G.WithShape(N, C, H, H), G.WithName("x"), G.WithValue(tensor.New(tensor.WithShape(N, C, H, H), tensor.WithBacking(data))))
	n.gamma = G.NewVector(g, tensor.Float64, G.WithShape(C), G.WithName("gamma"), G.WithValue(tensor.New(tensor.WithBacking([]float64{1, -0.5, 2}))))
	n.beta = G.NewVector(g, tensor.Float64, G.WithShape(C), G.WithName("beta"), G.WithValue(tensor.New(tensor.WithBacking([]float64{0.1, 0, -0.2}))))
	bn, _, err := layers.BatchNorm(x, n.gamma, n.beta, 0.1, 1e-5)
	require.NoError(t, err)
	r, err := layers.ReLU(bn)
	require.NoError(t, err)
	if shared {
		r = G.Must(G.Add(r, bn))
	}
	if read {
		G.Read(bn, &n.read)
	}
	flat := G.Must(G.Reshape(r, tensor.Shape{N, C * H * H}))
	n.cost = G.Must(G.Mean(G.Must(G.Sum(flat, 1))))
	_, err = G.Grad(n.cost, n.gamma, n.beta)
	require.NoError(t, err)
	return n
}

// machineFor runs program p on a CPU device of its own.
func machineFor(t *testing.T, p *vm.Program) *vm.Machine {
	t.Helper()
	dev, err := vm.NewCPU(64 << 20)
	require.NoError(t, err)
	al, err := alloc.NewVA(dev.Memory(), alloc.Granularity)
	require.NoError(t, err)
	m, err := vm.New(p, vm.Config{Device: dev, Allocator: al, OwnDevice: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// funcOf is the function whose op prints as op.
func funcOf(t *testing.T, p *vm.Program, op string) int {
	t.Helper()
	for i := range p.Funcs {
		if p.Funcs[i].Op.String() == op {
			return i
		}
	}
	t.Fatalf("no function of %s", op)
	return -1
}

// insertAfterExec puts in right after the exec of the function whose op prints as op.
func insertAfterExec(t *testing.T, p *vm.Program, op string, in func(f int, fn *vm.Func) vm.Instr) {
	t.Helper()
	for pc, x := range p.Instrs {
		if x.Op == vm.Exec && p.Funcs[x.Func].Op.String() == op {
			add := in(x.Func, &p.Funcs[x.Func])
			p.Instrs = append(p.Instrs[:pc+1], append([]vm.Instr{add}, p.Instrs[pc+1:]...)...)
			return
		}
	}
	t.Fatalf("no exec of %s in the tape", op)
}

// TestFusionOnlyWhereNothingCanTell: the machine fuses a batch norm with the ReLU after it where
// the ReLU writes over the batch norm's output and nothing else sees that output, and not where
// something does: another op reads it, the user reads it (a Read, or the forward's values bound
// to their nodes), the tape swaps it out or recomputes it, or the machine does not run the ops
// itself (a simulated device). Where it fuses, a step gives the unfused step's bits.
func TestFusionOnlyWhereNothingCanTell(t *testing.T) {
	const bnName = "BatchNorm{C=3 momentum=0.1 eps=1e-05}"
	for _, c := range []struct {
		name         string
		shared, read bool
		opts         []ooc.Option
		edit         func(t *testing.T, p *vm.Program)
		want         int
	}{
		{name: "alone", want: 1},
		{name: "read by another op", shared: true},
		{name: "read by the user", read: true},
		{name: "node values bound", opts: []ooc.Option{ooc.WithNodeValues(ooc.DefaultNodeValueLimit)}},
		{name: "swapped out between", edit: func(t *testing.T, p *vm.Program) {
			insertAfterExec(t, p, bnName, func(f int, fn *vm.Func) vm.Instr {
				return vm.Instr{Op: vm.SwapOut, Func: -1, Var: fn.Output, Bytes: p.Vars[fn.Output].Bytes}
			})
		}},
		{name: "another exec between", edit: func(t *testing.T, p *vm.Program) {
			// The ReLU's exec swapped with the exec after it (a tape that cannot run,
			// but the check comes first).
			var at []int
			for pc, x := range p.Instrs {
				if x.Op == vm.Exec && (p.Funcs[x.Func].Op.String() == "ReLU" || len(at) == 1) {
					at = append(at, pc)
				}
			}
			require.GreaterOrEqual(t, len(at), 2)
			p.Instrs[at[0]], p.Instrs[at[1]] = p.Instrs[at[1]], p.Instrs[at[0]]
		}},
		{name: "read by another function", edit: func(t *testing.T, p *vm.Program) {
			bn := funcOf(t, p, bnName)
			last := &p.Funcs[len(p.Funcs)-1]
			last.Inputs = append(last.Inputs, p.Funcs[bn].Output)
		}},
		{name: "not in place", edit: func(t *testing.T, p *vm.Program) {
			p.Funcs[funcOf(t, p, "ReLU")].InPlace = -1
		}},
		{name: "freed later", edit: func(t *testing.T, p *vm.Program) {
			y := p.Funcs[funcOf(t, p, bnName)].Output
			p.Instrs = append(p.Instrs, vm.Instr{Op: vm.Free, Func: -1, Var: y, Bytes: p.Vars[y].Bytes})
		}},
		{name: "another function recomputed between", edit: func(t *testing.T, p *vm.Program) {
			last := len(p.Funcs) - 1
			insertAfterExec(t, p, bnName, func(int, *vm.Func) vm.Instr {
				return vm.Instr{Op: vm.Recompute, Func: last, Var: p.Funcs[last].Output, Bytes: p.Vars[p.Funcs[last].Output].Bytes}
			})
		}},
		{name: "recomputed", edit: func(t *testing.T, p *vm.Program) {
			insertAfterExec(t, p, "ReLU", func(f int, fn *vm.Func) vm.Instr {
				return vm.Instr{Op: vm.Recompute, Func: f, Var: fn.Output, Bytes: p.Vars[fn.Output].Bytes}
			})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := newBNReLUNet(t, c.shared, c.read)
			p, err := ooc.Plan(n.g, append([]ooc.Option{ooc.Baseline(), ooc.WithNodeValues(0)}, c.opts...)...)
			require.NoError(t, err)
			if c.edit != nil {
				c.edit(t, p)
			}
			m := machineFor(t, p)
			fused := m.Fused()
			require.Len(t, fused, c.want, "fused pairs of\n%v", p)
			if c.want == 0 {
				return
			}
			require.Contains(t, p.Funcs[fused[0].Head].Op.String(), "BatchNorm")
			require.Equal(t, "ReLU", p.Funcs[fused[0].Tail].Op.String())
			got := stepBits(t, m, n)
			relu := vm.OpKey(p, &p.Funcs[fused[0].Tail])
			require.NotContains(t, m.OpTimes(), relu, "a fused tail has no time of its own")
			m.SetFusion(false)
			require.Empty(t, m.Fused(), "SetFusion(false)")
			require.Equal(t, stepBits(t, m, n), got, "the fused step's loss and gradients")
			require.Contains(t, m.OpTimes(), relu, "unfused, the ReLU is timed")
		})
	}
	t.Run("replanned after the first step", func(t *testing.T) {
		// The first step measures each function's own time for the planner: it runs unfused.
		n := newBNReLUNet(t, false, false)
		p, err := ooc.Plan(n.g, ooc.Baseline(), ooc.WithNodeValues(0))
		require.NoError(t, err)
		dev, err := vm.NewCPU(64 << 20)
		require.NoError(t, err)
		al, err := alloc.NewVA(dev.Memory(), alloc.Granularity)
		require.NoError(t, err)
		replan := func(map[string]time.Duration) (*vm.Program, error) { q := *p; return &q, nil }
		m, err := vm.New(p, vm.Config{Device: dev, Allocator: al, OwnDevice: true, Replan: replan})
		require.NoError(t, err)
		defer m.Close()
		require.Empty(t, m.Fused(), "before the first step")
		first := stepBits(t, m, n)
		require.Len(t, m.Fused(), 1, "after the replan")
		require.Equal(t, first, stepBits(t, m, n))
	})
	t.Run("simulated device", func(t *testing.T) {
		n := newBNReLUNet(t, false, false)
		dev, err := vm.NewDevice("sim:v100-pcie", 0)
		require.NoError(t, err)
		m, err := ooc.Compile(n.g, ooc.Baseline(), ooc.WithNodeValues(0), ooc.WithDevice(dev))
		require.NoError(t, err)
		defer m.Close()
		require.Empty(t, m.Fused())
	})
}

// stepBits runs one step and returns the bits of the loss and of gamma's and beta's gradients.
func stepBits(t *testing.T, m *vm.Machine, n *bnReLUNet) [][]uint64 {
	t.Helper()
	m.Reset()
	require.NoError(t, m.RunAll())
	var out [][]uint64
	for _, v := range []G.Value{n.cost.Value(), grad(t, n.gamma), grad(t, n.beta)} {
		var b []uint64
		switch d := v.Data().(type) {
		case float64:
			b = append(b, math.Float64bits(d))
		case []float64:
			for _, x := range d {
				b = append(b, math.Float64bits(x))
			}
		default:
			t.Fatalf("unexpected %T", d)
		}
		out = append(out, b)
	}
	return out
}

func grad(t *testing.T, n *G.Node) G.Value {
	t.Helper()
	g, err := n.Grad()
	require.NoError(t, err)
	return g
}
