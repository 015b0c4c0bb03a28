// Package zoocheck is the model zoo's acceptance on a CUDA device: each
// bundled model (Cases, at the sizes the fake device can run) trains a few
// SGD steps on the CUDA device and on the CPU device from equal weights and
// batches, at 100% and 50% of its in-core peak and at the least budget both
// can plan, and every loss, gradient, batch-norm running statistic and
// weight is compared by one rule (Pair.Check; Run says why it is what it
// is). vm/cuda/dispatch's TestZooOnFakeDevice runs it on the fake driver;
// "ooc doctor" runs it on a GPU.
package zoocheck
