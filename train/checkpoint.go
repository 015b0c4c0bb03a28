package train

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gorgonia.org/tensor"
)

// Checkpoint file format, version 2 (version 1 files are read too). All
// integers are little-endian.
//
//	header   8 bytes magic "OOC-CKPT", uint32 version, uint32 CRC-32C of the preceding 12 bytes
//	section  uint8 kind ('M' meta, 'T' tensor, 'E' end)
//	         uint16 name length, name
//	         uint32 info length, info (JSON)
//	         uint64 data length, data
//	         uint32 CRC-32C of the section from its kind byte through its data
//
// The first section is the meta record (JSON, Meta); then one tensor
// section per saved tensor (info {"dtype","shape"}, data the raw elements);
// then, in version 2, the run's step losses as a float64 tensor section named
// "history/losses" when there are any; the last is the end section, whose info
// {"sections": n} counts the sections before it. Nothing may follow it. Every section carries its own checksum, so
// a flipped byte or a truncation is reported with the offset of the damaged
// section.
const (
	ckptMagic   = "OOC-CKPT"
	ckptVersion = 2
	// lossesSection holds the whole run's per-step losses (version 2).
	lossesSection = "history/losses"

	kindMeta   = 'M'
	kindTensor = 'T'
	kindEnd    = 'E'

	maxInfoLen = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checkpoint is everything a run needs to continue where it stopped.
type Checkpoint struct {
	Meta    Meta
	Tensors []NamedTensor // "param/<name>", "bn/<i>/mean", "opt/<i>/<slot>", in that order
	// Losses are the per-step train losses of the whole run, resumes included.
	Losses []float64
}

type NamedTensor struct {
	Name string
	T    *tensor.Dense
}

// Meta is the JSON meta record: what was trained, how, and where the run is.
type Meta struct {
	Program string `json:"program"`
	Saved   string `json:"saved"` // RFC 3339; informational

	// The model and its input.
	Model    string `json:"model"`
	Batch    int    `json:"batch"`
	Channels int    `json:"channels"`
	Image    int    `json:"image"`
	Width    int    `json:"width,omitempty"`  // when not Image (0: square)
	Hidden   int    `json:"hidden,omitempty"` // lstm's width (0: its default)
	Classes  int    `json:"classes"`
	Dtype    string `json:"dtype"`
	Params   int64  `json:"params"`

	// Data, seed and optimizer: a resumed run must use the same.
	Data    string `json:"data"`
	Seed    int64  `json:"seed"`
	Augment bool   `json:"augment"`
	// Mean and Std normalised the input (datasets.Options).
	Mean      []float64 `json:"mean,omitempty"`
	Std       []float64 `json:"std,omitempty"`
	Optimizer string    `json:"optimizer"`
	LR        float64   `json:"lr"`
	LRDrop    []int     `json:"lr_drop,omitempty"`
	// OptimizerIter is Adam's step count (its bias correction depends on it).
	OptimizerIter int `json:"optimizer_iter"`

	// Budget is the device-memory budget training ran under (0: baseline,
	// no budget); ooc eval uses it unless told otherwise.
	Budget int64 `json:"budget"`

	// Position: Step training steps are done; the next batch is batch
	// NextBatch of epoch NextEpoch (0-based), as datasets.Options'
	// StartEpoch/StartBatch.
	Step      int `json:"step"`
	NextEpoch int `json:"next_epoch"`
	NextBatch int `json:"next_batch"`
	// The running train-loss sum of the unfinished epoch, for its mean.
	EpochLossSum float64 `json:"epoch_loss_sum"`
	EpochSteps   int     `json:"epoch_steps"`
	// LastEval is the test result after the last evaluated epoch, if any.
	LastEval *EvalResult `json:"last_eval,omitempty"`

	// Version 2: the whole run, so that a resume needs no flags. Run is nil
	// in version 1 files.
	Run *Config `json:"run,omitempty"`
	// Epochs are the finished epochs of the whole run.
	Epochs []EpochRecord `json:"epochs,omitempty"`
}

// checkpointError locates damage in a checkpoint file.
type checkpointError struct {
	File    string
	Offset  int64
	Section string
	Msg     string
}

func (e *checkpointError) Error() string {
	if e.Section != "" {
		return fmt.Sprintf("checkpoint %s: offset %d: section %q: %s", e.File, e.Offset, e.Section, e.Msg)
	}
	return fmt.Sprintf("checkpoint %s: offset %d: %s", e.File, e.Offset, e.Msg)
}

// writeCheckpoint encodes c.
func writeCheckpoint(w io.Writer, c *Checkpoint) error {
	var hdr [16]byte
	copy(hdr[:], ckptMagic)
	binary.LittleEndian.PutUint32(hdr[8:], ckptVersion)
	binary.LittleEndian.PutUint32(hdr[12:], crc32.Checksum(hdr[:12], castagnoli))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	meta, err := json.Marshal(c.Meta)
	if err != nil {
		return err
	}
	if err := writeSection(w, kindMeta, "meta", meta, 0, nil); err != nil {
		return err
	}
	for _, t := range c.Tensors {
		info, n, data, err := tensorWriter(t.T)
		if err != nil {
			return fmt.Errorf("tensor %s: %w", t.Name, err)
		}
		if err := writeSection(w, kindTensor, t.Name, info, n, data); err != nil {
			return err
		}
	}
	n := 1 + len(c.Tensors)
	if len(c.Losses) > 0 {
		l := tensor.New(tensor.WithShape(len(c.Losses)), tensor.WithBacking(c.Losses))
		info, size, data, err := tensorWriter(l)
		if err != nil {
			return err
		}
		if err := writeSection(w, kindTensor, lossesSection, info, size, data); err != nil {
			return err
		}
		n++
	}
	end, _ := json.Marshal(map[string]int{"sections": n})
	return writeSection(w, kindEnd, "end", end, 0, nil)
}

// crcWriter passes writes on and checksums them.
type crcWriter struct {
	w   io.Writer
	sum uint32
}

func (c *crcWriter) Write(p []byte) (int, error) {
	c.sum = crc32.Update(c.sum, castagnoli, p)
	return c.w.Write(p)
}

// writeSection writes one section; data writes exactly dataLen bytes.
func writeSection(w io.Writer, kind byte, name string, info []byte, dataLen int64, data func(io.Writer) error) error {
	if len(name) > math.MaxUint16 {
		return fmt.Errorf("section name %.40q... is too long", name)
	}
	if len(info) > maxInfoLen {
		return fmt.Errorf("section %q: info too long", name)
	}
	h := make([]byte, 0, 15+len(name)+len(info))
	h = append(h, kind)
	h = binary.LittleEndian.AppendUint16(h, uint16(len(name)))
	h = append(h, name...)
	h = binary.LittleEndian.AppendUint32(h, uint32(len(info)))
	h = append(h, info...)
	h = binary.LittleEndian.AppendUint64(h, uint64(dataLen))
	cw := &crcWriter{w: w}
	if _, err := cw.Write(h); err != nil {
		return err
	}
	if data != nil {
		if err := data(cw); err != nil {
			return err
		}
	}
	_, err := w.Write(binary.LittleEndian.AppendUint32(nil, cw.sum))
	return err
}

type tensorInfo struct {
	Dtype string `json:"dtype"`
	Shape []int  `json:"shape"`
}

// tensorWriter returns a tensor's info record, its data size and a function
// writing its elements little-endian, a chunk at a time (no copy of the
// whole tensor is made).
func tensorWriter(t *tensor.Dense) (info []byte, n int64, write func(io.Writer) error, err error) {
	if t == nil {
		return nil, 0, nil, errors.New("nil tensor")
	}
	if !t.IsNativelyAccessible() || t.IsMaterializable() {
		return nil, 0, nil, errors.New("the tensor is a view; save a copy")
	}
	const chunk = 1 << 13
	switch d := t.Data().(type) {
	case []float32:
		n = 4 * int64(len(d))
		write = func(w io.Writer) error {
			buf := make([]byte, 4*chunk)
			for i := 0; i < len(d); i += chunk {
				part := d[i:min(i+chunk, len(d))]
				for j, v := range part {
					binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(v))
				}
				if _, err := w.Write(buf[:4*len(part)]); err != nil {
					return err
				}
			}
			return nil
		}
	case []float64:
		n = 8 * int64(len(d))
		write = func(w io.Writer) error {
			buf := make([]byte, 8*chunk)
			for i := 0; i < len(d); i += chunk {
				part := d[i:min(i+chunk, len(d))]
				for j, v := range part {
					binary.LittleEndian.PutUint64(buf[8*j:], math.Float64bits(v))
				}
				if _, err := w.Write(buf[:8*len(part)]); err != nil {
					return err
				}
			}
			return nil
		}
	default:
		return nil, 0, nil, fmt.Errorf("cannot save a %v tensor (float32 or float64 only)", t.Dtype())
	}
	info, err = json.Marshal(tensorInfo{Dtype: t.Dtype().String(), Shape: append([]int{}, t.Shape()...)})
	return info, n, write, err
}

func decodeTensor(info, data []byte) (*tensor.Dense, error) {
	var ti tensorInfo
	if err := json.Unmarshal(info, &ti); err != nil {
		return nil, fmt.Errorf("bad tensor info: %v", err)
	}
	n := 1
	for _, s := range ti.Shape {
		if s <= 0 || s > math.MaxInt32 || n > math.MaxInt32/s {
			return nil, fmt.Errorf("bad tensor shape %v", ti.Shape)
		}
		n *= s
	}
	shape := ti.Shape
	if len(shape) == 0 {
		shape = []int{1}
	}
	switch ti.Dtype {
	case "float32":
		if len(data) != 4*n {
			return nil, fmt.Errorf("%d data bytes for a float32 tensor of shape %v (want %d)", len(data), ti.Shape, 4*n)
		}
		d := make([]float32, n)
		for i := range d {
			d[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d)), nil
	case "float64":
		if len(data) != 8*n {
			return nil, fmt.Errorf("%d data bytes for a float64 tensor of shape %v (want %d)", len(data), ti.Shape, 8*n)
		}
		d := make([]float64, n)
		for i := range d {
			d[i] = math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:]))
		}
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(d)), nil
	}
	return nil, fmt.Errorf("unsupported dtype %q", ti.Dtype)
}

// decodeCheckpoint parses a whole checkpoint file held in buf; file names it in errors.
func decodeCheckpoint(file string, buf []byte) (*Checkpoint, error) {
	fail := func(off int, section, format string, args ...any) error {
		return &checkpointError{File: file, Offset: int64(off), Section: section, Msg: fmt.Sprintf(format, args...)}
	}
	if len(buf) < 16 {
		if len(buf) < 8 || string(buf[:8]) != ckptMagic {
			return nil, fail(0, "", "not an ooc checkpoint (%d bytes; want the magic %q)", len(buf), ckptMagic)
		}
		return nil, fail(len(buf), "", "truncated: the header needs 16 bytes, the file has %d", len(buf))
	}
	if string(buf[:8]) != ckptMagic {
		return nil, fail(0, "", "not an ooc checkpoint (magic %q, want %q)", buf[:8], ckptMagic)
	}
	if got, want := binary.LittleEndian.Uint32(buf[12:]), crc32.Checksum(buf[:12], castagnoli); got != want {
		return nil, fail(8, "", "header checksum mismatch (stored %08x, computed %08x)", got, want)
	}
	if v := binary.LittleEndian.Uint32(buf[8:]); v < 1 || v > ckptVersion {
		return nil, fail(8, "", "unsupported checkpoint version %d (this ooc reads versions 1 to %d)", v, ckptVersion)
	}
	c := &Checkpoint{}
	off, count := 16, 0
	for {
		start := off
		need := func(n int, what string, section string) error {
			if len(buf)-off < n {
				return fail(off, section, "truncated: %s needs %d bytes, %d left in the file", what, n, len(buf)-off)
			}
			return nil
		}
		if err := need(3, "a section header", ""); err != nil {
			if off == len(buf) {
				return nil, fail(off, "", "truncated: the file ends after %d sections without the end section", count)
			}
			return nil, err
		}
		kind := buf[off]
		nameLen := int(binary.LittleEndian.Uint16(buf[off+1:]))
		off += 3
		if err := need(nameLen+4, "the section name and info length", ""); err != nil {
			return nil, err
		}
		name := string(buf[off : off+nameLen])
		off += nameLen
		infoLen := int(binary.LittleEndian.Uint32(buf[off:]))
		off += 4
		if infoLen > maxInfoLen {
			return nil, fail(start, name, "corrupt: info length %d exceeds %d", infoLen, maxInfoLen)
		}
		if err := need(infoLen+8, "the info and data length", name); err != nil {
			return nil, err
		}
		info := buf[off : off+infoLen]
		off += infoLen
		dataLen := binary.LittleEndian.Uint64(buf[off:])
		off += 8
		if dataLen > uint64(len(buf)-off) {
			return nil, fail(start, name, "truncated or corrupt: %d data bytes declared, %d left in the file", dataLen, len(buf)-off)
		}
		data := buf[off : off+int(dataLen)]
		off += int(dataLen)
		if err := need(4, "the section checksum", name); err != nil {
			return nil, err
		}
		got, want := binary.LittleEndian.Uint32(buf[off:]), crc32.Checksum(buf[start:off], castagnoli)
		if got != want {
			return nil, fail(start, name, "checksum mismatch (stored %08x, computed %08x): the section is corrupt", got, want)
		}
		off += 4
		switch {
		case count == 0 && kind != kindMeta:
			return nil, fail(start, name, "the first section must be the meta record, got kind %q", kind)
		case kind == kindMeta && count != 0:
			return nil, fail(start, name, "a second meta record")
		case kind == kindMeta:
			if err := json.Unmarshal(info, &c.Meta); err != nil {
				return nil, fail(start, name, "bad meta record: %v", err)
			}
		case kind == kindTensor:
			t, err := decodeTensor(info, data)
			if err != nil {
				return nil, fail(start, name, "%v", err)
			}
			if name == lossesSection {
				if c.Losses, _ = t.Data().([]float64); c.Losses == nil {
					return nil, fail(start, name, "losses are %v, want float64", t.Dtype())
				}
				break
			}
			c.Tensors = append(c.Tensors, NamedTensor{Name: name, T: t})
		case kind == kindEnd:
			var end struct {
				Sections int `json:"sections"`
			}
			if err := json.Unmarshal(info, &end); err != nil || end.Sections != count {
				return nil, fail(start, name, "end section counts %d sections, the file has %d", end.Sections, count)
			}
			if off != len(buf) {
				return nil, fail(off, "", "%d unexpected bytes after the end section", len(buf)-off)
			}
			return c, nil
		default:
			return nil, fail(start, name, "unknown section kind %q", kind)
		}
		count++
	}
}

// Load reads and verifies a checkpoint file.
func Load(path string) (*Checkpoint, error) {
	buf, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return decodeCheckpoint(path, buf)
}

// Save writes c to path atomically.
func Save(path string, c *Checkpoint) error {
	return writeFileAtomic(path, func(w io.Writer) error { return writeCheckpoint(w, c) })
}

// syncFile is (*os.File).Sync; tests replace it to simulate a failing disk.
var syncFile = (*os.File).Sync

// writeFileAtomic replaces path with what write produces, or leaves it as it
// was: the data goes to a temporary file in the same directory, is flushed
// and fsynced, then renamed over path, and the directory is fsynced so the
// rename survives a crash. On any error the temporary file is removed.
func writeFileAtomic(path string, write func(io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		if err != nil && !renamed {
			f.Close()
			os.Remove(tmp)
			err = fmt.Errorf("writing %s (the previous file, if any, is unchanged): %w", path, err)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err = write(bw); err != nil {
		return err
	}
	if err = bw.Flush(); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = syncFile(f); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	renamed = true
	if err = syncDir(dir); err != nil {
		return fmt.Errorf("%s written, but making the rename durable failed: %w", path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// RemoveStaleTemps removes the temporary files a killed run left next to the
// checkpoint at path (".NAME.tmp-*", the names writeFileAtomic uses), and
// returns their names. Temporary files of other checkpoints are left alone.
func RemoveStaleTemps(path string) ([]string, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	stale, err := filepath.Glob(filepath.Join(dir, "."+globEscape(base)+".tmp-*"))
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, f := range stale {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, fmt.Errorf("removing the stale temporary file %s: %w", f, err)
		}
		removed = append(removed, f)
	}
	return removed, nil
}

// globEscape quotes the characters filepath.Match treats specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
