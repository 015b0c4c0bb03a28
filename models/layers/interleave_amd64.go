//go:build amd64 && !purego

package layers

//go:noescape
func interleave6F32(blocks int, dst, s0, s1, s2, s3, s4, s5 *float32)

// interleave6F32Fast interleaves the longest prefix of whole eight-pixel blocks of six float32
// lanes with AVX2 (moves only: the values are copied, not computed) and returns its length.
func interleave6F32Fast(dst []float32, src *[colMaxLanes][]float32, n int) int {
	blocks := n / 8
	if !haveAVX2 || blocks == 0 {
		return 0
	}
	_ = dst[blocks*48-1]
	s := src[:6]
	for _, l := range s {
		_ = l[blocks*8-1]
	}
	interleave6F32(blocks, &dst[0], &s[0][0], &s[1][0], &s[2][0], &s[3][0], &s[4][0], &s[5][0])
	return blocks * 8
}

//go:noescape
func interleave8F32(blocks int, dst *float32, stride int, s0, s1, s2, s3, s4, s5, s6, s7 *float32)

// interleave8F32Fast writes the longest prefix of whole eight-pixel blocks of eight float32 rows
// of src (each pixels [0, n)) as groups g apart: dst[k*g+r] = src[r][k], with AVX2 (moves only),
// and returns its length.
func interleave8F32Fast(dst []float32, g int, src *[8][]float32, n int) int {
	blocks := n / 8
	if !haveAVX2 || blocks == 0 {
		return 0
	}
	_ = dst[(blocks*8-1)*g+7]
	for _, l := range src {
		_ = l[blocks*8-1]
	}
	interleave8F32(blocks, &dst[0], g*4, &src[0][0], &src[1][0], &src[2][0], &src[3][0], &src[4][0], &src[5][0], &src[6][0], &src[7][0])
	return blocks * 8
}
