package dispatch

import (
	"fmt"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// gorgonia's Conv2d is im2col, a matrix product and a transpose; its data
// gradient goes through col2im. The columns are gorgonia's (N, OH, OW,
// C·KH·KW) tensor, a graph value of its own that the budget counts, so the
// kernels need no workspace: g_im2col fills it, g_col2im gathers it back in
// the CPU op's order.

// im2colGeom reads the kernel geometry of an im2colOp (or the one a
// col2imOp embeds) for images x (N,C,H,W) and columns (N,OH,OW,K).
func im2colGeom(c fn, x, col []int) (kernels.ConvGeom, error) {
	if len(x) != 4 || len(col) != 4 {
		return kernels.ConvGeom{}, fmt.Errorf("images %v and columns %v are not (N,C,H,W) and (N,OH,OW,K)", x, col)
	}
	f := map[string]int{}
	for _, name := range []string{"h", "w", "padH", "padW", "strideH", "strideW", "dilationH", "dilationW"} {
		v, err := intField(c.f.Op, name)
		if err != nil {
			return kernels.ConvGeom{}, err
		}
		f[name] = v
	}
	g := kernels.ConvGeom{C: int64(x[1]), H: int64(x[2]), W: int64(x[3]), KH: int64(f["h"]), KW: int64(f["w"]),
		OH: int64(col[1]), OW: int64(col[2]), SH: int64(f["strideH"]), SW: int64(f["strideW"]),
		PH: int64(f["padH"]), PW: int64(f["padW"]), DH: int64(f["dilationH"]), DW: int64(f["dilationW"])}
	if g.SH < 1 || g.SW < 1 || g.DH < 1 || g.DW < 1 || g.KH < 1 || g.KW < 1 {
		return g, fmt.Errorf("kernel %dx%d, stride %dx%d, dilation %dx%d", g.KH, g.KW, g.SH, g.SW, g.DH, g.DW)
	}
	if col[0] != x[0] || int64(col[3]) != g.C*g.KH*g.KW {
		return g, fmt.Errorf("columns %v do not match images %v and a %dx%d kernel", col, x, g.KH, g.KW)
	}
	return g, nil
}

func planIm2col(_ *Runner, c fn) (plan, error) {
	x, col := c.in(0), c.out.Shape
	g, err := im2colGeom(c, x, col)
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	N, ga := int64(x[0]), kernels.ConvArg(g)
	return plan{run: func(r *Runner, a addrs) error {
		return r.launch("g_im2col_"+c.sfx, ptr(a.out), ptr(a.in[0]), i64(N), ga)
	}}, nil
}

func planCol2im(_ *Runner, c fn) (plan, error) {
	col, x := c.in(0), c.out.Shape
	g, err := im2colGeom(c, x, col)
	if err != nil {
		return plan{}, c.unsupported(err.Error())
	}
	N, ga := int64(x[0]), kernels.ConvArg(g)
	return plan{run: func(r *Runner, a addrs) error {
		return r.launch("g_col2im_"+c.sfx, ptr(a.out), ptr(a.in[0]), i64(N), ga)
	}}, nil
}
