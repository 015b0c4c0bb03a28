package dist

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// freeMaster is a loopback host:port nobody listens on (as far as the
// kernel knew a moment ago).
func freeMaster(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// shareAll runs Share for every world on its own goroutine and returns each
// one's bytes and error, and how often make was called.
func shareAll(ws []World, make func() ([]byte, error)) ([][]byte, []error, int) {
	got, errs := make2(len(ws))
	var calls atomic.Int32
	counted := func() ([]byte, error) { calls.Add(1); return make() }
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = Share(context.Background(), w, counted)
		}()
	}
	wg.Wait()
	return got, errs, int(calls.Load())
}

func make2(n int) ([][]byte, []error) { return make([][]byte, n), make([]error, n) }

// world is rank r of a world of size n meeting over TCP at master.
func world(r, n int, master string, timeout time.Duration) World {
	return World{Rank: r, Size: n, LocalRank: r, Master: master, RunID: "test", Timeout: timeout, Source: "flags"}
}

func id(b byte) func() ([]byte, error) {
	return func() ([]byte, error) { return bytes.Repeat([]byte{b}, 128), nil }
}

// Every rank gets rank 0's bytes, which are made once, over TCP and through
// a file, for worlds of 1, 2 and 4.
func TestShare(t *testing.T) {
	for _, transport := range []string{"tcp", "file"} {
		for _, n := range []int{1, 2, 4} {
			t.Run(fmt.Sprintf("%s/%d", transport, n), func(t *testing.T) {
				master, file := freeMaster(t), filepath.Join(t.TempDir(), "id")
				var ws []World
				for r := range n {
					w := world(r, n, master, 30*time.Second)
					if transport == "file" {
						w.Master, w.File = "", file
					}
					ws = append(ws, w)
				}
				got, errs, calls := shareAll(ws, id(7))
				want, _ := id(7)()
				for r := range n {
					if errs[r] != nil || !bytes.Equal(got[r], want) {
						t.Errorf("rank %d: %x, %v", r, got[r], errs[r])
					}
				}
				if calls != 1 {
					t.Errorf("make called %d times, want once (by rank 0)", calls)
				}
			})
		}
	}
}

// A file left by an earlier run (another run id) is not taken: the readers
// wait for this run's file, and without one they time out saying why.
func TestShareFileStale(t *testing.T) {
	file := filepath.Join(t.TempDir(), "id")
	old := World{Rank: 0, Size: 2, File: file, RunID: "yesterday"}
	if _, err := Share(context.Background(), old, id(1)); err != nil {
		t.Fatal(err)
	}
	reader := World{Rank: 1, Size: 2, LocalRank: 1, File: file, RunID: "today", Timeout: 300 * time.Millisecond}
	_, err := Share(context.Background(), reader, id(9))
	if err == nil || !strings.Contains(err.Error(), `run "yesterday"`) || !strings.Contains(err.Error(), "no rendezvous file") {
		t.Fatalf("a stale file: %v", err)
	}

	// With this run's rank 0 writing later, the reader takes the new bytes.
	reader.Timeout = 30 * time.Second
	done := make(chan []byte)
	go func() {
		b, err := Share(context.Background(), reader, id(9))
		if err != nil {
			t.Error(err)
		}
		done <- b
	}()
	time.Sleep(100 * time.Millisecond)
	if _, err := Share(context.Background(), World{Size: 2, File: file, RunID: "today"}, id(2)); err != nil {
		t.Fatal(err)
	}
	if b, want := <-done, bytes.Repeat([]byte{2}, 128); !bytes.Equal(b, want) {
		t.Errorf("reader took %x, want rank 0's %x", b, want)
	}
	// The temporary file was renamed, not left behind.
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(file), ".id.tmp*")); len(m) != 0 {
		t.Errorf("temporary files left: %q", m)
	}
}

// A file of this run but another world size is a configuration error, not a
// file to wait out.
func TestShareFileSizeMismatch(t *testing.T) {
	file := filepath.Join(t.TempDir(), "id")
	if _, err := Share(context.Background(), World{Size: 4, File: file, RunID: "r"}, id(1)); err != nil {
		t.Fatal(err)
	}
	_, err := Share(context.Background(), World{Rank: 1, Size: 2, LocalRank: 1, File: file, RunID: "r", Timeout: 10 * time.Second}, id(1))
	if err == nil || !strings.Contains(err.Error(), "world size 4, this rank 2") {
		t.Fatalf("got %v", err)
	}
}

// Bad worlds are refused by rank 0 with the reason, which reaches the ranks
// that checked in, and rank 0 stops rather than waiting out its timeout.
func TestShareRefuses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		others []World // rank 0 is world(0, 3, ...)
		want   string
	}{
		{"world size mismatch", []World{world(1, 3, "", 0), world(2, 4, "", 0)}, "world size mismatch: rank 2 has world size 4, rank 0 has 3"},
		{"a rank twice", []World{world(1, 3, "", 0), world(1, 3, "", 0)}, "rank 1 checked in twice"},
		{"a second rank 0", []World{world(1, 3, "", 0), {Rank: 0, Size: 3, RunID: "test"}}, "a second process says it is rank 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			master := freeMaster(t)
			start := time.Now()
			ws := []World{world(0, 3, master, 20*time.Second)}
			for _, o := range tc.others {
				o.Master, o.Timeout = master, 20*time.Second
				ws = append(ws, o)
			}
			// A second "rank 0" would listen itself; make it join instead.
			_, errs, _ := shareAllJoin(ws)
			if errs[0] == nil || !strings.Contains(errs[0].Error(), tc.want) {
				t.Errorf("rank 0: %v, want %q", errs[0], tc.want)
			}
			for i := 1; i < len(ws); i++ {
				if errs[i] == nil || !strings.Contains(errs[i].Error(), tc.want) {
					t.Errorf("process %d (rank %d): %v, want %q", i, ws[i].Rank, errs[i], tc.want)
				}
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %v: rank 0 waited instead of refusing", d)
			}
		})
	}
}

// shareAllJoin is shareAll where every world but the first joins over TCP,
// whatever rank it says it is (so a wrong rank can be sent to rank 0).
func shareAllJoin(ws []World) ([][]byte, []error, int) {
	got, errs := make2(len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 0 {
				got[i], errs[i] = Share(context.Background(), w, id(3))
				return
			}
			// Join after rank 0 listens, in order, so that which one is the
			// offender is known.
			time.Sleep(time.Duration(i) * 200 * time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), w.Timeout)
			defer cancel()
			got[i], errs[i] = join(ctx, w, w.Timeout)
		}()
	}
	wg.Wait()
	return got, errs, 0
}

// A rank of another run (another job that was given the same port) is
// refused with the reason, and does not stop this run: rank 0 goes on
// waiting for its own ranks, and names the stranger if they never come.
func TestShareAnotherRun(t *testing.T) {
	master := freeMaster(t)
	stranger := World{Rank: 1, Size: 2, LocalRank: 1, Master: master, RunID: "other", Timeout: 20 * time.Second}
	mine := world(1, 2, master, 20*time.Second)
	_, errs, _ := shareAllJoin([]World{world(0, 2, master, 20*time.Second), stranger, mine})
	if errs[0] != nil || errs[2] != nil {
		t.Errorf("this run's ranks: %v, %v", errs[0], errs[2])
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), `is rank 0 of run "test", not of run "other"`) {
		t.Errorf("the stranger: %v", errs[1])
	}

	_, errs, _ = shareAllJoin([]World{world(0, 2, master, time.Second), stranger})
	if errs[0] == nil || !strings.Contains(errs[0].Error(), `rank(s) 1 did not check in`) || !strings.Contains(errs[0].Error(), `refused as of another run: rank 1 of run "other"`) {
		t.Errorf("rank 0 alone: %v", errs[0])
	}
}

// A rank out of range never gets to rank 0 (its own Validate refuses it);
// sent anyway, rank 0 refuses it.
func TestShareRankOutOfRange(t *testing.T) {
	master := freeMaster(t)
	ws := []World{world(0, 2, master, 20*time.Second), {Rank: 5, Size: 2, Master: master, RunID: "test", Timeout: 20 * time.Second}}
	_, errs, _ := shareAllJoin(ws)
	for i, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "rank 5 is out of range for world size 2") {
			t.Errorf("process %d: %v", i, err)
		}
	}
	if _, err := Share(context.Background(), ws[1], id(1)); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("Share took rank 5 of 2: %v", err)
	}
}

// An unreachable master is an error that says so within the timeout.
func TestShareUnreachable(t *testing.T) {
	w := world(1, 2, freeMaster(t), 500*time.Millisecond)
	start := time.Now()
	_, err := Share(context.Background(), w, id(1))
	if err == nil || !strings.Contains(err.Error(), "could not be reached within 500ms") || !strings.Contains(err.Error(), w.Master) {
		t.Fatalf("got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("gave up after %v, timeout 500ms", d)
	}
}

// A rank that never comes: rank 0 names it, and the ranks that did check in
// hear that rank 0 gave up.
func TestShareMissingRank(t *testing.T) {
	master := freeMaster(t)
	_, errs, _ := shareAll([]World{world(0, 3, master, time.Second), world(1, 3, master, 20*time.Second)}, id(1))
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "rank(s) 2 did not check in") {
		t.Errorf("rank 0: %v", errs[0])
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "rank 0 gave up") {
		t.Errorf("rank 1: %v", errs[1])
	}
}

// Rank 0 failing to make the bytes is every rank's error: the ranks that
// check in hear it at once, and rank 0 returns it after errorLinger even if
// a rank never comes, not after the whole timeout.
func TestShareMakeFails(t *testing.T) {
	defer func(d time.Duration) { errorLinger = d }(errorLinger)
	errorLinger = 500 * time.Millisecond
	master := freeMaster(t)
	boom := errors.New("no NCCL here")
	start := time.Now()
	_, errs, _ := shareAll([]World{world(0, 3, master, time.Minute), world(1, 3, master, time.Minute)},
		func() ([]byte, error) { return nil, boom })
	if !errors.Is(errs[0], boom) {
		t.Errorf("rank 0: %v", errs[0])
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "could not make what it shares: no NCCL here") {
		t.Errorf("rank 1: %v", errs[1])
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v", d)
	}
}

// A connection that is not a rank (a port scan) does not stop the others.
func TestShareIgnoresStrangers(t *testing.T) {
	master := freeMaster(t)
	go func() {
		for range 50 {
			if c, err := net.Dial("tcp", master); err == nil {
				c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
				c.Close()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	time.Sleep(50 * time.Millisecond)
	got, errs, _ := shareAll([]World{world(0, 2, master, 20*time.Second), world(1, 2, master, 20*time.Second)}, id(4))
	if errs[0] != nil || errs[1] != nil || !bytes.Equal(got[0], got[1]) {
		t.Fatalf("%v %v", errs[0], errs[1])
	}
}

// The context ends Share early, as the timeout does.
func TestShareContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := Share(ctx, world(1, 2, freeMaster(t), time.Minute), id(1))
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "could not be reached") {
		t.Fatalf("got %v", err)
	}
}

// A file rendezvous into a directory that does not exist fails on rank 0
// with the path.
func TestShareFileUnwritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "missing", "id")
	_, err := Share(context.Background(), World{Size: 2, File: file, RunID: "r"}, id(1))
	if err == nil || !strings.Contains(err.Error(), "rendezvous file") || !strings.Contains(err.Error(), filepath.Dir(file)) {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(file); err == nil {
		t.Error("file exists")
	}
}
