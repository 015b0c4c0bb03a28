package datasets

import (
	"image"
	"image/color"
	"path/filepath"
	"testing"
)

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	cifarTree(t, filepath.Join(dir, "cifar"))
	mnistDir(t, filepath.Join(dir, "mnist"), true, 6, 4, 3, 3)
	writeFile(t, filepath.Join(dir, "folder", "a", "1.png"), pngBytes(t, rgbImage(3, 3, color.White)))
	writeFile(t, filepath.Join(dir, "seg", "images", "1.png"), pngBytes(t, rgbImage(3, 3, color.White)))
	writeFile(t, filepath.Join(dir, "seg", "masks", "1.png"), pngBytes(t, palettedMask(3, 3, image.Rect(0, 0, 1, 1), 1)))

	cases := []struct {
		spec string
		opts []OpenOption
		want Info // only the fields compared below
	}{
		{"synthetic", nil, Info{Name: "synthetic", Examples: 1024, Classes: 10, Channels: 3, Height: 32, Width: 32}},
		{"synthetic", []OpenOption{WithSplit(Test)}, Info{Name: "synthetic", Split: Test, Examples: 256, Classes: 10, Channels: 3, Height: 32, Width: 32}},
		{"synthetic", []OpenOption{WithShape(1, 28, 20), WithClasses(4), WithExamples(9), WithSeed(3)},
			Info{Name: "synthetic", Examples: 9, Classes: 4, Channels: 1, Height: 28, Width: 20}},
		{"synthetic:n=5,c=1,h=4,w=6,classes=3,seed=-2", []OpenOption{WithShape(3, 9, 9)},
			Info{Name: "synthetic", Examples: 5, Classes: 3, Channels: 1, Height: 4, Width: 6}},
		{"synthetic:seg", nil, Info{Name: "synthetic", Examples: 1024, Classes: 2, Channels: 3, Height: 32, Width: 32, Segmentation: true}},
		{"synthetic:seg=true,classes=5", []OpenOption{WithSegmentation(false)}, Info{Name: "synthetic", Examples: 1024, Classes: 5, Channels: 3, Height: 32, Width: 32, Segmentation: true}},
		{"synthetic", []OpenOption{WithSegmentation(true)}, Info{Name: "synthetic", Examples: 1024, Classes: 2, Channels: 3, Height: 32, Width: 32, Segmentation: true}},
		{"cifar10:" + filepath.Join(dir, "cifar"), []OpenOption{WithSplit(Test)}, Info{Name: "cifar10", Split: Test, Examples: 2, Classes: 10, Channels: 3, Height: 32, Width: 32}},
		{"mnist:" + filepath.Join(dir, "mnist"), nil, Info{Name: "mnist", Examples: 6, Classes: 10, Channels: 1, Height: 3, Width: 3}},
		{"fashion-mnist:" + filepath.Join(dir, "mnist"), []OpenOption{WithSplit(Test)}, Info{Name: "fashion-mnist", Split: Test, Examples: 4, Classes: 10, Channels: 1, Height: 3, Width: 3}},
		{"folder:" + filepath.Join(dir, "folder"), nil, Info{Name: "folder", Examples: 1, Classes: 1, Channels: 3, Height: 3, Width: 3}},
		{"seg:" + filepath.Join(dir, "seg"), nil, Info{Name: "seg", Examples: 1, Classes: 2, Channels: 3, Height: 3, Width: 3, Segmentation: true}},
		{"seg:" + filepath.Join(dir, "seg"), []OpenOption{WithClasses(6)}, Info{Name: "seg", Examples: 1, Classes: 6, Channels: 3, Height: 3, Width: 3, Segmentation: true}},
	}
	for _, tc := range cases {
		ds, err := Open(tc.spec, tc.opts...)
		if err != nil {
			t.Errorf("%s: %v", tc.spec, err)
			continue
		}
		got := ds.Info()
		w := tc.want
		if got.Name != w.Name || got.Split != w.Split || got.Examples != w.Examples || got.Classes != w.Classes ||
			got.Channels != w.Channels || got.Height != w.Height || got.Width != w.Width || got.Segmentation != w.Segmentation {
			t.Errorf("%s: info %+v, want %+v", tc.spec, got, w)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	cases := []struct{ spec, want string }{
		{"", "unknown dataset spec"},
		{"imagenet:/x", "unknown dataset spec \"imagenet:/x\""},
		{"cifar10", "needs a directory: cifar10:DIR"},
		{"folder:", "needs a directory"},
		{"seg", "needs a directory"},
		{"mnist", "needs a directory"},
		{"cifar10:/nonexistent", "/nonexistent/data_batch_1.bin"},
		{"fashion-mnist:/nonexistent", "apt-get install -y dataset-fashion-mnist"},
		{"synthetic:n=x", "n=\"x\" is not an integer"},
		{"synthetic:n", "\"n\" is not key=value"},
		{"synthetic:depth=3", "unknown key \"depth\""},
		{"synthetic:seg=maybe", "not a boolean"},
		{"synthetic:h=-4", "h=-4 out of range"},
		{"synthetic:h=70000,w=70000", "too large"},
	}
	for _, tc := range cases {
		_, err := Open(tc.spec)
		wantErr(t, err, tc.want)
	}
}

func TestParseSplit(t *testing.T) {
	for in, want := range map[string]Split{"train": Train, "TEST": Test, "t10k": Test, "val": Test} {
		if got, err := ParseSplit(in); err != nil || got != want {
			t.Errorf("ParseSplit(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseSplit("dev"); err == nil {
		t.Error("ParseSplit(dev): no error")
	}
	if Split(7).String() != "Split(7)" || Test.String() != "test" {
		t.Error("Split.String")
	}
}
