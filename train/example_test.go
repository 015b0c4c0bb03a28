package train_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"

	"github.com/gorgonia-ooc/outofcore/datasets"
	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/train"
	"github.com/gorgonia-ooc/outofcore/vm/cuda"
)

// A run by name: a model and data spec, half the in-core memory, a
// checkpoint; then the run resumed from the checkpoint alone for a third
// epoch.
func Example_run() {
	dir, err := os.MkdirTemp("", "train-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "run.ckpt")

	t, err := train.Open(train.Config{
		Model: "smallcnn", Data: "synthetic:n=32", Batch: 8, Image: 16, Epochs: 2,
		Budget: train.Budget{Percent: 50}, Checkpoint: path,
	})
	if err != nil {
		log.Fatal(err)
	}
	t.Progress = func(e train.Event) {
		if e.Kind == train.EpochDone {
			fmt.Printf("epoch %d done at step %d\n", e.Epoch, e.Step)
		}
	}
	res, err := t.Fit(context.Background())
	t.Close()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("swapped:", res.Stats.SwapInBytes > 0, "peak within the budget:", res.Stats.PeakDeviceBytes <= t.Machine().Program().Budget)

	ck, err := train.Load(path)
	if err != nil {
		log.Fatal(err)
	}
	cfg := train.RunConfig(ck) // the whole run as it was saved
	cfg.Epochs = 3
	t, err = train.Resume(ck, path, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer t.Close()
	if _, err := t.Fit(context.Background()); err != nil {
		log.Fatal(err)
	}
	h := t.History()
	fmt.Printf("history: steps %d..%d, %d epochs\n", h.First, t.Step(), len(h.Epochs))
	// Output:
	// epoch 1 done at step 4
	// epoch 2 done at step 8
	// swapped: true peak within the budget: true
	// history: steps 1..12, 3 epochs
}

// A model and datasets built by the caller.
func ExampleNew() {
	m, err := models.Build("smallcnn", models.Config{Batch: 4, Channels: 3, Height: 16, Width: 16, Classes: 10, Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	open := func(split datasets.Split) datasets.Dataset {
		ds, err := datasets.Open("synthetic:n=16", datasets.WithSplit(split), datasets.WithShape(3, 16, 16), datasets.WithClasses(10))
		if err != nil {
			log.Fatal(err)
		}
		return ds
	}
	t, err := train.New(m, open(datasets.Train), open(datasets.Test), train.Config{Steps: 2, Budget: train.Budget{Percent: 60}})
	if err != nil {
		log.Fatal(err)
	}
	defer t.Close()
	res, err := t.Fit(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	ev, err := t.Evaluate()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(res.Losses), "steps;", ev.Examples, "test examples evaluated")
	// Output: 2 steps; 16 test examples evaluated
}

// Data parallel on two CPU devices: each runs a replica with half of every
// batch under its own budget, and the gradients are averaged before the
// update; the checkpoint holds the device list, so the resumed run trains
// on two devices again.
func ExampleConfig_devices() {
	dir, err := os.MkdirTemp("", "train-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "run.ckpt")
	cfg := train.Config{Model: "smallcnn", Data: "synthetic:n=16", Batch: 4, Image: 16, Steps: 2,
		Devices: 2, Budget: train.Budget{Percent: 60}, Checkpoint: path}
	t, err := train.Open(cfg)
	if err != nil {
		log.Fatal(err)
	}
	res, err := t.Fit(context.Background())
	t.Close()
	if err != nil {
		log.Fatal(err)
	}
	ck, err := train.Load(path)
	if err != nil {
		log.Fatal(err)
	}
	saved := train.RunConfig(ck)
	fmt.Println(len(res.Losses), "steps on", saved.Devices, "devices of", saved.Device)
	// Output: 2 steps on 2 devices of cpu
}

// A rank of a run across processes, one per GPU, as torchrun starts them
// (RANK, WORLD_SIZE, LOCAL_RANK): every rank opens the same run with its
// own rank and device and the NCCL id rank 0 made, and Fit trains its share
// of every global batch; rank 0 evaluates and writes the checkpoint. It
// needs libnccl.so.2 and a GPU per rank: not run here (the package's tests
// run it on the fake CUDA driver and NCCL, ranks as processes).
func Example_ranks() {
	rank, _ := strconv.Atoi(os.Getenv("RANK"))
	world, _ := strconv.Atoi(os.Getenv("WORLD_SIZE"))
	id, err := cuda.ReadUniqueID("/shared/nccl.id") // rank 0 wrote it with cuda.NewUniqueID
	if err != nil {
		log.Fatal(err)
	}
	t, err := train.Open(train.Config{
		Model: "resnet18", Data: "cifar10:/shared/cifar-10-batches-bin", Batch: 256, Epochs: 10, Budget: train.Budget{Percent: 60},
		Device: "cuda:" + os.Getenv("LOCAL_RANK"), WorldSize: world, Rank: rank, NCCLID: id,
		Checkpoint: "/shared/run.ckpt",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer t.Close()
	if _, err := t.Fit(context.Background()); err != nil {
		log.Fatal(err) // a rank that died fails the others' next step: cuda.ErrNCCLFailed
	}
}
