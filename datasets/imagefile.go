package datasets

import (
	"bufio"
	"bytes"
	"fmt"
	"image"
	"image/color"
	_ "image/jpeg" // registered for image.Decode: folders hold JPEG files
	_ "image/png"  // registered for image.Decode: folders and masks hold PNG files
	"os"
	"path/filepath"
	"strings"
)

// maxPixels bounds the size an image header may claim. Without it a 30-byte
// PNG header claiming 100000x100000 pixels would make image.Decode allocate
// tens of gigabytes before noticing the data is missing.
const maxPixels = 1 << 26

// imageExt reports whether a file name is one the folder sources read.
func imageExt(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".png", ".jpg", ".jpeg":
		return true
	}
	return false
}

// lut8 maps 8-bit samples to [0,1]. It is computed through float64 so that the
// generic 16-bit path (v*257/65535, the same real number) rounds identically.
var lut8 = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(float64(i) / 255)
	}
	return
}()

// imageConfig reads only the header of an image file.
type imageConfig struct {
	width, height int
	gray          bool
}

func readImageConfig(path string) (imageConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return imageConfig{}, err
	}
	defer f.Close()
	cfg, format, err := image.DecodeConfig(bufio.NewReader(f))
	if err != nil {
		return imageConfig{}, &FormatError{File: path, Offset: -1, Entry: -1, Msg: "bad image header", Err: err}
	}
	if err := checkSize(path, cfg.Width, cfg.Height); err != nil {
		return imageConfig{}, err
	}
	_ = format
	gray := cfg.ColorModel == color.GrayModel || cfg.ColorModel == color.Gray16Model
	return imageConfig{width: cfg.Width, height: cfg.Height, gray: gray}, nil
}

func checkSize(name string, w, h int) error {
	if w <= 0 || h <= 0 || int64(w)*int64(h) > maxPixels {
		return &FormatError{File: name, Offset: -1, Entry: -1,
			Msg: fmt.Sprintf("image size %dx%d outside 1..%d pixels", w, h, maxPixels)}
	}
	return nil
}

// decodeBytes decodes a PNG or JPEG held in memory, refusing absurd sizes
// before the decoder allocates.
func decodeBytes(name string, data []byte) (image.Image, error) {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, &FormatError{File: name, Offset: -1, Entry: -1, Msg: "bad image header", Err: err}
	}
	if err := checkSize(name, cfg.Width, cfg.Height); err != nil {
		return nil, err
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, &FormatError{File: name, Offset: -1, Entry: -1, Msg: "bad image data", Err: err}
	}
	b := img.Bounds()
	if b.Dx() != cfg.Width || b.Dy() != cfg.Height {
		return nil, &FormatError{File: name, Offset: -1, Entry: -1,
			Msg: fmt.Sprintf("decoded size %dx%d differs from header %dx%d", b.Dx(), b.Dy(), cfg.Width, cfg.Height)}
	}
	return img, nil
}

// decodeImage turns PNG/JPEG bytes into CHW floats in [0,1]: one channel for
// gray images, three otherwise. Alpha is dropped by compositing over black,
// which is what the premultiplied RGBA() values already are.
func decodeImage(name string, data []byte) (pix []float32, c, h, w int, err error) {
	img, err := decodeBytes(name, data)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	b := img.Bounds()
	w, h = b.Dx(), b.Dy()
	switch m := img.(type) {
	case *image.Gray:
		pix = make([]float32, h*w)
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride : y*m.Stride+w]
			for x, v := range row {
				pix[y*w+x] = lut8[v]
			}
		}
		return pix, 1, h, w, nil
	case *image.Gray16:
		pix = make([]float32, h*w)
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				i := y*m.Stride + 2*x
				v := uint32(m.Pix[i])<<8 | uint32(m.Pix[i+1])
				pix[y*w+x] = float32(float64(v) / 65535)
			}
		}
		return pix, 1, h, w, nil
	}
	pix = make([]float32, 3*h*w)
	plane := h * w
	switch m := img.(type) {
	case *image.YCbCr:
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				yi := m.YOffset(b.Min.X+x, b.Min.Y+y)
				ci := m.COffset(b.Min.X+x, b.Min.Y+y)
				r, g, bb := color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
				o := y*w + x
				pix[o], pix[plane+o], pix[2*plane+o] = lut8[r], lut8[g], lut8[bb]
			}
		}
		return pix, 3, h, w, nil
	case *image.NRGBA:
		if m.Opaque() {
			for y := 0; y < h; y++ {
				row := m.Pix[y*m.Stride : y*m.Stride+4*w]
				for x := 0; x < w; x++ {
					o := y*w + x
					pix[o], pix[plane+o], pix[2*plane+o] = lut8[row[4*x]], lut8[row[4*x+1]], lut8[row[4*x+2]]
				}
			}
			return pix, 3, h, w, nil
		}
	case *image.RGBA:
		// RGBA is premultiplied, so its bytes are already composited over black.
		for y := 0; y < h; y++ {
			row := m.Pix[y*m.Stride : y*m.Stride+4*w]
			for x := 0; x < w; x++ {
				o := y*w + x
				pix[o], pix[plane+o], pix[2*plane+o] = lut8[row[4*x]], lut8[row[4*x+1]], lut8[row[4*x+2]]
			}
		}
		return pix, 3, h, w, nil
	}
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			r, g, bb, _ := img.At(b.Min.X+x, b.Min.Y+y).RGBA()
			o := y*w + x
			pix[o] = float32(float64(r) / 65535)
			pix[plane+o] = float32(float64(g) / 65535)
			pix[2*plane+o] = float32(float64(bb) / 65535)
		}
	}
	return pix, 3, h, w, nil
}

// decodeMask reads a segmentation mask whose pixel values are class indices.
// Palette images give the palette index (not the colour), which is how VOC-style
// masks store classes; gray images give the gray level. A colour pixel cannot be
// mapped to a class without a colour table, so it is an error naming the pixel.
func decodeMask(name string, data []byte) (mask []int, h, w int, err error) {
	img, err := decodeBytes(name, data)
	if err != nil {
		return nil, 0, 0, err
	}
	b := img.Bounds()
	w, h = b.Dx(), b.Dy()
	mask = make([]int, h*w)
	switch m := img.(type) {
	case *image.Paletted:
		mask8(mask, m.Pix, m.Stride, h, w)
		return mask, h, w, nil
	case *image.Gray:
		mask8(mask, m.Pix, m.Stride, h, w)
		return mask, h, w, nil
	case *image.Gray16:
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				i := y*m.Stride + 2*x
				mask[y*w+x] = int(m.Pix[i])<<8 | int(m.Pix[i+1])
			}
		}
		return mask, h, w, nil
	}
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			c := color.NRGBAModel.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
			if c.R != c.G || c.G != c.B {
				return nil, 0, 0, &FormatError{File: name, Offset: -1, Entry: -1,
					Msg: fmt.Sprintf("mask pixel (%d,%d) has colour (%d,%d,%d); masks must be palette or gray images whose values are class indices", x, y, c.R, c.G, c.B)}
			}
			mask[y*w+x] = int(c.R)
		}
	}
	return mask, h, w, nil
}

// mask8 reads one byte per pixel (a palette index or a gray level) as the
// class index.
func mask8(mask []int, pix []uint8, stride, h, w int) {
	for y := 0; y < h; y++ {
		for x, v := range pix[y*stride : y*stride+w] {
			mask[y*w+x] = int(v)
		}
	}
}
