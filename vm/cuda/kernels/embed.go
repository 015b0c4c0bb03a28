package kernels

import (
	"embed"
	_ "embed" // the PTX text
)

//go:generate go run ./internal/genptx

// PTX is the module of every kernel in Specs, made by clang from src/all.cu
// for Arch (see internal/genptx); load it with cuModuleLoadData (the driver
// JIT-compiles it for the GPU at hand, Arch or newer).
//
//go:embed kernels_sm60.ptx
var PTX string

// Arch is the oldest GPU architecture PTX runs on: sm_60 (Pascal: GTX 1080
// Ti, Titan X, P100, the out-of-core papers' GPUs); the driver compiles PTX
// forward to newer GPUs, never back.
const Arch = "sm_60"

// Sources are the CUDA C sources (src/*.cu, src/*.h) and the host harness
// (src/harness.cpp), for the host build of the kernels (kernelstest).
//
//go:embed src
var Sources embed.FS
