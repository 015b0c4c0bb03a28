package train

import (
	"encoding/json"
	"fmt"
	"image/color"
	"io"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/gorgonia-ooc/outofcore/internal/figure"
)

// EpochRecord is one finished epoch: its mean train loss and the test
// evaluation after it.
type EpochRecord struct {
	Epoch     int         `json:"epoch"`
	Step      int         `json:"step"`
	TrainLoss float64     `json:"train_loss"`
	Eval      *EvalResult `json:"eval,omitempty"`
}

// History is a run's record across resumes: its finished epochs and the
// loss of every step from First on (1 unless the run was resumed from a
// version 1 checkpoint, which kept no losses).
type History struct {
	Epochs []EpochRecord `json:"epochs"`
	Losses []float64     `json:"step_losses"`
	First  int           `json:"first_step"`
}

// WriteHistory writes h as indented JSON to file, atomically.
func WriteHistory(file string, h History) error {
	raw, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(file, func(w io.Writer) error {
		_, err := w.Write(append(raw, '\n'))
		return err
	})
}

// PlotHistory draws the mean train loss and the test accuracy per epoch.
func PlotHistory(file, model, data string, epochs []EpochRecord) error {
	if len(epochs) == 0 {
		return fmt.Errorf("-plot: no epoch finished, nothing to draw")
	}
	var loss, acc plotter.XYs
	for _, e := range epochs {
		loss = append(loss, plotter.XY{X: float64(e.Epoch), Y: e.TrainLoss})
		if e.Eval != nil && e.Eval.HasAcc {
			acc = append(acc, plotter.XY{X: float64(e.Epoch), Y: e.Eval.Accuracy})
		}
	}
	p := figure.New()
	p.Title.Text = fmt.Sprintf("%s on %s: train loss and test accuracy per epoch (measured, CPU)", model, data)
	p.X.Label.Text = "epoch"
	p.Y.Label.Text = "train loss / test accuracy"
	ll, lp, err := plotter.NewLinePoints(loss)
	if err != nil {
		return err
	}
	ll.Color, lp.Color = color.RGBA{R: 200, A: 255}, color.RGBA{R: 200, A: 255}
	p.Add(ll, lp)
	p.Legend.Add("mean train loss", ll, lp)
	if len(acc) > 0 {
		al, ap, err := plotter.NewLinePoints(acc)
		if err != nil {
			return err
		}
		al.Color, ap.Color = color.RGBA{B: 200, A: 255}, color.RGBA{B: 200, A: 255}
		p.Add(al, ap, plotter.NewGrid())
		p.Legend.Add("test accuracy", al, ap)
	}
	return figure.Save(p, 7*vg.Inch, 4*vg.Inch, file)
}
