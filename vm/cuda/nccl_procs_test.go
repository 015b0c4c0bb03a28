package cuda

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/cuda/internal/fakecuda"
)

// The test binary runs as one NCCL rank when ncclRankEnv is set (TestMain): "RANK NRANKS
// MODE", with the fake driver at ncclDriverEnv, the unique id in $OOC_NCCL_ID and its
// results written to ncclOutEnv.
const (
	ncclRankEnv   = "OOC_TEST_NCCL_RANK"
	ncclDriverEnv = "OOC_TEST_NCCL_DRIVER"
	ncclOutEnv    = "OOC_TEST_NCCL_OUT"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(ncclRankEnv); spec != "" {
		if err := runNCCLRank(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// ncclCase is one all-reduce the ranks run, each on data of its own.
type ncclCase struct {
	dt     tensor.Dtype
	n      int
	device bool // AllReduceMeanDevice, not AllReduceMean
}

// ncclCases: float32 and float64, a buffer of ten rounds (the tests set 4 KiB slots), one
// on the devices.
var ncclCases = []ncclCase{{tensor.Float32, 1000, false}, {tensor.Float64, 77, false}, {tensor.Float64, 5000, false}, {tensor.Float32, 300, true}}

// caseData is every rank's data of case i, the same in every process.
func caseData(i, nranks int) [][]byte {
	c := ncclCases[i]
	r := rand.New(rand.NewPCG(uint64(i), uint64(nranks)))
	out := make([][]byte, nranks)
	for k := range out {
		if c.dt == tensor.Float32 {
			out[k] = raw(randoms[float32](r, 1, c.n)[0])
		} else {
			out[k] = raw(randoms[float64](r, 1, c.n)[0])
		}
	}
	return out
}

// caseMean is the host's mean of case i's data: a sum in rank order, then a division.
func caseMean(i, nranks int) []byte {
	xs := caseData(i, nranks)
	if ncclCases[i].dt == tensor.Float32 {
		v := make([][]float32, nranks)
		for k, x := range xs {
			v[k] = unsafe.Slice((*float32)(unsafe.Pointer(&x[0])), len(x)/4)
		}
		return raw(hostMean(v))
	}
	v := make([][]float64, nranks)
	for k, x := range xs {
		v[k] = unsafe.Slice((*float64)(unsafe.Pointer(&x[0])), len(x)/8)
	}
	return raw(hostMean(v))
}

// reduceCase all-reduces case i's data of the local ranks on c and returns the results.
func reduceCase(c *NCCL, devs []*Device, ranks []int, i int) ([][]byte, error) {
	all := caseData(i, c.Ranks())
	bufs := make([][]byte, len(ranks))
	for k, r := range ranks {
		bufs[k] = all[r]
	}
	cs := ncclCases[i]
	if !cs.device {
		return bufs, c.AllReduceMean(cs.dt, bufs)
	}
	addrs := make([]uintptr, len(devs))
	for k, d := range devs {
		seg, err := d.Memory().AllocSegment(int64(len(bufs[k])))
		if err != nil {
			return nil, err
		}
		defer d.Memory().FreeSegment(seg)
		addrs[k] = seg.Addr
		if err := d.copySync(seg.Addr, bufs[k]); err != nil {
			return nil, err
		}
	}
	if err := c.AllReduceMeanDevice(cs.dt, addrs, cs.n); err != nil {
		return nil, err
	}
	for k, d := range devs {
		dst := bufs[k]
		err := d.do(func(drv *driver) error {
			return drv.check(fnMemcpyDtoH, drv.call(fnMemcpyDtoH, uintptr(unsafe.Pointer(&dst[0])), addrs[k], uintptr(len(dst))))
		})
		if err != nil {
			return nil, err
		}
	}
	return bufs, nil
}

// runNCCLRank is a rank in a process of its own. Modes: "mean" runs every case and writes
// the results; "idle" runs the first case, says "ready" on stdout and waits to be killed;
// "join" joins, runs the first case and fails with what went wrong.
func runNCCLRank(spec string) error {
	var rank, nranks int
	var mode string
	if _, err := fmt.Sscan(spec, &rank, &nranks, &mode); err != nil {
		return fmt.Errorf("%s=%q: %v", ncclRankEnv, spec, err)
	}
	d, err := Open(0, WithLibrary(os.Getenv(ncclDriverEnv)), WithLog(io.Discard))
	if err != nil {
		return err
	}
	defer d.Close()
	id, _, err := UniqueIDFromEnv()
	if err != nil {
		return err
	}
	c, err := JoinNCCL(d, rank, nranks, id)
	if err != nil {
		return fmt.Errorf("rank %d: %w", rank, err)
	}
	defer c.Close()
	var out bytes.Buffer
	for i := range ncclCases {
		if ncclCases[i].device && !c.AveragesOnDevice() {
			continue
		}
		bufs, err := reduceCase(c, []*Device{d}, []int{rank}, i)
		if err != nil {
			return fmt.Errorf("rank %d: %w", rank, err)
		}
		out.Write(bufs[0])
		if mode != "mean" {
			break
		}
	}
	if mode == "idle" {
		fmt.Println("ready")
		select {}
	}
	return os.WriteFile(os.Getenv(ncclOutEnv), out.Bytes(), 0o600)
}

// rankProc is a rank started as a process of its own.
type rankProc struct {
	cmd    *exec.Cmd
	out    string
	stderr bytes.Buffer
	stdout io.ReadCloser
}

// startRank starts the test binary as rank `rank` of nranks in mode, with id.
func startRank(t *testing.T, driver string, id UniqueID, rank, nranks int, mode string) *rankProc {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Skip("cannot find the test binary to run ranks with:", err)
	}
	p := &rankProc{out: filepath.Join(t.TempDir(), "out")}
	p.cmd = exec.Command(bin, "-test.run=^$")
	p.cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %d %s", ncclRankEnv, rank, nranks, mode), ncclDriverEnv+"="+driver,
		ncclOutEnv+"="+p.out, UniqueIDEnv+"="+id.String())
	p.cmd.Stderr = &p.stderr
	if p.stdout, err = p.cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	return p
}

// wait waits for the rank to exit, at most a minute.
func (p *rankProc) wait(t *testing.T) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, _ = io.Copy(io.Discard, p.stdout)
		done <- p.cmd.Wait()
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		t.Fatalf("rank %v did not exit within a minute; stderr:\n%s", p.cmd.Env[len(p.cmd.Env)-4], p.stderr.String())
		return nil
	}
}

// ncclProcs sets up the fake driver (n devices for the in-process reference) and a fresh
// fake NCCL of the given version for ranks in this process and others, with 4 KiB slots
// so that a case takes several rounds.
func ncclProcs(t *testing.T, n int, version int64) (driver string, devs []*Device, nf *fakecuda.Fake) {
	t.Helper()
	t.Setenv("OOC_FAKENCCL_SLOT_BYTES", "4096")
	t.Setenv("OOC_FAKENCCL_VERSION", strconv.FormatInt(version, 10))
	devs, nf = fakeNCCL(t, n, version)
	return os.Getenv("OOC_FAKENCCL_DRIVER"), devs, nf
}

// newTestID makes a unique id; the test fails if the fake NCCL's shared memory for it is
// left in /dev/shm at its end.
func newTestID(t *testing.T) UniqueID {
	t.Helper()
	id, err := NewUniqueID()
	must(t, err)
	name := segmentOf(id)
	t.Cleanup(func() {
		if _, err := os.Stat(name); err == nil {
			t.Errorf("%s is left behind", name)
			_ = os.Remove(name)
		}
	})
	return id
}

// segmentOf is where the fake NCCL keeps the shared memory of id's ranks.
func segmentOf(id UniqueID) string {
	h := fnv.New64a()
	h.Write(id[:])
	return filepath.Join("/dev/shm", fmt.Sprintf("fakenccl-%016x", h.Sum64()))
}

// TestNCCLAcrossProcesses: ranks in processes of their own, each with its own fake driver,
// meet through the fake NCCL's shared memory and all-reduce float32 and float64 buffers, on
// the host and on the devices, some in several rounds: every rank's result is, bit for bit,
// what the same ranks give in one process (NewNCCL) and the host's mean (a sum in rank
// order, then a division). This process is rank 0; 2 and 4 ranks with ncclAvg, and 2 with
// NCCL 2.9's ncclSum, divided on the host (no device case: it needs ncclAvg).
func TestNCCLAcrossProcesses(t *testing.T) {
	for _, tc := range []struct {
		nranks  int
		version int64
	}{{2, 22304}, {4, 22304}, {2, 20903}} {
		nranks := tc.nranks
		t.Run(fmt.Sprintf("%d ranks, version %d", nranks, tc.version), func(t *testing.T) {
			driver, devs, _ := ncclProcs(t, nranks, tc.version)
			one, err := NewNCCL(devs)
			must(t, err)
			var want [][]byte // case by case, every rank's
			for i := range ncclCases {
				if ncclCases[i].device && !one.AveragesOnDevice() {
					continue
				}
				got, err := reduceCase(one, devs, rankList(nranks), i)
				must(t, err)
				mean := caseMean(i, nranks)
				for r, b := range got {
					if !bytes.Equal(b, mean) {
						t.Fatalf("case %d, one process: rank %d differs from the host's mean", i, r)
					}
				}
				want = append(want, mean)
			}
			must(t, one.Close())

			id := newTestID(t)
			var procs []*rankProc
			for r := 1; r < nranks; r++ {
				procs = append(procs, startRank(t, driver, id, r, nranks, "mean"))
			}
			c, err := JoinNCCL(devs[0], 0, nranks, id)
			must(t, err)
			for i, k := 0, 0; i < len(ncclCases); i++ {
				if ncclCases[i].device && !c.AveragesOnDevice() {
					continue
				}
				got, err := reduceCase(c, devs[:1], []int{0}, i)
				must(t, err)
				if !bytes.Equal(got[0], want[k]) {
					t.Errorf("case %d: rank 0 differs from the one-process run", i)
				}
				k++
			}
			must(t, c.Close())
			wantAll := bytes.Join(want, nil)
			for k, p := range procs {
				if err := p.wait(t); err != nil {
					t.Fatalf("rank %d: %v; stderr:\n%s", k+1, err, p.stderr.String())
				}
				got, err := os.ReadFile(p.out)
				must(t, err)
				if !bytes.Equal(got, wantAll) {
					t.Errorf("rank %d (pid %d): its results differ from the one-process run", k+1, p.cmd.Process.Pid)
				}
			}
		})
	}
}

func rankList(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// TestNCCLDeadRank: rank 1, a process of its own, is killed (SIGKILL, and left unreaped: a
// zombie) while rank 0 waits for it in an all-reduce. Rank 0's call returns within seconds,
// not at the timeout, with ErrNCCLFailed and a message naming rank 1 and its pid; every
// later call says the same at once.
func TestNCCLDeadRank(t *testing.T) {
	driver, devs, _ := ncclProcs(t, 1, 22304)
	id := newTestID(t)
	p := startRank(t, driver, id, 1, 2, "idle")
	c, err := JoinNCCL(devs[0], 0, 2, id)
	must(t, err)
	defer func() { must(t, c.Close()) }()
	if _, err := reduceCase(c, devs, []int{0}, 0); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(p.stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("rank 1 said %q, %v; stderr:\n%s", line, err, p.stderr.String())
	}
	type result struct {
		err  error
		took time.Duration
	}
	done := make(chan result, 1)
	go func() {
		start := time.Now()
		_, err := reduceCase(c, devs, []int{0}, 1)
		done <- result{err, time.Since(start)}
	}()
	time.Sleep(200 * time.Millisecond) // rank 0 is waiting in the all-reduce
	must(t, p.cmd.Process.Signal(syscall.SIGKILL))
	var res result
	select {
	case res = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("rank 0 still waits 30 s after rank 1 was killed")
	}
	_ = p.wait(t) // reap it only now
	pid := strconv.Itoa(p.cmd.Process.Pid)
	if !errors.Is(res.err, ErrNCCLFailed) || !strings.Contains(res.err.Error(), "rank 1 of 2 (pid "+pid+") is gone") {
		t.Fatalf("rank 0's all-reduce: %v, want ErrNCCLFailed naming rank 1 (pid %s)", res.err, pid)
	}
	if res.took > 10*time.Second {
		t.Errorf("rank 0 noticed after %v", res.took)
	}
	t.Logf("after %v: %v", res.took.Round(time.Millisecond), res.err)
	if err := c.AllReduceMean(tensor.Float32, [][]byte{make([]byte, 4)}); !errors.Is(err, ErrNCCLFailed) || c.Err() == nil {
		t.Errorf("a later call: %v (Err %v), want the communicator's failure", err, c.Err())
	}
}

// TestNCCLBadWorld: ranks that disagree on the world size, or two processes that give the
// same rank, fail every rank, each saying why, instead of leaving the others waiting.
func TestNCCLBadWorld(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ranks [][2]int // the other processes' rank and world size
		want  string
	}{
		{"world size mismatch", [][2]int{{1, 3}}, "every rank must give the same world size"},
		{"rank given twice", [][2]int{{1, 2}, {1, 2}}, "rank 1 of 2 joined twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			driver, devs, _ := ncclProcs(t, 1, 22304)
			id := newTestID(t)
			// Rank 0 joins first: a rank that comes after every other has left waits
			// alone until the timeout, as a real NCCL's would.
			type joined struct {
				c   *NCCL
				err error
			}
			first := make(chan joined, 1)
			go func() {
				c, err := JoinNCCL(devs[0], 0, 2, id)
				first <- joined{c, err}
			}()
			for start := time.Now(); ; time.Sleep(time.Millisecond) {
				if _, err := os.Stat(segmentOf(id)); err == nil {
					break
				}
				if time.Since(start) > time.Minute {
					t.Fatal("rank 0 made no shared memory within a minute")
				}
			}
			var procs []*rankProc
			for _, r := range tc.ranks {
				procs = append(procs, startRank(t, driver, id, r[0], r[1], "join"))
			}
			j := <-first
			c, err := j.c, j.err
			if err == nil {
				// Both duplicates may come after rank 0 and the first of them have
				// joined: the second fails the communicator, and rank 0's next call.
				for _, p := range procs {
					_ = p.wait(t)
				}
				_, err = reduceCase(c, devs, []int{0}, 0)
				must(t, c.Close())
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("rank 0: %v, want an error saying %q", err, tc.want)
				for _, p := range procs {
					t.Logf("stderr: %s", p.stderr.String())
				}
			}
			for k, p := range procs {
				if werr := p.wait(t); werr == nil || !strings.Contains(p.stderr.String(), tc.want) {
					t.Errorf("process %d (rank %d of %d): %v; stderr %q, want it to fail saying %q", k, tc.ranks[k][0], tc.ranks[k][1], werr, p.stderr.String(), tc.want)
				}
			}
		})
	}
}

// TestNCCLTimeout: a rank that joined but never reaches the all-reduce (alive, so no
// peer's death ends the wait) fails the others' call at WithNCCLTimeout: the watchdog
// aborts the communicator, and the blocked call returns, saying so.
func TestNCCLTimeout(t *testing.T) {
	ds, _ := fakeNCCL(t, 2, 22304)
	id := newTestID(t)
	var idle *NCCL
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var err error
		if idle, err = JoinNCCL(ds[1], 1, 2, id); err != nil {
			t.Error(err)
		}
	}()
	c, err := JoinNCCL(ds[0], 0, 2, id, WithNCCLTimeout(300*time.Millisecond), withNCCLPoll(20*time.Millisecond))
	must(t, err)
	wg.Wait()
	start := time.Now()
	err = c.AllReduceMean(tensor.Float64, [][]byte{make([]byte, 64)})
	took := time.Since(start)
	if !errors.Is(err, ErrNCCLFailed) || !strings.Contains(err.Error(), "more than the timeout of 300ms") {
		t.Errorf("all-reduce: %v, want the timeout", err)
	}
	if took > 10*time.Second {
		t.Errorf("the all-reduce returned after %v", took)
	}
	t.Logf("after %v: %v", took.Round(time.Millisecond), err)
	// The idle rank learns of it too.
	if idle != nil {
		if err := idle.Err(); !errors.Is(err, ErrNCCLFailed) || !strings.Contains(err.Error(), "rank 0 of 2") {
			t.Errorf("the idle rank: %v, want the failure rank 0's abort caused", err)
		}
		must(t, idle.Close())
	}
	must(t, c.Close())
	if _, err := JoinNCCL(ds[0], 0, 2, id, WithNCCLTimeout(-time.Second)); err == nil || !strings.Contains(err.Error(), "want a positive duration") {
		t.Errorf("a negative timeout: %v", err)
	}
}
