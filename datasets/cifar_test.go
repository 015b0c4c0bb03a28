package datasets

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// cifarTree writes the six standard files with small record counts.
func cifarTree(t *testing.T, dir string) {
	t.Helper()
	for i, n := range CIFAR10TrainFiles {
		labels := []byte{byte(i), byte(i + 1), 9}
		writeFile(t, filepath.Join(dir, n), cifarBytes(labels...))
	}
	writeFile(t, filepath.Join(dir, CIFAR10TestFile), cifarBytes(3, 4))
}

func TestCIFAR10(t *testing.T) {
	dir := t.TempDir()
	cifarTree(t, dir)
	train, err := CIFAR10(dir, Train)
	if err != nil {
		t.Fatal(err)
	}
	info := train.Info()
	if info.Examples != 15 || info.Classes != 10 || info.Channels != 3 || info.Height != 32 || info.Width != 32 {
		t.Fatalf("info %+v", info)
	}
	if info.ClassNames[0] != "airplane" || len(info.ClassNames) != 10 {
		t.Errorf("class names %v", info.ClassNames)
	}
	// Example 4 is record 1 of data_batch_2.bin: label 2, pixel k = byte(31+k).
	ex, err := train.Load(4)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Label != 2 || ex.Image[0] != lut8[31] || ex.Image[1024] != lut8[(31+1024)%256] {
		t.Errorf("example 4: label %d, pixels %v %v", ex.Label, ex.Image[0], ex.Image[1024])
	}
	test, err := CIFAR10(dir, Test)
	if err != nil {
		t.Fatal(err)
	}
	if n := test.Info().Examples; n != 2 {
		t.Errorf("test examples %d", n)
	}
	if _, err := train.Load(15); err == nil {
		t.Error("Load past the end: no error")
	}

	// The archive extracts to cifar-10-batches-bin/; its parent must work too.
	parent := t.TempDir()
	cifarTree(t, filepath.Join(parent, "cifar-10-batches-bin"))
	if _, err := CIFAR10(parent, Test); err != nil {
		t.Errorf("parent directory: %v", err)
	}
	// batches.meta.txt names override the built-in ones.
	names := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n"
	writeFile(t, filepath.Join(dir, "batches.meta.txt"), []byte(names))
	test, _ = CIFAR10(dir, Test)
	if got := test.Info().ClassNames[9]; got != "j" {
		t.Errorf("meta names: %q", got)
	}
}

func TestCIFAR10Errors(t *testing.T) {
	good := cifarBytes(1, 2, 3)
	cases := []struct {
		name string
		data []byte // nil: file absent
		want []string
	}{
		{"missing", nil, []string{"test_batch.bin", "missing file"}},
		{"empty", []byte{}, []string{"test_batch.bin", "offset 0", "empty file"}},
		{"truncated", good[:2*cifarRecord+100], []string{"test_batch.bin", "offset 6146", "entry 2", "truncated record: 100 of 3073 bytes"}},
		{"one byte", good[:1], []string{"offset 0", "entry 0", "truncated record: 1 of 3073"}},
		{"bad label", append(append([]byte{}, good[:cifarRecord]...), append([]byte{10}, good[1:cifarRecord]...)...),
			[]string{"test_batch.bin", "offset 3073", "entry 1", "label 10 out of range 0..9"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.data != nil {
				writeFile(t, filepath.Join(dir, CIFAR10TestFile), tc.data)
			}
			_, err := CIFAR10(dir, Test)
			wantErr(t, err, tc.want...)
			if tc.data == nil && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("missing file error does not wrap fs.ErrNotExist: %v", err)
			}
			var fe *FormatError
			if tc.data != nil && !errors.As(err, &fe) {
				t.Errorf("corrupt file error is not a *FormatError: %T", err)
			}
		})
	}
	// A missing training batch is named, not just "some file".
	dir := t.TempDir()
	cifarTree(t, dir)
	os.Remove(filepath.Join(dir, "data_batch_3.bin"))
	_, err := CIFAR10(dir, Train)
	wantErr(t, err, filepath.Join(dir, "data_batch_3.bin"))
}
