//go:build !amd64 || purego

package blas

func archKernels() []kernelSet { return nil }
