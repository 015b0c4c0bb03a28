package dispatch

import (
	"encoding/binary"
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/models/layers"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// planLayer plans models/layers' ops: convolutions as im2col or col2im
// around cuBLAS GEMMs, one image at a time (the column matrix of one image
// fits in the workspace the CPU op declares, which the budget counts), and
// the rest one kernel each.
func planLayer(r *Runner, c fn, d layers.DeviceOp) (plan, error) {
	sfx := c.sfx
	switch d.Kind {
	case layers.DevConv, layers.DevConvData, layers.DevConvFilter:
		return planConv(c, d)
	case layers.DevChannelSum:
		N, C, plane := nchw(c.in(0))
		return plan{run: func(r *Runner, a addrs) error {
			return r.launch("channel_sum_"+sfx, ptr(a.out), ptr(a.in[0]), i64(N), i64(C), i64(plane))
		}}, nil
	case layers.DevReLU:
		n := total(c.out.Shape)
		return plan{run: func(r *Runner, a addrs) error { return r.launch("relu_"+sfx, ptr(a.out), ptr(a.in[0]), i64(n)) }}, nil
	case layers.DevReLUGrad:
		n := total(c.out.Shape)
		return plan{run: func(r *Runner, a addrs) error {
			return r.launch("relu_grad_"+sfx, ptr(a.out), ptr(a.in[0]), ptr(a.in[1]), i64(n))
		}}, nil
	case layers.DevMaxPool, layers.DevMaxPoolGrad, layers.DevAvgPool, layers.DevAvgPoolGrad:
		x, y := c.in(0), c.out.Shape
		if d.Kind == layers.DevMaxPoolGrad || d.Kind == layers.DevAvgPoolGrad {
			x, y = c.out.Shape, c.in(len(c.ins)-1)
		}
		if len(x) != 4 || len(y) != 4 {
			return plan{}, c.unsupported("pooling of non-NCHW tensors")
		}
		w := d.Pool
		g := kernels.PoolArg(kernels.PoolGeom{Planes: int64(x[0] * x[1]), H: int64(x[2]), W: int64(x[3]), OH: int64(y[2]), OW: int64(y[3]),
			KH: int64(w.KH), KW: int64(w.KW), SH: int64(w.SH), SW: int64(w.SW), PH: int64(w.PH), PW: int64(w.PW)})
		avg := "avgpool_"
		if d.ExcludePad {
			avg = "avgpool_excl_"
		}
		switch d.Kind {
		case layers.DevMaxPool:
			return plan{run: func(r *Runner, a addrs) error { return r.launch("maxpool_"+sfx, ptr(a.out), ptr(a.in[0]), g) }}, nil
		case layers.DevAvgPool:
			return plan{run: func(r *Runner, a addrs) error { return r.launch(avg+sfx, ptr(a.out), ptr(a.in[0]), g) }}, nil
		case layers.DevMaxPoolGrad:
			return plan{run: func(r *Runner, a addrs) error {
				return r.launch("maxpool_grad_"+sfx, ptr(a.out), ptr(a.in[0]), ptr(a.in[1]), g)
			}}, nil
		default:
			return plan{run: func(r *Runner, a addrs) error { return r.launch(avg+"grad_"+sfx, ptr(a.out), ptr(a.in[0]), g) }}, nil
		}
	case layers.DevGAP, layers.DevGAPGrad:
		x := c.in(0)
		if d.Kind == layers.DevGAPGrad {
			x = c.out.Shape
		}
		N, C, plane := nchw(x)
		name := "gap_"
		if d.Kind == layers.DevGAPGrad {
			name = "gap_grad_"
		}
		return plan{run: func(r *Runner, a addrs) error {
			return r.launch(name+sfx, ptr(a.out), ptr(a.in[0]), i64(N*C), i64(plane))
		}}, nil
	case layers.DevBatchNorm, layers.DevBNGradGamma, layers.DevBNGradX:
		return planBN(r, c, d)
	case layers.DevLeakyReLU, layers.DevTanh, layers.DevCopy:
		n := total(c.out.Shape)
		return plan{run: func(r *Runner, a addrs) error {
			switch d.Kind {
			case layers.DevLeakyReLU:
				return r.launch("leaky_relu_"+sfx, ptr(a.out), ptr(a.in[0]), i64(n), kernels.Float(d.Slope))
			case layers.DevTanh:
				return r.launch("tanh_"+sfx, ptr(a.out), ptr(a.in[0]), i64(n))
			}
			return copyLaunch(r, sfx, a.out, a.in[0], n, kernels.Contiguous())
		}}, nil
	case layers.DevLeakyReLUGrad, layers.DevTanhGrad:
		n := total(c.out.Shape)
		return plan{run: func(r *Runner, a addrs) error {
			if d.Kind == layers.DevTanhGrad {
				return r.launch("tanh_grad_"+sfx, ptr(a.out), ptr(a.in[0]), ptr(a.in[1]), i64(n))
			}
			return r.launch("leaky_relu_grad_"+sfx, ptr(a.out), ptr(a.in[0]), ptr(a.in[1]), i64(n), kernels.Float(d.Slope))
		}}, nil
	case layers.DevInstanceNorm, layers.DevInstanceNormGrad:
		N, C, plane := nchw(c.in(0))
		return plan{run: func(r *Runner, a addrs) error {
			if d.Kind == layers.DevInstanceNorm {
				return r.launch("instnorm_"+sfx, ptr(a.out), ptr(a.in[0]), i64(N*C), i64(plane), kernels.Float(d.Eps))
			}
			return r.launch("instnorm_grad_"+sfx, ptr(a.out), ptr(a.in[0]), ptr(a.in[1]), i64(N*C), i64(plane), kernels.Float(d.Eps))
		}}, nil
	case layers.DevReflectPad, layers.DevReflectPadGrad:
		small := c.in(0)
		name := "reflect_pad_"
		if d.Kind == layers.DevReflectPadGrad {
			small, name = c.out.Shape, "reflect_pad_grad_"
		}
		if len(small) != 4 {
			return plan{}, c.unsupported("reflection padding of non-NCHW tensors")
		}
		return plan{run: func(r *Runner, a addrs) error {
			return r.launch(name+sfx, ptr(a.out), ptr(a.in[0]), i64(int64(small[0]*small[1])), i64(int64(small[2])), i64(int64(small[3])), i64(int64(d.Pad)))
		}}, nil
	case layers.DevMeanLoss, layers.DevMeanLossGrad:
		n := total(c.in(0))
		kind := int64(0)
		if d.Loss.L1 {
			kind = 1
		}
		return plan{run: func(r *Runner, a addrs) error {
			b := a.in[0] // MSEToConstant has one operand: the kernel reads b only for L1Loss
			if d.Loss.L1 {
				b = a.in[1]
			}
			if d.Kind == layers.DevMeanLoss {
				return r.launch("mean_loss_"+sfx, ptr(a.out), i64(kind), ptr(a.in[0]), ptr(b), i64(n), kernels.Float(d.Loss.Target), kernels.Float(d.Loss.Scale))
			}
			return r.launch("mean_loss_grad_"+sfx, ptr(a.out), i64(kind), i64(int64(d.Loss.Wrt)), ptr(a.in[0]), ptr(b), ptr(a.in[len(a.in)-1]), i64(n),
				kernels.Float(d.Loss.Target), kernels.Float(d.Loss.Scale))
		}}, nil
	case layers.DevEmbedding, layers.DevEmbeddingGrad:
		ids := c.in(0) // (N,1,1,T)
		var V, E int64
		if d.Kind == layers.DevEmbedding {
			V, E = int64(c.in(1)[0]), int64(c.in(1)[1])
		} else {
			V, E = int64(d.Vocab), int64(c.out.Shape[1])
		}
		if len(ids) != 4 {
			return plan{}, c.unsupported("token ids that are not (N,1,1,T)")
		}
		name := "embedding_"
		if d.Kind == layers.DevEmbeddingGrad {
			name = "embedding_grad_"
		}
		return plan{run: func(r *Runner, a addrs) error {
			return r.launch(name+sfx, ptr(a.out), ptr(a.in[0]), ptr(a.in[1]), i64(int64(ids[0])), i64(int64(ids[3])), i64(V), i64(E))
		}}, nil
	case layers.DevLSTMCell:
		pre := c.in(0)
		if len(pre) != 2 {
			return plan{}, c.unsupported("LSTM pre-activations that are not (N,4H)")
		}
		N, H := int64(pre[0]), int64(pre[1]/4)
		return plan{run: func(r *Runner, a addrs) error {
			return r.launch("lstm_cell_"+sfx, i64(int64(d.Cell)), ptr(a.out), ptr(a.in[0]), ptr(a.in[1]), ptr(a.in[len(a.in)-1]), i64(N), i64(H))
		}}, nil
	case layers.DevLSTMGates:
		// ((xw + hw) + bih) + bhh, rounded in that order as the CPU op.
		x := c.out.Shape
		if len(x) != 2 {
			return plan{}, c.unsupported("LSTM gates that are not (N,4H)")
		}
		n, W := total(x), int64(x[1])
		bias := kernels.Layout{Rank: 2, Dim: [kernels.MaxDims]int64{int64(x[0]), W},
			Out: [kernels.MaxDims]int64{W, 1}, A: [kernels.MaxDims]int64{W, 1}, B: [kernels.MaxDims]int64{0, 1}}
		add := i64(int64(kernels.BinaryAdd))
		return plan{run: func(r *Runner, a addrs) error {
			if err := r.launch("binary_"+sfx, add, ptr(a.out), ptr(a.in[0]), ptr(a.in[1]), i64(n), kernels.LayoutArg(kernels.Contiguous())); err != nil {
				return err
			}
			for _, b := range a.in[2:] {
				if err := r.launch("binary_"+sfx, add, ptr(a.out), ptr(a.out), ptr(b), i64(n), kernels.LayoutArg(bias)); err != nil {
					return err
				}
			}
			return nil
		}}, nil
	case layers.DevSeqStep, layers.DevSeqPlace, layers.DevSeqStack:
		return planSeq(c, d)
	case layers.DevResize, layers.DevResizeGrad:
		N, C, _ := nchw(c.in(0))
		g := d.Resize
		al, name := int64(0), "resize_bilinear_"
		if g.Align {
			al = 1
		}
		if d.Kind == layers.DevResizeGrad {
			name = "resize_bilinear_grad_"
		}
		return plan{run: func(r *Runner, a addrs) error {
			return r.launch(name+sfx, ptr(a.out), ptr(a.in[0]), i64(N*C), i64(int64(g.IH)), i64(int64(g.IW)), i64(int64(g.OH)), i64(int64(g.OW)), i64(al))
		}}, nil
	}
	return plan{}, c.unsupported("no kernel plan for this layer op")
}

// nchw is (N, C, the product of the remaining axes).
func nchw(s tensor.Shape) (N, C, plane int64) {
	N, C, plane = 1, 1, 1
	for i, v := range s {
		switch i {
		case 0:
			N = int64(v)
		case 1:
			C = int64(v)
		default:
			plane *= int64(v)
		}
	}
	return
}

func planConv(c fn, d layers.DeviceOp) (plan, error) {
	var x, w, y tensor.Shape // (N,C,H,W), (O,C,KH,KW), (N,O,OH,OW)
	switch d.Kind {
	case layers.DevConv:
		x, w, y = c.in(0), c.in(1), c.out.Shape
	case layers.DevConvData:
		w, y, x = c.in(0), c.in(1), c.out.Shape
	default:
		x, y, w = c.in(0), c.in(1), c.out.Shape
	}
	if len(x) != 4 || len(w) != 4 || len(y) != 4 {
		return plan{}, c.unsupported("convolution of non-NCHW tensors")
	}
	p := d.Conv
	N, C, H, W := x[0], x[1], x[2], x[3]
	O, KH, KW, OH, OW := w[0], w[2], w[3], y[2], y[3]
	g := kernels.ConvGeom{C: int64(C), H: int64(H), W: int64(W), KH: int64(KH), KW: int64(KW), OH: int64(OH), OW: int64(OW),
		SH: int64(p.StrideH), SW: int64(p.StrideW), PH: int64(p.PadH), PW: int64(p.PadW), DH: int64(p.DilationH), DW: int64(p.DilationW)}
	K, P := C*KH*KW, OH*OW
	direct := KH == 1 && KW == 1 && p.StrideH == 1 && p.StrideW == 1 && p.PadH == 0 && p.PadW == 0
	es := c.es
	if !direct && layers.ConvChunk(N, P) == 1 {
		// Tiles of output pixels within the workspace, as the CPU op cuts them.
		if tile := layers.ConvTilePixels(K, P, int(c.f.Workspace/es)); tile < P {
			if c.f.Workspace < int64(K*tile)*es {
				return plan{}, c.unsupported(fmt.Sprintf("its workspace (%d bytes) is smaller than one tile's column matrix (%d bytes)", c.f.Workspace, int64(K*tile)*es))
			}
			return planConvTiled(c, d, N, O, K, P, tile, kernels.ConvArg(g))
		}
	}
	if !direct && c.f.Workspace < int64(K*P)*es {
		return plan{}, c.unsupported(fmt.Sprintf("its workspace (%d bytes) is smaller than one image's column matrix (%d bytes)", c.f.Workspace, int64(K*P)*es))
	}
	xImg, yImg := uintptr(int64(C*H*W)*es), uintptr(int64(O*P)*es)
	ga := kernels.ConvArg(g)
	sfx := c.sfx
	bias := d.Bias && d.Kind != layers.DevConvFilter
	switch d.Kind {
	case layers.DevConv:
		return plan{run: func(r *Runner, a addrs) error {
			for i := 0; i < N; i++ {
				xi, yi := a.in[0]+uintptr(i)*xImg, a.out+uintptr(i)*yImg
				col := xi
				if !direct {
					col = a.ws
					if err := r.launch("im2col_"+sfx, ptr(col), ptr(xi), i64(1), ga, i64(int64(P))); err != nil {
						return err
					}
				}
				if err := r.gemm(es, false, false, O, P, K, a.in[1], K, col, P, 0, yi, P); err != nil {
					return err
				}
			}
			if bias {
				return r.launch("channel_bias_"+sfx, ptr(a.out), ptr(a.in[2]), i64(int64(N)), i64(int64(O)), i64(int64(P)))
			}
			return nil
		}}, nil
	case layers.DevConvData:
		return plan{run: func(r *Runner, a addrs) error {
			for i := 0; i < N; i++ {
				dyi, dxi := a.in[1]+uintptr(i)*yImg, a.out+uintptr(i)*xImg
				col := dxi
				if !direct {
					col = a.ws
				}
				if err := r.gemm(es, true, false, K, P, O, a.in[0], K, dyi, P, 0, col, P); err != nil {
					return err
				}
				if !direct {
					if err := r.launch("col2im_"+sfx, ptr(dxi), ptr(col), i64(1), ga, i64(int64(P))); err != nil {
						return err
					}
				}
			}
			if bias {
				return r.launch("channel_bias_"+sfx, ptr(a.out), ptr(a.in[2]), i64(int64(N)), i64(int64(C)), i64(int64(H*W)))
			}
			return nil
		}}, nil
	default:
		if B := layers.ConvChunk(N, P); B > 1 {
			return planConvFilterChunked(c, N, O, K, P, B, ga)
		}
		return plan{run: func(r *Runner, a addrs) error {
			for i := 0; i < N; i++ {
				xi, dyi := a.in[0]+uintptr(i)*xImg, a.in[1]+uintptr(i)*yImg
				col := xi
				if !direct {
					col = a.ws
					if err := r.launch("im2col_"+sfx, ptr(col), ptr(xi), i64(1), ga, i64(int64(P))); err != nil {
						return err
					}
				}
				beta := 1.0
				if i == 0 {
					beta = 0
				}
				if err := r.gemm(es, false, true, O, K, P, dyi, P, col, P, beta, a.out, K); err != nil {
					return err
				}
			}
			return nil
		}}, nil
	}
}

// planConvTiled is a convolution of images whose column matrix exceeds the
// workspace: each image in tiles of output pixels (layers.ConvTilePixels),
// as the CPU op. Forward and filter tiles run in pixel order, the data
// gradient's from the last, added onto the cleared image (col2im_tile), so
// every sum is cut where the CPU op cuts it: tiles are multiples of the
// GEMM's k block.
func planConvTiled(c fn, d layers.DeviceOp, N, O, K, P, tile int, ga kernels.Arg) (plan, error) {
	es, sfx := c.es, c.sfx
	var x tensor.Shape // (N,C,H,W): the data side
	switch d.Kind {
	case layers.DevConvData:
		x = c.out.Shape
	default:
		x = c.in(0)
	}
	xImg, yImg := uintptr(int64(x[1]*x[2]*x[3])*es), uintptr(int64(O*P)*es)
	off := func(base uintptr, p0 int) uintptr { return base + uintptr(int64(p0)*es) }
	bias := d.Bias && d.Kind != layers.DevConvFilter
	return plan{run: func(r *Runner, a addrs) error {
		col, beta := a.ws, 0.0
		for i := 0; i < N; i++ {
			switch d.Kind {
			case layers.DevConv:
				xi, yi := a.in[0]+uintptr(i)*xImg, a.out+uintptr(i)*yImg
				for p0 := 0; p0 < P; p0 += tile {
					t := min(tile, P-p0)
					if err := r.launch("im2col_tile_"+sfx, ptr(col), ptr(xi), ga, i64(int64(t)), i64(int64(p0)), i64(int64(t))); err != nil {
						return err
					}
					if err := r.gemm(es, false, false, O, t, K, a.in[1], K, col, t, 0, off(yi, p0), P); err != nil {
						return err
					}
				}
			case layers.DevConvData:
				dyi, dxi := a.in[1]+uintptr(i)*yImg, a.out+uintptr(i)*xImg
				if err := r.launch("fill_"+sfx, ptr(dxi), flt(0), i64(int64(xImg)/es)); err != nil {
					return err
				}
				for p0 := (P - 1) / tile * tile; p0 >= 0; p0 -= tile {
					t := min(tile, P-p0)
					if err := r.gemm(es, true, false, K, t, O, a.in[0], K, off(dyi, p0), P, 0, col, t); err != nil {
						return err
					}
					if err := r.launch("col2im_tile_"+sfx, ptr(dxi), ptr(col), ga, i64(int64(t)), i64(int64(p0)), i64(int64(t))); err != nil {
						return err
					}
				}
			default:
				xi, dyi := a.in[0]+uintptr(i)*xImg, a.in[1]+uintptr(i)*yImg
				for p0 := 0; p0 < P; p0 += tile {
					t := min(tile, P-p0)
					if err := r.launch("im2col_tile_"+sfx, ptr(col), ptr(xi), ga, i64(int64(t)), i64(int64(p0)), i64(int64(t))); err != nil {
						return err
					}
					if err := r.gemm(es, false, true, O, K, t, off(dyi, p0), P, col, t, beta, a.out, K); err != nil {
						return err
					}
					beta = 1
				}
			}
		}
		if !bias {
			return nil
		}
		if d.Kind == layers.DevConv {
			return r.launch("channel_bias_"+sfx, ptr(a.out), ptr(a.in[2]), i64(int64(N)), i64(int64(O)), i64(int64(P)))
		}
		return r.launch("channel_bias_"+sfx, ptr(a.out), ptr(a.in[2]), i64(int64(N)), i64(int64(x[1])), i64(int64(x[2]*x[3])))
	}}, nil
}

// planConvFilterChunked is the weight gradient of small images, summed as
// the CPU op sums it: B images side by side in one GEMM, whose k (the
// chunk's B·P pixels) the GEMM cuts into blocks as the CPU's does, so the
// fake cuBLAS, doing package blas's arithmetic, gives the CPU op's bits. The
// forward and data products need no chunking for that: each of their
// elements sums over K or O whatever the images per GEMM. dy's chunk is
// gathered from (nb, O, P) to (O, nb·P) by a copy; col and that stage are
// the CPU op's workspace, which the budget counts.
func planConvFilterChunked(c fn, N, O, K, P, B int, ga kernels.Arg) (plan, error) {
	es := c.es
	colBytes, stageBytes := int64(K*B*P)*es, int64(O*B*P)*es
	if c.f.Workspace < colBytes+stageBytes {
		return plan{}, c.unsupported(fmt.Sprintf("its workspace (%d bytes) is smaller than a chunk of %d images' column and staging matrices (%d bytes)",
			c.f.Workspace, B, colBytes+stageBytes))
	}
	x := c.in(0)
	xImg, yImg := uintptr(int64(x[1]*x[2]*x[3])*es), uintptr(int64(O*P)*es)
	sfx := c.sfx
	return plan{run: func(r *Runner, a addrs) error {
		col, stage := a.ws, a.ws+uintptr(colBytes)
		for n0 := 0; n0 < N; n0 += B {
			nb := min(B, N-n0)
			cols := nb * P
			l := kernels.Layout{Rank: 3,
				Dim: [kernels.MaxDims]int64{int64(O), int64(nb), int64(P)},
				Out: [kernels.MaxDims]int64{int64(cols), int64(P), 1},
				A:   [kernels.MaxDims]int64{int64(P), int64(O * P), 1}}
			if err := copyLaunch(r, sfx, stage, a.in[1]+uintptr(n0)*yImg, int64(O*cols), l); err != nil {
				return err
			}
			if err := r.launch("im2col_"+sfx, ptr(col), ptr(a.in[0]+uintptr(n0)*xImg), i64(int64(nb)), ga, i64(int64(cols))); err != nil {
				return err
			}
			beta := 1.0
			if n0 == 0 {
				beta = 0
			}
			if err := r.gemm(es, false, true, O, K, cols, stage, cols, col, cols, beta, a.out, K); err != nil {
				return err
			}
		}
		return nil
	}}, nil
}

// bnState is one batch-norm layer's running statistics on the device: the
// op keeps them on the host (gorgonia's API reads them there), so each
// training forward uploads them, bn_running updates them on the device, and
// the step's end brings them back (an explicit host synchronisation of C
// float64 pairs per layer).
type bnState struct {
	op      runningStatser
	c       int
	off     int64  // offset in the runner's scratch: mean, then variance
	up      []byte // the host copy uploaded this step
	down    []byte
	touched bool // updated on the device this step
	loaded  bool // uploaded this step
	// saved is state the op keeps between its forward and its gradient
	// (gorgonia's saved variance: C values after the running ones), on the
	// device from the first upload on; nil for models/layers' op.
	saved   []float64
	savedUp bool
}

// bytes is the state's size in the runner's scratch.
func (s *bnState) bytes() int64 { return 8 * int64(2*s.c+len(s.saved)) }

func (s *bnState) addr(r *Runner) (mean, variance uintptr) {
	m := r.scratch() + uintptr(s.off)
	return m, m + uintptr(8*s.c)
}

// load uploads the running statistics once per step.
func (s *bnState) load(r *Runner) error {
	if s.loaded {
		return nil
	}
	mean, variance := s.op.RunningStats()
	if len(mean) != s.c || len(variance) != s.c {
		return fmt.Errorf("batch norm holds %d and %d running statistics, want %d", len(mean), len(variance), s.c)
	}
	s.up = s.up[:0]
	all := append(mean, variance...)
	if !s.savedUp {
		all = append(all, s.saved...)
	}
	for _, v := range all {
		s.up = binary.LittleEndian.AppendUint64(s.up, math.Float64bits(v))
	}
	m, _ := s.addr(r)
	w, err := r.CopyIn(m, s.up)
	if err != nil {
		return err
	}
	if err := r.WaitFor(w); err != nil {
		return err
	}
	s.loaded, s.savedUp = true, true
	return nil
}

// queueBN starts copying the running statistics updated on the device this
// step back to the host, after the step's compute.
func (r *Runner) queueBN() ([]*bnState, error) {
	var out []*bnState
	for _, s := range r.bns {
		touched := s.touched
		s.touched, s.loaded = false, false
		if !touched {
			continue
		}
		if len(s.down) != 16*s.c {
			s.down = make([]byte, 16*s.c)
		}
		m, _ := s.addr(r)
		if _, err := r.CopyOut(s.down, m); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// storeBN hands the downloaded statistics to their ops, once the copies landed.
func storeBN(states []*bnState) error {
	for _, s := range states {
		vals := make([]float64, 2*s.c)
		for i := range vals {
			vals[i] = math.Float64frombits(binary.LittleEndian.Uint64(s.down[8*i:]))
		}
		if err := s.op.SetRunningStats(vals[:s.c], vals[s.c:]); err != nil {
			return err
		}
	}
	return nil
}

func planBN(r *Runner, c fn, d layers.DeviceOp) (plan, error) {
	x := c.in(0)
	N, C, plane := nchw(x)
	if len(x) < 2 {
		return plan{}, c.unsupported("batch norm of a tensor without channels")
	}
	st := r.bns[d.BN]
	if st == nil {
		st = &bnState{op: d.BN, c: int(C)}
		r.bns[d.BN] = st
	}
	if st.c != int(C) {
		return plan{}, c.unsupported("one batch norm op on tensors of different channel counts")
	}
	geo := []kernels.Arg{i64(N), i64(C), i64(plane)}
	sfx, es := c.sfx, c.es
	// Scratch: mean, invstd and (variance or sdy), sdxh as float64, then
	// the gamma gradient of BatchNormGradX as the element type.
	f64 := uintptr(8 * C)
	scratch := 4*8*C + es*C
	stats := func(r *Runner, x uintptr) (mean, inv uintptr, err error) {
		mean, inv = r.scratch(), r.scratch()+f64
		if d.BN.Training() {
			err = r.launch("bn_stats_"+sfx, append([]kernels.Arg{ptr(mean), ptr(inv), ptr(inv + f64), ptr(x)}, append(geo, flt(d.BN.Epsilon()))...)...)
			return
		}
		if err = st.load(r); err != nil {
			return
		}
		rm, rv := st.addr(r)
		err = r.launch("bn_infer_stats", ptr(mean), ptr(inv), ptr(rm), ptr(rv), i64(C), flt(d.BN.Epsilon()))
		return
	}
	switch d.Kind {
	case layers.DevBatchNorm:
		return plan{scratch: scratch, run: func(r *Runner, a addrs) error {
			mean, inv, err := stats(r, a.in[0])
			if err != nil {
				return err
			}
			if d.BN.Training() {
				if err := st.load(r); err != nil {
					return err
				}
				cnt := float64(N * plane)
				unbias := 1.0
				if cnt > 1 {
					unbias = cnt / (cnt - 1)
				}
				rm, rv := st.addr(r)
				if err := r.launch("bn_running", ptr(rm), ptr(rv), ptr(mean), ptr(inv+f64), i64(C), flt(d.BN.Momentum()), flt(unbias)); err != nil {
					return err
				}
				st.touched = true
			}
			return r.launch("bn_apply_"+sfx, append([]kernels.Arg{ptr(a.out), ptr(a.in[0]), ptr(a.in[1]), ptr(a.in[2]), ptr(mean), ptr(inv)}, geo...)...)
		}}, nil
	default:
		gamma := d.Kind == layers.DevBNGradGamma
		return plan{scratch: scratch, run: func(r *Runner, a addrs) error {
			xa, dy := a.in[0], a.in[len(a.in)-1]
			mean, inv, err := stats(r, xa)
			if err != nil {
				return err
			}
			sdy, sdxh := inv+f64, inv+2*f64
			dg := inv + 3*f64
			if gamma {
				dg = a.out
			}
			if err := r.launch("bn_grad_sums_"+sfx, append([]kernels.Arg{ptr(dg), ptr(sdy), ptr(sdxh), ptr(xa), ptr(dy), ptr(mean), ptr(inv)}, geo...)...); err != nil {
				return err
			}
			if gamma {
				return nil
			}
			tr := int64(0)
			if d.BN.Training() {
				tr = 1
			}
			return r.launch("bn_grad_x_"+sfx, append(append([]kernels.Arg{ptr(a.out), ptr(xa), ptr(dy), ptr(a.in[1]), ptr(mean), ptr(inv), ptr(sdy), ptr(sdxh)}, geo...), i64(tr))...)
		}}, nil
	}
}

// planSeq plans the sequence ops as copies: a step is column t of the
// (N·C, T) matrix of a sequence, read with stride T or written with it
// (SequencePlace after zeroing the sequence; StackSequence one copy per
// step).
func planSeq(c fn, d layers.DeviceOp) (plan, error) {
	sfx, es := c.sfx, uintptr(c.es)
	T := int64(d.Steps)
	rows := total(c.in(0))
	if d.Kind == layers.DevSeqStep {
		rows = total(c.out.Shape)
	}
	col := kernels.Layout{Rank: 1, Dim: [kernels.MaxDims]int64{rows}, Out: [kernels.MaxDims]int64{T}, A: [kernels.MaxDims]int64{1}}
	switch d.Kind {
	case layers.DevSeqStep:
		l := kernels.Layout{Rank: 1, Dim: [kernels.MaxDims]int64{rows}, Out: [kernels.MaxDims]int64{1}, A: [kernels.MaxDims]int64{T}}
		return plan{run: func(r *Runner, a addrs) error {
			return copyLaunch(r, sfx, a.out, a.in[0]+uintptr(d.Step)*es, rows, l)
		}}, nil
	case layers.DevSeqPlace:
		return plan{run: func(r *Runner, a addrs) error {
			if err := r.launch("fill_"+sfx, ptr(a.out), flt(0), i64(rows*T)); err != nil {
				return err
			}
			return copyLaunch(r, sfx, a.out+uintptr(d.Step)*es, a.in[0], rows, col)
		}}, nil
	}
	return plan{run: func(r *Runner, a addrs) error {
		for t := range a.in {
			if err := copyLaunch(r, sfx, a.out+uintptr(t)*es, a.in[t], rows, col); err != nil {
				return err
			}
		}
		return nil
	}}, nil
}
