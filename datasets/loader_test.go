package datasets

import (
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"gorgonia.org/tensor"
)

func synth(t testing.TB, n int) Dataset {
	t.Helper()
	ds, err := Synthetic(SyntheticConfig{Examples: n, Channels: 3, Height: 8, Width: 6, Classes: 5, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// drain reads batches until io.EOF.
func drain(t testing.TB, l *Loader) []*Batch {
	t.Helper()
	var out []*Batch
	for {
		b, err := l.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
}

func load(t testing.TB, ds Dataset, o Options) []*Batch {
	t.Helper()
	l, err := NewLoader(ds, o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return drain(t, l)
}

// sameBatch compares bit for bit: resumed training must see identical input.
func sameBatch(a, b *Batch) error {
	if a.Epoch != b.Epoch || a.Index != b.Index || a.N != b.N || a.EndOfEpoch != b.EndOfEpoch {
		return fmt.Errorf("positions differ: %+v vs %+v", a, b)
	}
	if fmt.Sprint(a.Indices, a.Labels) != fmt.Sprint(b.Indices, b.Labels) {
		return fmt.Errorf("indices or labels differ")
	}
	for _, p := range [][2]*tensor.Dense{{a.X, b.X}, {a.Y, b.Y}} {
		if fmt.Sprint(p[0].Shape()) != fmt.Sprint(p[1].Shape()) {
			return fmt.Errorf("shapes %v vs %v", p[0].Shape(), p[1].Shape())
		}
		switch x := p[0].Data().(type) {
		case []float32:
			y := p[1].Data().([]float32)
			for i := range x {
				if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
					return fmt.Errorf("element %d: %v vs %v", i, x[i], y[i])
				}
			}
		case []float64:
			y := p[1].Data().([]float64)
			for i := range x {
				if math.Float64bits(x[i]) != math.Float64bits(y[i]) {
					return fmt.Errorf("element %d: %v vs %v", i, x[i], y[i])
				}
			}
		}
	}
	return nil
}

func TestLoaderShapes(t *testing.T) {
	ds := synth(t, 10)
	cases := []struct {
		dtype tensor.Dtype
		last  LastBatch
		ns    []int // N per batch
		rows  int   // rows of the final batch
	}{
		{tensor.Float32, KeepLast, []int{4, 4, 2}, 2},
		{tensor.Float64, KeepLast, []int{4, 4, 2}, 2},
		{tensor.Float32, DropLast, []int{4, 4}, 4},
		{tensor.Float64, PadLast, []int{4, 4, 2}, 4},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.dtype, tc.last), func(t *testing.T) {
			l, err := NewLoader(ds, Options{BatchSize: 4, Dtype: tc.dtype, Last: tc.last, Epochs: 1, Shuffle: true})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if l.BatchesPerEpoch() != len(tc.ns) {
				t.Errorf("BatchesPerEpoch %d, want %d", l.BatchesPerEpoch(), len(tc.ns))
			}
			if fmt.Sprint(l.InputShape(), l.TargetShape()) != "[4 3 8 6] [4 5]" {
				t.Errorf("shapes %v %v", l.InputShape(), l.TargetShape())
			}
			bs := drain(t, l)
			if len(bs) != len(tc.ns) {
				t.Fatalf("%d batches, want %d", len(bs), len(tc.ns))
			}
			for i, b := range bs {
				rows := 4
				if i == len(bs)-1 {
					rows = tc.rows
				}
				if b.N != tc.ns[i] || b.Index != i || b.EndOfEpoch != (i == len(bs)-1) {
					t.Errorf("batch %d: N %d index %d end %v", i, b.N, b.Index, b.EndOfEpoch)
				}
				if fmt.Sprint([]int(b.X.Shape())) != fmt.Sprint([]int{rows, 3, 8, 6}) || fmt.Sprint([]int(b.Y.Shape())) != fmt.Sprint([]int{rows, 5}) {
					t.Errorf("batch %d: X %v Y %v", i, b.X.Shape(), b.Y.Shape())
				}
				if b.X.Dtype() != tc.dtype || b.Y.Dtype() != tc.dtype {
					t.Errorf("dtypes %v %v", b.X.Dtype(), b.Y.Dtype())
				}
				if len(b.Labels) != rows || len(b.Indices) != rows {
					t.Fatalf("%d labels, %d indices for %d rows", len(b.Labels), len(b.Indices), rows)
				}
				for r := 0; r < rows; r++ {
					for k := 0; k < 5; k++ {
						v, _ := b.Y.At(r, k)
						want := 0.0
						if b.Labels[r] == k {
							want = 1
						}
						if fmt.Sprint(v) != fmt.Sprint(want) {
							t.Errorf("batch %d Y[%d,%d] = %v with label %d", i, r, k, v, b.Labels[r])
						}
					}
					if (r >= b.N) != (b.Labels[r] == -1 && b.Indices[r] == -1) {
						t.Errorf("batch %d row %d (N %d): label %d index %d", i, r, b.N, b.Labels[r], b.Indices[r])
					}
				}
			}
		})
	}
}

func TestLoaderOrder(t *testing.T) {
	ds := synth(t, 23)
	seen := map[string]bool{}
	bs := load(t, ds, Options{BatchSize: 5, Shuffle: true, Seed: 9, Epochs: 3})
	for e := 0; e < 3; e++ {
		var idx []int
		for _, b := range bs {
			if b.Epoch == e {
				idx = append(idx, b.Indices[:b.N]...)
			}
		}
		count := make([]int, 23)
		for _, i := range idx {
			count[i]++
		}
		for i, c := range count {
			if c != 1 {
				t.Fatalf("epoch %d: example %d appears %d times", e, i, c)
			}
		}
		seen[fmt.Sprint(idx)] = true
	}
	if len(seen) != 3 {
		t.Error("epochs share an order")
	}
	plain := load(t, ds, Options{BatchSize: 5, Epochs: 1})
	if fmt.Sprint(plain[0].Indices) != "[0 1 2 3 4]" {
		t.Errorf("unshuffled order %v", plain[0].Indices)
	}
}

// TestLoaderDeterminism: same seed, same bits, whatever the prefetch depth or
// the number of decode workers; another seed, another order.
func TestLoaderDeterminism(t *testing.T) {
	ds := synth(t, 19)
	base := Options{BatchSize: 4, Shuffle: true, Seed: 42, Epochs: 2, RandomCrop: 2, Flip: true,
		Mean: []float64{0.5}, Std: []float64{0.25, 0.5, 1}}
	ref := load(t, ds, base)
	variants := map[string]func(o *Options){
		"again":      func(o *Options) {},
		"workers 3":  func(o *Options) { o.Workers = 3 },
		"prefetch 1": func(o *Options) { o.Prefetch = 1 },
		"prefetch 7": func(o *Options) { o.Prefetch = 7; o.Workers = 2 },
	}
	for name, f := range variants {
		o := base
		f(&o)
		got := load(t, ds, o)
		if len(got) != len(ref) {
			t.Fatalf("%s: %d batches, want %d", name, len(got), len(ref))
		}
		for i := range got {
			if err := sameBatch(ref[i], got[i]); err != nil {
				t.Fatalf("%s: batch %d: %v", name, i, err)
			}
		}
	}
	o := base
	o.Seed = 43
	other := load(t, ds, o)
	if fmt.Sprint(other[0].Indices) == fmt.Sprint(ref[0].Indices) {
		t.Error("seeds 42 and 43 give the same first batch")
	}
}

// TestLoaderResume restarts at every position of a run and compares the rest.
func TestLoaderResume(t *testing.T) {
	ds := synth(t, 14)
	base := Options{BatchSize: 4, Shuffle: true, Seed: 5, Epochs: 3, RandomCrop: 1, Flip: true, Last: DropLast}
	ref := load(t, ds, base)
	if len(ref) != 9 {
		t.Fatalf("%d batches", len(ref))
	}
	for k, b := range ref {
		o := base
		o.StartEpoch, o.StartBatch = b.Epoch, b.Index+1 // as a trainer resumes after batch k
		got := load(t, ds, o)
		if len(got) != len(ref)-k-1 {
			t.Fatalf("resume after %d: %d batches, want %d", k, len(got), len(ref)-k-1)
		}
		for i := range got {
			if err := sameBatch(ref[k+1+i], got[i]); err != nil {
				t.Fatalf("resume after %d: batch %d: %v", k, i, err)
			}
		}
	}
}

// constant is a Dataset whose examples are a fixed image; it also lets tests
// inject failures.
type constant struct {
	info Info
	img  []float32
	fail func(i int) error
}

func (c *constant) Info() Info { return c.info }
func (c *constant) Load(i int) (Example, error) {
	if c.fail != nil {
		if err := c.fail(i); err != nil {
			return Example{}, err
		}
	}
	return Example{Image: c.img, Channels: c.info.Channels, Height: c.info.Height, Width: c.info.Width, Label: i % c.info.Classes}, nil
}

func newConstant(n, c, h, w int) *constant {
	img := make([]float32, c*h*w)
	for i := range img {
		img[i] = float32(i) / float32(len(img))
	}
	return &constant{info: Info{Name: "const", Examples: n, Classes: 3, Channels: c, Height: h, Width: w}, img: img}
}

func TestLoaderNormaliseAndChannels(t *testing.T) {
	ds := newConstant(2, 3, 2, 2)
	b := load(t, ds, Options{BatchSize: 2, Epochs: 1, Dtype: tensor.Float64, Mean: []float64{0.1, 0.2, 0.3}, Std: []float64{2, 4, 8}})[0]
	x := b.X.Data().([]float64)
	for c := 0; c < 3; c++ {
		for p := 0; p < 4; p++ {
			v := float64(ds.img[c*4+p])
			want := (v - []float64{0.1, 0.2, 0.3}[c]) / []float64{2, 4, 8}[c]
			if got := x[4*3+c*4+p]; got != want {
				t.Fatalf("channel %d pixel %d: %v, want %v", c, p, got, want)
			}
		}
	}
	// Colour to gray uses BT.601 luma.
	b = load(t, ds, Options{BatchSize: 1, Epochs: 1, Channels: 1})[0]
	x32 := b.X.Data().([]float32)
	want := float32(0.299*float64(ds.img[0]) + 0.587*float64(ds.img[4]) + 0.114*float64(ds.img[8]))
	if x32[0] != want || b.X.Shape()[1] != 1 {
		t.Errorf("luma %v, want %v (shape %v)", x32[0], want, b.X.Shape())
	}
	// Gray to colour replicates.
	g := newConstant(1, 1, 2, 2)
	b = load(t, g, Options{BatchSize: 1, Epochs: 1, Channels: 3})[0]
	x32 = b.X.Data().([]float32)
	if x32[1] != g.img[1] || x32[5] != g.img[1] || x32[9] != g.img[1] {
		t.Errorf("replicated %v", x32)
	}
	// The dataset's buffer is shared across Loads: flipping must not touch it.
	before := append([]float32(nil), ds.img...)
	load(t, ds, Options{BatchSize: 2, Epochs: 4, Flip: true})
	if fmt.Sprint(before) != fmt.Sprint(ds.img) {
		t.Error("augmentation modified the dataset's image")
	}
}

// TestLoaderAugment checks that every augmented image is the padded original
// shifted by at most RandomCrop pixels and possibly mirrored, and that both
// flips and several offsets occur.
func TestLoaderAugment(t *testing.T) {
	const h, w, p = 5, 7, 2
	ds := newConstant(64, 1, h, w)
	for i := range ds.img {
		ds.img[i] = float32(i + 1) // nonzero, so padding is recognisable
	}
	bs := load(t, ds, Options{BatchSize: 64, Epochs: 1, RandomCrop: p, Flip: true, Seed: 1})
	x := bs[0].X.Data().([]float32)
	flips, offsets := 0, map[[2]int]bool{}
	for n := 0; n < 64; n++ {
		got := x[n*h*w : (n+1)*h*w]
		found := false
		for dy := 0; dy <= 2*p && !found; dy++ {
			for dx := 0; dx <= 2*p && !found; dx++ {
				for _, flip := range []bool{false, true} {
					want := randomCrop(ds.img, 1, h, w, p, dy, dx)
					if flip {
						flipRows(want, h, w)
					}
					if fmt.Sprint(want) == fmt.Sprint(got) {
						found = true
						offsets[[2]int{dy, dx}] = true
						if flip {
							flips++
						}
						break
					}
				}
			}
		}
		if !found {
			t.Fatalf("example %d is no crop/flip of the original: %v", n, got)
		}
	}
	if flips < 16 || flips > 48 || len(offsets) < 8 {
		t.Errorf("%d of 64 flipped, %d distinct offsets", flips, len(offsets))
	}
}

func TestLoaderErrors(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name string
		fail func(i int) error
		ex   func(i int) Example
		want string
	}{
		{"load error", func(i int) error {
			if i == 5 {
				return boom
			}
			return nil
		}, nil, "boom"},
		{"panic", func(i int) error {
			if i == 6 {
				panic("kaboom")
			}
			return nil
		}, nil, "panic loading example 6: kaboom"},
		{"short image", nil, func(i int) Example { return Example{Image: make([]float32, 3), Channels: 1, Height: 2, Width: 2} }, "malformed"},
		{"label range", nil, func(i int) Example {
			return Example{Image: make([]float32, 4), Channels: 1, Height: 2, Width: 2, Label: 3}
		}, "label 3 out of range 0..2"},
		{"channels", nil, func(i int) Example { return Example{Image: make([]float32, 8), Channels: 2, Height: 2, Width: 2} }, "cannot convert 2 channels to 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			var ds Dataset
			c := newConstant(8, 1, 2, 2)
			c.fail = tc.fail
			ds = c
			if tc.ex != nil {
				ds = funcDataset{c.info, tc.ex}
			}
			l, err := NewLoader(ds, Options{BatchSize: 2, Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			var got error
			for i := 0; i < 10 && got == nil; i++ {
				_, got = l.Next()
			}
			wantErr(t, got, tc.want)
			if _, again := l.Next(); again != got {
				t.Errorf("error not sticky: %v", again)
			}
			l.Close()
			checkNoLeak(t, before)
		})
	}
}

type funcDataset struct {
	info Info
	f    func(int) Example
}

func (d funcDataset) Info() Info                  { return d.info }
func (d funcDataset) Load(i int) (Example, error) { return d.f(i), nil }

func TestLoaderOptionErrors(t *testing.T) {
	ds := synth(t, 10)
	cases := []struct {
		o    Options
		want string
	}{
		{Options{}, "BatchSize must be positive"},
		{Options{BatchSize: 11, Last: DropLast}, "no full batch"},
		{Options{BatchSize: 2, Dtype: tensor.Int}, "not supported"},
		{Options{BatchSize: 2, Mean: []float64{1, 2}}, "Mean has 2 values for 3 channels"},
		{Options{BatchSize: 2, Std: []float64{0}}, "Std[0] = 0"},
		{Options{BatchSize: 2, Channels: 2}, "cannot feed 3-channel"},
		{Options{BatchSize: 2, RandomCrop: -1}, "RandomCrop"},
		{Options{BatchSize: 2, StartBatch: -1}, "negative"},
		{Options{BatchSize: 2, Last: 7}, "unknown LastBatch"},
	}
	for _, tc := range cases {
		_, err := NewLoader(ds, tc.o)
		wantErr(t, err, tc.want)
	}
	if _, err := NewLoader(nil, Options{BatchSize: 1}); err == nil {
		t.Error("nil dataset: no error")
	}
}

func TestLoaderEOFAndClose(t *testing.T) {
	before := runtime.NumGoroutine()
	ds := synth(t, 10)
	l, err := NewLoader(ds, Options{BatchSize: 5, Epochs: 2})
	if err != nil {
		t.Fatal(err)
	}
	bs := drain(t, l)
	if len(bs) != 4 || !bs[1].EndOfEpoch || bs[2].Epoch != 1 || bs[0].EndOfEpoch {
		t.Errorf("%d batches", len(bs))
	}
	if _, err := l.Next(); err != io.EOF {
		t.Errorf("after the end: %v", err)
	}
	l.Close()
	if _, err := l.Next(); err != ErrClosed {
		t.Errorf("after Close: %v", err)
	}
	l.Close() // idempotent

	// Close while the producer is blocked on a full channel, never read.
	l, _ = NewLoader(ds, Options{BatchSize: 1, Prefetch: 1})
	time.Sleep(10 * time.Millisecond)
	l.Close()

	// Close from another goroutine while Next waits on a slow dataset.
	slow := newConstant(100, 1, 2, 2)
	release := make(chan struct{})
	slow.fail = func(i int) error {
		<-release
		return nil
	}
	l, _ = NewLoader(slow, Options{BatchSize: 1})
	var wg sync.WaitGroup
	wg.Add(1)
	var nextErr error
	go func() {
		defer wg.Done()
		_, nextErr = l.Next()
		for nextErr == nil {
			_, nextErr = l.Next()
		}
	}()
	time.Sleep(10 * time.Millisecond)
	closed := make(chan struct{})
	go func() {
		l.Close()
		close(closed)
	}()
	time.Sleep(10 * time.Millisecond)
	close(release) // the batch in progress finishes; the producer sees Close
	<-closed
	wg.Wait()
	if nextErr != ErrClosed {
		t.Errorf("Next racing Close: %v", nextErr)
	}
	checkNoLeak(t, before)
}

func TestLoaderUnlimitedEpochs(t *testing.T) {
	l, err := NewLoader(synth(t, 3), Options{BatchSize: 2, Shuffle: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var last *Batch
	for i := 0; i < 25; i++ {
		if last, err = l.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if last.Epoch != 12 || last.Index != 0 {
		t.Errorf("batch 25 at epoch %d index %d", last.Epoch, last.Index)
	}
	if !strings.Contains(fmt.Sprint(l.Info().Name), "synthetic") {
		t.Error(l.Info())
	}
}
