package datasets

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// DefaultFashionMNISTDir is where Debian's dataset-fashion-mnist package puts
// the four gzip-compressed IDX files.
const DefaultFashionMNISTDir = "/usr/share/datasets/fashion-mnist"

// FashionMNISTInstall is the command that provides DefaultFashionMNISTDir.
const FashionMNISTInstall = "apt-get install -y dataset-fashion-mnist"

// FashionMNISTClassNames is the label order of Fashion-MNIST.
var FashionMNISTClassNames = []string{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"}

// MNISTClassNames are the digits.
var MNISTClassNames = []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}

// IDX header: two zero bytes, a type code, the number of dimensions, then one
// big-endian uint32 per dimension. Only unsigned bytes (0x08) hold images and labels.
const (
	idxUbyte  = 0x08
	idxMaxLen = 1 << 36 // refuses headers whose claimed size is absurd before reading
)

// readIDX reads a plain or gzip-compressed IDX file. Compression is detected
// from the gzip magic bytes, not from the name, so a renamed file still works.
func readIDX(path string, wantDims int) ([]int, []byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return parseIDX(path, raw, wantDims)
}

func parseIDX(name string, raw []byte, wantDims int) ([]int, []byte, error) {
	var r io.Reader = bytes.NewReader(raw)
	gz := len(raw) >= 2 && raw[0] == 0x1f && raw[1] == 0x8b
	var br *bytes.Reader
	if gz {
		br = bytes.NewReader(raw)
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, &FormatError{File: name, Offset: 0, Entry: -1, Msg: "bad gzip header", Err: err}
		}
		// Multistream files are legal gzip; keep the default so they decode fully.
		r = zr
	}
	fail := func(off int64, entry int, err error, format string, args ...any) error {
		e := formatErr(name, off, entry, format, args...)
		e.Decompressed = gz
		if err != nil {
			if gz && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
				e.Msg += fmt.Sprintf(" (gzip stream broken at compressed offset %d)", int64(len(raw))-int64(br.Len()))
			}
			e.Err = err
		}
		return e
	}
	var head [4]byte
	if n, err := io.ReadFull(r, head[:]); err != nil {
		return nil, nil, fail(int64(n), -1, err, "short read in IDX magic: %d of 4 bytes", n)
	}
	if head[0] != 0 || head[1] != 0 {
		return nil, nil, fail(0, -1, nil, "bad IDX magic % x (want 00 00 08 %02x)", head[:], wantDims)
	}
	if head[2] != idxUbyte {
		return nil, nil, fail(2, -1, nil, "IDX data type 0x%02x not supported (want 0x08, unsigned byte)", head[2])
	}
	if int(head[3]) != wantDims {
		return nil, nil, fail(3, -1, nil, "IDX file has %d dimensions, want %d", head[3], wantDims)
	}
	dimBytes := make([]byte, 4*wantDims)
	if n, err := io.ReadFull(r, dimBytes); err != nil {
		return nil, nil, fail(int64(4+n), -1, err, "short read in IDX dimensions: %d of %d bytes", n, len(dimBytes))
	}
	dims := make([]int, wantDims)
	total := int64(1)
	for i := range dims {
		d := binary.BigEndian.Uint32(dimBytes[4*i:])
		dims[i] = int(d)
		if i > 0 && d == 0 {
			return nil, nil, fail(int64(4+4*i), -1, nil, "IDX dimension %d is zero", i)
		}
		total *= int64(d)
		if total > idxMaxLen {
			return nil, nil, fail(int64(4+4*i), -1, nil, "IDX dimensions %v claim more than %d bytes", dims[:i+1], int64(idxMaxLen))
		}
	}
	hdr := int64(4 + 4*wantDims)
	item := total / max(int64(dims[0]), 1) // bytes per image (or label)
	var payload []byte
	if !gz {
		payload = raw[hdr:]
		if int64(len(payload)) < total {
			got := int64(len(payload))
			return nil, nil, fail(hdr+got, int(got/item), io.ErrUnexpectedEOF,
				"truncated: %d of %d data bytes (entry %d of %d incomplete)", got, total, got/item, dims[0])
		}
		if int64(len(payload)) > total {
			return nil, nil, fail(hdr+total, -1, nil, "%d trailing bytes after %d entries", int64(len(payload))-total, dims[0])
		}
		return dims, payload, nil
	}
	// Growing the buffer as data arrives, rather than allocating the claimed
	// size, keeps a tiny corrupt file from requesting gigabytes.
	var buf bytes.Buffer
	got, err := io.CopyN(&buf, r, total)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, nil, fail(hdr+got, int(got/item), err,
			"truncated: %d of %d data bytes (entry %d of %d incomplete)", got, total, got/item, dims[0])
	}
	var one [1]byte
	if n, err := io.ReadFull(r, one[:]); n > 0 {
		return nil, nil, fail(hdr+total, -1, nil, "trailing bytes after %d entries", dims[0])
	} else if !errors.Is(err, io.EOF) {
		// Data complete, but the gzip trailer (CRC, length) is missing or wrong.
		return nil, nil, fail(hdr+total, -1, err, "bad gzip trailer")
	}
	return dims, buf.Bytes(), nil
}

type idxSet struct {
	info   Info
	images []byte
	labels []byte
}

// IDX reads an images file (idx3-ubyte) and a labels file (idx1-ubyte), plain
// or gzip-compressed. Classes is the largest label plus one.
func IDX(imagesPath, labelsPath string) (Dataset, error) {
	return loadIDX("idx", imagesPath, labelsPath, 0)
}

// loadIDX validates both files and their agreement; classes > 0 also bounds the labels.
func loadIDX(name, imagesPath, labelsPath string, classes int) (*idxSet, error) {
	idims, images, err := readIDX(imagesPath, 3)
	if err != nil {
		return nil, wrapMissing(name, err)
	}
	ldims, labels, err := readIDX(labelsPath, 1)
	if err != nil {
		return nil, wrapMissing(name, err)
	}
	if idims[0] == 0 {
		return nil, formatErr(imagesPath, 4, -1, "no images")
	}
	if ldims[0] != idims[0] {
		return nil, formatErr(labelsPath, 4, -1, "%d labels, but %s has %d images", ldims[0], imagesPath, idims[0])
	}
	maxLabel := 0
	for i, l := range labels {
		if classes > 0 && int(l) >= classes {
			return nil, formatErr(labelsPath, int64(8+i), i, "label %d out of range 0..%d", l, classes-1)
		}
		maxLabel = max(maxLabel, int(l))
	}
	if classes == 0 {
		classes = maxLabel + 1
	}
	return &idxSet{
		info: Info{Name: name, Examples: idims[0], Classes: classes, Channels: 1,
			Height: idims[1], Width: idims[2]},
		images: images,
		labels: labels,
	}, nil
}

func wrapMissing(name string, err error) error {
	var fe *FormatError
	if errors.As(err, &fe) {
		return err
	}
	return fmt.Errorf("datasets: %s: %w", name, err)
}

func (s *idxSet) Info() Info { return s.info }

func (s *idxSet) Load(i int) (Example, error) {
	if err := checkIndex(s.info.Name, i, s.info.Examples); err != nil {
		return Example{}, err
	}
	n := s.info.Height * s.info.Width
	pix := make([]float32, n)
	for k, v := range s.images[i*n : (i+1)*n] {
		pix[k] = lut8[v]
	}
	return Example{Image: pix, Channels: 1, Height: s.info.Height, Width: s.info.Width, Label: int(s.labels[i])}, nil
}

// idxFile finds one of the standard names in dir: the dashed form used by the
// original distribution and Debian, the dotted form some mirrors use, each
// with or without .gz. want is the name reported when none exists.
func idxFile(dir, prefix, kind string) (path, want string, ok bool) {
	want = filepath.Join(dir, prefix+"-"+kind+".gz")
	for _, base := range []string{prefix + "-" + kind, prefix + "-" + strings.Replace(kind, "-", ".", 1)} {
		for _, ext := range []string{".gz", ""} {
			p := filepath.Join(dir, base+ext)
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				return p, want, true
			}
		}
	}
	return "", want, false
}

// IDXFiles returns the image and label paths of a split in an MNIST-layout
// directory, or an error naming the first missing file.
func IDXFiles(dir string, split Split) (images, labels string, err error) {
	prefix := "train"
	switch split {
	case Train:
	case Test:
		prefix = "t10k"
	default:
		return "", "", fmt.Errorf("datasets: unknown split %v", split)
	}
	images, want, ok := idxFile(dir, prefix, "images-idx3-ubyte")
	if !ok {
		return "", "", missingIDX(want)
	}
	labels, want, ok = idxFile(dir, prefix, "labels-idx1-ubyte")
	if !ok {
		return "", "", missingIDX(want)
	}
	return images, labels, nil
}

func missingIDX(want string) error {
	return &fs.PathError{Op: "open", Path: want + " (or " + strings.TrimSuffix(filepath.Base(want), ".gz") + ")", Err: fs.ErrNotExist}
}

// MNIST reads the MNIST digits from dir in their standard file names.
func MNIST(dir string, split Split) (Dataset, error) {
	return mnistLike("mnist", dir, split, MNISTClassNames, []float64{0.1307}, []float64{0.3081}, "")
}

// FashionMNIST reads Fashion-MNIST from dir ("" means DefaultFashionMNISTDir).
// A missing file error says how to install Debian's copy.
func FashionMNIST(dir string, split Split) (Dataset, error) {
	if dir == "" {
		dir = DefaultFashionMNISTDir
	}
	return mnistLike("fashion-mnist", dir, split, FashionMNISTClassNames, []float64{0.2860}, []float64{0.3530},
		"; install the data with: "+FashionMNISTInstall+" (it goes to "+DefaultFashionMNISTDir+")")
}

func mnistLike(name, dir string, split Split, classes []string, mean, std []float64, hint string) (Dataset, error) {
	images, labels, err := IDXFiles(dir, split)
	if err != nil {
		return nil, fmt.Errorf("datasets: %s: missing file: %w%s", name, err, hint)
	}
	s, err := loadIDX(name, images, labels, len(classes))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w%s", err, hint)
		}
		return nil, err
	}
	s.info.Split = split
	s.info.ClassNames = classes
	s.info.Mean, s.info.Std = mean, std
	s.info.Dir = dir
	return s, nil
}
