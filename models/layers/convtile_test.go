package layers

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestConvTilesSameBits runs each convolution kind with the whole-image workspace, the least one
// (256-pixel tiles) and one in between, and requires the same bits: the scheduler may pick any.
func TestConvTilesSameBits(t *testing.T) {
	type geom struct {
		n, c, h, w, o, k int
		p                ConvParams
	}
	geoms := []geom{
		{2, 3, 37, 29, 5, 3, Square(1, 1)},
		{1, 4, 40, 41, 3, 3, Square(2, 1)},
		{2, 2, 33, 35, 4, 3, ConvParams{PadH: 2, PadW: 2, DilationH: 2, DilationW: 2}},
		{1, 3, 30, 30, 2, 5, ConvParams{StrideH: 1, StrideW: 2, PadH: 2, PadW: 1}},
		{2, 3, 24, 24, 4, 1, Square(1, 0)}, // direct: no im2col, nothing to tile
		{2, 2, 20, 20, 3, 2, Square(2, 0)},
	}
	rng := rand.New(rand.NewSource(11))
	for gi, g := range geoms {
		p := g.p.norm()
		fwd := &convOp{kind: convForward, p: p}
		xs, ws := sh(g.n, g.c, g.h, g.w), sh(g.o, g.c, g.k, g.k)
		ys, err := fwd.outShape([]tensor.Shape{xs, ws})
		require.NoError(t, err)
		ops := []struct {
			op     *convOp
			shapes []tensor.Shape
		}{
			{fwd, []tensor.Shape{xs, ws}},
			{&convOp{kind: convData, p: p, h: g.h, w: g.w}, []tensor.Shape{ws, ys}},
			{&convOp{kind: convFilter, p: p, kh: g.k, kw: g.k}, []tensor.Shape{xs, ys}},
		}
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			for _, o := range ops {
				t.Run(fmt.Sprintf("%d/%v/%v", gi, o.op.kind, dt), func(t *testing.T) {
					var in []G.Value
					for _, s := range o.shapes {
						in = append(in, denseAs(dt, s, randData(rng, s.TotalSize())))
					}
					full, least := o.op.wsBytes(dt, o.shapes), o.op.MinWorkspaceBytes(dt, o.shapes)
					require.LessOrEqual(t, least, full)
					if gi < 4 { // images of more than 256 output pixels tile
						require.Less(t, least, full)
					}
					var first G.Value
					for _, n := range []int64{full, least, (full + least) / 2, least + 8} {
						os, err := o.op.outShape(o.shapes)
						require.NoError(t, err)
						out := newDense(dt, os)
						require.NoError(t, o.op.DoWorkspace(out, alignedNaNBytes(n), in...))
						if first == nil {
							first = out
							continue
						}
						requireSameBits(t, first, out, fmt.Sprintf("workspace %d vs %d bytes", n, full))
					}
					if least < full {
						os, _ := o.op.outShape(o.shapes)
						require.Error(t, o.op.DoWorkspace(newDense(dt, os), alignedNaNBytes(least-1), in...))
					}
				})
			}
		}
	}
}
