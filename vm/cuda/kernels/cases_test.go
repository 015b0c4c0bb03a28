package kernels_test

import (
	"testing"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels/kernelcheck"
)

// Each test runs one group of package kernelcheck's checks (its Cases say
// what each checks) on the host build, float32 then float64: the same
// checks "ooc doctor" runs on a GPU, here exact where the kernels promise
// the CPU op's bits.

func TestUnary(t *testing.T)                 { runGroup(t, "unary") }
func TestBinary(t *testing.T)                { runGroup(t, "binary") }
func TestCompare(t *testing.T)               { runGroup(t, "compare") }
func TestFill(t *testing.T)                  { runGroup(t, "fill") }
func TestBatchNorm(t *testing.T)             { runGroup(t, "batchnorm") }
func TestGANOps(t *testing.T)                { runGroup(t, "gan") }
func TestConv(t *testing.T)                  { runGroup(t, "conv") }
func TestConvTiles(t *testing.T)             { runGroup(t, "convtiles") }
func TestLSTMOps(t *testing.T)               { runGroup(t, "lstm") }
func TestCopyTranspose(t *testing.T)         { runGroup(t, "transpose") }
func TestCopyConcatSlice(t *testing.T)       { runGroup(t, "concat") }
func TestCopyRepeat(t *testing.T)            { runGroup(t, "repeat") }
func TestBinaryBroadcast(t *testing.T)       { runGroup(t, "broadcast") }
func TestSolvers(t *testing.T)               { runGroup(t, "solvers") }
func TestPool(t *testing.T)                  { runGroup(t, "pool") }
func TestGlobalAvgPool(t *testing.T)         { runGroup(t, "gap") }
func TestReLU(t *testing.T)                  { runGroup(t, "relu") }
func TestReduce(t *testing.T)                { runGroup(t, "reduce") }
func TestSoftmax(t *testing.T)               { runGroup(t, "softmax") }
func TestSoftmaxCrossEntropy(t *testing.T)   { runGroup(t, "xent") }
func TestResizeBilinear(t *testing.T)        { runGroup(t, "resize") }
func TestReduceAxes(t *testing.T)            { runGroup(t, "reduceaxes") }
func TestConvert(t *testing.T)               { runGroup(t, "convert") }
func TestIntBinary(t *testing.T)             { runGroup(t, "int") }
func TestBoolOps(t *testing.T)               { runGroup(t, "bool") }
func TestCTC(t *testing.T)                   { runGroup(t, "ctc") }
func TestGorgoniaBatchNorm(t *testing.T)     { runGroup(t, "gbatchnorm") }
func TestGorgoniaDropout(t *testing.T)       { runGroup(t, "gdropout") }
func TestGorgoniaUpsampleGrad(t *testing.T)  { runGroup(t, "gupsample") }
func TestGorgoniaByIndices(t *testing.T)     { runGroup(t, "gbyindices") }
func TestGorgoniaIm2col(t *testing.T)        { runGroup(t, "gim2col") }
func TestGorgoniaPool(t *testing.T)          { runGroup(t, "gpool") }
func TestGorgoniaGroupNorm(t *testing.T)     { runGroup(t, "ggroupnorm") }
func TestGorgoniaSparsemax(t *testing.T)     { runGroup(t, "gsparsemax") }
func TestGorgoniaGlobalAvgPool(t *testing.T) { runGroup(t, "ggap") }

// TestCol2imBitExact and TestSoftmaxLastAxisBug: facts of the host build
// (kernelcheck says what each shows).
func TestCol2imBitExact(t *testing.T)     { kernelcheck.Col2imBitExact(t, newMem(t)) }
func TestSoftmaxLastAxisBug(t *testing.T) { kernelcheck.SoftmaxLastAxisBug(t, newMem(t)) }

// TestEveryKernelHasACase: "ooc doctor" checks every kernel only if some
// case launches it.
func TestEveryKernelHasACase(t *testing.T) {
	m := newMem(t)
	for _, c := range kernelcheck.Cases {
		c.Run(t, m)
	}
	got := map[string]bool{}
	for _, k := range m.Launched() {
		got[k] = true
	}
	for _, s := range kernels.Specs {
		if !got[s.Name] {
			t.Errorf("no kernelcheck case launches %s", s.Name)
		}
	}
}
