package datasets_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/gorgonia-ooc/outofcore/datasets"
	"gorgonia.org/tensor"
)

// A training loop: open a dataset, wrap it in a Loader shaped like the
// model's input, and read batches until the last epoch ends.
func ExampleNewLoader() {
	ds, err := datasets.Synthetic(datasets.SyntheticConfig{
		Examples: 100, Channels: 3, Height: 32, Width: 32, Classes: 10, Seed: 1,
	})
	if err != nil {
		log.Fatal(err)
	}
	l, err := datasets.NewLoader(ds, datasets.Options{
		BatchSize:  32,
		Dtype:      tensor.Float32,
		Shuffle:    true,
		Seed:       7,
		Last:       datasets.DropLast,
		Mean:       []float64{0.5},
		Std:        []float64{0.25},
		RandomCrop: 4,
		Flip:       true,
		Epochs:     2,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	fmt.Println("batches per epoch:", l.BatchesPerEpoch())
	for {
		b, err := l.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		if b.EndOfEpoch {
			fmt.Printf("epoch %d ends: X %v, Y %v, %d labels\n", b.Epoch, b.X.Shape(), b.Y.Shape(), len(b.Labels))
		}
	}
	// Output:
	// batches per epoch: 3
	// epoch 0 ends: X (32, 3, 32, 32), Y (32, 10), 32 labels
	// epoch 1 ends: X (32, 3, 32, 32), Y (32, 10), 32 labels
}

// Resuming after a checkpoint: start where the saved position says and the
// batches are the very ones the interrupted run would have seen.
func ExampleOptions_resume() {
	ds, _ := datasets.Open("synthetic:n=50,c=1,h=8,w=8,classes=3")
	opts := datasets.Options{BatchSize: 8, Shuffle: true, Seed: 3, Flip: true, Epochs: 3}

	full, _ := datasets.NewLoader(ds, opts)
	defer full.Close()
	var saved, want *datasets.Batch
	for i := 0; i < 10; i++ {
		b, _ := full.Next()
		if i == 6 {
			saved = b // the checkpoint was written after this batch
		}
		want = b
	}

	opts.StartEpoch, opts.StartBatch = saved.Epoch, saved.Index+1
	resumed, _ := datasets.NewLoader(ds, opts)
	defer resumed.Close()
	var got *datasets.Batch
	for i := 0; i < 3; i++ {
		got, _ = resumed.Next()
	}
	fmt.Println("position:", got.Epoch, got.Index)
	fmt.Println("same examples:", fmt.Sprint(got.Indices) == fmt.Sprint(want.Indices))
	fmt.Println("same pixels:", fmt.Sprint(got.X.Data()) == fmt.Sprint(want.X.Data()))
	// Output:
	// position: 1 2
	// same examples: true
	// same pixels: true
}

// The CLI passes its -data flag to Open; the model's input shape and class
// count fill in what synthetic data cannot know by itself.
func ExampleOpen() {
	ds, err := datasets.Open("synthetic:seg", datasets.WithShape(1, 64, 64), datasets.WithClasses(3))
	if err != nil {
		log.Fatal(err)
	}
	info := ds.Info()
	fmt.Println(info.Name, info.Examples, info.Classes, info.Channels, info.Height, info.Width, info.Segmentation)

	l, _ := datasets.NewLoader(ds, datasets.Options{BatchSize: 4, Dtype: tensor.Float64})
	defer l.Close()
	b, _ := l.Next()
	fmt.Println("X", b.X.Shape(), "Y", b.Y.Shape(), "mask labels", len(b.Labels))

	_, err = datasets.Open("imagenet:/data")
	fmt.Println(err != nil)
	// Output:
	// synthetic 1024 3 1 64 64 true
	// X (4, 1, 64, 64) Y (4, 3, 64, 64) mask labels 16384
	// true
}

// A damaged file names itself and the offset of the damage.
func ExampleCIFAR10() {
	dir, _ := os.MkdirTemp("", "cifar")
	defer os.RemoveAll(dir)
	record := make([]byte, 3073) // label byte, then 32x32 R, G and B planes
	record[0] = 3                // cat
	data := append(append([]byte{}, record...), record[:1000]...)
	os.WriteFile(filepath.Join(dir, "test_batch.bin"), data, 0o644)

	_, err := datasets.CIFAR10(dir, datasets.Test)
	fmt.Println(strings.ReplaceAll(err.Error(), dir, "DIR"))
	var fe *datasets.FormatError
	if errors.As(err, &fe) {
		fmt.Println(filepath.Base(fe.File), fe.Offset, fe.Entry)
	}

	os.WriteFile(filepath.Join(dir, "test_batch.bin"), record, 0o644)
	ds, _ := datasets.CIFAR10(dir, datasets.Test)
	ex, _ := ds.Load(0)
	fmt.Println(ds.Info().Examples, ds.Info().ClassNames[ex.Label])
	// Output:
	// datasets: DIR/test_batch.bin: offset 3073: entry 1: truncated record: 1000 of 3073 bytes
	// test_batch.bin 3073 1
	// 1 cat
}

// Without the Debian package the error says how to get the data.
func ExampleFashionMNIST() {
	dir, _ := os.MkdirTemp("", "fmnist")
	defer os.RemoveAll(dir)
	_, err := datasets.FashionMNIST(dir, datasets.Train)
	fmt.Println(errors.Is(err, os.ErrNotExist))
	fmt.Println(strings.Contains(err.Error(), datasets.FashionMNISTInstall))
	// Output:
	// true
	// true
}
