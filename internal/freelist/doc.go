// Package freelist keeps structs a hot path has finished with, to be taken
// again instead of new ones from the heap: the allocators' blocks and
// pieces, the copy engines' events, and the GEMM's and the layers' parallel
// jobs, each made and dropped many times a training step.
package freelist
