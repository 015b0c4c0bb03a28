//go:build !amd64 || purego

package layers

func addF32Fast([]float64, []float32) int                       { return 0 }
func sqF32Fast([]float64, []float32, float64) int               { return 0 }
func gradF32Fast(_, _ []float64, _, _ []float32, _ float64) int { return 0 }
func affineF32Fast(_, _ []float32, _, _, _ float32) int         { return 0 }
func bnDxF32Fast(_, _, _ []float32, _, _, _, _ float32) int     { return 0 }

func reluF32Fast(_, _, _ []float32) int { return 0 }

func foldFast(_, _ []float64) int { return 0 }

func maxPool2x2F32Fast(_, _, _, _, _, _ []float32, _ int) int { return 0 }

func maxPool3F32Row(_ []float32, _ []int32, _, _, _ []float32, _ int) bool { return false }
