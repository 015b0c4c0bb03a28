package ooc_test

import (
	"fmt"
	"log"
	"os"
	"strconv"

	G "gorgonia.org/gorgonia"

	"github.com/gorgonia-ooc/outofcore/models"
	"github.com/gorgonia-ooc/outofcore/ooc"
	"github.com/gorgonia-ooc/outofcore/vm"
	"github.com/gorgonia-ooc/outofcore/vm/cuda"
)

// A script trains on two devices by building its model in a function of
// the batch size: CompileParallel gives each device half of every batch,
// and the script feeds, steps and reads the whole-batch graph as before.
func ExampleCompileParallel() {
	build := func(batch int) (ooc.Replica, error) {
		m, err := models.Build("smallcnn", models.Config{Batch: batch, Channels: 3, Height: 16, Width: 16, Classes: 4, Seed: 7})
		if err != nil {
			return ooc.Replica{}, err
		}
		return ooc.Replica{Graph: m.Graph, Inputs: G.Nodes{m.Input, m.Labels}, Learnables: m.Learnables, Loss: m.Loss}, nil
	}
	devices, err := vm.NewDevices("cpu*2", 64<<20)
	if err != nil {
		log.Fatal(err)
	}
	p, err := ooc.CompileParallel(build, 8, devices, ooc.BindDualValues())
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	model := p.Model()
	solver := G.NewAdamSolver(G.WithLearnRate(1e-3))
	var losses []float32
	for step := 0; step < 3; step++ {
		// A fixed batch here; a real script lets the next batch from its data.
		if err := (&models.Model{Input: model.Inputs[0], Labels: model.Inputs[1]}).BindRandom(1); err != nil {
			log.Fatal(err)
		}
		if err := p.RunAll(); err != nil {
			log.Fatal(err)
		}
		losses = append(losses, model.Loss.Value().Data().(float32))
		if err := solver.Step(G.NodesToValueGrads(model.Learnables)); err != nil {
			log.Fatal(err)
		}
		p.Reset()
	}
	fmt.Println("replicas:", len(p.Machines()), "all-reduce:", p.AllReducer().Name())
	fmt.Println("loss fell:", losses[2] < losses[0])
	// Output:
	// replicas: 2 all-reduce: host
	// loss fell: true
}

// One process per GPU, on one machine or several: every rank builds the same
// model, joins the NCCL communicator on its device and compiles with
// WithWorld; it feeds the whole global batch (the same data on every rank),
// and its replica trains on its share, rows rank*b/N to (rank+1)*b/N, the
// gradients and the loss averaged across the ranks. It needs libnccl.so.2
// and a GPU per rank: not run here (package train's tests run it on the fake
// NCCL, ranks as processes).
func ExampleWithWorld() {
	rank, _ := strconv.Atoi(os.Getenv("RANK"))
	world, _ := strconv.Atoi(os.Getenv("WORLD_SIZE"))
	id, err := cuda.ReadUniqueID("/shared/nccl.id") // rank 0 wrote it (cuda.NewUniqueID)
	if err != nil {
		log.Fatal(err)
	}
	dev, err := cuda.Open(0)
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	comm, err := cuda.JoinNCCL(dev, rank, world, id)
	if err != nil {
		log.Fatal(err)
	}
	defer comm.Close()
	build := func(batch int) (ooc.Replica, error) {
		m, err := models.Build("smallcnn", models.Config{Batch: batch, Channels: 3, Height: 16, Width: 16, Classes: 4, Seed: 7})
		if err != nil {
			return ooc.Replica{}, err
		}
		return ooc.Replica{Graph: m.Graph, Inputs: G.Nodes{m.Input, m.Labels}, Learnables: m.Learnables, Loss: m.Loss}, nil
	}
	const globalBatch = 64
	p, err := ooc.CompileParallel(build, globalBatch, []vm.Device{dev}, ooc.BindDualValues(),
		ooc.WithAllReducer(comm), ooc.WithWorld(rank, world))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	// Each step: let the global batch into p.Model().Inputs, p.RunAll, step a
	// solver on p.Model().Learnables, p.Reset, as ExampleCompileParallel does.
}
