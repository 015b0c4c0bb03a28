package datasets

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"path/filepath"
	"testing"
)

func TestImageFolder(t *testing.T) {
	dir := t.TempDir()
	red, blue := color.NRGBA{255, 0, 0, 255}, color.NRGBA{0, 0, 255, 255}
	gray := image.NewGray(image.Rect(0, 0, 8, 6))
	for i := range gray.Pix {
		gray.Pix[i] = 128
	}
	writeFile(t, filepath.Join(dir, "zebra", "a.png"), pngBytes(t, rgbImage(8, 6, red)))
	writeFile(t, filepath.Join(dir, "zebra", "b.JPG"), jpegBytes(t, rgbImage(8, 6, blue)))
	writeFile(t, filepath.Join(dir, "zebra", "notes.txt"), []byte("ignored"))
	writeFile(t, filepath.Join(dir, "zebra", ".hidden.png"), []byte("ignored"))
	writeFile(t, filepath.Join(dir, "apple", "deep", "g.png"), pngBytes(t, gray))
	writeFile(t, filepath.Join(dir, "empty", ".keep"), nil)
	ds, err := ImageFolder(dir, Train)
	if err != nil {
		t.Fatal(err)
	}
	info := ds.Info()
	wantNames := []string{"apple", "empty", "zebra"}
	if info.Examples != 3 || info.Classes != 3 || info.Channels != 3 || info.Height != 6 || info.Width != 8 {
		t.Fatalf("info %+v", info)
	}
	for i, n := range wantNames {
		if info.ClassNames[i] != n {
			t.Errorf("class %d = %q, want %q", i, info.ClassNames[i], n)
		}
	}
	cases := []struct {
		i, label, c int
		rgb         [3]float32 // first pixel
		tol         float32
	}{
		{0, 0, 1, [3]float32{lut8[128]}, 0},
		{1, 2, 3, [3]float32{1, 0, 0}, 0},
		{2, 2, 3, [3]float32{0, 0, 1}, 0.05}, // JPEG is lossy
	}
	for _, tc := range cases {
		ex, err := ds.Load(tc.i)
		if err != nil {
			t.Fatal(err)
		}
		if ex.Label != tc.label || ex.Channels != tc.c {
			t.Errorf("example %d: label %d channels %d", tc.i, ex.Label, ex.Channels)
		}
		for c := 0; c < tc.c; c++ {
			if d := ex.Image[c*48] - tc.rgb[c]; d > tc.tol || d < -tc.tol {
				t.Errorf("example %d channel %d = %v, want %v", tc.i, c, ex.Image[c*48], tc.rgb[c])
			}
		}
	}
	// The gray image is replicated to the three channels the folder reports.
	l, err := NewLoader(ds, Options{BatchSize: 3, Epochs: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	b, err := l.Next()
	if err != nil {
		t.Fatal(err)
	}
	x := b.X.Data().([]float32)
	if x[0] != lut8[128] || x[48] != lut8[128] || x[96] != lut8[128] {
		t.Errorf("gray replicated: %v %v %v", x[0], x[48], x[96])
	}
}

func TestImageFolderSizesAndSplits(t *testing.T) {
	dir := t.TempDir()
	for _, s := range []string{"train", "test"} {
		writeFile(t, filepath.Join(dir, s, "a", "1.png"), pngBytes(t, rgbImage(10, 20, color.White)))
		writeFile(t, filepath.Join(dir, s, "b", "2.png"), pngBytes(t, rgbImage(30, 15, color.White)))
	}
	writeFile(t, filepath.Join(dir, "test", "b", "3.png"), pngBytes(t, rgbImage(30, 15, color.White)))
	ds, err := ImageFolder(dir, Test)
	if err != nil {
		t.Fatal(err)
	}
	if info := ds.Info(); info.Examples != 3 || info.Height != 0 || info.Width != 0 {
		t.Fatalf("mixed sizes: info %+v", info)
	}
	if _, err := NewLoader(ds, Options{BatchSize: 2}); err == nil {
		t.Error("loader without a size over mixed-size images: no error")
	}
	l, err := NewLoader(ds, Options{BatchSize: 2, Height: 8, Width: 8, Epochs: 1, Last: DropLast})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	b, err := l.Next()
	if err != nil {
		t.Fatal(err)
	}
	if s := b.X.Shape(); s[0] != 2 || s[1] != 3 || s[2] != 8 || s[3] != 8 {
		t.Errorf("shape %v", s)
	}
	for _, v := range b.X.Data().([]float32) {
		if v < 0.999 || v > 1.001 {
			t.Fatalf("resized white image has value %v", v)
		}
	}
	if _, err := l.Next(); err == nil {
		t.Error("DropLast: a second batch of 3 examples")
	}
	// A plain folder has no test split, which callers can detect.
	plain := filepath.Join(dir, "train")
	if _, err := ImageFolder(plain, Test); !errors.Is(err, ErrNoSplit) {
		t.Errorf("plain folder, test split: %v", err)
	}
}

func TestImageFolderErrors(t *testing.T) {
	good := pngBytes(t, rgbImage(4, 4, color.White))
	cases := []struct {
		name  string
		files map[string][]byte
		load  bool // error only when the pixels are decoded
		want  []string
	}{
		{"no classes", map[string][]byte{"x.png": good}, false, []string{"no class sub-directories"}},
		{"no images", map[string][]byte{"a/x.txt": good}, false, []string{"no .png, .jpg or .jpeg files"}},
		{"garbage", map[string][]byte{"a/1.png": good, "b/2.png": []byte("not a png at all")}, false,
			[]string{filepath.Join("b", "2.png"), "entry 1", "bad image header"}},
		{"huge header", map[string][]byte{"a/1.png": hugePNGHeader()}, false, []string{"1.png", "entry 0", "outside 1.."}},
		{"truncated body", map[string][]byte{"a/1.png": good, "a/2.png": good[:len(good)-20]}, true,
			[]string{filepath.Join("a", "2.png"), "entry 1", "bad image data"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for n, d := range tc.files {
				writeFile(t, filepath.Join(dir, n), d)
			}
			ds, err := ImageFolder(dir, Train)
			if tc.load {
				if err != nil {
					t.Fatal(err)
				}
				l, err := NewLoader(ds, Options{BatchSize: 2})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				_, err = l.Next()
				wantErr(t, err, tc.want...)
				_, err2 := l.Next()
				if err2 != err {
					t.Errorf("second Next: %v, want the same error", err2)
				}
				return
			}
			wantErr(t, err, tc.want...)
		})
	}
}

// hugePNGHeader is a valid PNG signature and IHDR claiming 1e5 x 1e5 pixels.
func hugePNGHeader() []byte {
	img := pngBytesNoT(rgbImage(1, 1, color.White))
	// IHDR width and height live at bytes 16..23, its CRC (over type and data) at 29..32.
	copy(img[16:24], []byte{0, 1, 0x86, 0xa0, 0, 1, 0x86, 0xa0})
	binary.BigEndian.PutUint32(img[29:33], crc32.ChecksumIEEE(img[12:29]))
	return img
}
