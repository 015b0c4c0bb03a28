package datasets

import (
	"errors"
	"image"
	"image/color"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gorgonia.org/tensor"
)

// cityscapesTree writes n label-map/image pairs of 8x4 pixels in Pix2PixHD's layout, named as
// Cityscapes names them; the label map of pair i is class 7+i on its left half, 0 elsewhere.
func cityscapesTree(t *testing.T, dir, split string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		stem := "aachen_00000" + string(rune('0'+i)) + "_000019"
		img := rgbImage(8, 4, color.NRGBA{uint8(60 * i), 128, 255, 255})
		writeFile(t, filepath.Join(dir, split+"_img", stem+"_leftImg8bit.png"), pngBytes(t, img))
		m := image.NewGray(image.Rect(0, 0, 8, 4))
		for y := 0; y < 4; y++ {
			for x := 0; x < 4; x++ {
				m.SetGray(x, y, color.Gray{Y: uint8(7 + i)})
			}
		}
		writeFile(t, filepath.Join(dir, split+"_label", stem+"_gtFine_labelIds.png"), pngBytes(t, m))
	}
}

func TestCityscapes(t *testing.T) {
	dir := t.TempDir()
	cityscapesTree(t, dir, "train", 3)
	ds, err := Open("cityscapes:" + dir)
	if err != nil {
		t.Fatal(err)
	}
	info := ds.Info()
	if info.Name != "cityscapes" || info.Examples != 3 || info.Classes != CityscapesLabelIDs || !info.Segmentation ||
		info.Height != 4 || info.Width != 8 || info.Channels != 3 {
		t.Fatalf("info %+v", info)
	}
	ex, err := ds.Load(2)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Mask[0] != 9 || ex.Mask[3] != 9 || ex.Mask[4] != 0 || math.Abs(float64(ex.Image[0])-120.0/255) > 1e-6 {
		t.Fatalf("example 2: mask %v, first pixel %v", ex.Mask, ex.Image[0])
	}
	// The loader turns pixels into [-1, 1] with the dataset's statistics and label maps one-hot.
	l, b := firstBatch(t, ds, Options{BatchSize: 2, Epochs: 1, Mean: info.Mean, Std: info.Std, Last: DropLast})
	if !b.X.Shape().Eq(tensor.Shape{2, 3, 4, 8}) || !b.Y.Shape().Eq(tensor.Shape{2, 35, 4, 8}) {
		t.Fatalf("shapes %v %v", b.X.Shape(), b.Y.Shape())
	}
	x := b.X.Data().([]float32)
	if x[0] != -1 || x[2*32] != 1 { // image 0: red 0, blue 255
		t.Fatalf("pixels not mapped to [-1, 1]: red %v, blue %v", x[0], x[2*32])
	}
	y := b.Y.Data().([]float32)
	if y[7*32+0] != 1 || y[0*32+4] != 1 || y[7*32+4] != 0 {
		t.Fatalf("one-hot label map wrong")
	}
	if _, err := l.Next(); err != io.EOF {
		t.Fatalf("want EOF after one full batch, got %v", err)
	}

	// No test split: an error that is also fs.ErrNotExist, so a trainer skips evaluation.
	if _, err := Open("cityscapes:"+dir, WithSplit(Test)); !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, ErrNoSplit) {
		t.Fatalf("test split: %v", err)
	}
	cityscapesTree(t, dir, "test", 1)
	if ds, err := Open("cityscapes:"+dir, WithSplit(Test), WithClasses(20)); err != nil || ds.Info().Examples != 1 || ds.Info().Classes != 20 {
		t.Fatalf("test split: %v", err)
	}
}

func TestCityscapesErrors(t *testing.T) {
	dir := t.TempDir()
	cityscapesTree(t, dir, "train", 2)
	// A label id beyond the classes is reported with file and pixel when loaded.
	ds, err := Cityscapes(dir, Train, 8)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ds.Load(1); err == nil || !strings.Contains(err.Error(), "class 8") || !strings.Contains(err.Error(), "gtFine_labelIds.png") {
		t.Fatalf("want a class error naming the file, got %v", err)
	}
	// An image without its label map.
	writeFile(t, filepath.Join(dir, "train_img", "bonn_000001_leftImg8bit.png"), pngBytes(t, rgbImage(8, 4, color.White)))
	if _, err := Cityscapes(dir, Train, 0); err == nil || !strings.Contains(err.Error(), "bonn_000001") {
		t.Fatalf("want a missing-label error, got %v", err)
	}
	if _, err := Open("cityscapes:" + t.TempDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("empty directory: %v", err)
	}
}

func TestText(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ptb.train.txt"), []byte("the cat sat\nthe dog sat on the mat\n"))
	writeFile(t, filepath.Join(dir, "ptb.valid.txt"), []byte("the cow sat\n"))

	// Words: 3+1 and 6+1 tokens; vocabulary sorted, <unk> last.
	ds, err := Open("text:"+dir+",seq=3,words", WithSplit(Train))
	if err != nil {
		t.Fatal(err)
	}
	info := ds.Info()
	want := []string{"<eos>", "cat", "dog", "mat", "on", "sat", "the", "<unk>"}
	if strings.Join(info.ClassNames, " ") != strings.Join(want, " ") || info.Classes != 8 || info.Examples != (11-1)/3 ||
		info.Height != 1 || info.Width != 3 || info.Channels != 1 || !info.Segmentation {
		t.Fatalf("info %+v", info)
	}
	ex, err := ds.Load(1) // tokens 3..5: <eos> the dog, targets the dog sat
	if err != nil {
		t.Fatal(err)
	}
	if ex.Image[0] != 0 || ex.Image[1] != 6 || ex.Image[2] != 2 || ex.Mask[0] != 6 || ex.Mask[1] != 2 || ex.Mask[2] != 5 {
		t.Fatalf("example 1: %v -> %v", ex.Image, ex.Mask)
	}
	// The test split (valid: no test file) maps unseen words to <unk>.
	ts, err := Open("text:"+dir+",words,seq=2", WithSplit(Test))
	if err != nil {
		t.Fatal(err)
	}
	ex, err = ts.Load(0)
	if err != nil {
		t.Fatal(err)
	}
	if ts.Info().Examples != 1 || ex.Image[0] != 6 || ex.Image[1] != 7 || ex.Mask[1] != 5 {
		t.Fatalf("test example %v -> %v", ex.Image, ex.Mask)
	}

	// Characters, through the loader: X holds the ids unchanged, Y the one-hot next characters.
	file := filepath.Join(dir, "abc.txt")
	writeFile(t, file, []byte("abcabcab"))
	cs, err := Open("text:" + file + ",seq=2")
	if err != nil {
		t.Fatal(err)
	}
	if cs.Info().Classes != 4 || cs.Info().Examples != 3 {
		t.Fatalf("chars info %+v", cs.Info())
	}
	_, b := firstBatch(t, cs, Options{BatchSize: 3, Epochs: 1})
	if !b.X.Shape().Eq(tensor.Shape{3, 1, 1, 2}) || !b.Y.Shape().Eq(tensor.Shape{3, 4, 1, 2}) {
		t.Fatalf("shapes %v %v", b.X.Shape(), b.Y.Shape())
	}
	if got := b.X.Data().([]float32); got[0] != 0 || got[1] != 1 || got[2] != 2 || got[3] != 0 {
		t.Fatalf("ids %v", got)
	}
	if y := b.Y.Data().([]float32); y[1*2+0] != 1 || y[2*2+1] != 1 {
		t.Fatalf("targets %v", y)
	}
	if _, err := Open("text:"+file, WithSplit(Test)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a single file has no test split: %v", err)
	}
}

func TestTextErrors(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short.txt")
	writeFile(t, short, []byte("ab"))
	bad := filepath.Join(dir, "bad.txt")
	writeFile(t, bad, []byte("ok\xffno"))
	for _, c := range []struct{ spec, want string }{
		{"text:" + short + ",seq=2", "fewer than one sequence"},
		{"text:" + short + ",seq=0", "seq="},
		{"text:" + bad, "offset 2"},
		{"text:" + filepath.Join(dir, "missing.txt"), "no such file"},
		{"text:" + dir, "no *train*.txt"},
		{"text:", "needs a directory"},
	} {
		_, err := Open(c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want an error containing %q, got %v", c.spec, c.want, err)
		}
	}
	// A path with a comma that is not an option is part of the path.
	odd := filepath.Join(dir, "a,b.txt")
	if err := os.WriteFile(odd, []byte("abcdefgh"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open("text:" + odd + ",seq=3"); err != nil {
		t.Fatal(err)
	}
}

// firstBatch starts a loader (closed when the test ends) and returns it with its first batch.
func firstBatch(t *testing.T, ds Dataset, opt Options) (*Loader, *Batch) {
	t.Helper()
	l, err := NewLoader(ds, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	b, err := l.Next()
	if err != nil {
		t.Fatal(err)
	}
	return l, b
}
