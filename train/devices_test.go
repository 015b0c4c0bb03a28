package train

import (
	"bytes"
	"context"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gorgonia-ooc/outofcore/datasets"
	"github.com/gorgonia-ooc/outofcore/models"
)

// Data parallel on one device (-device cpu*1) goes through
// ooc.CompileParallel, its replica, all-reduce and batch-norm hand-over,
// and must train exactly as one device does: the same losses, weights,
// batch-norm statistics, optimizer state and evaluations, bit for bit.
func TestOneReplicaIsOneDevice(t *testing.T) {
	dir := t.TempDir()
	run := func(device string) (*Checkpoint, map[string][]byte, string) {
		cfg := tinyConfig()
		cfg.Epochs, cfg.Steps, cfg.Device = 2, 6, device
		cfg.Checkpoint = filepath.Join(dir, strings.ReplaceAll(device, "*", "x")+".ckpt")
		tr, res := fit(t, cfg)
		var out bytes.Buffer
		tr.Describe(&out)
		tr.Summary(&out, res)
		ck, ts := runState(t, cfg.Checkpoint)
		return ck, ts, out.String()
	}
	want, wantT, _ := run("cpu")
	got, gotT, out := run("cpu*1")
	if !strings.Contains(out, "data parallel on 1 CPU devices") {
		t.Errorf("cpu*1 did not run through CompileParallel:\n%s", out)
	}
	if len(gotT) != len(wantT) {
		t.Fatalf("%d tensors, want %d", len(gotT), len(wantT))
	}
	for name, w := range wantT {
		if !bytes.Equal(gotT[name], w) {
			t.Errorf("%s differs from one device's", name)
		}
	}
	for i := range want.Losses {
		if math.Float64bits(got.Losses[i]) != math.Float64bits(want.Losses[i]) {
			t.Errorf("step %d: loss %v, one device %v", i+1, got.Losses[i], want.Losses[i])
		}
	}
	if !reflect.DeepEqual(got.Meta.Epochs, want.Meta.Epochs) || !reflect.DeepEqual(got.Meta.LastEval, want.Meta.LastEval) {
		t.Errorf("evaluations differ:\n%+v\n%+v", got.Meta.Epochs, want.Meta.Epochs)
	}
	if got.Meta.Run.Device != "cpu*1" {
		t.Errorf("the checkpoint's run has -device %q", got.Meta.Run.Device)
	}
}

// Device, Devices and the CUDA-only options are checked before any work.
func TestCheckDevice(t *testing.T) {
	for _, c := range []struct {
		cfg  func(*Config)
		want string // "" : valid
	}{
		{func(c *Config) {}, ""},
		{func(c *Config) { c.Device = "cuda" }, ""},
		{func(c *Config) { c.Device = "cuda:1"; c.HostUpdate = true; c.LaunchTable = "x.txt" }, ""},
		{func(c *Config) { c.Devices = 2 }, ""},
		{func(c *Config) { c.Device = "cpu,cpu*3" }, ""},
		{func(c *Config) { c.Device = "tpu" }, "unknown device"},
		{func(c *Config) { c.Device = "sim:v100-pcie" }, "runs real steps"},
		{func(c *Config) { c.Device = "sim:v100-pcie*2" }, "runs real steps"},
		{func(c *Config) { c.Device = "cuda"; c.Devices = 2 }, ""},
		{func(c *Config) { c.Device = "cuda:0,cuda:1"; c.HostUpdate = true }, ""},
		{func(c *Config) { c.Device = "cuda*3"; c.LaunchTable = "x.txt" }, ""},
		{func(c *Config) { c.Device = "cpu,cuda:0" }, "not both"},
		{func(c *Config) { c.Device = "cuda:0,cpu*2" }, "not both"},
		{func(c *Config) { c.Device = "cuda:0,cuda:0" }, "cuda:0 is listed twice"},
		{func(c *Config) { c.Device = "cuda,cuda:0" }, "cuda:0 is listed twice"},
		{func(c *Config) { c.Device = "cuda:1*2" }, "a count goes with cuda"},
		{func(c *Config) { c.Device = "cuda*0" }, "positive count"},
		{func(c *Config) { c.Device = "cuda:x,cuda:1" }, "want cuda:N"},
		{func(c *Config) { c.Device = "tpu,tpu" }, "not \"tpu\""},
		{func(c *Config) { c.Device = "cpu*x" }, "positive count"},
		{func(c *Config) { c.Devices = -2 }, "positive count"},
		{func(c *Config) { c.Device = "cpu,cpu"; c.Devices = 2 }, "one way"},
		{func(c *Config) { c.HostUpdate = true }, "-host-update"},
		{func(c *Config) { c.Devices = 2; c.LaunchTable = "x.txt" }, "-launch-table"},
		{func(c *Config) { c.Device = "cpu*2"; c.HostUpdate = true }, "-host-update"},
	} {
		cfg := tinyConfig()
		c.cfg(&cfg)
		cfg.Defaults()
		err := cfg.Check()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("-device %q -devices %d: %v, want %q", cfg.Device, cfg.Devices, err, c.want)
		}
	}
}

// New with a model the caller built trains data parallel too: each replica
// is models.Build of the model's name and configuration at its share of
// the batch.
func TestNewOnTwoDevices(t *testing.T) {
	m, err := models.Build("smallcnn", models.Config{Batch: 4, Channels: 3, Height: 16, Width: 16, Classes: 10, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := datasets.Open("synthetic:n=16", datasets.WithShape(3, 16, 16), datasets.WithClasses(10))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(m, ds, nil, Config{Steps: 2, Devices: 2, Budget: Budget{Percent: 60}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	res, err := tr.Fit(context.Background())
	if err != nil || len(res.Losses) != 2 || tr.par == nil || len(tr.par.devs) != 2 {
		t.Fatalf("%v: %d losses", err, len(res.Losses))
	}
}
