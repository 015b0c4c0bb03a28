package alloc

import "testing"

// decodeTrace reads a fuzz input as an alloc/free trace, three bytes a step. A first byte
// that is 0 mod 4 frees the tensor it picks among all allocated so far (freeing one twice is
// how double frees get tested); any other allocates (magnitude+1) << shift bytes, with the
// shift from the first byte and the magnitude from the other two: 1 byte to 128 MiB.
func decodeTrace(data []byte) []op {
	const maxSteps = 300
	var trace []op
	id := 0
	for i := 0; i+2 < len(data) && len(trace) < maxSteps; i += 3 {
		b := data[i]
		if b%4 == 0 {
			if id > 0 {
				trace = append(trace, op{id: int(b>>2) % id})
			}
			continue
		}
		mag := int64(data[i+1])<<8 | int64(data[i+2])
		trace = append(trace, op{alloc: true, id: id, size: (mag + 1) << ((b >> 2) % 12)})
		id++
	}
	return trace
}

// fuzzCapacity is small enough that traces run out of memory and make VA evict and remap.
const fuzzCapacity = 64 * mib

// fuzzRun replays a fuzz input with the checks of TestRandomTraces. Bit 7 of the first byte
// picks host memory (patterns checked in real bytes) over accounting memory: a host run costs
// milliseconds of page faults, an accounting run microseconds, and the fuzzer is free to spend
// its time where the coverage is.
func fuzzRun(t *testing.T, ak allocKind, data []byte) {
	if len(data) == 0 {
		return
	}
	mk := memKinds[1]
	if data[0]&0x80 != 0 {
		mk = memKinds[0]
	}
	c := newChecker(t, ak, mk, fuzzCapacity)
	for _, o := range decodeTrace(data[1:]) {
		c.do(o)
	}
	c.finish()
}

func fuzzSeeds(f *testing.F) {
	for _, mem := range []byte{0, 0x80} {
		f.Add(append([]byte{mem}, 1, 0, 10, 5, 1, 0, 0, 0, 0, 4, 0, 0, 9, 255, 255))
		f.Add(append([]byte{mem | 3}, 45, 255, 255, 45, 255, 255, 0, 0, 0, 45, 255, 255, 41, 0, 1, 4, 0, 0, 45, 200, 0))
	}
}

func FuzzBestFit(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRun(t, bestFitKind, data) })
}

// FuzzVA takes the chunk size from the low bits of the first byte: 2, 4, 8 or 40 MiB.
func FuzzVA(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		chunk := []int64{2 * mib, 4 * mib, 8 * mib, DefaultChunkSize}[data[0]%4]
		fuzzRun(t, vaKind(chunk), data)
	})
}
