package dist

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// MaxPayload bounds what Share hands out: an NCCL unique id is 128 bytes.
const MaxPayload = 1 << 20

// Share hands rank 0's bytes to every rank of w: rank 0 calls create (it
// creates the NCCL unique id) and returns its result; every other rank
// returns the same bytes, received through w's rendezvous (the file when
// w.File is set, else TCP at w.Master). With TCP every rank returns only
// after all w.Size ranks have reached Share, so it is also a barrier; with the
// file, rank 0 returns as soon as the file is written. A process on its own
// just calls create. Share gives up with an error naming what is missing when
// ctx ends or w.Timeout (DefaultTimeout when zero) passes.
func Share(ctx context.Context, w World, create func() ([]byte, error)) ([]byte, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if create == nil {
		return nil, errors.New("dist: Share needs a create function for rank 0")
	}
	if !w.Multi() {
		return makePayload(create)
	}
	timeout := w.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case w.Transport() == "file" && w.Rank == 0:
		return writeShared(w, create)
	case w.Transport() == "file":
		return readShared(ctx, w, timeout)
	case w.Rank == 0:
		return serve(ctx, w, create, timeout)
	}
	return join(ctx, w, timeout)
}

func makePayload(create func() ([]byte, error)) ([]byte, error) {
	b, err := create()
	if err != nil {
		return nil, err
	}
	if len(b) > MaxPayload {
		return nil, fmt.Errorf("dist: rank 0 made %d bytes to share, more than %d", len(b), MaxPayload)
	}
	return b, nil
}

// The file's format, a few lines of text:
//
//	ooc-rendezvous 1
//	run <run id>
//	size <world size>
//	payload <hex>
const fileMagic = "ooc-rendezvous 1"

func encodeFile(w World, payload []byte) []byte {
	return fmt.Appendf(nil, "%s\nrun %s\nsize %d\npayload %s\n", fileMagic, strconv.Quote(w.RunID), w.Size, hex.EncodeToString(payload))
}

// decodeFile reads a rendezvous file; stale is set when it belongs to another
// run (a reader waits on for this run's file).
func decodeFile(b []byte, w World) (payload []byte, stale bool, err error) {
	fields := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 4*MaxPayload)
	for first := true; sc.Scan(); first = false {
		if first {
			if sc.Text() != fileMagic {
				return nil, false, fmt.Errorf("not a rendezvous file (first line %q)", sc.Text())
			}
			continue
		}
		k, v, _ := strings.Cut(sc.Text(), " ")
		fields[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, false, err
	}
	run, err := strconv.Unquote(fields["run"])
	if err != nil {
		return nil, false, fmt.Errorf("bad run line %q", fields["run"])
	}
	if run != w.RunID {
		return nil, true, fmt.Errorf("written by run %q, not this run %q", run, w.RunID)
	}
	if fields["size"] != strconv.Itoa(w.Size) {
		return nil, false, fmt.Errorf("rank 0 of run %q has world size %s, this rank %d", run, fields["size"], w.Size)
	}
	p, ok := fields["payload"]
	if !ok {
		return nil, false, errors.New("no payload line")
	}
	if payload, err = hex.DecodeString(p); err != nil {
		return nil, false, fmt.Errorf("bad payload: %v", err)
	}
	return payload, false, nil
}

// writeShared is rank 0's side of the file rendezvous: the file appears
// whole or not at all (a temporary file in the same directory, synced, then
// renamed over the path), so no reader sees half of it.
func writeShared(w World, create func() ([]byte, error)) ([]byte, error) {
	payload, err := makePayload(create)
	if err != nil {
		return nil, err
	}
	dir, base := filepath.Split(w.File)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp*")
	if err != nil {
		return nil, fmt.Errorf("dist: rank 0: rendezvous file: %w", err)
	}
	_, err = f.Write(encodeFile(w, payload))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), w.File)
	}
	if err != nil {
		os.Remove(f.Name())
		return nil, fmt.Errorf("dist: rank 0: rendezvous file: %w", err)
	}
	return payload, nil
}

// readShared polls for rank 0's file of this run: a missing file, or one
// from another run, is waited out until the deadline.
func readShared(ctx context.Context, w World, timeout time.Duration) ([]byte, error) {
	wait := 20 * time.Millisecond
	last := "the file does not exist"
	for {
		b, err := os.ReadFile(w.File)
		switch {
		case err == nil:
			payload, stale, derr := decodeFile(b, w)
			if derr == nil {
				return payload, nil
			}
			if !stale {
				return nil, fmt.Errorf("dist: rank %d: rendezvous file %s: %v", w.Rank, w.File, derr)
			}
			last = "the file there was " + derr.Error()
		case errors.Is(err, fs.ErrNotExist):
		default:
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dist: rank %d: rank 0 wrote no rendezvous file %s for run %q within %v (%s): %w",
				w.Rank, w.File, w.RunID, timeout, last, context.Cause(ctx))
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}
