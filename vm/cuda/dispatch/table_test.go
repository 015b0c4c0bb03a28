package dispatch_test

import (
	"bytes"
	"math/rand"
	"strings"
	"testing"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/dispatch"
	"github.com/gorgonia-ooc/outofcore/vm/cuda/kernels"
)

// TestLaunchTable: after a step, every function of the program has its
// launches recorded with the configuration and cost the kernels' Specs give,
// and cuBLAS calls count 2mnk FLOPs.
func TestLaunchTable(t *testing.T) {
	d := openFake(t)
	p := newPair(t, d, zooCase{Name: "smallcnn", Cfg: models.Config{Batch: 2, Channels: 3, Height: 8, Width: 8, Classes: 4, Seed: 9}})
	p.Step(t, rand.New(rand.NewSource(1)))
	ls, ok := dispatch.LaunchesOf(p.MG)
	if !ok {
		t.Fatal("the CUDA machine has no dispatch runner")
	}
	if _, ok := dispatch.LaunchesOf(p.MC); ok {
		t.Error("the CPU machine reports a launch table")
	}
	funcs := map[int]bool{}
	seen := map[string]bool{}
	for _, l := range ls {
		funcs[l.Func] = true
		seen[l.Kernel] = true
		if l.Count < 1 || l.Bytes <= 0 {
			t.Errorf("%+v: no launches or no bytes", l)
		}
		if s, ok := kernels.Lookup(l.Kernel); ok {
			if l.Block != [3]uint32{256, 1, 1} || l.Grid[0] == 0 {
				t.Errorf("%s: grid %v block %v", l.Kernel, l.Grid, l.Block)
			}
			_ = s
		} else if l.Kernel != "cublasSgemm_v2" || l.FLOPs <= 0 {
			t.Errorf("unknown launch %+v", l)
		}
	}
	if n := len(p.MG.Program().Funcs); len(funcs) != n {
		t.Errorf("%d of %d functions have launches", len(funcs), n)
	}
	for _, k := range []string{"im2col_f32", "cublasSgemm_v2", "bn_stats_f32", "bn_apply_f32", "relu_f32", "maxpool_f32", "softmax_f32", "copy_f32", "reduce_f32"} {
		if !seen[k] {
			t.Errorf("no %s launch in smallcnn's step", k)
		}
	}
	var b bytes.Buffer
	if err := dispatch.WriteLaunchTable(&b, ls); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "im2col_f32") || !strings.Contains(b.String(), "total") {
		t.Errorf("table:\n%s", b.String())
	}
	t.Logf("%d launch rows; first lines:\n%s", len(ls), strings.Join(strings.SplitN(b.String(), "\n", 6)[:5], "\n"))
}
