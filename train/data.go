package train

import (
	"fmt"
	"strings"

	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/datasets"
	"github.com/gorgonia-ooc/outofcore/models"
)

// dataShape is what a model is built for and a loader produces.
type dataShape struct {
	channels, height, width, classes int
	seg                              bool
	hidden                           int // lstm's width (-hidden)
}

// size is the input size as HxW.
func (s dataShape) size() string { return fmt.Sprintf("%dx%d", s.height, s.width) }

// modelShape is the input a built model takes.
func modelShape(m *models.Model) dataShape {
	c := m.Config
	w := c.Width
	if w == 0 {
		w = c.Height
	}
	return dataShape{channels: max(c.Channels, 1), height: max(c.Height, 1), width: w, classes: c.Classes, hidden: c.Hidden, seg: wantsSegmentation(m)}
}

// openSplit opens one split of a data spec. Synthetic data takes its shape,
// classes and seed from the run; files have their own.
func openSplit(spec string, split datasets.Split, height, width, classes int, seed int64, seg bool) (datasets.Dataset, error) {
	if height == 0 {
		height = 32
	}
	if width == 0 {
		width = height
	}
	opts := []datasets.OpenOption{datasets.WithSplit(split), datasets.WithShape(3, height, width), datasets.WithSeed(seed)}
	if classes > 0 {
		opts = append(opts, datasets.WithClasses(classes))
	}
	if seg {
		opts = append(opts, datasets.WithSegmentation(true))
	}
	ds, err := datasets.Open(spec, opts...)
	if err != nil {
		return nil, fmt.Errorf("-data %s: %w", spec, err)
	}
	return ds, nil
}

func isSynthetic(spec string) bool {
	name, _, _ := strings.Cut(spec, ":")
	return strings.EqualFold(name, "synthetic")
}

// resolveShape picks the model input for a dataset and the -image, -width and
// -classes flags: by default a square of the data's shorter side, or for
// sequences (one pixel high, as text data) their native 1 x length.
func resolveShape(info datasets.Info, spec string, image, width, classes int) (dataShape, error) {
	s := dataShape{channels: info.Channels, height: image, width: width, classes: info.Classes, seg: info.Segmentation}
	switch {
	case image == 0 && width == 0 && info.Height == 1 && info.Width > 0:
		s.height, s.width = 1, info.Width
	case image == 0 && info.Height > 0 && info.Width > 0:
		s.height = min(info.Height, info.Width)
	case image == 0:
		s.height = 32
	}
	if s.width == 0 {
		s.width = s.height
	}
	if classes > 0 && classes != info.Classes {
		return s, configErrorf("-classes %d: -data %s has %d classes", classes, spec, info.Classes)
	}
	return s, nil
}

// buildModel builds the model for the data.
func buildModel(name string, batch int, s dataShape, seed int64) (*models.Model, error) {
	return models.Build(name, models.Config{Batch: batch, Channels: s.channels, Height: s.height, Width: s.width,
		Classes: s.classes, Hidden: s.hidden, Dtype: tensor.Float32, Seed: seed})
}

// checkFit checks that the loader's batches are what the model takes.
func checkFit(m *models.Model, l *datasets.Loader, model, spec string) error {
	if in, want := m.Input.Shape(), l.InputShape(); !in.Eq(tensor.Shape(want)) {
		return fmt.Errorf("model %s takes input %v, -data %s gives %v", model, in, spec, want)
	}
	if y, want := m.Labels.Shape(), l.TargetShape(); !y.Eq(tensor.Shape(want)) {
		what := "class labels"
		if l.Info().Segmentation {
			what = "segmentation masks"
		}
		return fmt.Errorf("model %s wants targets of shape %v, -data %s gives %s of shape %v", model, y, spec, what, want)
	}
	return nil
}

// wantsSegmentation reports whether the model's targets are per pixel.
func wantsSegmentation(m *models.Model) bool { return m.Labels.Shape().Dims() == 4 }

// ckptWidth is the width a checkpoint records: 0 for a square input, as
// checkpoints written before non-square inputs have it.
func ckptWidth(s dataShape) int {
	if s.width == s.height {
		return 0
	}
	return s.width
}

// shape is the input a checkpoint's model was trained on.
func (m Meta) shape() dataShape {
	w := m.Width
	if w == 0 {
		w = m.Image
	}
	return dataShape{channels: m.Channels, height: m.Image, width: w, classes: m.Classes, hidden: m.Hidden}
}
