package cuda

import (
	"io"
	"os"
)

// An Option configures Open.
type Option func(*config)

type config struct {
	library     string // WithLibrary; "" searches
	search      Search
	capacity    int64
	reserve     int64
	pinnedLimit int64
	log         io.Writer
	// ownContext makes the device create a context of its own (cuCtxCreate_v2) instead of
	// retaining the primary one: only the tests ask for it, to show what breaks then.
	ownContext bool
}

func newConfig(opts []Option) config {
	c := config{reserve: -1, log: os.Stderr, search: DefaultSearch()}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithLibrary loads the driver from path and nowhere else, overriding $OOC_CUDA_LIBRARY
// and the search. A path with a slash is loaded as it is; a bare name goes through the
// loader's search.
func WithLibrary(path string) Option { return func(c *config) { c.library = path } }

// WithSearch says where the device looks for libcuda, and later for cuBLAS (OpenBLAS) and
// NCCL (NewNCCL), instead of DefaultSearch. Its Getenv reads the overrides.
func WithSearch(s Search) Option { return func(c *config) { c.search = s } }

// WithCapacity sets the device memory the allocators may use, in bytes: a budget. 0 (the
// default) takes the free memory at Open minus the reserve. More than that is refused.
func WithCapacity(bytes int64) Option { return func(c *config) { c.capacity = bytes } }

// WithReserve sets the device memory left to the driver outside the allocators' capacity
// (default: DefaultReserve of the device's memory).
func WithReserve(bytes int64) Option { return func(c *config) { c.reserve = bytes } }

// WithPinnedLimit caps the pinned host memory of the swap-buffer pool (default: half the
// machine's RAM). Beyond it, and wherever pinning fails, buffers are pageable.
func WithPinnedLimit(bytes int64) Option { return func(c *config) { c.pinnedLimit = bytes } }

// WithLog sends the device's warnings (no VMM, pageable fallback) to w instead of
// os.Stderr; nil discards them.
func WithLog(w io.Writer) Option {
	return func(c *config) {
		if w == nil {
			w = io.Discard
		}
		c.log = w
	}
}
