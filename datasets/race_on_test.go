//go:build race

package datasets

// raceEnabled lets tests shrink work that the race detector slows tenfold
// (inflating the 26 MB real Fashion-MNIST training file takes 20 s under it).
const raceEnabled = true
