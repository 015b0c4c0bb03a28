package main

import (
	"bytes"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorgonia-ooc/outofcore/models"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// Without PyTorch the command skips, naming the install command.
func TestSkipsWithoutTorch(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-python", "/nonexistent/python3"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), installHint) {
		t.Errorf("output %q does not name %q", out.String(), installHint)
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-rounds", "0"}, {"-malloc", "jemalloc"}, {"-steps", "-1"}, {"-omp", "busy"}} {
		if err := run(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// Each side's op names land in the category of the same work, backward before forward.
func TestCategory(t *testing.T) {
	for _, c := range []struct {
		name  string
		torch bool
		want  string
	}{
		{"Conv2D", false, "convolution forward"},
		{"Conv2DData", false, "convolution backward"},
		{"Conv2DFilter", false, "convolution backward"},
		{"BatchNorm", false, "batch norm forward"},
		{"BatchNormGradGamma", false, "batch norm backward"},
		{"ChannelSum", false, "batch norm backward"},
		{"ReLU", false, "ReLU forward"},
		{"ReLUGrad", false, "ReLU backward"},
		{"MaxPool2D", false, "pooling forward"},
		{"MaxPool2DGrad", false, "pooling backward"},
		{"GlobalAvgPool2DGrad", false, "pooling backward"},
		{"A × B", false, "linear (matmul)"},
		{"Aᵀ × B", false, "linear (matmul)"},
		{"SoftmaxDiff", false, "loss (softmax, cross-entropy)"},
		{"+ false", false, "other ops"},
		{"optimizer (Adam)", false, "optimizer (Adam)"},
		{"outside ops (engine)", false, "outside ops (engine)"},
		{"aten::mkldnn_convolution", true, "convolution forward"},
		{"aten::convolution_backward", true, "convolution backward"},
		{"aten::native_batch_norm", true, "batch norm forward"},
		{"aten::native_batch_norm_backward", true, "batch norm backward"},
		{"aten::clamp_min", true, "ReLU forward"},
		{"aten::threshold_backward", true, "ReLU backward"},
		{"aten::max_pool2d_with_indices", true, "pooling forward"},
		{"aten::max_pool2d_with_indices_backward", true, "pooling backward"},
		{"aten::addmm", true, "linear (matmul)"},
		{"aten::_log_softmax_backward_data", true, "loss (softmax, cross-entropy)"},
		{"optimizer", true, "optimizer (Adam)"},
		{"aten::add", true, "other ops"},
		{"aten::to", true, "other ops"},
	} {
		if got := category(c.name, c.torch); got != c.want {
			t.Errorf("category(%q, torch %v) = %q, want %q", c.name, c.torch, got, c.want)
		}
	}
}

// Our breakdown takes each label's time between the snapshots over the steps, and the step's
// remainder after ops and solver is the engine's.
func TestOurBreakdown(t *testing.T) {
	ms := time.Millisecond
	before := map[string]time.Duration{"Conv2D": 10 * ms, "ReLU": 2 * ms}
	after := map[string]time.Duration{"Conv2D": 30 * ms, "ReLU": 6 * ms}
	b := ourBreakdown(before, after, map[string]float64{"Conv2D": 3, "ReLU": 2}, 2, 4*ms, 40*ms)
	want := map[string]float64{"Conv2D": 10, "ReLU": 2, "optimizer (Adam)": 2, "outside ops (engine)": 6}
	for k, v := range want {
		if math.Abs(b.ms[k]-v) > 1e-9 {
			t.Errorf("%s: %v ms a step, want %v", k, b.ms[k], v)
		}
	}
	if b.wallMs != 20 {
		t.Errorf("wall %v ms a step, want 20", b.wallMs)
	}
	if got := b.top(2); !slices.Equal(got, []string{"Conv2D", "outside ops (engine)"}) {
		t.Errorf("top(2) = %v", got)
	}
}

// PyTorch's profile line becomes a breakdown; a broken or empty one is an error.
func TestTorchBreakdown(t *testing.T) {
	b, err := torchBreakdown(`{"steps": 2, "wall_ms": 50.5, "ops": {"aten::addmm": 1.5, "optimizer": 3}}`)
	if err != nil {
		t.Fatal(err)
	}
	if b.wallMs != 50.5 || b.ms["aten::addmm"] != 1.5 || b.byCategory(true)["optimizer (Adam)"] != 3 {
		t.Errorf("breakdown %+v", b)
	}
	for _, bad := range []string{"", "params 3", `{"steps": 0, "ops": {"x": 1}}`, `{"steps": 1, "ops": {}}`} {
		if _, err := torchBreakdown(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// The table has a row per category, their sum and the wall time, then each side's largest ops.
func TestPrintBreakdown(t *testing.T) {
	ours := breakdown{ms: map[string]float64{"Conv2D": 4, "optimizer (Adam)": 1}, calls: map[string]float64{"Conv2D": 3}, wallMs: 6}
	theirs := breakdown{ms: map[string]float64{"aten::mkldnn_convolution": 2, "aten::add": 0.5}, wallMs: 3}
	var out bytes.Buffer
	printBreakdown(&out, "m b1", ours, theirs, 3)
	s := out.String()
	for _, want := range []string{
		"| convolution forward | 4.0 | 2.0 |",
		"| optimizer (Adam) | 1.0 | 0.0 |",
		"| other ops | 0.0 | 0.5 |",
		"| sum | 5.0 | 2.5 |",
		"| step wall time over the same steps | 6.0 | 3.0 |",
		"largest ops, this project (ms a step): Conv2D 4.0 (3 calls); optimizer (Adam) 1.0",
		"largest ops, PyTorch (ms a step): aten::mkldnn_convolution 2.0; aten::add 0.5",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if n := strings.Count(s, "\n| "); n != len(categories)+4 { // the header, "other ops", the sum and the wall time
		t.Errorf("%d table rows, want %d:\n%s", n, len(categories)+4, s)
	}
}

// With OOC_TORCHBENCH=1 and PyTorch in /usr/bin/python3, a short run of each model prints its
// row and both breakdowns (minutes on 2 loaded cores; the timings are not checked).
func TestWithTorch(t *testing.T) {
	if os.Getenv("OOC_TORCHBENCH") != "1" {
		t.Skip("set OOC_TORCHBENCH=1 to run the models against PyTorch (minutes)")
	}
	var out bytes.Buffer
	if err := run([]string{"-python", "/usr/bin/python3", "-models", "smallcnn,resnet18,resnet50", "-rounds", "1", "-steps", "1"}, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if strings.HasPrefix(s, "skipped") {
		t.Skip(s)
	}
	for _, want := range []string{"| smallcnn b64 1x28x28 |", "| resnet18 b32 3x32x32 |", "| resnet50 b16 3x64x64 |", "| convolution backward |"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
}

// Our step binds no activation to its node, as ooc train compiles: only the loss and the
// gradients leave the machine, so the engine copies nothing else to the host a step.
func TestOurStepBindsNoActivation(t *testing.T) {
	o, err := ourStep(setup{"smallcnn", models.Config{Batch: 2, Channels: 1, Height: 8, Width: 8, Classes: 3, Seed: 1}})
	if err != nil {
		t.Fatal(err)
	}
	p := o.vm.Program()
	for i := range p.Vars {
		if v := &p.Vars[i]; v.Bind && !v.Node.IsScalar() {
			t.Errorf("%s (%v) is copied to the host after its op", v.Name, v.Shape)
		}
	}
	if err := o.step(); err != nil {
		t.Fatal(err)
	}
}
