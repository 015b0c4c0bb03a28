// Package workpool runs the items of a job on a few long-lived goroutines: the fork-join under
// package blas's GEMM, models/layers' convolutions and its parallelFor (batch norm, ReLU, pooling).
//
// Starting goroutines per call costs a closure allocation and a wake-up each, which a training
// step pays thousands of times (a GEMM per image per convolution). Here idle workers wait on a
// channel and a call hands its job to those that are idle; one is started only when none is, so
// after the first steps a call allocates nothing. A call never waits for a worker to become free:
// the caller drains the items itself too, so nested calls cannot deadlock.
package workpool
