package dispatch

// gorgoniaFamilies plans gorgonia's op types that have a file of their own
// here (one per op family), by the op's type name.
var gorgoniaFamilies = map[string]func(r *Runner, c fn) (plan, error){
	"gorgonia.im2colOp":            planIm2col,
	"gorgonia.col2imOp":            planCol2im,
	"gorgonia.maxPoolOp":           planGPool,
	"gorgonia.maxPoolDiffOp":       planGPool,
	"gorgonia.avgPoolOp":           planGPool,
	"gorgonia.avgPoolDiffOp":       planGPool,
	"gorgonia.BatchNormOp":         planGBatchNorm,
	"gorgonia.batchnormDiffOp":     planGBatchNorm,
	"gorgonia.GroupNormOp":         planGGroupNorm,
	"gorgonia.groupNormDiffOp":     planGGroupNorm,
	"gorgonia.dropoutOp":           planDropout,
	"gorgonia.dropoutDiffOp":       planDropout,
	"gorgonia.randomOp":            planRandom,
	"gorgonia.upsampleOp":          planUpsample,
	"gorgonia.upsampleDiffOp":      planUpsample,
	"gorgonia.byIndicesOp":         planByIndices,
	"gorgonia.byIndicesOpDiffOp":   planByIndices,
	"gorgonia.sparsemaxOp":         planSparsemax,
	"gorgonia.sparsemaxDiffOp":     planSparsemax,
	"gorgonia.globalAveragePoolOp": planGAP,
}
