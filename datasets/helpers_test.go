package datasets

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// writeFile creates parent directories too, since most fixtures are trees.
func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// cifarBytes makes records whose pixels encode (record, position) so a test
// can tell which record it got back.
func cifarBytes(labels ...byte) []byte {
	out := make([]byte, 0, len(labels)*cifarRecord)
	for i, l := range labels {
		out = append(out, l)
		for k := 0; k < cifarPixels; k++ {
			out = append(out, byte(i*31+k))
		}
	}
	return out
}

func idxBytes(dims []int, data []byte) []byte {
	var b bytes.Buffer
	b.Write([]byte{0, 0, idxUbyte, byte(len(dims))})
	for _, d := range dims {
		binary.Write(&b, binary.BigEndian, uint32(d))
	}
	b.Write(data)
	return b.Bytes()
}

func gz(data []byte) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write(data)
	w.Close()
	return b.Bytes()
}

// mnistDir writes an MNIST-layout directory with n train and m test images of
// h x w pixels; pixel values encode the image index.
func mnistDir(t testing.TB, dir string, compress bool, n, m, h, w int) {
	t.Helper()
	for _, s := range []struct {
		prefix string
		count  int
	}{{"train", n}, {"t10k", m}} {
		pix := make([]byte, s.count*h*w)
		labels := make([]byte, s.count)
		for i := range pix {
			pix[i] = byte(i/(h*w)*10 + i%(h*w)%7)
		}
		for i := range labels {
			labels[i] = byte(i % 10)
		}
		img := idxBytes([]int{s.count, h, w}, pix)
		lab := idxBytes([]int{s.count}, labels)
		ext := ""
		if compress {
			img, lab, ext = gz(img), gz(lab), ".gz"
		}
		writeFile(t, filepath.Join(dir, s.prefix+"-images-idx3-ubyte"+ext), img)
		writeFile(t, filepath.Join(dir, s.prefix+"-labels-idx1-ubyte"+ext), lab)
	}
}

func rgbImage(w, h int, c color.Color) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, c)
		}
	}
	return img
}

func pngBytes(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func jpegBytes(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// palettedMask draws class k in the rectangle r on a class-0 background.
func palettedMask(w, h int, r image.Rectangle, k uint8) *image.Paletted {
	pal := color.Palette{color.Black, color.RGBA{255, 0, 0, 255}, color.RGBA{0, 255, 0, 255}, color.RGBA{0, 0, 255, 255}}
	m := image.NewPaletted(image.Rect(0, 0, w, h), pal)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			m.SetColorIndex(x, y, k)
		}
	}
	return m
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not contain %q", err, p)
		}
	}
}

// checkNoLeak fails if goroutines started during the test are still running
// shortly after it; exiting goroutines need a moment to be unscheduled.
func checkNoLeak(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= before {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines running, %d before:\n%s", n, before, buf)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func pngBytesNoT(img image.Image) []byte {
	var b bytes.Buffer
	png.Encode(&b, img)
	return b.Bytes()
}
