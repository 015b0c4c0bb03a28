package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/gorgonia-ooc/outofcore/train"
)

// stepInfo is what a training step reports.
type stepInfo = train.Event

// reporter shows training progress: a bar on a terminal, plain lines otherwise.
type reporter interface {
	// epoch starts an epoch of n batches of batch images, the first of which is first (1-based).
	epoch(epoch, epochs, first, n, batch int)
	step(s stepInfo)
	// printf prints a line of its own (the bar, if any, is cleared first).
	printf(format string, args ...any)
	// done ends the epoch's bar, if any.
	done()
	// event shows one of the trainer's events.
	event(e train.Event)
}

// newReporter picks the reporter for mode "auto", "bar" or "plain".
func newReporter(mode string, w io.Writer, every int) (reporter, error) {
	switch mode {
	case "auto":
		if isTerminal(w) {
			return &barReporter{w: w}, nil
		}
		return &plainReporter{w: w, every: every}, nil
	case "bar":
		return &barReporter{w: w}, nil
	case "plain":
		return &plainReporter{w: w, every: every}, nil
	}
	return nil, fmt.Errorf("-progress %q: want auto, bar or plain", mode)
}

// show routes a trainer event to a reporter.
func show(r reporter, e train.Event) {
	switch e.Kind {
	case train.EpochStart:
		r.epoch(e.Epoch, e.Epochs, e.Batch, e.Batches, e.BatchSize)
	case train.StepDone:
		r.step(e)
	case train.EpochDone:
		r.done()
		r.printf("%s", e.Text)
	default:
		r.printf("%s", e.Text)
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) && os.Getenv("TERM") != "dumb"
}

// plainReporter prints one line every `every` steps and at the end of each
// epoch, in a fixed format that scripts and tests parse.
type plainReporter struct {
	w     io.Writer
	every int
}

func (p *plainReporter) epoch(epoch, epochs, first, n, batch int) {}
func (p *plainReporter) event(e train.Event)                      { show(p, e) }
func (p *plainReporter) done()                                    {}
func (p *plainReporter) printf(format string, args ...any)        { fmt.Fprintf(p.w, format+"\n", args...) }

func (p *plainReporter) step(s stepInfo) {
	if p.every > 1 && s.Step%p.every != 0 && s.Batch != s.Batches && s.Step != s.LastStep {
		return
	}
	fmt.Fprintf(p.w, "step %d/%d  epoch %d/%d  batch %d/%d  loss %.6f  %.1f img/s  device peak %s  swap in %s out %s\n",
		s.Step, s.LastStep, s.Epoch, s.Epochs, s.Batch, s.Batches, s.Loss, s.ImagesPerSec,
		train.FormatBytes(s.PeakDevice), train.FormatBytes(s.SwapInBytes), train.FormatBytes(s.SwapOutBytes))
}

// barThrottle is the least time between two redraws of the bar.
var barThrottle = 100 * time.Millisecond

// barReporter draws one progress bar per epoch, counting images, with the
// rate, the loss and the device memory in its description.
type barReporter struct {
	w   io.Writer
	bar *progressbar.ProgressBar
	pre string
}

func (b *barReporter) event(e train.Event) { show(b, e) }

func (b *barReporter) epoch(epoch, epochs, first, n, batch int) {
	b.done()
	b.pre = fmt.Sprintf("epoch %d/%d", epoch, epochs)
	b.bar = progressbar.NewOptions64(int64(n*batch),
		progressbar.OptionSetWriter(b.w),
		progressbar.OptionSetDescription(b.pre),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("img"),
		progressbar.OptionSetWidth(24),
		progressbar.OptionThrottle(barThrottle),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionClearOnFinish(),
	)
	_ = b.bar.Set64(int64((first - 1) * batch))
}

func (b *barReporter) step(s stepInfo) {
	if b.bar == nil {
		return
	}
	b.bar.Describe(fmt.Sprintf("%s  loss %.4f  dev %s  swap %s", b.pre, s.Loss, train.FormatBytes(s.PeakDevice), train.FormatBytes(s.SwapInBytes+s.SwapOutBytes)))
	_ = b.bar.Add(s.Images)
}

func (b *barReporter) printf(format string, args ...any) {
	if b.bar != nil {
		_ = b.bar.Clear()
	}
	fmt.Fprintf(b.w, format+"\n", args...)
}

func (b *barReporter) done() {
	if b.bar != nil {
		_ = b.bar.Finish()
		_ = b.bar.Clear()
		b.bar = nil
	}
}
