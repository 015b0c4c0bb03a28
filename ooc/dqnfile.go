package ooc

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
)

// The DQN weights file, version 2 (version 1's networks read other
// features: unnormalised sizes and times), little-endian: the 8 bytes
// "OOCDQNW\n", the version (uint32), p and T (uint32 each), then each of
// the 9 weight matrices as its value count (uint32) and values (float64),
// and last the CRC-32 (IEEE) of every byte before it (uint32).
const (
	dqnMagic   = "OOCDQNW\n"
	dqnVersion = 2
)

// MarshalBinary encodes the weights in the versioned file format.
func (w *DQNWeights) MarshalBinary() ([]byte, error) {
	if err := w.check(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(dqnMagic)
	u32 := func(x int) { _ = binary.Write(&b, binary.LittleEndian, uint32(x)) }
	u32(dqnVersion)
	u32(w.P)
	u32(w.T)
	for _, m := range w.W {
		u32(len(m))
		for _, x := range m {
			_ = binary.Write(&b, binary.LittleEndian, math.Float64bits(x))
		}
	}
	_ = binary.Write(&b, binary.LittleEndian, crc32.ChecksumIEEE(b.Bytes()))
	return b.Bytes(), nil
}

// UnmarshalBinary decodes weights MarshalBinary encoded; a file that is
// truncated, of another version, inconsistent or corrupt is an error
// naming the byte offset where it was found.
func (w *DQNWeights) UnmarshalBinary(data []byte) error {
	off := 0
	u32 := func(what string) (int, error) {
		if len(data)-off < 4 {
			return 0, fmt.Errorf("ooc: dqn weights: truncated at offset %d (reading %s)", off, what)
		}
		x := binary.LittleEndian.Uint32(data[off:])
		off += 4
		return int(x), nil
	}
	if len(data) < len(dqnMagic) || string(data[:len(dqnMagic)]) != dqnMagic {
		return fmt.Errorf("ooc: dqn weights: not a weights file (no %q at offset 0)", dqnMagic)
	}
	off = len(dqnMagic)
	if len(data) >= 4 {
		body := len(data) - 4
		if got, want := crc32.ChecksumIEEE(data[:body]), binary.LittleEndian.Uint32(data[body:]); got != want {
			return fmt.Errorf("ooc: dqn weights: checksum at offset %d is %08x, the bytes before it sum to %08x: the file is corrupt", body, want, got)
		}
	}
	v, err := u32("the version")
	if err != nil {
		return err
	}
	if v != dqnVersion {
		return fmt.Errorf("ooc: dqn weights: version %d at offset %d (this build reads version %d)", v, off-4, dqnVersion)
	}
	var out DQNWeights
	if out.P, err = u32("p"); err != nil {
		return err
	}
	if out.T, err = u32("T"); err != nil {
		return err
	}
	if out.P < 1 || out.P > 1024 || out.T < 1 || out.T > 64 {
		return fmt.Errorf("ooc: dqn weights: p = %d, T = %d at offset %d (want 1..1024 and 1..64)", out.P, out.T, off-8)
	}
	for i, sh := range out.shapes() {
		n, err := u32(fmt.Sprintf("W%d's size", i+1))
		if err != nil {
			return err
		}
		if n != sh[0]*sh[1] {
			return fmt.Errorf("ooc: dqn weights: W%d has %d values at offset %d, want %d for p = %d", i+1, n, off-4, sh[0]*sh[1], out.P)
		}
		if len(data)-off < 8*n {
			return fmt.Errorf("ooc: dqn weights: truncated at offset %d (reading W%d's %d values)", off, i+1, n)
		}
		out.W[i] = make([]float64, n)
		for j := range out.W[i] {
			x := math.Float64frombits(binary.LittleEndian.Uint64(data[off:]))
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("ooc: dqn weights: W%d[%d] at offset %d is %v", i+1, j, off, x)
			}
			out.W[i][j] = x
			off += 8
		}
	}
	if off != len(data)-4 {
		return fmt.Errorf("ooc: dqn weights: %d bytes at offset %d after the weights, want only the 4-byte checksum", len(data)-off, off)
	}
	*w = out
	return nil
}

// SaveDQNWeights writes w to path in the versioned file format.
func SaveDQNWeights(path string, w *DQNWeights) error {
	b, err := w.MarshalBinary()
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// LoadDQNWeights reads weights SaveDQNWeights wrote.
func LoadDQNWeights(path string) (*DQNWeights, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64<<20))
	if err != nil {
		return nil, err
	}
	w := new(DQNWeights)
	if err := w.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return w, nil
}

// dqnDefault is the trained network DQN plans with when given no weights:
// how it was trained is in docs/results.md ("The shipped DQN weights").
//
//go:embed dqn_default.weights
var dqnDefault []byte

// DefaultDQNWeights returns a copy of the trained weights shipped in the
// package, which DQN{} plans with.
func DefaultDQNWeights() (*DQNWeights, error) {
	w := new(DQNWeights)
	if err := w.UnmarshalBinary(dqnDefault); err != nil {
		return nil, fmt.Errorf("the shipped DQN weights: %w", err)
	}
	return w, nil
}
