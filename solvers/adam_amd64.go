//go:build amd64 && !purego

package solvers

import "golang.org/x/sys/cpu"

// adamConsts is the layout adamAVX2 reads.
type adamConsts struct{ omb1, omb2, beta1, beta2, cv1, cv2, eps, negEta float32 }

//go:noescape
func adamAVX2(n int, w, gr, m, v *float32, k *adamConsts)

var haveAVX2 = cpu.X86.HasAVX2

// adamFast runs the plain Adam update (no L1, L2, batch scaling or clip) on the longest prefix
// of whole vectors and returns how many elements it did.
func adamFast(c *coeffs[float32], w, g, m, v []float32) int {
	n := len(w) &^ 7
	if !haveAVX2 || n == 0 || c.useL1 || c.useL2 || c.useBatch || c.useClip {
		return 0
	}
	k := adamConsts{c.omb1, c.omb2, c.beta1, c.beta2, c.cv1, c.cv2, c.eps, c.negEta}
	adamAVX2(n, &w[0], &g[0], &m[0], &v[0], &k)
	return n
}
