package ooc

import "sync"

// WithPoison is withPoison, for the external tests.
var WithPoison = withPoison

// ForgetNCCLNote lets the next CompileParallel say again that NCCL is missing.
func ForgetNCCLNote() { ncclNote = sync.Once{} }
