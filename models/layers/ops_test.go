package layers

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

type opCase struct {
	name   string
	shapes []tensor.Shape
	build  buildFn
	ref    func(vals [][]float64) []float64
	setup  func(out *G.Node)          // after the machine is made, e.g. BN inference mode
	prep   func(vals [][]float64)     // adjust random inputs, e.g. keep ReLU inputs off 0
	gorg   buildFn                    // gorgonia's own op on the same inputs, if it has a correct one
	gorgOK func(dt tensor.Dtype) bool // restrict the gorgonia comparison
}

func sh(d ...int) tensor.Shape { return tensor.Shape(d) }

type convCase struct {
	N, C, H, W, O, KH, KW int
	p                     ConvParams
	bias                  bool
}

func (c convCase) String() string {
	return fmt.Sprintf("x%dx%dx%dx%d_w%dx%dx%d_s%d,%d_p%d,%d_d%d,%d_b%t", c.N, c.C, c.H, c.W, c.O, c.KH, c.KW,
		c.p.StrideH, c.p.StrideW, c.p.PadH, c.p.PadW, c.p.DilationH, c.p.DilationW, c.bias)
}

type convTCase struct {
	N, Ci, H, W, Co, K int
	p                  ConvParams
	bias               bool
}

func opCases() []opCase {
	var cases []opCase
	convs := []convCase{
		{2, 3, 7, 6, 4, 3, 3, Square(1, 1), false},
		{2, 3, 7, 6, 4, 3, 3, Square(1, 1), true},
		{2, 3, 9, 7, 5, 3, 3, Square(2, 1), false},
		{1, 4, 6, 6, 3, 1, 1, Square(1, 0), true},  // direct 1x1 path
		{2, 4, 7, 5, 3, 1, 1, Square(2, 0), false}, // strided 1x1 (ResNet downsample)
		{1, 2, 9, 8, 3, 3, 3, ConvParams{PadH: 2, PadW: 2, DilationH: 2, DilationW: 2}, false},
		{2, 3, 11, 10, 2, 5, 5, Square(3, 2), true},
		{1, 2, 8, 9, 3, 2, 3, ConvParams{StrideH: 2, StrideW: 1, PadH: 0, PadW: 1}, false},
		{1, 3, 13, 13, 4, 7, 7, Square(2, 3), false}, // ResNet stem shape
		// 64-pixel images go 4 to a GEMM (minGemmCols), so 5 images make a full and a partial chunk.
		{5, 2, 8, 8, 3, 3, 3, Square(1, 1), true},
		{5, 3, 8, 8, 2, 1, 1, Square(1, 0), false},   // direct kernel, but chunked
		{3, 2, 16, 16, 2, 3, 3, Square(1, 1), false}, // 256 pixels: one image per GEMM
		// Atrous convolutions as DeepLab's ASPP uses them (padding = rate keeps the size), with
		// rates as large as and larger than the image, where most taps fall in the padding.
		{2, 3, 7, 7, 2, 3, 3, ConvParams{PadH: 6, PadW: 6, DilationH: 6, DilationW: 6}, false},
		{1, 2, 5, 6, 3, 3, 3, ConvParams{PadH: 12, PadW: 12, DilationH: 12, DilationW: 12}, true},
		{1, 2, 9, 8, 2, 3, 3, ConvParams{PadH: 4, PadW: 4, DilationH: 4, DilationW: 4}, false}, // multi-grid 4
		{2, 2, 6, 5, 2, 3, 3, ConvParams{StrideH: 2, StrideW: 2, PadH: 2, PadW: 2, DilationH: 2, DilationW: 2}, false},
	}
	for _, c := range convs {
		c := c
		shapes := []tensor.Shape{sh(c.N, c.C, c.H, c.W), sh(c.O, c.C, c.KH, c.KW)}
		if c.bias {
			shapes = append(shapes, sh(c.O))
		}
		oc := opCase{
			name:   "Conv2D/" + c.String(),
			shapes: shapes,
			build: func(ns G.Nodes) (*G.Node, error) {
				var b *G.Node
				if c.bias {
					b = ns[2]
				}
				return Conv2D(ns[0], ns[1], b, c.p)
			},
			ref: func(v [][]float64) []float64 {
				var b []float64
				if c.bias {
					b = v[2]
				}
				return refConv(nd{shapes[0], v[0]}, nd{shapes[1], v[1]}, b, c.p).data
			},
		}
		if !c.bias {
			p := c.p.norm()
			oc.gorg = func(ns G.Nodes) (*G.Node, error) {
				return G.Conv2d(ns[0], ns[1], sh(c.KH, c.KW), []int{p.PadH, p.PadW}, []int{p.StrideH, p.StrideW}, []int{p.DilationH, p.DilationW})
			}
		}
		cases = append(cases, oc)
	}

	convTs := []convTCase{
		{2, 3, 4, 5, 2, 2, Square(2, 0), true}, // U-Net up-convolution
		{1, 2, 3, 4, 3, 3, ConvParams{StrideH: 2, StrideW: 2, PadH: 1, PadW: 1, OutPadH: 1, OutPadW: 0}, false},
		{2, 2, 3, 3, 2, 4, Square(2, 1), true},
		{1, 3, 4, 4, 2, 3, ConvParams{PadH: 1, PadW: 1, DilationH: 2, DilationW: 2}, false},
		{1, 2, 5, 4, 3, 3, Square(1, 1), false},
		{5, 2, 8, 8, 2, 3, Square(1, 1), true}, // chunks of 4 images and 1
	}
	for _, c := range convTs {
		c := c
		shapes := []tensor.Shape{sh(c.N, c.Ci, c.H, c.W), sh(c.Ci, c.Co, c.K, c.K)}
		if c.bias {
			shapes = append(shapes, sh(c.Co))
		}
		cases = append(cases, opCase{
			name:   fmt.Sprintf("ConvTranspose2D/x%v_w%v_%+v_b%t", shapes[0], shapes[1], c.p, c.bias),
			shapes: shapes,
			build: func(ns G.Nodes) (*G.Node, error) {
				var b *G.Node
				if c.bias {
					b = ns[2]
				}
				return ConvTranspose2D(ns[0], ns[1], b, c.p)
			},
			ref: func(v [][]float64) []float64 {
				var b []float64
				if c.bias {
					b = v[2]
				}
				return refConvTranspose(nd{shapes[0], v[0]}, nd{shapes[1], v[1]}, b, c.p).data
			},
		})
	}

	// The conv's own gradient kinds, as forward ops, so their second derivatives are checked too.
	{
		p := Square(2, 1)
		cases = append(cases, opCase{
			name:   "Conv2DFilter/as-op",
			shapes: []tensor.Shape{sh(2, 3, 7, 6), sh(2, 4, 4, 3)},
			build: func(ns G.Nodes) (*G.Node, error) {
				return G.ApplyOp(&convOp{kind: convFilter, p: p.norm(), kh: 3, kw: 3}, ns[0], ns[1])
			},
		})
	}

	pools := []struct {
		x          tensor.Shape
		k, s, p    int
		max        bool
		gorgonia   bool
		nameSuffix string
	}{
		{sh(2, 3, 7, 7), 3, 2, 1, true, true, "resnet-stem"},
		{sh(2, 2, 6, 5), 2, 2, 0, true, true, "odd"},
		{sh(1, 2, 5, 6), 3, 1, 0, true, true, "overlap"},
		{sh(1, 2, 9, 7), 3, 3, 1, true, true, "stride3"},
		{sh(2, 3, 6, 6), 2, 2, 0, false, false, "2x2"},
		{sh(2, 2, 7, 5), 2, 2, 0, false, false, "odd"},
		{sh(1, 2, 7, 6), 3, 2, 1, false, false, "pad"},
	}
	for _, pc := range pools {
		pc := pc
		kind := "AvgPool2D"
		if pc.max {
			kind = "MaxPool2D"
		}
		oc := opCase{
			name:   fmt.Sprintf("%s/%s_x%v_k%d_s%d_p%d", kind, pc.nameSuffix, pc.x, pc.k, pc.s, pc.p),
			shapes: []tensor.Shape{pc.x},
			build: func(ns G.Nodes) (*G.Node, error) {
				if pc.max {
					return MaxPool2D(ns[0], pc.k, pc.s, pc.p)
				}
				return AvgPool2D(ns[0], pc.k, pc.s, pc.p)
			},
			ref: func(v [][]float64) []float64 { return refPool(nd{pc.x, v[0]}, pc.k, pc.s, pc.p, pc.max).data },
		}
		if pc.gorgonia {
			oc.gorg = func(ns G.Nodes) (*G.Node, error) {
				return G.MaxPool2D(ns[0], sh(pc.k, pc.k), []int{pc.p, pc.p}, []int{pc.s, pc.s})
			}
		}
		cases = append(cases, oc)
	}

	cases = append(cases, opCase{
		name:   "GlobalAvgPool2D/x2x3x5x4",
		shapes: []tensor.Shape{sh(2, 3, 5, 4)},
		build:  func(ns G.Nodes) (*G.Node, error) { return GlobalAvgPool2D(ns[0]) },
		ref:    func(v [][]float64) []float64 { return refGAP(nd{sh(2, 3, 5, 4), v[0]}).data },
	})

	for _, xs := range []tensor.Shape{sh(3, 4, 5, 3), sh(2, 3, 1, 1), sh(4, 2, 3, 2)} {
		xs := xs
		C := xs[1]
		shapes := []tensor.Shape{xs, sh(C), sh(C)}
		cases = append(cases, opCase{
			name:   fmt.Sprintf("BatchNorm/train_x%v", xs),
			shapes: shapes,
			build: func(ns G.Nodes) (*G.Node, error) {
				y, _, err := BatchNorm(ns[0], ns[1], ns[2], 0.1, 1e-5)
				return y, err
			},
			ref: func(v [][]float64) []float64 { return refBN(nd{xs, v[0]}, v[1], v[2], 1e-5, nil, nil).data },
			gorg: func(ns G.Nodes) (*G.Node, error) {
				s := sh(1, C, 1, 1)
				gm, err := G.Reshape(ns[1], s)
				if err != nil {
					return nil, err
				}
				bt, err := G.Reshape(ns[2], s)
				if err != nil {
					return nil, err
				}
				y, _, _, _, err := G.BatchNorm(ns[0], gm, bt, 0.1, 1e-5)
				return y, err
			},
		})
	}
	cases = append(cases, opCase{
		name:   "BatchNorm/train_2d",
		shapes: []tensor.Shape{sh(5, 3), sh(3), sh(3)},
		build: func(ns G.Nodes) (*G.Node, error) {
			y, _, err := BatchNorm(ns[0], ns[1], ns[2], 0.1, 1e-5)
			return y, err
		},
	})
	{
		xs := sh(3, 4, 3, 2)
		rm, rv := []float64{0.5, -1, 0, 2}, []float64{0.5, 2, 1, 0.25}
		cases = append(cases, opCase{
			name:   "BatchNorm/inference",
			shapes: []tensor.Shape{xs, sh(4), sh(4)},
			build: func(ns G.Nodes) (*G.Node, error) {
				y, _, err := BatchNorm(ns[0], ns[1], ns[2], 0.1, 1e-5)
				return y, err
			},
			setup: func(y *G.Node) {
				op := y.Op().(*BatchNormOp)
				op.SetTraining(false)
				if err := op.SetRunningStats(rm, rv); err != nil {
					panic(err)
				}
			},
			ref: func(v [][]float64) []float64 { return refBN(nd{xs, v[0]}, v[1], v[2], 1e-5, rm, rv).data },
		})
	}

	cases = append(cases, opCase{
		name:   "ReLU/x2x3x4x5",
		shapes: []tensor.Shape{sh(2, 3, 4, 5)},
		build:  func(ns G.Nodes) (*G.Node, error) { return ReLU(ns[0]) },
		prep: func(v [][]float64) {
			for i, x := range v[0] {
				v[0][i] = x + math.Copysign(0.05, x)
			}
		},
		ref: func(v [][]float64) []float64 {
			r := make([]float64, len(v[0]))
			for i, x := range v[0] {
				r[i] = math.Max(x, 0)
			}
			return r
		},
	})
	return append(cases, newOpCases()...)
}

func caseVals(c opCase, seed int64) (vals [][]float64, r []float64, outShape tensor.Shape) {
	rng := rand.New(rand.NewSource(seed))
	for _, s := range c.shapes {
		vals = append(vals, randData(rng, s.TotalSize()))
	}
	if c.prep != nil {
		c.prep(vals)
	}
	g := G.NewGraph()
	ns := inputNodes(g, tensor.Float64, c.shapes, vals)
	y, err := c.build(ns)
	if err != nil {
		panic(fmt.Sprintf("%s: %v", c.name, err))
	}
	return vals, randData(rng, y.Shape().TotalSize()), y.Shape()
}

func TestForwardMatchesReference(t *testing.T) {
	for i, c := range opCases() {
		if c.ref == nil {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			vals, _, _ := caseVals(c, int64(i))
			want := c.ref(vals)
			for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
				got := opForward(t, dt, c.shapes, c.build, c.setup)(vals)
				tol := 1e-12 * (1 + maxAbs(want))
				if dt == tensor.Float32 {
					tol = 2e-5 * (1 + maxAbs(want))
				}
				require.LessOrEqual(t, maxAbsDiff(got, want), tol, "%v", dt)
			}
		})
	}
}

func TestGradientsMatchFiniteDifferences(t *testing.T) {
	worst, worst32, worstCase := 0.0, 0.0, ""
	for i, c := range opCases() {
		t.Run(c.name, func(t *testing.T) {
			vals, r, _ := caseVals(c, int64(100+i))
			_, grads := runTape(t, tensor.Float64, c.shapes, vals, r, c.build, c.setup)
			num := numGrads(vals, r, opForward(t, tensor.Float64, c.shapes, c.build, c.setup))
			for k := range grads {
				e := maxAbsDiff(grads[k], num[k])
				if e > worst {
					worst, worstCase = e, fmt.Sprintf("%s input %d, max|grad| %.3g", c.name, k, maxAbs(num[k]))
				}
				require.LessOrEqual(t, e, 1e-6*(1+maxAbs(num[k])), "gradient of input %d", k)
			}
			// The float32 kernels agree with the float64 ones to float32 precision.
			_, g32 := runTape(t, tensor.Float32, c.shapes, vals, r, c.build, c.setup)
			for k := range grads {
				e := maxAbsDiff(g32[k], grads[k]) / (1 + maxAbs(grads[k]))
				worst32 = math.Max(worst32, e)
				require.LessOrEqual(t, e, 2e-5, "float32 gradient of input %d", k)
			}
		})
	}
	t.Logf("max abs error of any gradient against central differences (float64, h=1e-6): %.3g (%s)", worst, worstCase)
	t.Logf("max error of float32 gradients against float64 ones, relative to 1+max|grad|: %.3g", worst32)
}

func TestAgainstGorgoniaOps(t *testing.T) {
	worst := map[string]float64{}
	for i, c := range opCases() {
		if c.gorg == nil {
			continue
		}
		for _, dt := range []tensor.Dtype{tensor.Float64, tensor.Float32} {
			if c.gorgOK != nil && !c.gorgOK(dt) {
				continue
			}
			t.Run(fmt.Sprintf("%s/%v", c.name, dt), func(t *testing.T) {
				vals, r, _ := caseVals(c, int64(200+i))
				yo, go_ := runTape(t, dt, c.shapes, vals, r, c.build, nil)
				yg, gg := runTape(t, dt, c.shapes, vals, r, c.gorg, nil)
				tol := 1e-11
				if dt == tensor.Float32 {
					tol = 2e-4
				}
				key := c.name[:indexSlash(c.name)] + " " + dt.String()
				e := maxAbsDiff(yo, yg)
				require.LessOrEqual(t, e, tol*(1+maxAbs(yg)), "forward")
				worst[key] = math.Max(worst[key], e)
				for k := range gg {
					e := maxAbsDiff(go_[k], gg[k])
					require.LessOrEqual(t, e, tol*(1+maxAbs(gg[k])), "gradient of input %d", k)
					worst[key] = math.Max(worst[key], e)
				}
			})
		}
	}
	for k, v := range worst {
		t.Logf("max abs difference vs gorgonia, %s: %.3g", k, v)
	}
}

func indexSlash(s string) int {
	for i, r := range s {
		if r == '/' {
			return i
		}
	}
	return len(s)
}
