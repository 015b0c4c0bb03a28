package datasets

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Dataset is a random-access source of examples at their native size.
//
// Load must be safe for concurrent use: the Loader may decode several examples
// of one batch in parallel (Options.Workers).
type Dataset interface {
	Info() Info
	// Load returns example i, 0 <= i < Info().Examples. A corrupt example is an
	// error naming its file and entry; Load never panics on bad data.
	Load(i int) (Example, error)
}

// Example is one decoded image (and, for segmentation, its mask) before any
// resizing, augmentation or normalisation.
type Example struct {
	// Image holds Channels*Height*Width values in CHW order, scaled to [0, 1].
	Image                   []float32
	Channels, Height, Width int
	// Label is the class index, or -1 for segmentation examples.
	Label int
	// Mask holds Height*Width class indices (row-major) for segmentation, nil otherwise.
	Mask []int
}

// Info describes a dataset.
type Info struct {
	Name     string // "synthetic", "cifar10", "folder", "seg", "fashion-mnist", "mnist", "idx"
	Split    Split
	Examples int
	Classes  int
	Channels int
	// Height and Width are the native image size; 0 when the images differ in
	// size (image folders), in which case the Loader needs an explicit size.
	Height, Width int
	// ClassNames has Classes entries where the names are known, nil otherwise.
	ClassNames []string
	// Segmentation is true when examples carry per-pixel masks instead of labels.
	Segmentation bool
	// Mean and Std are the customary per-channel normalisation statistics of
	// the dataset's training split where known (nil otherwise); pass them to
	// Options.Mean and Options.Std.
	Mean, Std []float64
	// Dir is the directory the data was read from ("" for synthetic data).
	Dir string
}

// Split selects the training or the test part of a dataset.
type Split int

const (
	Train Split = iota
	Test
)

func (s Split) String() string {
	switch s {
	case Train:
		return "train"
	case Test:
		return "test"
	}
	return "Split(" + strconv.Itoa(int(s)) + ")"
}

// ParseSplit accepts "train" and "test" (and "val"/"eval" as aliases of test),
// so command-line flags can name a split.
func ParseSplit(s string) (Split, error) {
	switch strings.ToLower(s) {
	case "train", "training":
		return Train, nil
	case "test", "t10k", "val", "eval":
		return Test, nil
	}
	return 0, fmt.Errorf("datasets: unknown split %q (want train or test)", s)
}

// ErrNoSplit is returned (wrapped) when a directory has no data for the
// requested split, so a caller can skip evaluation instead of failing.
var ErrNoSplit = errors.New("no data for this split")

// ErrClosed is returned by Loader.Next after Close.
var ErrClosed = errors.New("datasets: loader closed")

// FormatError reports a truncated or corrupt file. It carries the position so
// that a user can find the bad record with a hex dump or by listing a folder.
type FormatError struct {
	File string
	// Offset is the byte offset of the problem, -1 when it is not meaningful
	// (for example inside an image decoded by image/png).
	Offset int64
	// Decompressed is true when Offset counts bytes of the gunzipped stream.
	Decompressed bool
	// Entry is the record, image or example index, -1 when not meaningful.
	Entry int
	Msg   string
	Err   error
}

func (e *FormatError) Error() string {
	var b strings.Builder
	b.WriteString("datasets: ")
	b.WriteString(e.File)
	if e.Offset >= 0 {
		if e.Decompressed {
			b.WriteString(": decompressed offset ")
		} else {
			b.WriteString(": offset ")
		}
		b.WriteString(strconv.FormatInt(e.Offset, 10))
	}
	if e.Entry >= 0 {
		b.WriteString(": entry ")
		b.WriteString(strconv.Itoa(e.Entry))
	}
	if e.Msg != "" {
		b.WriteString(": ")
		b.WriteString(e.Msg)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *FormatError) Unwrap() error { return e.Err }

func formatErr(file string, offset int64, entry int, format string, args ...any) *FormatError {
	return &FormatError{File: file, Offset: offset, Entry: entry, Msg: fmt.Sprintf(format, args...)}
}

// checkIndex keeps out-of-range indices from becoming slice panics inside a source.
func checkIndex(name string, i, n int) error {
	if i < 0 || i >= n {
		return fmt.Errorf("datasets: %s: example %d out of range [0, %d)", name, i, n)
	}
	return nil
}
