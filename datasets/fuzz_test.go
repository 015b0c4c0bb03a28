package datasets

import (
	"image"
	"image/color"
	"strings"
	"testing"
)

// The fuzz targets feed untrusted bytes to every parser. Their seed corpora
// live in testdata/fuzz/<Name>/, so a plain `go test` replays them; run
// `go test -fuzz FuzzIDX ./datasets/` to search further.

func FuzzIDX(f *testing.F) {
	f.Add(idxBytes([]int{2, 3, 3}, make([]byte, 18)))
	f.Add(gz(idxBytes([]int{2}, []byte{1, 2})))
	f.Add([]byte{0, 0, 8, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, dims := range []int{1, 3} {
			d, payload, err := parseIDX("fuzz", data, dims)
			if err != nil {
				if !strings.HasPrefix(err.Error(), "datasets: fuzz: ") {
					t.Fatalf("error does not name the file: %v", err)
				}
				continue
			}
			n := 1
			for _, v := range d {
				n *= v
			}
			if len(d) != dims || len(payload) != n {
				t.Fatalf("dims %v, %d payload bytes", d, len(payload))
			}
		}
	})
}

func FuzzCIFAR(f *testing.F) {
	f.Add(cifarBytes(1, 9))
	f.Add(cifarBytes(3)[:100])
	f.Add(cifarBytes(10))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &cifar{info: Info{Name: "cifar10", Classes: cifarClasses, Channels: 3, Height: cifarSide, Width: cifarSide}}
		if err := c.add("fuzz.bin", data); err != nil {
			if !strings.Contains(err.Error(), "fuzz.bin: offset ") {
				t.Fatalf("error without file and offset: %v", err)
			}
			return
		}
		for _, i := range []int{0, c.info.Examples - 1, c.info.Examples} {
			ex, err := c.Load(i)
			if (err == nil) != (i < c.info.Examples) {
				t.Fatalf("Load(%d) of %d: %v", i, c.info.Examples, err)
			}
			if err == nil && (ex.Label < 0 || ex.Label > 9 || len(ex.Image) != cifarPixels) {
				t.Fatalf("example %d: label %d, %d values", i, ex.Label, len(ex.Image))
			}
		}
	})
}

// FuzzImage covers image and mask decoding, including the size guard.
func FuzzImage(f *testing.F) {
	f.Add(pngBytesNoT(rgbImage(3, 2, color.White)))
	f.Add(pngBytesNoT(palettedMask(4, 4, image.Rect(0, 0, 2, 2), 2)))
	f.Add(pngBytesNoT(image.NewGray16(image.Rect(0, 0, 2, 2))))
	f.Add(hugePNGHeader())
	f.Add([]byte("\xff\xd8\xff\xdb"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if pix, c, h, w, err := decodeImage("fuzz.png", data); err == nil {
			if (c != 1 && c != 3) || len(pix) != c*h*w {
				t.Fatalf("%dx%dx%d with %d values", c, h, w, len(pix))
			}
			for _, v := range pix {
				if !(v >= 0 && v <= 1) {
					t.Fatalf("value %v outside [0,1]", v)
				}
			}
		} else if !strings.Contains(err.Error(), "fuzz.png") {
			t.Fatalf("error does not name the file: %v", err)
		}
		if m, h, w, err := decodeMask("fuzz.png", data); err == nil && len(m) != h*w {
			t.Fatalf("mask %dx%d with %d values", h, w, len(m))
		}
	})
}

// FuzzTransform drives resizing, cropping and flipping through the Loader
// with arbitrary sizes, which is where index arithmetic goes wrong.
func FuzzTransform(f *testing.F) {
	f.Add(uint8(5), uint8(7), uint8(3), uint8(2), uint8(1), true, uint8(1))
	f.Add(uint8(1), uint8(1), uint8(9), uint8(9), uint8(4), false, uint8(3))
	f.Add(uint8(40), uint8(3), uint8(2), uint8(40), uint8(0), true, uint8(3))
	f.Fuzz(func(t *testing.T, h0, w0, h, w, crop uint8, flip bool, c uint8) {
		if h0 == 0 || w0 == 0 || h == 0 || w == 0 || h0 > 64 || w0 > 64 || h > 64 || w > 64 {
			return
		}
		ds, err := Synthetic(SyntheticConfig{Examples: 2, Channels: 1, Height: int(h0), Width: int(w0), Classes: 3, Segmentation: c%2 == 0})
		if err != nil {
			t.Fatal(err)
		}
		l, err := NewLoader(ds, Options{BatchSize: 2, Epochs: 1, Channels: int(c%4) + 1, Height: int(h), Width: int(w),
			RandomCrop: int(crop % 16), Flip: flip})
		if err != nil {
			return // e.g. two channels from a one-channel source is refused
		}
		defer l.Close()
		b, err := l.Next()
		if err != nil {
			t.Fatal(err)
		}
		if got := b.X.Shape(); got[2] != int(h) || got[3] != int(w) {
			t.Fatalf("shape %v", got)
		}
	})
}

func FuzzSpec(f *testing.F) {
	for _, s := range []string{"n=4,c=1,h=2,w=2", "seg,classes=3", "seed=-9", "n=1,c=1,h=1,w=1,classes=1,seg=1", "h=99999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		ds, err := Open("synthetic:"+arg, WithExamples(2), WithShape(1, 4, 4))
		if err != nil {
			return
		}
		info := ds.Info()
		if int64(info.Channels)*int64(info.Height)*int64(info.Width) > 1<<16 {
			return // valid but too big to decode quickly inside the fuzzer
		}
		if _, err := ds.Load(info.Examples - 1); err != nil {
			t.Fatal(err)
		}
	})
}
