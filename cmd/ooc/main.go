// Command ooc trains and measures Gorgonia models out of core.
//
// Usage:
//
//	ooc train [flags]   train a model under a device-memory budget
//	ooc eval  [flags]   evaluate a checkpoint on a test set
//	ooc sweep [flags]   batch-size sweep per scheduler and allocator
//	ooc plan  [flags]   plan one step and show its tape and memory
//	ooc compare [flags] makespan / lower bound of the schedulers across budgets
//	ooc doctor [flags]  the acceptance of a GPU: driver, memory, allocators, streams, every kernel, every model step, the sweep
//	ooc multigpu [flags] the multi-GPU paper's tables (simulated), or -cpu replicas against one device (measured)
//	ooc gpu-summary -dir DIR  join the GPU bundle's outputs (cmd/gpubundle) into DIR/summary.md
//	ooc launch -nproc N -- train [flags]  run N ranks of one training on this machine (torchrun's environment)
//
// Run "ooc <command> -h" for a command's flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/gorgonia-ooc/outofcore/train"
)

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = []command{
	{"train", "train a model under a device-memory budget", runTrain},
	{"eval", "evaluate a checkpoint on a test set", runEval},
	{"sweep", "batch-size sweep: images/s per scheduler, allocator and batch (the paper's Table 1)", runSweep},
	{"plan", "plan one step: the tape, a summary, and memory over the step", runPlan},
	{"compare", "makespan / lower bound of every scheduler across budgets (simulated)", runCompare},
	{"dqn-train", "train the DQN planner's Q-network on one model and budget (simulated); write its weights", runDQNTrain},
	{"multigpu", "the multi-GPU paper's tables: data-parallel swapping on devices sharing a host link (simulated), or -cpu replicas (measured)", runMultiGPU},
	{"doctor", "the acceptance of a GPU: checks, every kernel and model step against the CPU, the ResNet-50 sweep", runDoctor},
	{"gpu-summary", "join the GPU bundle's outputs (cmd/gpubundle's run.sh) into summary.md, the targets checked", runGPUSummary},
	{"launch", "run -nproc N ranks of \"ooc COMMAND\" on this machine, as torchrun does: ooc launch -nproc 2 -- train ...", runLaunch},
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: ooc <command> [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun \"ooc <command> -h\" for a command's flags.")
}

// run dispatches a command line and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) < 1 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		var status *exitStatus
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage) || errors.As(err, new(*train.ConfigError)):
			fmt.Fprintln(stderr, "ooc "+c.name+":", err)
			return 2
		case errors.As(err, &status):
			fmt.Fprintln(stderr, "ooc "+c.name+":", err)
			return status.code
		}
		fmt.Fprintln(stderr, "ooc "+c.name+":", err)
		return 1
	}
	fmt.Fprintf(stderr, "ooc: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

func main() {
	// The first interrupt (SIGINT or SIGTERM) stops training after the current step and writes
	// the checkpoint; a second one kills the process.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
