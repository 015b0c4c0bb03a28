package layers

// Plain-loop float64 reference implementations, written from the definitions and sharing no code
// with the ops: conv as a gather, conv-transpose as a scatter, pools and BN straight from formulas.

import (
	"math"
	"os"
	"testing"

	"gorgonia.org/tensor"
)

func TestMain(m *testing.M) {
	// gorgonia and tensor recycle headers through a pool; a header we still hold could be reused.
	tensor.DontUsePool()
	os.Exit(m.Run())
}

type nd struct {
	shape tensor.Shape
	data  []float64
}

func newND(shape ...int) nd {
	return nd{shape: tensor.Shape(shape).Clone(), data: make([]float64, tensor.Shape(shape).TotalSize())}
}

func (a nd) at4(i, j, k, l int) *float64 {
	s := a.shape
	return &a.data[((i*s[1]+j)*s[2]+k)*s[3]+l]
}

func refConv(x, w nd, b []float64, p ConvParams) nd {
	p = p.norm()
	N, C, H, W := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	O, KH, KW := w.shape[0], w.shape[2], w.shape[3]
	OH := (H+2*p.PadH-p.DilationH*(KH-1)-1)/p.StrideH + 1
	OW := (W+2*p.PadW-p.DilationW*(KW-1)-1)/p.StrideW + 1
	y := newND(N, O, OH, OW)
	for n := 0; n < N; n++ {
		for o := 0; o < O; o++ {
			for oh := 0; oh < OH; oh++ {
				for ow := 0; ow < OW; ow++ {
					s := 0.0
					if b != nil {
						s = b[o]
					}
					for c := 0; c < C; c++ {
						for i := 0; i < KH; i++ {
							for j := 0; j < KW; j++ {
								ih := oh*p.StrideH - p.PadH + i*p.DilationH
								iw := ow*p.StrideW - p.PadW + j*p.DilationW
								if ih >= 0 && ih < H && iw >= 0 && iw < W {
									s += *x.at4(n, c, ih, iw) * *w.at4(o, c, i, j)
								}
							}
						}
					}
					*y.at4(n, o, oh, ow) = s
				}
			}
		}
	}
	return y
}

// refConvTranspose scatters each input pixel through the kernel, as the textbook definition.
func refConvTranspose(x, w nd, b []float64, p ConvParams) nd {
	p = p.norm()
	N, Ci, H, W := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	Co, KH, KW := w.shape[1], w.shape[2], w.shape[3]
	OH := (H-1)*p.StrideH - 2*p.PadH + p.DilationH*(KH-1) + 1 + p.OutPadH
	OW := (W-1)*p.StrideW - 2*p.PadW + p.DilationW*(KW-1) + 1 + p.OutPadW
	y := newND(N, Co, OH, OW)
	for n := 0; n < N; n++ {
		for co := 0; co < Co; co++ {
			for oh := 0; oh < OH; oh++ {
				for ow := 0; ow < OW; ow++ {
					if b != nil {
						*y.at4(n, co, oh, ow) = b[co]
					}
				}
			}
		}
		for ci := 0; ci < Ci; ci++ {
			for ih := 0; ih < H; ih++ {
				for iw := 0; iw < W; iw++ {
					v := *x.at4(n, ci, ih, iw)
					for co := 0; co < Co; co++ {
						for i := 0; i < KH; i++ {
							for j := 0; j < KW; j++ {
								oh := ih*p.StrideH - p.PadH + i*p.DilationH
								ow := iw*p.StrideW - p.PadW + j*p.DilationW
								if oh >= 0 && oh < OH && ow >= 0 && ow < OW {
									*y.at4(n, co, oh, ow) += v * *w.at4(ci, co, i, j)
								}
							}
						}
					}
				}
			}
		}
	}
	return y
}

func refPool(x nd, k, s, pad int, maxPool bool) nd {
	N, C, H, W := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	OH, OW := (H+2*pad-k)/s+1, (W+2*pad-k)/s+1
	y := newND(N, C, OH, OW)
	for n := 0; n < N; n++ {
		for c := 0; c < C; c++ {
			for oh := 0; oh < OH; oh++ {
				for ow := 0; ow < OW; ow++ {
					best, sum := math.Inf(-1), 0.0
					for i := 0; i < k; i++ {
						for j := 0; j < k; j++ {
							ih, iw := oh*s-pad+i, ow*s-pad+j
							if ih < 0 || ih >= H || iw < 0 || iw >= W {
								continue
							}
							v := *x.at4(n, c, ih, iw)
							sum += v
							best = math.Max(best, v)
						}
					}
					if maxPool {
						*y.at4(n, c, oh, ow) = best
					} else {
						*y.at4(n, c, oh, ow) = sum / float64(k*k)
					}
				}
			}
		}
	}
	return y
}

func refGAP(x nd) nd {
	N, C, H, W := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	y := newND(N, C)
	for n := 0; n < N; n++ {
		for c := 0; c < C; c++ {
			s := 0.0
			for h := 0; h < H; h++ {
				for w := 0; w < W; w++ {
					s += *x.at4(n, c, h, w)
				}
			}
			y.data[n*C+c] = s / float64(H*W)
		}
	}
	return y
}

// refBN normalises with the batch statistics, or with the given mean and variance if non-nil.
func refBN(x nd, gamma, beta []float64, eps float64, mean, variance []float64) nd {
	N, C, H, W := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	y := newND(N, C, H, W)
	for c := 0; c < C; c++ {
		var m, v float64
		if mean != nil {
			m, v = mean[c], variance[c]
		} else {
			cnt := float64(N * H * W)
			for n := 0; n < N; n++ {
				for h := 0; h < H; h++ {
					for w := 0; w < W; w++ {
						m += *x.at4(n, c, h, w)
					}
				}
			}
			m /= cnt
			for n := 0; n < N; n++ {
				for h := 0; h < H; h++ {
					for w := 0; w < W; w++ {
						d := *x.at4(n, c, h, w) - m
						v += d * d
					}
				}
			}
			v /= cnt
		}
		for n := 0; n < N; n++ {
			for h := 0; h < H; h++ {
				for w := 0; w < W; w++ {
					*y.at4(n, c, h, w) = gamma[c]*(*x.at4(n, c, h, w)-m)/math.Sqrt(v+eps) + beta[c]
				}
			}
		}
	}
	return y
}
