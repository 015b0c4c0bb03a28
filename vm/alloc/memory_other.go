//go:build !linux

package alloc

import "errors"

// NewHostMemory needs memfd and mmap(MAP_FIXED) and is only implemented on Linux.
func NewHostMemory(capacity int64) (Memory, error) {
	return nil, errors.New("alloc: host memory is only implemented on Linux")
}

// NewRecycledHostMemory is only implemented on Linux, as NewHostMemory is.
func NewRecycledHostMemory(capacity int64) (Memory, error) {
	return nil, errors.New("alloc: host memory is only implemented on Linux")
}
