package datasets

import (
	"fmt"
	"math"
)

// fitWindow maps an output axis of n pixels onto a source axis of n0 pixels
// for "resize the shorter side, then center-crop": scale is source pixels per
// output pixel, off the source coordinate of the window's left edge.
func fitWindow(h0, w0, h, w int) (scale, offY, offX float64) {
	s := math.Max(float64(h)/float64(h0), float64(w)/float64(w0)) // output px per source px
	scale = 1 / s
	offY = (float64(h0) - float64(h)*scale) / 2
	offX = (float64(w0) - float64(w)*scale) / 2
	return scale, offY, offX
}

// taps are the source pixels and weights that make one output pixel along one axis.
type taps struct {
	start int
	w     []float64
}

// filterAxis builds a triangle (bilinear) filter whose support widens with the
// downscale factor. Plain bilinear sampling would alias badly when a 500-pixel
// photo becomes 32 pixels; widening the support averages the skipped pixels,
// the same idea as PIL's antialiased bilinear resize.
func filterAxis(n0, n int, scale, off float64) []taps {
	support := math.Max(1, scale)
	out := make([]taps, n)
	for i := range out {
		center := off + (float64(i)+0.5)*scale - 0.5
		lo := int(math.Floor(center - support))
		hi := int(math.Ceil(center + support))
		if lo < 0 {
			lo = 0
		}
		if hi > n0-1 {
			hi = n0 - 1
		}
		ws := make([]float64, 0, hi-lo+1)
		sum := 0.0
		for j := lo; j <= hi; j++ {
			v := 1 - math.Abs(float64(j)-center)/support
			if v < 0 {
				v = 0
			}
			ws = append(ws, v)
			sum += v
		}
		if sum == 0 { // cannot happen for a window inside the image; guard anyway
			c := int(math.Round(center))
			c = min(max(c, 0), n0-1)
			out[i] = taps{start: c, w: []float64{1}}
			continue
		}
		for k := range ws {
			ws[k] /= sum
		}
		out[i] = taps{start: lo, w: ws}
	}
	return out
}

// resizeImage resizes CHW pixels to h x w, scaling the shorter side and cropping
// the centre, so no image is distorted whatever its aspect ratio.
func resizeImage(src []float32, c, h0, w0, h, w int) []float32 {
	if h0 == h && w0 == w {
		return src
	}
	scale, offY, offX := fitWindow(h0, w0, h, w)
	tx := filterAxis(w0, w, scale, offX)
	ty := filterAxis(h0, h, scale, offY)
	tmp := make([]float64, h0*w) // horizontal pass, one channel at a time
	dst := make([]float32, c*h*w)
	for ch := 0; ch < c; ch++ {
		plane := src[ch*h0*w0 : (ch+1)*h0*w0]
		for y := 0; y < h0; y++ {
			row := plane[y*w0 : (y+1)*w0]
			for x, t := range tx {
				s := 0.0
				for k, wt := range t.w {
					s += wt * float64(row[t.start+k])
				}
				tmp[y*w+x] = s
			}
		}
		out := dst[ch*h*w : (ch+1)*h*w]
		for y, t := range ty {
			for x := 0; x < w; x++ {
				s := 0.0
				for k, wt := range t.w {
					s += wt * tmp[(t.start+k)*w+x]
				}
				out[y*w+x] = float32(s)
			}
		}
	}
	return dst
}

// resizeMask uses nearest neighbour on the same window as resizeImage, because
// class indices cannot be interpolated and must stay aligned with the image.
func resizeMask(src []int, h0, w0, h, w int) []int {
	if h0 == h && w0 == w {
		return src
	}
	scale, offY, offX := fitWindow(h0, w0, h, w)
	xs := make([]int, w)
	for x := range xs {
		xs[x] = min(max(int(math.Floor(offX+(float64(x)+0.5)*scale)), 0), w0-1)
	}
	dst := make([]int, h*w)
	for y := 0; y < h; y++ {
		sy := min(max(int(math.Floor(offY+(float64(y)+0.5)*scale)), 0), h0-1)
		for x, sx := range xs {
			dst[y*w+x] = src[sy*w0+sx]
		}
	}
	return dst
}

// convertChannels adapts gray data to colour models and back, so that for
// example Fashion-MNIST can feed a ResNet built for three channels.
func convertChannels(src []float32, c0, c, plane int) ([]float32, error) {
	switch {
	case c0 == c:
		return src, nil
	case c0 == 1:
		dst := make([]float32, c*plane)
		for ch := 0; ch < c; ch++ {
			copy(dst[ch*plane:], src[:plane])
		}
		return dst, nil
	case c0 == 3 && c == 1:
		// ITU-R BT.601 luma, as PIL's convert("L") and torchvision's Grayscale.
		dst := make([]float32, plane)
		for i := range dst {
			dst[i] = float32(0.299*float64(src[i]) + 0.587*float64(src[plane+i]) + 0.114*float64(src[2*plane+i]))
		}
		return dst, nil
	}
	return nil, fmt.Errorf("cannot convert %d channels to %d", c0, c)
}

// randomCrop pads by p zero pixels on every side and cuts an h x w window at
// (dy, dx) in the padded image; dy, dx in [0, 2p]. Masks pad with class 0.
func randomCrop(src []float32, c, h, w, p, dy, dx int) []float32 {
	dst := make([]float32, len(src))
	for ch := 0; ch < c; ch++ {
		for y := 0; y < h; y++ {
			sy := y + dy - p
			if sy < 0 || sy >= h {
				continue
			}
			for x := 0; x < w; x++ {
				sx := x + dx - p
				if sx < 0 || sx >= w {
					continue
				}
				dst[(ch*h+y)*w+x] = src[(ch*h+sy)*w+sx]
			}
		}
	}
	return dst
}

func cropMask(src []int, h, w, p, dy, dx int) []int {
	dst := make([]int, len(src))
	for y := 0; y < h; y++ {
		sy := y + dy - p
		if sy < 0 || sy >= h {
			continue
		}
		for x := 0; x < w; x++ {
			sx := x + dx - p
			if sx < 0 || sx >= w {
				continue
			}
			dst[y*w+x] = src[sy*w+sx]
		}
	}
	return dst
}

// flipRows mirrors every row in place; rows is the number of rows over all channels.
func flipRows[T any](pix []T, rows, w int) {
	for r := 0; r < rows; r++ {
		row := pix[r*w : (r+1)*w]
		for i, j := 0, w-1; i < j; i, j = i+1, j-1 {
			row[i], row[j] = row[j], row[i]
		}
	}
}
