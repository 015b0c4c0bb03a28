package ooc_test

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// stackedDAProgram is gorgonia's examples/stacked_autoencoder (read at
// v0.9.18: stackedDA.go, denoisingautoencoder.go, layer.go, neuron.go)
// pretraining, with its three layers' costs and gradients in one machine
// under BindDualValues. The graph is built in the example's order:
// NewStackedDA makes, per layer, the FC layer (w, b, Sigmoid(input·w + b),
// the next layer's input) and the tied-weight autoencoder on it
// (Transpose(w), hb, the corruption), then the softmax layer's leaves;
// Pretrain then builds each autoencoder's cost
// Mean(BinaryXent(Sigmoid(Sigmoid(corrupt(input)·w + b)·wᵀ + hb), input)),
// Reads it, and differentiates it for w, b and hb. The biases are
// batch-wide matrices initialised to zeroes, as the example's are for a
// batch above 1, and the vanilla solver divides by the batch size.
//
// Differences from the example, each for a reason:
//   - The corruption is a 0/1 mask per layer the loop Lets each step (each
//     input kept with probability 0.9, 0.8, 0.7): the example's
//     BinomialRandomNode is clock-seeded, so two runs cannot agree; it is
//     a scalar there, kept with probabilities 0.1, 0.2, 0.3).
//   - Each cost has its own Read destination (the example shares one
//     between its three machines).
//   - One machine runs the three layers (the example compiles one per
//     layer with CompileFunction and steps each layer's solver after it).
//   - w is initialised from a seeded Gaussian with Glorot's variance (the
//     example's GlorotU draws from the global generator).
//   - The data is Let each step from a seeded generator in (0.05, 0.95),
//     as MNIST pixels scaled by the example's loader are in [0.1, 0.9]
//     (no data set is read in tests).
//   - Every node is named when it is made, so no two inputs share a hash;
//     stackedDAAsWritten names them as the example does, and TapeMachine
//     trains that otherwise (TestTapeMachineMergedInputs).
func stackedDAProgram(in int, hidden []int, steps int) realProgram {
	return realProgram{from: "gorgonia examples/stacked_autoencoder (pretraining)", dts: []tensor.Dtype{tensor.Float64},
		steps: steps, build: func(dt tensor.Dtype) *realRun {
			return buildStackedDA(dt, 4, in, hidden).realRun
		}}
}

// sdaLayer is one of the example's DenoisingAutoencoders.
type sdaLayer struct {
	w, b, hw, hb, corruption, input *G.Node
	keep                            float64
}

// sdaRun is a build of the program, with the loop's Lets for the
// LispMachine's check.
type sdaRun struct {
	*realRun
	lets func(t *testing.T, i int)
}

func buildStackedDA(dt tensor.Dtype, batch, in int, hidden []int) sdaRun {
	c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(27))}
	zeros := func(name string, shape ...int) *G.Node {
		return G.NewMatrix(c.g, dt, G.WithShape(shape...), G.WithName(name),
			G.WithValue(tensor.New(tensor.Of(dt), tensor.WithShape(shape...))))
	}
	// NewStackedDA
	x := G.NewMatrix(c.g, dt, G.WithShape(batch, in), G.WithName("x"))
	var das []sdaLayer
	input, inW := x, in
	for i, out := range hidden {
		w := c.leaf(fmt.Sprintf("w_%d", i), math.Sqrt(2/float64(inW+out)), inW, out)
		b := zeros(fmt.Sprintf("b_%d", i), batch, out)
		output := G.Must(G.Sigmoid(G.Must(G.Add(G.Must(G.Mul(input, w)), b))))
		das = append(das, sdaLayer{
			w: w, b: b, hw: G.Must(G.Transpose(w)), hb: zeros(fmt.Sprintf("hb_%d", i), batch, inW),
			corruption: G.NewMatrix(c.g, dt, G.WithShape(batch, inW), G.WithName(fmt.Sprintf("corruption_%d", i))),
			input:      input, keep: 0.9 - 0.1*float64(i),
		})
		input, inW = output, out
	}
	c.leaf("Softmax_w", 0.1, hidden[len(hidden)-1], 10)
	zeros("Softmax_b", batch, 10)

	// Pretrain
	var readList []any
	var learn G.Nodes
	for _, da := range das {
		corrupted := G.Must(G.HadamardProd(da.corruption, da.input))
		act := G.Must(G.Sigmoid(G.Must(G.Add(G.Must(G.Mul(corrupted, da.w)), da.b))))
		rec := G.Must(G.Sigmoid(G.Must(G.Add(G.Must(G.Mul(act, da.hw)), da.hb))))
		cost := G.Must(G.Mean(G.Must(G.BinaryXent(rec, da.input))))
		costVal := new(G.Value)
		G.Read(cost, costVal)
		mustGrad(cost, da.w, da.b, da.hb)
		readList = append(readList, costVal, cost)
		learn = append(learn, da.w, da.b, da.hb)
	}
	solver := G.NewVanillaSolver(G.WithBatchSize(float64(batch)))
	lets := func(t *testing.T, i int) {
		r := stepData(i)
		let(t, x, randUnit(r, dt, batch, in))
		for _, da := range das {
			m := tensor.New(tensor.Of(dt), tensor.WithShape(da.corruption.Shape()...))
			for k := 0; k < m.Len(); k++ {
				if r.Float64() < da.keep {
					setAt(m, k, 1)
				}
			}
			let(t, da.corruption, m)
		}
	}
	readList = append(readList, gradOf(learn))
	return sdaRun{&realRun{g: c.g, learn: learn, final: learn,
		step: trainLoop(lets, readList, solverOn{solver, learn})}, lets}
}

// TestStackedDenoisingAutoencoderBitForBit: gorgonia's stacked denoising
// autoencoder pretraining (stackedDAProgram: hidden widths 1000, 500 and
// 250, batch 4, float64) trains bit for bit as under TapeMachine, in core
// and at the least feasible budget: every cost (Read and node value) and
// gradient of 3 steps, and the weights after. Half the in-core peak does
// not plan: the least budget is 61% of it (52% with the 784-wide input),
// most of it the gradients, which are outputs. The input is 64 wide here
// (about 3.5 s on this machine under load); OOC_SDA_FULL=1 runs the
// example's 784 (MNIST), about 7 s, and the example as written
// (stackedDAAsWritten, issue 27's configuration) at 784 too, about 2
// minutes under load: planning it replays TapeMachine's program at every
// budget the search tries. TestTapeMachineMergedInputs runs that program small by
// default.
func TestStackedDenoisingAutoencoderBitForBit(t *testing.T) {
	in := 64
	if os.Getenv("OOC_SDA_FULL") != "" {
		in = 784
	}
	progs := map[string]realProgram{
		fmt.Sprintf("stacked-denoising-autoencoder-in%d", in): stackedDAProgram(in, []int{1000, 500, 250}, 3),
	}
	if in == 784 {
		progs["stacked-denoising-autoencoder-as-written-in784"] = stackedDAAsWritten(4, in, []int{1000, 500, 250}, 3, false)
	}
	checkRealPrograms(t, progs)
}

// TestStackedDenoisingAutoencoderTapeIsLisp: the reference is right here.
// After a solver step (the biases no longer zero, so a read of x·w + b in
// place of x·w would show), every node TapeMachine computes in the second
// step holds the LispMachine's value bit for bit, from the same weights
// and data: TapeMachine reads no clobbered memory in this program.
func TestStackedDenoisingAutoencoderTapeIsLisp(t *testing.T) {
	const in = 64
	hidden := []int{1000, 500, 250}
	dt := tensor.Float64
	ref := buildStackedDA(dt, 4, in, hidden)
	tm := G.NewTapeMachine(ref.g, G.BindDualValues(ref.learn...), G.TraceExec())
	defer tm.Close()
	ref.step(t, []G.VM{tm}, 0)
	ref.lets(t, 1)
	require.NoError(t, tm.RunAll())

	other := buildStackedDA(dt, 4, in, hidden)
	for k, n := range other.learn {
		copy(n.Value().Data().([]float64), ref.learn[k].Value().Data().([]float64))
	}
	other.lets(t, 1)
	lisp := G.NewLispMachine(other.g, G.ExecuteFwdOnly())
	defer lisp.Close()
	require.NoError(t, lisp.RunAll())

	byID := map[int64]*G.Node{}
	for _, n := range other.g.AllNodes() {
		byID[n.ID()] = n
	}
	compared := 0
	for _, n := range ref.g.AllNodes() {
		if n.Op() == nil || n.Value() == nil {
			continue
		}
		o := byID[n.ID()]
		require.NotNil(t, o, "node %v has no twin", n)
		require.NotNil(t, o.Value(), "LispMachine left %v unbound", o)
		require.Equal(t, valueBits(t, n.Value()), valueBits(t, o.Value()), "%v", n)
		compared++
	}
	require.Greater(t, compared, 150, "too few nodes compared")
}

// stackedDAAsWritten is gorgonia's examples/stacked_autoencoder (v0.9.18)
// pretraining as its code is written, the three layers' costs and
// gradients in one machine under BindDualValues: NewFC's weights and
// biases are made unnamed and named w_i, b_i afterwards (WithName on the
// node), the tied-weight autoencoder's reconstruction bias hb is made
// unnamed, its corruption is the example's scalar
// BinomialRandomNode(1, p), each layer's cost is Read into one shared
// costValue, and each step Lets a slice of one dataset tensor (pixels
// scaled as the example's MNIST loader does, 0.1 to 1). The corruption's
// generator is seeded from the clock, so p is 0 or 1 here (the example's
// 0.1, 0.2, 0.3 draw differently in every run), which draws the same
// scalars every run. nameAtCreation names every node when it is made
// instead: the same function, which TapeMachine computes otherwise
// (TestTapeMachineMergedInputs).
func stackedDAAsWritten(batch, in int, hidden []int, steps int, nameAtCreation bool) realProgram {
	return realProgram{from: "gorgonia examples/stacked_autoencoder (pretraining, as written)", dts: []tensor.Dtype{tensor.Float64},
		steps: steps, build: func(dt tensor.Dtype) *realRun {
			return buildSDAAsWritten(dt, batch, in, hidden, steps, nameAtCreation)
		}}
}

func buildSDAAsWritten(dt tensor.Dtype, batch, in int, hidden []int, steps int, nameAtCreation bool) *realRun {
	c := &userCtx{g: G.NewGraph(), dt: dt, rng: rand.New(rand.NewSource(1337))}
	// GlorotU(1.0), from a seeded generator.
	glorotU := func(r, cols int) *tensor.Dense {
		lim := math.Sqrt(6 / float64(r+cols))
		t := tensor.New(tensor.Of(dt), tensor.WithShape(r, cols))
		for i := 0; i < t.Len(); i++ {
			setAt(t, i, (2*c.rng.Float64()-1)*lim)
		}
		return t
	}
	named := func(name string) []G.NodeConsOpt {
		if nameAtCreation {
			return []G.NodeConsOpt{G.WithName(name)}
		}
		return nil
	}
	matrix := func(name string, init *tensor.Dense, shape ...int) *G.Node {
		opts := append(named(name), G.WithShape(shape...))
		if init != nil {
			opts = append(opts, G.WithValue(init))
		} else {
			opts = append(opts, G.WithInit(G.Zeroes()))
		}
		n := G.NewMatrix(c.g, dt, opts...)
		if !nameAtCreation && !strings.HasPrefix(name, "hb_") {
			G.WithName(name)(n)
		}
		return n
	}
	probs := []float64{1, 0, 1}

	// NewStackedDA
	x := G.NewMatrix(c.g, dt, G.WithShape(batch, in), G.WithName("x"))
	type da struct{ w, b, hw, hb, corruption, input *G.Node }
	var das []da
	input, inW := x, in
	for i, out := range hidden {
		w := matrix(fmt.Sprintf("w_%d", i), glorotU(inW, out), inW, out)
		b := matrix(fmt.Sprintf("b_%d", i), nil, batch, out)
		output := G.Must(G.Sigmoid(G.Must(G.Add(G.Must(G.Mul(input, w)), b))))
		hw := G.Must(G.Transpose(w))
		hb := matrix(fmt.Sprintf("hb_%d", i), nil, batch, inW)
		das = append(das, da{w: w, b: b, hw: hw, hb: hb, corruption: G.BinomialRandomNode(c.g, dt, 1, probs[i%len(probs)]), input: input})
		input, inW = output, out
	}
	matrix("Softmax_w", glorotU(inW, 10), inW, 10)
	matrix("Softmax_b", nil, batch, 10)

	// Pretrain, the three machines' programs in one.
	costValue := new(G.Value)
	var learn, costs G.Nodes
	for _, d := range das {
		corrupted := G.Must(G.HadamardProd(d.corruption, d.input))
		act := G.Must(G.Sigmoid(G.Must(G.Add(G.Must(G.Mul(corrupted, d.w)), d.b))))
		rec := G.Must(G.Sigmoid(G.Must(G.Add(G.Must(G.Mul(act, d.hw)), d.hb))))
		cost := G.Must(G.Mean(G.Must(G.BinaryXent(rec, d.input))))
		G.Read(cost, costValue)
		mustGrad(cost, d.w, d.b, d.hb)
		learn = append(learn, d.w, d.b, d.hb)
		costs = append(costs, cost)
	}
	data := tensor.New(tensor.Of(dt), tensor.WithShape(steps*batch, in))
	r := rand.New(rand.NewSource(7))
	for i := 0; i < data.Len(); i++ {
		px := 0
		if r.Float64() < 0.2 {
			px = r.Intn(256)
		}
		setAt(data, i, float64(px)/255*0.9+0.1)
	}
	lets := func(t *testing.T, i int) {
		view, err := data.Slice(G.S(i*batch, (i+1)*batch))
		require.NoError(t, err)
		let(t, x, view)
	}
	readList := []any{costValue}
	for _, cost := range costs {
		readList = append(readList, cost)
	}
	readList = append(readList, gradOf(learn))
	return &realRun{g: c.g, learn: learn, final: learn,
		step: trainLoop(lets, readList, solverOn{G.NewVanillaSolver(G.WithBatchSize(float64(batch))), learn})}
}

// TestTapeMachineMergedInputs: gorgonia's stacked autoencoder example,
// written as the example writes it (stackedDAAsWritten, small widths),
// leaves each autoencoder's reconstruction bias unnamed and names each
// layer's bias after making it, so layer i's bias b_i and layer i+1's
// reconstruction bias share one hash (both (batch, width_i), both made
// unnamed). TapeMachine's compiler takes them for one value and loads
// both into one register: layer i's autoencoder adds hb_{i+1} where it
// reads b_i. Both start at zero, so the first step agrees and the
// second differs, in the 9th digit of the loss with the example's widths
// (issue 27). The same program with every node named when made trains
// otherwise on TapeMachine; ooc reads what TapeMachine reads, bit for bit,
// in core, at half the in-core peak where it plans, and at the least
// budget.
func TestTapeMachineMergedInputs(t *testing.T) {
	hidden := []int{10, 8, 6}
	tapeOf := func(p realProgram) [][]uint64 { return p.readsOnTape(t, tensor.Float64) }
	require.NotEqual(t, tapeOf(stackedDAAsWritten(4, 12, hidden, 2, false)), tapeOf(stackedDAAsWritten(4, 12, hidden, 2, true)),
		"TapeMachine no longer merges the example's biases; the test shows nothing")
	checkRealPrograms(t, map[string]realProgram{"sda-as-written": stackedDAAsWritten(4, 12, hidden, 2, false)})
}
