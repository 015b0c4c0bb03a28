package datasets

import (
	"image"
	"image/color"
	"path/filepath"
	"testing"

	"gorgonia.org/tensor"
)

// segTree writes n pairs of 8x6 images: a.jpg/png with palette masks whose
// rectangle class is i%3+1.
func segTree(t *testing.T, root string, n int) {
	t.Helper()
	names := []string{"a", "b", "c", "d", "e", "f"}
	for i := 0; i < n; i++ {
		img := rgbImage(8, 6, color.NRGBA{uint8(40 * i), 100, 200, 255})
		if i%2 == 0 {
			writeFile(t, filepath.Join(root, "images", names[i]+".png"), pngBytes(t, img))
		} else {
			writeFile(t, filepath.Join(root, "images", names[i]+".jpg"), jpegBytes(t, img))
		}
		m := palettedMask(8, 6, image.Rect(0, 0, 2+i, 3), uint8(i%3+1))
		writeFile(t, filepath.Join(root, "masks", names[i]+".png"), pngBytes(t, m))
	}
}

func TestSegmentation(t *testing.T) {
	dir := t.TempDir()
	segTree(t, dir, 4)
	ds, err := Segmentation(dir, Train, 0)
	if err != nil {
		t.Fatal(err)
	}
	info := ds.Info()
	if info.Examples != 4 || info.Classes != 4 || !info.Segmentation || info.Height != 6 || info.Width != 8 || info.Channels != 3 {
		t.Fatalf("info %+v", info)
	}
	ex, err := ds.Load(1) // b: rectangle 3x3 of class 2
	if err != nil {
		t.Fatal(err)
	}
	if ex.Label != -1 || ex.Mask[0] != 2 || ex.Mask[2] != 2 || ex.Mask[3] != 0 || ex.Mask[3*8] != 0 {
		t.Errorf("mask %v", ex.Mask)
	}

	l, err := NewLoader(ds, Options{BatchSize: 4, Epochs: 1, Dtype: tensor.Float64, Flip: true, RandomCrop: 1, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	b, err := l.Next()
	if err != nil {
		t.Fatal(err)
	}
	if s := b.Y.Shape(); s[0] != 4 || s[1] != 4 || s[2] != 6 || s[3] != 8 {
		t.Fatalf("Y shape %v", s)
	}
	if len(b.Labels) != 4*48 {
		t.Fatalf("%d labels", len(b.Labels))
	}
	// The one-hot and the indices agree pixel by pixel, after augmentation.
	y := b.Y.Data().([]float64)
	for n := 0; n < 4; n++ {
		for p := 0; p < 48; p++ {
			for k := 0; k < 4; k++ {
				want := 0.0
				if b.Labels[n*48+p] == k {
					want = 1
				}
				if y[(n*4+k)*48+p] != want {
					t.Fatalf("Y[%d,%d,pixel %d] = %v, label %d", n, k, p, y[(n*4+k)*48+p], b.Labels[n*48+p])
				}
			}
		}
	}

	// classes.txt names the classes; an explicit count wins over both.
	writeFile(t, filepath.Join(dir, "classes.txt"), []byte("bg\nred\ngreen\nblue\nextra\n"))
	ds, _ = Segmentation(dir, Train, 0)
	if i := ds.Info(); i.Classes != 5 || i.ClassNames[4] != "extra" {
		t.Errorf("classes.txt: %+v", i)
	}
	ds, _ = Segmentation(dir, Train, 7)
	if c := ds.Info().Classes; c != 7 {
		t.Errorf("explicit classes: %d", c)
	}
}

func TestSegmentationSplitsAndGray(t *testing.T) {
	dir := t.TempDir()
	segTree(t, filepath.Join(dir, "train"), 2)
	g := image.NewGray(image.Rect(0, 0, 4, 4))
	g.Pix[5] = 1
	writeFile(t, filepath.Join(dir, "test", "images", "x.png"), pngBytes(t, g))
	writeFile(t, filepath.Join(dir, "test", "masks", "x.png"), pngBytes(t, g))
	ds, err := Segmentation(dir, Test, 0)
	if err != nil {
		t.Fatal(err)
	}
	if i := ds.Info(); i.Examples != 1 || i.Channels != 1 || i.Classes != 2 {
		t.Errorf("test split %+v", i)
	}
	if ds, err := Segmentation(dir, Train, 0); err != nil || ds.Info().Examples != 2 {
		t.Errorf("train split: %v", err)
	}
}

func TestSegmentationErrors(t *testing.T) {
	img := pngBytes(t, rgbImage(4, 4, color.White))
	mask := pngBytes(t, palettedMask(4, 4, image.Rect(0, 0, 1, 1), 3))
	cases := []struct {
		name    string
		files   map[string][]byte
		classes int
		load    bool
		want    []string
	}{
		{"no masks dir", map[string][]byte{"images/a.png": img}, 0, false, []string{"missing directory", "masks"}},
		{"no mask", map[string][]byte{"images/a.png": img, "images/b.png": img, "masks/a.png": mask}, 0, false,
			[]string{filepath.Join("images", "b.png"), "has no mask", filepath.Join("masks", "b.png")}},
		{"orphan mask", map[string][]byte{"images/a.png": img, "masks/a.png": mask, "masks/z.png": mask}, 0, false,
			[]string{filepath.Join("masks", "z.png"), "has no image"}},
		{"jpeg mask", map[string][]byte{"images/a.png": img, "masks/a.jpg": jpegBytes(t, rgbImage(4, 4, color.Black))}, 0, false,
			[]string{"a.jpg", "must be PNG"}},
		{"duplicate", map[string][]byte{"images/a.png": img, "images/a.jpg": jpegBytes(t, rgbImage(4, 4, color.Black)), "masks/a.png": mask}, 0, false,
			[]string{"same name"}},
		{"size mismatch", map[string][]byte{"images/a.png": img, "masks/a.png": pngBytes(t, palettedMask(5, 4, image.Rect(0, 0, 1, 1), 1))}, 0, false,
			[]string{filepath.Join("masks", "a.png"), "entry 0", "mask is 5x4 but image"}},
		{"colour mask", map[string][]byte{"images/a.png": img, "masks/a.png": pngBytes(t, rgbImage(4, 4, color.NRGBA{1, 2, 3, 255}))}, 0, false,
			[]string{filepath.Join("masks", "a.png"), "entry 0", "pixel (0,0) has colour (1,2,3)"}},
		{"class range", map[string][]byte{"images/a.png": img, "masks/a.png": mask}, 2, true,
			[]string{filepath.Join("masks", "a.png"), "entry 0", "pixel (0,0) has class 3, want 0..1"}},
		{"corrupt mask", map[string][]byte{"images/a.png": img, "masks/a.png": mask[:len(mask)-15]}, 2, true,
			[]string{filepath.Join("masks", "a.png"), "entry 0", "bad image data"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for n, d := range tc.files {
				writeFile(t, filepath.Join(dir, filepath.FromSlash(n)), d)
			}
			ds, err := Segmentation(dir, Train, tc.classes)
			if !tc.load {
				wantErr(t, err, tc.want...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = ds.Load(0)
			wantErr(t, err, tc.want...)
		})
	}
}
