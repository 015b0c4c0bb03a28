package datasets

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestIDXLayouts(t *testing.T) {
	for _, compress := range []bool{false, true} {
		dir := t.TempDir()
		mnistDir(t, dir, compress, 23, 7, 5, 4)
		for _, tc := range []struct {
			split Split
			n     int
		}{{Train, 23}, {Test, 7}} {
			ds, err := MNIST(dir, tc.split)
			if err != nil {
				t.Fatalf("gz=%v %v: %v", compress, tc.split, err)
			}
			info := ds.Info()
			if info.Examples != tc.n || info.Height != 5 || info.Width != 4 || info.Channels != 1 || info.Classes != 10 || info.Split != tc.split {
				t.Errorf("gz=%v: info %+v", compress, info)
			}
			ex, err := ds.Load(3)
			if err != nil {
				t.Fatal(err)
			}
			if ex.Label != 3 || ex.Image[0] != lut8[30] || ex.Image[1] != lut8[31] {
				t.Errorf("gz=%v: example 3: label %d pixels %v", compress, ex.Label, ex.Image[:2])
			}
		}
	}
	// Some mirrors use dots ("train-images.idx3-ubyte"); the generic IDX opener
	// takes any names and counts classes from the labels.
	dir := t.TempDir()
	mnistDir(t, dir, false, 12, 3, 2, 2)
	for _, f := range []string{"train-images-idx3-ubyte", "train-labels-idx1-ubyte"} {
		if err := os.Rename(filepath.Join(dir, f), filepath.Join(dir, strings.Replace(f, "-idx", ".idx", 1))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := MNIST(dir, Train); err != nil {
		t.Errorf("dotted names: %v", err)
	}
	ds, err := IDX(filepath.Join(dir, "t10k-images-idx3-ubyte"), filepath.Join(dir, "t10k-labels-idx1-ubyte"))
	if err != nil {
		t.Fatal(err)
	}
	if c := ds.Info().Classes; c != 3 {
		t.Errorf("IDX classes %d, want 3 (labels 0..2)", c)
	}
}

func TestIDXErrors(t *testing.T) {
	pix := make([]byte, 3*4*4)
	images := idxBytes([]int{3, 4, 4}, pix)
	labels := idxBytes([]int{3}, []byte{1, 2, 3})
	bad := func(b []byte, i int, v byte) []byte {
		c := append([]byte(nil), b...)
		c[i] = v
		return c
	}
	cases := []struct {
		name           string
		images, labels []byte
		want           []string
	}{
		{"bad magic", bad(images, 0, 1), labels, []string{"t10k-images-idx3-ubyte", "offset 0", "bad IDX magic 01 00 08 03"}},
		{"wrong type", bad(images, 2, 0x0d), labels, []string{"offset 2", "data type 0x0d"}},
		{"wrong dims", bad(images, 3, 2), labels, []string{"offset 3", "2 dimensions, want 3"}},
		{"labels as images", labels, labels, []string{"t10k-images-idx3-ubyte", "offset 3", "1 dimensions, want 3"}},
		{"short magic", images[:3], labels, []string{"offset 3", "short read in IDX magic"}},
		{"short header", images[:10], labels, []string{"offset 10", "short read in IDX dimensions: 6 of 12"}},
		{"truncated pixels", images[:16+20], labels, []string{"t10k-images-idx3-ubyte", "offset 36", "entry 1", "truncated: 20 of 48 data bytes"}},
		{"trailing", append(append([]byte(nil), images...), 7, 7), labels, []string{"offset 64", "2 trailing bytes"}},
		{"zero rows", idxBytes([]int{3, 0, 4}, nil), labels, []string{"offset 8", "dimension 1 is zero"}},
		{"huge", idxBytes([]int{1 << 30, 1 << 30, 4}, nil), labels, []string{"offset 8", "claim more than"}},
		{"no images", idxBytes([]int{0, 4, 4}, nil), idxBytes([]int{0}, nil), []string{"offset 4", "no images"}},
		{"count mismatch", images, idxBytes([]int{2}, []byte{1, 2}), []string{"t10k-labels-idx1-ubyte", "offset 4", "2 labels, but", "has 3 images"}},
		{"label range", images, idxBytes([]int{3}, []byte{1, 10, 3}), []string{"t10k-labels-idx1-ubyte", "offset 9", "entry 1", "label 10 out of range 0..9"}},
		{"truncated labels", images, labels[:10], []string{"t10k-labels-idx1-ubyte", "offset 10", "entry 2", "truncated: 2 of 3"}},
		{"gz truncated", gz(images)[:30], labels, []string{"t10k-images-idx3-ubyte.gz", "decompressed offset"}},
		{"gz short data", gz(images[:40]), labels, []string{"t10k-images-idx3-ubyte.gz", "decompressed offset 40", "entry 1", "truncated: 24 of 48"}},
		{"gz bad crc", bad(gz(images), len(gz(images))-6, 0xff), labels, []string{"decompressed offset 64", "bad gzip trailer"}},
		{"gz header", []byte{0x1f, 0x8b, 1}, labels, []string{"offset 0", "bad gzip header"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			iname := "t10k-images-idx3-ubyte"
			if len(tc.images) > 1 && tc.images[0] == 0x1f && tc.images[1] == 0x8b {
				iname += ".gz"
			}
			writeFile(t, filepath.Join(dir, iname), tc.images)
			writeFile(t, filepath.Join(dir, "t10k-labels-idx1-ubyte"), tc.labels)
			_, err := FashionMNIST(dir, Test)
			wantErr(t, err, tc.want...)
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Errorf("%T is not a *FormatError", err)
			}
		})
	}
}

func TestFashionMNISTMissing(t *testing.T) {
	dir := t.TempDir()
	_, err := FashionMNIST(dir, Train)
	wantErr(t, err, filepath.Join(dir, "train-images-idx3-ubyte.gz"), "apt-get install -y dataset-fashion-mnist")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("does not wrap fs.ErrNotExist: %v", err)
	}
	mnistDir(t, dir, true, 2, 2, 2, 2)
	os.Remove(filepath.Join(dir, "t10k-labels-idx1-ubyte.gz"))
	_, err = FashionMNIST(dir, Test)
	wantErr(t, err, "t10k-labels-idx1-ubyte.gz", "apt-get install")
	_, err = MNIST(dir, Test)
	wantErr(t, err, "t10k-labels-idx1-ubyte.gz")
	if strings.Contains(err.Error(), "apt-get") {
		t.Errorf("MNIST error suggests the Fashion-MNIST package: %v", err)
	}
}

// TestFashionMNISTReal reads Debian's copy of the real data, when installed.
func TestFashionMNISTReal(t *testing.T) {
	dir := DefaultFashionMNISTDir
	if _, _, err := IDXFiles(dir, Train); err != nil {
		t.Skipf("Fashion-MNIST not installed in %s; run: %s", dir, FashionMNISTInstall)
	}
	for _, tc := range []struct {
		split  Split
		n      int
		labels []int
	}{{Test, 10000, []int{9, 2, 1, 1}}, {Train, 60000, []int{9, 0, 0, 3}}} {
		if tc.split == Train && (raceEnabled || testing.Short()) {
			t.Log("training split skipped under -race or -short: the test split exercised the same code")
			continue
		}
		ds, err := Open("fashion-mnist", WithSplit(tc.split))
		if err != nil {
			t.Fatal(err)
		}
		info := ds.Info()
		if info.Examples != tc.n || info.Height != 28 || info.Width != 28 || info.Classes != 10 || info.ClassNames[9] != "Ankle boot" {
			t.Fatalf("%v: info %+v", tc.split, info)
		}
		l, err := NewLoader(ds, Options{BatchSize: 4, Mean: info.Mean, Std: info.Std, Epochs: 1})
		if err != nil {
			t.Fatal(err)
		}
		b, err := l.Next()
		l.Close()
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range tc.labels {
			if b.Labels[i] != want {
				t.Errorf("%v: label %d = %d, want %d", tc.split, i, b.Labels[i], want)
			}
		}
	}
}
