package train

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch/dispatchtest"
)

// cudaRun is what a training run on fake CUDA devices left: its step
// losses, its checkpoint's tensors (weights, batch-norm statistics, Adam's
// moments) by name, its summary and what CompileParallel said.
type cudaRun struct {
	losses  []float64
	tensors map[string][]byte
	values  map[string][]float64
	out     string
	log     string
}

// trainFake trains cfg to its end (resuming its checkpoint when resume is
// set, to cfg.Steps) and reads the checkpoint back.
func trainFake(t *testing.T, cfg Config, resume bool) cudaRun {
	t.Helper()
	start := time.Now()
	defer func() { t.Logf("%s: %v", filepath.Base(cfg.Checkpoint), time.Since(start)) }()
	var log bytes.Buffer
	var tr *Trainer
	var err error
	if resume {
		ck, lerr := Load(cfg.Checkpoint)
		if lerr != nil {
			t.Fatal(lerr)
		}
		run := *ck.Meta.Run
		run.Steps = cfg.Steps
		tr, err = Resume(ck, cfg.Checkpoint, run, ooc.WithLog(&log))
	} else {
		tr, err = Open(cfg, ooc.WithLog(&log))
	}
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	res, err := tr.Fit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if tr.upd != nil && tr.upd.rep != nil {
		// Every replica's weights on its device are replica 0's, bit for bit.
		for i, ds := range tr.upd.rep.solvers {
			if err := ds.SyncToHost(); err != nil {
				t.Fatal(err)
			}
			for k, l := range tr.par.learnables[i] {
				if !bytes.Equal(rawBits(t, l.Value()), rawBits(t, tr.par.learnables[0][k].Value())) {
					t.Errorf("replica %d's %s differs from replica 0's", i, l.Name())
				}
			}
		}
	}
	var out bytes.Buffer
	tr.Describe(&out)
	tr.Summary(&out, res)
	ck, ts := runState(t, cfg.Checkpoint)
	values := map[string][]float64{}
	for _, nt := range ck.Tensors {
		switch d := nt.T.Data().(type) {
		case []float32:
			for _, x := range d {
				values[nt.Name] = append(values[nt.Name], float64(x))
			}
		case []float64:
			values[nt.Name] = d
		default:
			t.Fatalf("%s holds %T", nt.Name, d)
		}
	}
	return cudaRun{losses: ck.Losses, tensors: ts, values: values, out: out.String(), log: log.String()}
}

// sameRun fails unless two runs' losses and checkpoint tensors are equal
// bit for bit.
func sameRun(t *testing.T, what string, got, want cudaRun) {
	t.Helper()
	if len(got.losses) != len(want.losses) || len(got.tensors) != len(want.tensors) {
		t.Fatalf("%s: %d losses and %d tensors, want %d and %d", what, len(got.losses), len(got.tensors), len(want.losses), len(want.tensors))
	}
	for i := range want.losses {
		if math.Float64bits(got.losses[i]) != math.Float64bits(want.losses[i]) {
			t.Errorf("%s: step %d loss %v, want %v", what, i+1, got.losses[i], want.losses[i])
		}
	}
	for name, w := range want.tensors {
		if !bytes.Equal(got.tensors[name], w) {
			t.Errorf("%s: %s differs", what, name)
		}
	}
}

// TestDataParallelOnFakeCUDA trains smallcnn data parallel on two fake
// CUDA devices through the package's Open, Fit and Resume: each replica
// compiled on its own device at half the batch under 60% of its in-core
// peak, weights and Adam's state on both devices, the update run there.
//
//   - With the fake NCCL the gradients are averaged on the devices
//     (AllReduceMeanDevice); without NCCL CompileParallel says so once and
//     they go through the host. The fake NCCL sums in rank order and
//     divides as the host all-reduce does, so the two runs agree bit for
//     bit: losses, weights, batch-norm statistics and Adam's moments.
//   - Two CPU replicas (cpu*2) do the same arithmetic on the same shares
//     (smallcnn's batch norms normalise each replica's share, so one device
//     on the whole batch is not the same math; TestDataParallelLSTMOnFakeCUDA
//     compares with one device where it is): the CUDA run matches them
//     within float32's 1e-5 relative, as one fake CUDA device matches the
//     CPU device (TestTrainOnFakeCUDA).
//   - -host-update (gorgonia's solver on the host, weights up and gradients
//     down every step) matches them too.
//   - A run stopped after step 2 and resumed from its checkpoint continues
//     bit for bit: the checkpoint holds replica 0's weights, statistics and
//     Adam's state, and every device starts from them.
func TestDataParallelOnFakeCUDA(t *testing.T) {
	t0 := time.Now()
	driver := dispatchtest.Setenv(t)
	t.Logf("fake driver built in %v", time.Since(t0))
	dispatchtest.SetDevices(t, driver, 2)
	dir := t.TempDir()
	cfg := func(name, device string, steps int) Config {
		c := tinyConfig()
		c.Steps, c.Device = steps, device
		c.Checkpoint = filepath.Join(dir, name+".ckpt")
		return c
	}
	// No other test of this package trains on CUDA devices without NCCL,
	// so this run is the process's first to say it.
	host := trainFake(t, cfg("host", "cuda:0,cuda:1", 3), false)
	for _, want := range []string{"data parallel on 2 CUDA devices (-device cuda:0,cuda:1): batch 4 split 2 per device",
		"(host all-reduce)", "gradients averaged through the host", "Fake CUDA Device 0 (fakecuda)"} {
		if !strings.Contains(host.out, want) {
			t.Errorf("the summary lacks %q:\n%s", want, host.out)
		}
	}
	if !strings.Contains(host.log, "no usable NCCL library") || !strings.Contains(host.log, "averaging gradients on the host instead") {
		t.Errorf("without NCCL CompileParallel said %q", host.log)
	}

	dispatchtest.SetenvNCCL(t, driver)
	nccl := trainFake(t, cfg("nccl", "cuda*2", 3), false)
	if !strings.Contains(nccl.out, "gradients averaged there by NCCL") || nccl.log != "" {
		t.Errorf("with the fake NCCL: said %q; summary:\n%s", nccl.log, nccl.out)
	}
	sameRun(t, "NCCL against the host all-reduce", nccl, host)

	trainFake(t, cfg("resumed", "cuda*2", 2), false)
	resumed := trainFake(t, cfg("resumed", "cuda*2", 3), true)
	sameRun(t, "resumed after step 2", resumed, nccl)

	cpu := trainFake(t, cfg("cpu", "cpu*2", 3), false)
	closeTo(t, "two CUDA devices against two CPU devices", host, cpu)
	// -host-update: gorgonia's solver on the host, on the averaged gradients.
	hc := cfg("hostupdate", "cuda*2", 3)
	hc.HostUpdate = true
	hostUpdate := trainFake(t, hc, false)
	if !strings.Contains(hostUpdate.out, "on the host (-host-update") {
		t.Errorf("-host-update: the summary says\n%s", hostUpdate.out)
	}
	closeTo(t, "two CUDA devices, -host-update, against two CPU devices", hostUpdate, cpu)

	// The LSTM has no batch norm and a loss that is the mean over every
	// token of the batch, so the mean of two replicas' losses and gradients
	// (each the mean over its two sequences) is the whole batch's, up to
	// float32 rounding of the order of the sums: one device on the whole
	// batch is the same math, and matches within 1e-5 relative.
	text := t.TempDir()
	for name, line := range map[string]string{"train.txt": "the cat sat on the mat.\n", "test.txt": "the mat sat on the cat.\n"} {
		if err := os.WriteFile(filepath.Join(text, name), []byte(strings.Repeat(line, 2)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lstm := func(name, device string) Config {
		c := cfg(name, device, 2)
		c.Model, c.Data, c.Image, c.Hidden, c.LR, c.Optimizer = "lstm", "text:"+text+",seq=4", 0, 8, 0.1, "sgd"
		return c
	}
	one := trainFake(t, lstm("lstm1", "cuda"), false)
	two := trainFake(t, lstm("lstm2", "cuda:0,cuda:1"), false)
	closeTo(t, "lstm on two CUDA devices against one on the whole batch", two, one)

	// Mistakes fail before any step, naming the problem.
	for _, c := range []struct {
		device string
		batch  int
		want   string
	}{
		{"cpu,cuda:0", 4, "-device cpu,cuda:0: one data-parallel run trains on CPU devices or on CUDA devices, not both"},
		{"cuda:0,cuda:2", 4, "-device cuda:0,cuda:2: cuda: no CUDA device: cuda:2 asked for, but this machine has 2 (cuda:0 to cuda:1)"},
		{"cuda*3", 6, "-device cuda*3: cuda: no CUDA device: cuda:2 asked for"},
		{"cuda*2", 5, "-batch 5 does not split evenly among 2 devices"},
		{"cuda:0,cuda:0", 4, "cuda:0 is listed twice"},
	} {
		cf := cfg("bad", c.device, 1)
		cf.Batch = c.batch
		tr, err := Open(cf)
		if err == nil {
			tr.Close()
			t.Errorf("-device %s -batch %d: no error", c.device, c.batch)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("-device %s -batch %d: %v, want %q", c.device, c.batch, err, c.want)
		}
		t.Logf("-device %s -batch %d: %v", c.device, c.batch, err)
	}
}

// closeTo fails unless two runs' losses and checkpoint tensors agree
// within 1e-5 relative (of the larger magnitude; 1e-7 absolute near 0).
func closeTo(t *testing.T, what string, got, want cudaRun) {
	t.Helper()
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-5*max(math.Abs(a), math.Abs(b))+1e-7 }
	if len(want.losses) == 0 || len(got.losses) != len(want.losses) {
		t.Fatalf("%s: %d losses, want %d", what, len(got.losses), len(want.losses))
	}
	for i := range want.losses {
		if !near(got.losses[i], want.losses[i]) {
			t.Errorf("%s: step %d loss %v, want %v", what, i+1, got.losses[i], want.losses[i])
		}
	}
	worst, at := 0.0, ""
	for name, b := range want.values {
		a := got.values[name]
		if len(a) != len(b) {
			t.Errorf("%s: %s holds %d values, want %d", what, name, len(a), len(b))
			continue
		}
		for i := range b {
			if d := math.Abs(a[i] - b[i]); !near(a[i], b[i]) || d > worst {
				if !near(a[i], b[i]) {
					t.Errorf("%s: %s[%d] = %v, want %v", what, name, i, a[i], b[i])
					break
				}
				worst, at = d, fmt.Sprintf("%s[%d]", name, i)
			}
		}
	}
	t.Logf("%s: largest difference %.3g at %s", what, worst, at)
}

func rawBits(t *testing.T, v G.Value) []byte {
	t.Helper()
	d, ok := v.(*tensor.Dense)
	if !ok {
		t.Fatalf("a learnable holds a %T", v)
	}
	return encodeBits(t, NamedTensor{T: d})
}
