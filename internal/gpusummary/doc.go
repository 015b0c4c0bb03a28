// Package gpusummary joins the GPU bundle's outputs (cmd/gpubundle's run.sh:
// env.md, doctor.md, sweep.json, hybrid.json, torch.json) into summary.md: how each part
// ended, the doctor's verdict, one table of our sweep (baseline, window + VA,
// hybrid) against PyTorch's (in core, save_on_cpu, checkpoint) with the
// ratios, the failures that were not out of memory, and issue 25's targets
// each marked met, missed (with the numbers) or not measured (with why).
//
// It reads files only; it never decides a result the files do not hold, so
// a part that failed or ran out of time shows as such rather than as a
// missed target.
package gpusummary
