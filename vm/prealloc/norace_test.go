//go:build !race

package prealloc

const raceEnabled = false
