package kernelcheck

import (
	"math"
	"math/rand"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// valueGrad is a weight and its gradient as a gorgonia solver sees them.
type valueGrad struct{ v, g *tensor.Dense }

func (x valueGrad) Value() G.Value         { return x.v }
func (x valueGrad) Grad() (G.Value, error) { return x.g, nil }

// solverCfg is one solver configuration: the optional steps and constants.
type solverCfg struct {
	l1, l2, batch, clip float64
}

var solverCfgs = []solverCfg{{}, {l1: 0.01, l2: 0.02, batch: 4, clip: 0.3}, {l2: 0.05, clip: 1e-3}, {batch: 1, clip: 0}}

func (c solverCfg) opts() []G.SolverOpt {
	o := []G.SolverOpt{G.WithLearnRate(0.05)}
	if c.l1 != 0 {
		o = append(o, G.WithL1Reg(c.l1))
	}
	if c.l2 != 0 {
		o = append(o, G.WithL2Reg(c.l2))
	}
	if c.batch != 0 {
		o = append(o, G.WithBatchSize(c.batch))
	}
	if c.clip != 0 {
		o = append(o, G.WithClip(c.clip))
	}
	return o
}

// flags are the optional steps Step takes (clipCheck: it also needs clip > 0).
func (c solverCfg) flags(l1 bool, clipCheck bool) int64 {
	var f kernels.OptFlags
	if l1 && c.l1 != 0 {
		f |= kernels.OptL1
	}
	if c.l2 != 0 {
		f |= kernels.OptL2
	}
	if c.batch > 1 {
		f |= kernels.OptBatch
	}
	if c.clip != 0 && (!clipCheck || c.clip > 0) {
		f |= kernels.OptClip
	}
	return int64(f)
}

// num converts a gorgonia constant as Step does for T: float32 constants are
// float32 conversions (or float32 arithmetic) of the float64 settings.
func num[T float32 | float64](v T) kernels.Arg { return kernels.Float(float64(v)) }

func testSolvers[T float32 | float64](t TB, m *Mem, c solverCfg) {
	rng := rand.New(rand.NewSource(17))
	const n = 301
	s := suffix[T]()
	for _, kind := range []string{"sgd", "momentum", "adam", "rmsprop"} {
		w0 := randn[T](rng, n, 1)
		w0[3] = 0 // sign 0 for L1
		var solver G.Solver
		switch kind {
		case "sgd":
			solver = G.NewVanillaSolver(c.opts()...)
		case "momentum":
			solver = G.NewMomentum(append(c.opts(), G.WithMomentum(0.8))...)
		case "adam":
			solver = G.NewAdamSolver(append(c.opts(), G.WithBeta1(0.85), G.WithBeta2(0.99), G.WithEps(1e-6))...)
		case "rmsprop":
			solver = G.NewRMSPropSolver(append(c.opts(), G.WithEps(1e-6))...)
		}
		cpuW := dense(w0, n)
		wb := put(m, w0)
		c1, c2 := newOut[T](m, n), newOut[T](m, n)
		m.launch("fill_"+s, p(c1), kernels.Float(0), kernels.Int(n))
		m.launch("fill_"+s, p(c2), kernels.Float(0), kernels.Int(n))
		for step := 1; step <= 3; step++ {
			grad := randn[T](rng, n, 2)
			grad[5] = T(math.Inf(1)) // clipped, or carried
			cpuG := dense(grad, n)
			if err := solver.Step([]G.ValueGrad{valueGrad{cpuW, cpuG}}); err != nil {
				t.Fatal(err)
			}
			gb := put(m, grad)
			eta, negClip, clip := -T(0.05), -T(c.clip), T(c.clip)
			l1, l2 := T(c.l1), T(c.l2)
			opb := T(1)
			if c.batch != 0 {
				opb = T(1) / T(c.batch)
			}
			reg := []kernels.Arg{num(l1), num(l2), num(opb), num(negClip), num(clip)}
			switch kind {
			case "sgd":
				m.launch("sgd_"+s, append(append([]kernels.Arg{p(wb), p(gb), kernels.Int(n), kernels.Int(c.flags(true, true))}, reg...), num(eta))...)
			case "momentum":
				m.launch("momentum_"+s, append(append([]kernels.Arg{p(wb), p(gb), p(c1), kernels.Int(n), kernels.Int(c.flags(true, true))}, reg...), num(eta), num(T(0.8)))...)
			case "adam":
				b1, b2 := 0.85, 0.99
				corr1, corr2 := 1-math.Pow(b1, float64(step)), 1-math.Pow(b2, float64(step))
				if dtOf[T]() == tensor.Float32 {
					m.launch("adam_"+s, append(append([]kernels.Arg{p(wb), p(gb), p(c1), p(c2), kernels.Int(n), kernels.Int(c.flags(true, true))}, reg...),
						num(float32(1)-float32(b1)), num(float32(1)-float32(b2)), num(float32(b1)), num(float32(b2)), num(float32(1e-6)),
						num(-float32(0.05)), num(float32(1)/float32(corr1)), num(float32(1)/float32(corr2)))...)
				} else {
					m.launch("adam_"+s, append(append([]kernels.Arg{p(wb), p(gb), p(c1), p(c2), kernels.Int(n), kernels.Int(c.flags(true, true))}, reg...),
						num(1-b1), num(1-b2), num(b1), num(b2), num(1e-6), num(-0.05), num(1/corr1), num(1/corr2))...)
				}
			case "rmsprop":
				decay := 0.999
				om := T(1.0 - decay)
				m.launch("rmsprop_"+s, p(wb), p(gb), p(c1), kernels.Int(n), kernels.Int(c.flags(false, false)&^int64(kernels.OptBatch)),
					num(T(decay)), num(om), num(T(1e-6)), num(l2), num(negClip), num(clip), num(T(-0.05)))
			}
			compare(t, m, kind+"_"+s+" weights", get[T](wb), data[T](t, cpuW), false)
			compare(t, m, kind+"_"+s+" gradient", get[T](gb), data[T](t, cpuG), false)
		}
	}
}
