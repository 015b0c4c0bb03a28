//go:build race

package prealloc

// The race detector's instrumentation changes how Go compiles tensor's
// kernels, and with it which NaN survives x + y when both are NaNs.
const raceEnabled = true
