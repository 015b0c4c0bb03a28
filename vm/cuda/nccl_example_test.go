package cuda_test

import (
	"errors"
	"log"
	"os"
	"strconv"
	"time"

	"gorgonia.org/tensor"

	"github.com/gorgonia-ooc/outofcore/vm/cuda"
)

// One process per GPU, on one machine or several: rank 0 makes the communicator's id and
// writes it where the others read it (a shared file here; $OOC_NCCL_ID works too, with
// cuda.UniqueIDFromEnv), every rank joins with its own device, and each all-reduce leaves
// the mean over all ranks in every rank's buffer. Given to ooc.CompileParallel with
// ooc.WithAllReducer, the communicator averages each process's replicas with the others'.
// It needs libnccl.so.2 and a GPU per rank: not run here.
func ExampleJoinNCCL() {
	rank, _ := strconv.Atoi(os.Getenv("RANK"))
	ranks, _ := strconv.Atoi(os.Getenv("WORLD_SIZE"))
	const idFile = "/shared/nccl.id"
	if rank == 0 {
		id, err := cuda.NewUniqueID() // fails with cuda.ErrNoNCCL where NCCL is missing
		if err != nil {
			log.Fatal(err)
		}
		if err := id.WriteFile(idFile); err != nil {
			log.Fatal(err)
		}
	}
	id, err := cuda.ReadUniqueID(idFile) // the other ranks wait for the file to appear first
	if err != nil {
		log.Fatal(err)
	}
	d, err := cuda.Open(0)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	// Returns once every rank has joined; a collective call that waits more than two minutes
	// for the others fails the communicator (the default is cuda.DefaultNCCLTimeout).
	c, err := cuda.JoinNCCL(d, rank, ranks, id, cuda.WithNCCLTimeout(2*time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	grad := make([]byte, 4096) // one learnable's float32 gradient, as raw bytes
	if err := c.AllReduceMean(tensor.Float32, [][]byte{grad}); err != nil {
		if errors.Is(err, cuda.ErrNCCLFailed) {
			// A rank died, left or disagreed, or the call timed out: the communicator is
			// aborted and the message says why (NCCL's ncclGetLastError names a dead rank).
			log.Fatalf("rank %d: the job is over: %v", rank, err)
		}
		log.Fatal(err)
	}
}
