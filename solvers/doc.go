// Package solvers holds gorgonia's SGD (VanillaSolver), Momentum, Adam and RMSProp update rules
// rewritten to run in place, in one pass per element, on all cores, with no allocation after the
// first step, and still bit-identical to gorgonia's solver of the same name and options.
//
// gorgonia's solvers apply a rule as a sequence of whole-tensor operations, cloning tensors on
// the way (Adam clones the gradient and the moments every step: in a ResNet-18 training step it
// was 17% of the time, most of it page faults on the fresh memory), on one goroutine. Here every
// element goes through the same operations in the same order with the same rounding, so the
// results do not change, only the time.
//
// Constructors take gorgonia's own options (gorgonia.WithLearnRate, WithClip, WithL1Reg,
// WithL2Reg, WithBatchSize, WithBeta1/2, WithEps, WithRho, WithMomentum) and read the settings
// off the gorgonia solver they build, so defaults and the quirks of each rule stay gorgonia's:
// Momentum's L1 and L2 terms use the velocity, RMSProp ignores L1 and batch size and clamps even
// with clip <= 0, the others clip only with clip > 0. Parameters must be dense float32 or
// float64 tensors (gorgonia's scalar values are refused with an error); gradients are zeroed
// after the update, as gorgonia does.
//
// Equality with gorgonia (built with the default GOAMD64=v1; with v3, Adam differs in the last
// bits because the compiler fuses multiply-adds) is tested over 25 steps for each rule, both precisions and option sets
// with clipping, L1/L2 regularisation and batch scaling (TestSameBitsAsGorgonia). The work is
// split into fixed chunks of elements run by a pool of goroutines that lives for the program;
// the update is element-wise, so the thread count cannot change a bit (TestSameBitsAnyThreads).
// BenchmarkAdam compares with gorgonia's AdamSolver on ResNet-18's 11.2 million parameters.
//
// State and SetState expose the step count and the per-parameter state vectors for checkpoints
// (package train saves them in the form it saves gorgonia's solvers' state in, so a checkpoint
// moves between the two), and SetLearnRate does what gorgonia.WithLearnRate does to gorgonia's
// solvers, which it cannot do to this one.
package solvers
