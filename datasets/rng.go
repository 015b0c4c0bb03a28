package datasets

import "math/bits"

// The package carries its own generator instead of math/rand so that shuffles,
// augmentations and synthetic data stay bit-identical across Go releases: a
// checkpoint resumed with a newer toolchain must see the same batches.

// splitmix64 is tiny, fast, passes BigCrush, and any 64-bit value is a valid state.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// intn returns a uniform value in [0, n) without modulo bias (Lemire's method).
func (r *rng) intn(n int) int {
	if n <= 1 {
		return 0
	}
	un := uint64(n)
	hi, lo := bits.Mul64(r.next(), un)
	if lo < un {
		thresh := -un % un
		for lo < thresh {
			hi, lo = bits.Mul64(r.next(), un)
		}
	}
	return int(hi)
}

// float64 returns a uniform value in [0, 1).
func (r *rng) float64() float64 { return float64(r.next()>>11) / (1 << 53) }

// mix derives a stream seed from several keys; each key goes through a full
// splitmix round so that nearby keys (epoch 1 vs 2) give unrelated streams.
func mix(keys ...uint64) uint64 {
	h := uint64(0x6a09e667f3bcc909)
	for _, k := range keys {
		r := rng{h ^ k}
		h = r.next()
	}
	return h
}

// Stream tags keep the streams of different purposes apart for the same seed.
const (
	tagShuffle uint64 = iota + 0x5eed0000
	tagAugment
	tagProto
	tagExample
	tagColor
)

// permutation is a Fisher-Yates shuffle of 0..n-1.
func permutation(n int, r *rng) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j := r.intn(i + 1)
		p[i], p[j] = p[j], p[i]
	}
	return p
}
