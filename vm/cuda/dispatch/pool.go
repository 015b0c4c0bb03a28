package dispatch

import (
	"fmt"
	"strings"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// gorgonia's MaxPool2D and AveragePool2D, forward and backward. The CPU ops
// keep an argmax mask from their last forward; the kernels need none: the
// max gradient finds each window's argmax again from x (gorgonia's rule:
// the first strictly larger value from -MaxFloat), and the average pool's
// mask is each clipped window's last pixel, known from the geometry.

// poolGeom reads a gorgonia pooling op's window for input x and output y.
// The window's start offset is gorgonia's: the north and west padding, or,
// given four paddings, the south and east ones (as its loops read them).
func poolGeom(c fn, x, y []int) (kernels.PoolGeom, error) {
	if len(x) != 4 || len(y) != 4 {
		return kernels.PoolGeom{}, fmt.Errorf("pooling of %v into %v: not NCHW", x, y)
	}
	f := map[string]int{}
	for _, name := range []string{"h", "w", "padNorth", "padWest", "padSouth", "padEast", "strideH", "strideW"} {
		v, err := intField(c.f.Op, name)
		if err != nil {
			return kernels.PoolGeom{}, err
		}
		f[name] = v
	}
	explicit, err := boolField(c.f.Op, "explicitPadding")
	if err != nil {
		return kernels.PoolGeom{}, err
	}
	ph, pw := f["padNorth"], f["padWest"]
	if explicit {
		ph, pw = f["padSouth"], f["padEast"]
	}
	if f["strideH"] < 1 || f["strideW"] < 1 || f["h"] < 1 || f["w"] < 1 {
		return kernels.PoolGeom{}, fmt.Errorf("window %dx%d, stride %dx%d", f["h"], f["w"], f["strideH"], f["strideW"])
	}
	if x[0] != y[0] || x[1] != y[1] {
		return kernels.PoolGeom{}, fmt.Errorf("pooling of %v into %v", x, y)
	}
	return kernels.PoolGeom{Planes: int64(x[0] * x[1]), H: int64(x[2]), W: int64(x[3]), OH: int64(y[2]), OW: int64(y[3]),
		KH: int64(f["h"]), KW: int64(f["w"]), SH: int64(f["strideH"]), SW: int64(f["strideW"]), PH: int64(ph), PW: int64(pw)}, nil
}

func planGPool(_ *Runner, c fn) (plan, error) {
	name := strings.TrimPrefix(fmt.Sprintf("%T", c.f.Op), "*gorgonia.")
	diff := strings.HasSuffix(name, "DiffOp")
	x, y := c.in(0), c.out.Shape
	if diff {
		if len(c.ins) != 3 {
			return plan{}, c.unsupported("a pooling gradient without (x, y, dy)")
		}
		x, y = c.out.Shape, c.in(2)
	}
	g, err := poolGeom(c, x, y)
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	ga, sfx := kernels.PoolArg(g), c.sfx
	switch name {
	case "maxPoolOp":
		return plan{run: func(r *Runner, a addrs) error { return r.launch("g_maxpool_"+sfx, ptr(a.out), ptr(a.in[0]), ga) }}, nil
	case "maxPoolDiffOp":
		return plan{run: func(r *Runner, a addrs) error {
			return r.launch("g_maxpool_grad_"+sfx, ptr(a.out), ptr(a.in[0]), ptr(a.in[2]), ga)
		}}, nil
	case "avgPoolOp":
		return plan{run: func(r *Runner, a addrs) error { return r.launch("g_avgpool_"+sfx, ptr(a.out), ptr(a.in[0]), ga) }}, nil
	default:
		return plan{run: func(r *Runner, a addrs) error { return r.launch("g_avgpool_grad_"+sfx, ptr(a.out), ptr(a.in[2]), ga) }}, nil
	}
}

// planGAP is gorgonia's GlobalAveragePool2D (which has no gradient).
func planGAP(_ *Runner, c fn) (plan, error) {
	x := c.in(0)
	if len(x) != 4 {
		return plan{}, c.unsupported(fmt.Sprintf("global average pooling of %v: not NCHW", x))
	}
	planes, plane := int64(x[0]*x[1]), int64(x[2]*x[3])
	return plan{run: func(r *Runner, a addrs) error {
		return r.launch("g_gap_"+c.sfx, ptr(a.out), ptr(a.in[0]), i64(planes), i64(plane))
	}}, nil
}
