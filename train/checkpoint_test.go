package train

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gorgonia.org/tensor"
)

func sampleCheckpoint() *Checkpoint {
	f32 := tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float32{1, -2.5, float32(math.Inf(1)), 0, float32(math.SmallestNonzeroFloat32), math.MaxFloat32}))
	f64 := tensor.New(tensor.WithShape(4), tensor.WithBacking([]float64{math.Pi, -0.0, 1e-300, 7}))
	nan := tensor.New(tensor.WithShape(1, 1, 1, 2), tensor.WithBacking([]float32{float32(math.NaN()), 3}))
	return &Checkpoint{
		Meta: Meta{Program: "test", Model: "smallcnn", Batch: 4, Channels: 3, Image: 16, Classes: 10,
			Data: "synthetic:n=16", Seed: 7, Optimizer: "adam", LR: 0.001, OptimizerIter: 3, Step: 3, NextEpoch: 0, NextBatch: 3,
			EpochLossSum: 0.1 + 0.2, EpochSteps: 3, Mean: []float64{0.5}, Std: []float64{0.25},
			LastEval: &EvalResult{Epoch: 1, Step: 2, Examples: 16, Correct: 5, Total: 16, Accuracy: 5.0 / 16, HasAcc: true, Loss: 1.0 / 3}},
		Tensors: []NamedTensor{{"param/w", f32}, {"bn/0/mean", f64}, {"opt/0/mean", nan}},
	}
}

func encode(t *testing.T, c *Checkpoint) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := writeCheckpoint(&b, c); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func sameBits(a, b *tensor.Dense) bool {
	if !a.Shape().Eq(b.Shape()) || a.Dtype() != b.Dtype() {
		return false
	}
	switch x := a.Data().(type) {
	case []float32:
		y := b.Data().([]float32)
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
				return false
			}
		}
	case []float64:
		y := b.Data().([]float64)
		for i := range x {
			if math.Float64bits(x[i]) != math.Float64bits(y[i]) {
				return false
			}
		}
	default:
		return false
	}
	return true
}

func TestCheckpointRoundTrip(t *testing.T) {
	c := sampleCheckpoint()
	path := filepath.Join(t.TempDir(), "c.ckpt")
	if err := Save(path, c); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", got.Meta) != fmt.Sprintf("%+v", c.Meta) || *got.Meta.LastEval != *c.Meta.LastEval {
		t.Errorf("meta:\n got %+v\nwant %+v", got.Meta, c.Meta)
	}
	if got.Meta.EpochLossSum != 0.1+0.2 {
		t.Errorf("float64 meta not exact: %v", got.Meta.EpochLossSum)
	}
	if len(got.Tensors) != len(c.Tensors) {
		t.Fatalf("%d tensors, want %d", len(got.Tensors), len(c.Tensors))
	}
	for i, nt := range c.Tensors {
		if got.Tensors[i].Name != nt.Name || !sameBits(got.Tensors[i].T, nt.T) {
			t.Errorf("tensor %d: got %s %v, want %s %v", i, got.Tensors[i].Name, got.Tensors[i].T, nt.Name, nt.T)
		}
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	// Writing is deterministic: the same checkpoint gives the same bytes.
	if !bytes.Equal(encode(t, c), encode(t, c)) {
		t.Error("two encodings differ")
	}
}

// Every truncation and every single flipped byte is detected, with the file
// name and an offset in the message, and never returns a checkpoint.
func TestCheckpointCorruption(t *testing.T) {
	good := encode(t, sampleCheckpoint())
	dir := t.TempDir()
	check := func(t *testing.T, what string, data []byte, wantOffset string) {
		t.Helper()
		path := filepath.Join(dir, "bad.ckpt")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Load(path)
		if err == nil {
			t.Fatalf("%s: loaded without error", what)
		}
		if c != nil {
			t.Errorf("%s: returned a checkpoint with the error", what)
		}
		var ce *checkpointError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "offset ") {
			t.Fatalf("%s: error %q does not name the file and an offset", what, err)
		}
		if wantOffset != "" && !strings.Contains(err.Error(), wantOffset) {
			t.Errorf("%s: error %q, want %q", what, err, wantOffset)
		}
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "offset 0: not an ooc checkpoint"},
		{"other file", []byte("PK\x03\x04 this is a zip file, honest"), "offset 0: not an ooc checkpoint"},
		{"half header", good[:12], "offset 12: truncated"},
		{"header only", good[:16], "offset 16: truncated: the file ends after 0 sections"},
		{"no end section", good[:len(good)-25], "truncated"},
		{"last byte missing", good[:len(good)-1], "truncated"},
		{"trailing garbage", append(append([]byte{}, good...), 0), "unexpected bytes after the end section"},
		{"future version", func() []byte {
			b := append([]byte{}, good...)
			b[8] = ckptVersion + 1
			return b
		}(), "offset 8: header checksum mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) { check(t, tc.name, tc.data, tc.want) })
	}
	t.Run("every truncation", func(t *testing.T) {
		for n := 0; n < len(good); n++ {
			check(t, fmt.Sprintf("truncated to %d bytes", n), good[:n], "")
		}
	})
	t.Run("every flipped byte", func(t *testing.T) {
		for i := range good {
			b := append([]byte{}, good...)
			b[i] ^= 0x20
			check(t, fmt.Sprintf("byte %d flipped", i), b, "")
		}
	})
}

func TestCheckpointUnsupportedVersion(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(ckptMagic)
	b.Write([]byte{9, 0, 0, 0})
	sum := crcOf(b.Bytes())
	b.Write(sum)
	path := filepath.Join(t.TempDir(), "v9.ckpt")
	os.WriteFile(path, b.Bytes(), 0o644)
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), "unsupported checkpoint version 9") {
		t.Fatalf("error %v", err)
	}
}

func crcOf(b []byte) []byte {
	return binary.LittleEndian.AppendUint32(nil, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

// A write that fails at any point leaves the previous checkpoint as it was
// and no temporary file behind.
func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.ckpt")
	old := []byte("the good old checkpoint")
	if err := os.WriteFile(path, old, 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk on fire")
	for _, tc := range []struct {
		name  string
		write func(io.Writer) error
		sync  func(*os.File) error
	}{
		{"encoder fails half way", func(w io.Writer) error {
			w.Write(bytes.Repeat([]byte("x"), 3<<20))
			return boom
		}, nil},
		{"fsync fails", func(w io.Writer) error {
			_, err := w.Write([]byte("new"))
			return err
		}, func(*os.File) error { return boom }},
		{"writer fails", func(w io.Writer) error {
			return writeCheckpoint(failingWriter{w, 100}, sampleCheckpoint())
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.sync != nil {
				syncFile = tc.sync
				defer func() { syncFile = (*os.File).Sync }()
			}
			err := writeFileAtomic(path, tc.write)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "unchanged") {
				t.Fatalf("error %v", err)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, old) {
				t.Errorf("the old file changed to %q", got)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				t.Errorf("directory holds %v, want only run.ckpt", names)
			}
		})
	}
	// And a write that succeeds replaces it.
	if err := writeFileAtomic(path, func(w io.Writer) error { _, err := w.Write([]byte("new")); return err }); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "new" {
		t.Errorf("file holds %q", got)
	}
}

type failingWriter struct {
	w    io.Writer
	left int
}

func (f failingWriter) Write(p []byte) (int, error) {
	if len(p) > f.left {
		return 0, errors.New("no space left on device")
	}
	return f.w.Write(p)
}
