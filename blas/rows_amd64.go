//go:build amd64 && !purego

package blas

import "unsafe"

// copyRowsAVX copies kc groups of gb bytes (32, 64 or 128) to consecutive groups at dst, group p
// from src + off[p]*size bytes.
//
//go:noescape
func copyRowsAVX(dst, src unsafe.Pointer, off *int, kc, gb, size int)
