// Package models builds training graphs for the networks the out-of-core
// papers measure: each Build returns a Gorgonia graph holding the forward
// pass, a softmax cross-entropy loss and its backward (gorgonia.Grad), with
// only the weights allocated, so that even paper-scale batches can be built
// and planned on a small machine.
package models
