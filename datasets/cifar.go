package datasets

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// CIFAR-10 binary layout: each record is one label byte followed by a 32x32
// image stored as three planes (R, G, B) of 1024 bytes, i.e. already CHW.
const (
	cifarSide    = 32
	cifarPixels  = 3 * cifarSide * cifarSide
	cifarRecord  = 1 + cifarPixels
	cifarClasses = 10
)

// CIFAR10ClassNames is the order of the labels in the binary files.
var CIFAR10ClassNames = []string{"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"}

// CIFAR10TrainFiles and CIFAR10TestFile are the names inside cifar-10-batches-bin/.
var (
	CIFAR10TrainFiles = []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"}
	CIFAR10TestFile   = "test_batch.bin"
)

type cifar struct {
	info  Info
	files []string
	data  [][]byte // validated records per file
	first []int    // index of each file's first example
}

// CIFAR10 reads the binary version of CIFAR-10 from dir (the extracted
// cifar-10-batches-bin directory, or its parent). The files are validated and
// held in memory (150 MB for the training split), which costs less than
// re-reading them every epoch.
func CIFAR10(dir string, split Split) (Dataset, error) {
	if sub := filepath.Join(dir, "cifar-10-batches-bin"); isDir(sub) {
		dir = sub
	}
	var names []string
	switch split {
	case Train:
		names = CIFAR10TrainFiles
	case Test:
		names = []string{CIFAR10TestFile}
	default:
		return nil, fmt.Errorf("datasets: cifar10: unknown split %v", split)
	}
	paths := make([]string, len(names))
	for i, n := range names {
		paths[i] = filepath.Join(dir, n)
	}
	ds, err := CIFAR10Files(paths...)
	if err != nil {
		return nil, err
	}
	c := ds.(*cifar)
	c.info.Split = split
	c.info.Dir = dir
	if names, ok := readCIFARMeta(filepath.Join(dir, "batches.meta.txt")); ok {
		c.info.ClassNames = names
	}
	return c, nil
}

// CIFAR10Files reads the given CIFAR-10 binary files in order, for layouts that
// do not use the standard names.
func CIFAR10Files(paths ...string) (Dataset, error) {
	if len(paths) == 0 {
		return nil, errors.New("datasets: cifar10: no files given")
	}
	c := &cifar{info: Info{Name: "cifar10", Classes: cifarClasses, Channels: 3, Height: cifarSide, Width: cifarSide,
		ClassNames: CIFAR10ClassNames,
		Mean:       []float64{0.4914, 0.4822, 0.4465},
		Std:        []float64{0.2470, 0.2435, 0.2616}}}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("datasets: cifar10: missing file %s (the binary version, cifar-10-binary.tar.gz): %w", p, err)
			}
			return nil, fmt.Errorf("datasets: cifar10: %w", err)
		}
		if err := c.add(p, data); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *cifar) add(name string, data []byte) error {
	n, err := parseCIFAR(name, data)
	if err != nil {
		return err
	}
	c.files = append(c.files, name)
	c.data = append(c.data, data)
	c.first = append(c.first, c.info.Examples)
	c.info.Examples += n
	return nil
}

// parseCIFAR validates a whole file up front so that training never stops
// half-way through an epoch on a bad record; it returns the record count.
func parseCIFAR(name string, data []byte) (int, error) {
	if len(data) == 0 {
		return 0, formatErr(name, 0, -1, "empty file, want records of %d bytes", cifarRecord)
	}
	n := len(data) / cifarRecord
	if rem := len(data) % cifarRecord; rem != 0 {
		return 0, formatErr(name, int64(n*cifarRecord), n, "truncated record: %d of %d bytes", rem, cifarRecord)
	}
	for i := 0; i < n; i++ {
		if l := data[i*cifarRecord]; l >= cifarClasses {
			return 0, formatErr(name, int64(i*cifarRecord), i, "label %d out of range 0..%d", l, cifarClasses-1)
		}
	}
	return n, nil
}

func (c *cifar) Info() Info { return c.info }

func (c *cifar) Load(i int) (Example, error) {
	if err := checkIndex("cifar10", i, c.info.Examples); err != nil {
		return Example{}, err
	}
	f := sort.Search(len(c.first), func(k int) bool { return c.first[k] > i }) - 1
	rec := c.data[f][(i-c.first[f])*cifarRecord:][:cifarRecord]
	pix := make([]float32, cifarPixels)
	for k, v := range rec[1:] {
		pix[k] = lut8[v]
	}
	return Example{Image: pix, Channels: 3, Height: cifarSide, Width: cifarSide, Label: int(rec[0])}, nil
}

// readCIFARMeta picks up the class names shipped beside the batches, so a
// relabelled variant in the same format shows its own names.
func readCIFARMeta(path string) ([]string, bool) {
	names, ok := readLines(path)
	if !ok || len(names) != cifarClasses {
		return nil, false
	}
	return names, true
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
