package dist_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/gorgonia-ooc/outofcore/dist"
)

// A training process finds its world in the environment torchrun (or ooc
// launch, or Slurm's srun) gave it, and rank 0 hands the NCCL id to the
// others. A process started on its own is a world of one: it makes the id
// itself and meets no one.
func ExampleShare() {
	// A real process calls dist.FromEnv(flags); the example reads an empty
	// environment, so that it means the same wherever the tests run.
	w, err := dist.Resolve(dist.Flags{}, nil)
	if err != nil {
		log.Fatal(err)
	}
	id, err := dist.Share(context.Background(), w, func() ([]byte, error) {
		return []byte("a 128-byte ncclUniqueId in real use"), nil // cuda.NewUniqueID()
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(w, "multi:", w.Multi(), "id:", string(id))
	// Output: a single process multi: false id: a 128-byte ncclUniqueId in real use
}

// Resolve reads any environment: here rank 3 of a Slurm step of 8 tasks.
func ExampleResolve() {
	env := map[string]string{"SLURM_PROCID": "3", "SLURM_NTASKS": "8", "SLURM_LOCALID": "3",
		"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_STEP_NODELIST": "gpu[07-08]"}
	w, err := dist.Resolve(dist.Flags{}, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(w)
	fmt.Println(strings.Join(w.Env(), " "))
	// Output:
	// rank 3 of 8 (local rank 3, from slurm), rendezvous tcp gpu07:24242
	// RANK=3 WORLD_SIZE=8 LOCAL_RANK=3 MASTER_ADDR=gpu07 MASTER_PORT=24242 OOC_RUN_ID=slurm-4242.0
}
