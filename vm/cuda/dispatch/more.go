package dispatch

// planMore plans the gorgonia op types of issue 26 (part A) that planGorgonia's
// switch does not: ok is false for an op type it does not know.
func planMore(c fn, name string) (p plan, ok bool, err error) {
	switch name {
	case "gorgonia.maxBetween", "gorgonia.minBetween":
		p, err = planBetween(c)
	case "gorgonia.transposeOp":
		p, err = planTranspose(c)
	case "gorgonia.maxOp":
		p, err = planReduce(c, true)
	case "gorgonia.sliceIncrOp":
		p, err = planSliceIncr(c)
	case "gorgonia.diagFlatOp":
		p, err = planDiagFlat(c)
	case "gorgonia.tensordotOp":
		p, err = planTensordot(c)
	default:
		return plan{}, false, nil
	}
	return p, true, err
}
