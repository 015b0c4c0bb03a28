package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"

	"github.com/gorgonia-ooc/outofcore/internal/gpusummary"
)

// runGPUSummary is "ooc gpu-summary", the GPU bundle's last part (cmd/gpubundle's run.sh):
// it joins the files the earlier parts wrote into DIR/summary.md and prints it.
func runGPUSummary(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("gpu-summary", "-dir DIR [flags]", "Joins the GPU bundle's outputs in DIR (env.md, doctor.md, sweep.json, hybrid.json, torch.json) into DIR/summary.md:\n"+
		"the parts' outcomes, the doctor's verdict, ours against PyTorch with the ratios, and issue 25's targets\n"+
		"(met, missed with the numbers, or not measured with why). run.sh calls it; it can be rerun on a copy of $OUT.", stderr)
	dir := fs.String("dir", "", "the folder run.sh wrote ($OUT)")
	parts := fs.String("parts", "", "run.sh's record of its parts: name:exit status:seconds, comma-separated")
	budget := fs.String("budget", "16GiB", "the device memory the sweep and PyTorch ran in (for the targets' wording)")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		return usagef("-dir: the folder run.sh wrote is required")
	}
	ps, err := gpusummary.ParseParts(*parts)
	if err != nil {
		return usagef("-parts: %v", err)
	}
	in, err := gpusummary.Read(*dir, ps, *budget)
	if err != nil {
		return usagef("-dir: %v", err)
	}
	var buf bytes.Buffer
	if err := gpusummary.Write(&buf, in); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*dir, "summary.md"), buf.Bytes(), 0o644); err != nil {
		return err
	}
	_, err = stdout.Write(buf.Bytes())
	return err
}
