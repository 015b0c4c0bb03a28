package datasets

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"gorgonia.org/tensor"
)

// LastBatch says what happens to the examples left over when the dataset size
// is not a multiple of the batch size.
type LastBatch int

const (
	// KeepLast yields a final, smaller batch.
	KeepLast LastBatch = iota
	// DropLast skips the incomplete final batch, so every batch fits a graph
	// built for a fixed batch size; training usually wants this.
	DropLast
	// PadLast yields a full-size final batch whose tail is zero images with
	// label -1 and an all-zero one-hot row; Batch.N counts the real examples.
	// Evaluation wants this: a fixed-size graph sees every test example once,
	// and the zero rows add nothing to a cross-entropy sum.
	PadLast
)

func (lb LastBatch) String() string {
	switch lb {
	case KeepLast:
		return "keep"
	case DropLast:
		return "drop"
	case PadLast:
		return "pad"
	}
	return fmt.Sprintf("LastBatch(%d)", int(lb))
}

// Options configure a Loader. The zero value of every field but BatchSize is
// a sensible default.
type Options struct {
	BatchSize int
	// Channels, Height and Width are the model's input size; 0 takes the
	// dataset's native value. Images of another size are resized (shorter side
	// first, then centre-cropped, so nothing is distorted); gray data is
	// replicated to feed a colour model, colour is turned to luma for a gray one.
	Channels, Height, Width int
	// Dtype of X and Y: tensor.Float32 (the default) or tensor.Float64.
	Dtype tensor.Dtype
	// Shuffle draws a new permutation each epoch from (Seed, epoch).
	Shuffle bool
	// Seed drives shuffling and augmentation. The same seed gives the same
	// batches, bit for bit, in every run and after a resume.
	Seed int64
	Last LastBatch
	// Mean and Std normalise each channel, x' = (x - Mean[c]) / Std[c], with x
	// in [0, 1]. Each may be nil (0 and 1), hold one value for all channels, or
	// one per channel. Info.Mean and Info.Std hold the customary values.
	Mean, Std []float64
	// RandomCrop pads each image by this many zero pixels on every side and
	// cuts a window of the original size at a random offset (the CIFAR
	// recipe: 4). 0 disables it.
	RandomCrop int
	// Flip mirrors each image horizontally with probability 1/2.
	Flip bool
	// Epochs is how many epochs Next yields before io.EOF; 0 means no end.
	Epochs int
	// StartEpoch and StartBatch resume at a position: to continue after batch
	// b, pass b.Epoch and b.Index+1 (an index past the end of an epoch rolls
	// over into the next one). Everything from there on matches the
	// uninterrupted run bit for bit, because the order and the augmentation
	// are functions of (Seed, epoch, position), never of loader history.
	StartEpoch, StartBatch int
	// Prefetch is how many finished batches may wait for the caller; 0 means 2.
	Prefetch int
	// Workers decode the examples of one batch in parallel; 0 means 1. The
	// result does not depend on it.
	Workers int
}

// Batch is one step's input. The tensors are freshly allocated and belong to
// the caller.
type Batch struct {
	// Epoch and Index locate the batch: Index counts batches within the epoch.
	Epoch, Index int
	// N is the number of real examples (less than the batch size only for a
	// final batch under KeepLast or PadLast).
	N int
	// X is (rows, C, H, W); rows is N, or the batch size under PadLast.
	X *tensor.Dense
	// Y is the one-hot target: (rows, Classes), or (rows, Classes, H, W) for
	// segmentation.
	Y *tensor.Dense
	// Labels holds class indices: rows of them, or rows*H*W (row-major) for
	// segmentation; padding is -1.
	Labels []int
	// Indices are the dataset indices of the examples, -1 for padding.
	Indices []int
	// EndOfEpoch marks the last batch of its epoch, where a trainer evaluates.
	EndOfEpoch bool
}

// Loader produces batches from a Dataset on a background goroutine. Next is
// for one goroutine; Close may be called from any goroutine and must be
// called to release the producer.
type Loader struct {
	ds      Dataset
	info    Info
	opt     Options
	c, h, w int
	mean    []float64
	std     []float64
	nb      int
	f64     bool

	out       chan result
	done      chan struct{}
	closeOnce sync.Once
	closed    atomic.Bool
	wg        sync.WaitGroup
	err       error // sticky; only Next touches it
}

type result struct {
	b   *Batch
	err error
}

// errAborted tells the producer that Close interrupted a batch.
var errAborted = errors.New("aborted")

// NewLoader checks the options against the dataset and starts prefetching.
func NewLoader(ds Dataset, opt Options) (*Loader, error) {
	if ds == nil {
		return nil, errors.New("datasets: nil dataset")
	}
	info := ds.Info()
	l := &Loader{ds: ds, info: info, opt: opt}
	if err := l.setup(); err != nil {
		return nil, err
	}
	l.out = make(chan result, l.opt.Prefetch)
	l.done = make(chan struct{})
	l.wg.Add(1)
	go l.run()
	return l, nil
}

func (l *Loader) setup() error {
	o, info := &l.opt, l.info
	switch {
	case o.BatchSize <= 0:
		return fmt.Errorf("datasets: BatchSize must be positive, got %d", o.BatchSize)
	case info.Examples <= 0:
		return fmt.Errorf("datasets: %s has no examples", info.Name)
	case info.Classes <= 0:
		return fmt.Errorf("datasets: %s has no classes", info.Name)
	case o.Epochs < 0 || o.StartEpoch < 0 || o.StartBatch < 0:
		return fmt.Errorf("datasets: Epochs, StartEpoch and StartBatch must not be negative")
	case o.RandomCrop < 0 || o.RandomCrop > 1<<12:
		return fmt.Errorf("datasets: RandomCrop %d outside 0..4096", o.RandomCrop)
	case o.Prefetch < 0 || o.Workers < 0:
		return fmt.Errorf("datasets: Prefetch and Workers must not be negative")
	case o.Last < KeepLast || o.Last > PadLast:
		return fmt.Errorf("datasets: unknown LastBatch %d", o.Last)
	}
	switch o.Dtype {
	case tensor.Dtype{}, tensor.Float32:
		o.Dtype = tensor.Float32
	case tensor.Float64:
		l.f64 = true
	default:
		return fmt.Errorf("datasets: Dtype %v not supported (want Float32 or Float64)", o.Dtype)
	}
	if o.Prefetch == 0 {
		o.Prefetch = 2
	}
	if o.Workers == 0 {
		o.Workers = 1
	}
	l.c, l.h, l.w = o.Channels, o.Height, o.Width
	if l.c == 0 {
		l.c = info.Channels
	}
	if l.h == 0 {
		l.h = info.Height
	}
	if l.w == 0 {
		l.w = info.Width
	}
	if l.h <= 0 || l.w <= 0 {
		return fmt.Errorf("datasets: %s images differ in size; set Options.Height and Options.Width", info.Name)
	}
	if l.c <= 0 || int64(l.c)*int64(l.h)*int64(l.w) > maxPixels {
		return fmt.Errorf("datasets: input size %dx%dx%d not supported", l.c, l.h, l.w)
	}
	if info.Channels != l.c && info.Channels != 1 && !(info.Channels == 3 && l.c == 1) {
		return fmt.Errorf("datasets: cannot feed %d-channel %s images to a %d-channel input", info.Channels, info.Name, l.c)
	}
	var err error
	if l.mean, err = perChannel("Mean", o.Mean, l.c, 0); err != nil {
		return err
	}
	if l.std, err = perChannel("Std", o.Std, l.c, 1); err != nil {
		return err
	}
	for c, s := range l.std {
		if !(s > 0) {
			return fmt.Errorf("datasets: Std[%d] = %v, must be positive", c, s)
		}
	}
	n := info.Examples
	l.nb = n / o.BatchSize
	if o.Last != DropLast && n%o.BatchSize != 0 {
		l.nb++
	}
	if l.nb == 0 {
		return fmt.Errorf("datasets: %d examples make no full batch of %d (use KeepLast or PadLast)", n, o.BatchSize)
	}
	o.StartEpoch += o.StartBatch / l.nb
	o.StartBatch %= l.nb
	return nil
}

func perChannel(name string, v []float64, c int, def float64) ([]float64, error) {
	out := make([]float64, c)
	switch len(v) {
	case 0:
		for i := range out {
			out[i] = def
		}
	case 1:
		for i := range out {
			out[i] = v[0]
		}
	case c:
		copy(out, v)
	default:
		return nil, fmt.Errorf("datasets: %s has %d values for %d channels (want 0, 1 or %d)", name, len(v), c, c)
	}
	return out, nil
}

// BatchesPerEpoch is the number of batches Next yields per epoch.
func (l *Loader) BatchesPerEpoch() int { return l.nb }

// Info describes the underlying dataset.
func (l *Loader) Info() Info { return l.info }

// InputShape is the shape of a full batch's X: (BatchSize, C, H, W).
func (l *Loader) InputShape() []int { return []int{l.opt.BatchSize, l.c, l.h, l.w} }

// TargetShape is the shape of a full batch's Y.
func (l *Loader) TargetShape() []int {
	if l.info.Segmentation {
		return []int{l.opt.BatchSize, l.info.Classes, l.h, l.w}
	}
	return []int{l.opt.BatchSize, l.info.Classes}
}

// Next returns the next batch, io.EOF after the last epoch, ErrClosed after
// Close, or the first error the dataset reported (again on every later call:
// a loader does not skip bad data silently).
func (l *Loader) Next() (*Batch, error) {
	if l.closed.Load() {
		return nil, ErrClosed
	}
	if l.err != nil {
		return nil, l.err
	}
	r, ok := <-l.out
	if !ok {
		if l.closed.Load() {
			return nil, ErrClosed
		}
		l.err = io.EOF
		return nil, io.EOF
	}
	if r.err != nil {
		l.err = r.err
		return nil, r.err
	}
	return r.b, nil
}

// Close stops the producer and waits for it, so no goroutine outlives the
// loader. It is idempotent.
func (l *Loader) Close() error {
	l.closeOnce.Do(func() {
		l.closed.Store(true)
		close(l.done)
	})
	l.wg.Wait()
	return nil
}

func (l *Loader) run() {
	defer l.wg.Done()
	defer close(l.out)
	epoch, b := l.opt.StartEpoch, l.opt.StartBatch
	for ; l.opt.Epochs == 0 || epoch < l.opt.Epochs; epoch++ {
		order := l.order(epoch)
		for ; b < l.nb; b++ {
			batch, err := l.build(epoch, b, order)
			if errors.Is(err, errAborted) {
				return
			}
			// Checked first because select picks at random among ready cases,
			// and a closed loader should not hand out another batch.
			select {
			case <-l.done:
				return
			default:
			}
			select {
			case l.out <- result{batch, err}:
			case <-l.done:
				return
			}
			if err != nil {
				return
			}
		}
		b = 0
	}
}

// order is the example order of an epoch: a pure function of (Seed, epoch),
// which is what makes resuming exact.
func (l *Loader) order(epoch int) []int {
	if !l.opt.Shuffle {
		p := make([]int, l.info.Examples)
		for i := range p {
			p[i] = i
		}
		return p
	}
	r := rng{mix(uint64(l.opt.Seed), tagShuffle, uint64(epoch))}
	return permutation(l.info.Examples, &r)
}

// batchBufs is where the examples of one batch are written.
type batchBufs struct {
	x32, y32 []float32
	x64, y64 []float64
	labels   []int
}

func (l *Loader) build(epoch, b int, order []int) (batch *Batch, err error) {
	defer func() {
		if p := recover(); p != nil {
			batch, err = nil, fmt.Errorf("datasets: panic building epoch %d batch %d: %v\n%s", epoch, b, p, debug.Stack())
		}
	}()
	bs := l.opt.BatchSize
	start := b * bs
	n := min(bs, l.info.Examples-start)
	rows := n
	if l.opt.Last == PadLast {
		rows = bs
	}
	k := l.info.Classes
	plane := l.h * l.w
	sample := l.c * plane
	ysample, lsample := k, 1
	if l.info.Segmentation {
		ysample, lsample = k*plane, plane
	}
	var bufs batchBufs
	if l.f64 {
		bufs.x64 = make([]float64, rows*sample)
		bufs.y64 = make([]float64, rows*ysample)
	} else {
		bufs.x32 = make([]float32, rows*sample)
		bufs.y32 = make([]float32, rows*ysample)
	}
	bufs.labels = make([]int, rows*lsample)
	for i := range bufs.labels {
		bufs.labels[i] = -1
	}
	indices := make([]int, rows)
	for i := range indices {
		indices[i] = -1
	}
	copy(indices, order[start:start+n])

	errs := make([]error, n)
	var next atomic.Int64
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			select {
			case <-l.done:
				errs[i] = errAborted
				return
			default:
			}
			errs[i] = l.example(&bufs, i, epoch, start+i, indices[i])
		}
	}
	if w := min(l.opt.Workers, n); w <= 1 {
		work()
	} else {
		var wg sync.WaitGroup
		for j := 0; j < w; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				work()
			}()
		}
		wg.Wait()
	}
	for _, e := range errs { // lowest index first: the same error every run
		if e != nil {
			return nil, e
		}
	}
	batch = &Batch{Epoch: epoch, Index: b, N: n, Labels: bufs.labels, Indices: indices, EndOfEpoch: b == l.nb-1}
	xs := []int{rows, l.c, l.h, l.w}
	ys := []int{rows, k}
	if l.info.Segmentation {
		ys = []int{rows, k, l.h, l.w}
	}
	if l.f64 {
		batch.X = tensor.New(tensor.WithShape(xs...), tensor.WithBacking(bufs.x64))
		batch.Y = tensor.New(tensor.WithShape(ys...), tensor.WithBacking(bufs.y64))
	} else {
		batch.X = tensor.New(tensor.WithShape(xs...), tensor.WithBacking(bufs.x32))
		batch.Y = tensor.New(tensor.WithShape(ys...), tensor.WithBacking(bufs.y32))
	}
	return batch, nil
}

// load calls the dataset, turning a panic in a user-supplied Dataset into an
// error so that Next keeps its promise of never panicking.
func (l *Loader) load(idx int) (ex Example, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("datasets: %s: panic loading example %d: %v", l.info.Name, idx, p)
		}
	}()
	return l.ds.Load(idx)
}

// example decodes, transforms and writes one example into row i of the batch.
func (l *Loader) example(bufs *batchBufs, i, epoch, pos, idx int) error {
	ex, err := l.load(idx)
	if err != nil {
		return err
	}
	c0, h0, w0 := ex.Channels, ex.Height, ex.Width
	k := l.info.Classes
	if c0 <= 0 || h0 <= 0 || w0 <= 0 || int64(c0)*int64(h0)*int64(w0) > maxPixels || len(ex.Image) != c0*h0*w0 {
		return fmt.Errorf("datasets: %s: example %d: image %dx%dx%d with %d values is malformed", l.info.Name, idx, c0, h0, w0, len(ex.Image))
	}
	img, err := convertChannels(ex.Image, c0, l.c, h0*w0)
	if err != nil {
		return fmt.Errorf("datasets: %s: example %d: %w", l.info.Name, idx, err)
	}
	var mask []int
	if l.info.Segmentation {
		if len(ex.Mask) != h0*w0 {
			return fmt.Errorf("datasets: %s: example %d: mask has %d values for a %dx%d image", l.info.Name, idx, len(ex.Mask), w0, h0)
		}
		for p, v := range ex.Mask {
			if v < 0 || v >= k {
				return fmt.Errorf("datasets: %s: example %d: mask pixel (%d,%d) has class %d, want 0..%d", l.info.Name, idx, p%w0, p/w0, v, k-1)
			}
		}
		mask = resizeMask(ex.Mask, h0, w0, l.h, l.w)
	} else if ex.Label < 0 || ex.Label >= k {
		return fmt.Errorf("datasets: %s: example %d: label %d out of range 0..%d", l.info.Name, idx, ex.Label, k-1)
	}
	img = resizeImage(img, l.c, h0, w0, l.h, l.w)
	if p := l.opt.RandomCrop; p > 0 || l.opt.Flip {
		r := rng{mix(uint64(l.opt.Seed), tagAugment, uint64(epoch), uint64(pos))}
		if p > 0 {
			dy, dx := r.intn(2*p+1), r.intn(2*p+1)
			img = randomCrop(img, l.c, l.h, l.w, p, dy, dx)
			if mask != nil {
				mask = cropMask(mask, l.h, l.w, p, dy, dx)
			}
		}
		if l.opt.Flip && r.next()&1 == 1 {
			if &img[0] == &ex.Image[0] {
				img = append([]float32(nil), img...) // never modify the dataset's own buffer
			}
			flipRows(img, l.c*l.h, l.w)
			if mask != nil {
				if &mask[0] == &ex.Mask[0] {
					mask = append([]int(nil), mask...)
				}
				flipRows(mask, l.h, l.w)
			}
		}
	}
	plane := l.h * l.w
	xo := i * l.c * plane
	for c := 0; c < l.c; c++ {
		m, s := l.mean[c], l.std[c]
		src := img[c*plane : (c+1)*plane]
		if l.f64 {
			dst := bufs.x64[xo+c*plane:]
			for p, v := range src {
				dst[p] = (float64(v) - m) / s
			}
		} else {
			dst := bufs.x32[xo+c*plane:]
			for p, v := range src {
				dst[p] = float32((float64(v) - m) / s)
			}
		}
	}
	if mask == nil {
		bufs.labels[i] = ex.Label
		l.setY(bufs, i*k+ex.Label)
		return nil
	}
	copy(bufs.labels[i*plane:], mask)
	for p, v := range mask {
		l.setY(bufs, (i*k+v)*plane+p)
	}
	return nil
}

func (l *Loader) setY(bufs *batchBufs, j int) {
	if l.f64 {
		bufs.y64[j] = 1
	} else {
		bufs.y32[j] = 1
	}
}
