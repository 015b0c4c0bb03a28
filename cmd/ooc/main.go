// Command ooc trains and measures Gorgonia models out of core.
//
// Usage:
//
//	ooc train [flags]   train a model under a device-memory budget
//
// Run "ooc <command> -h" for a command's flags.
package main

import (
	"fmt"
	"io"
	"os"
)

type command struct {
	name, summary string
	run           func(args []string, stdout io.Writer) error
}

var commands = []command{
	{"train", "train a model under a device-memory budget", runTrain},
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: ooc <command> [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
}

func main() {
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(2)
	}
	for _, c := range commands {
		if c.name == os.Args[1] {
			if err := c.run(os.Args[2:], os.Stdout); err != nil {
				fmt.Fprintln(os.Stderr, "ooc "+c.name+":", err)
				os.Exit(1)
			}
			return
		}
	}
	if os.Args[1] == "-h" || os.Args[1] == "help" || os.Args[1] == "--help" {
		usage(os.Stdout)
		return
	}
	fmt.Fprintf(os.Stderr, "ooc: unknown command %q\n", os.Args[1])
	usage(os.Stderr)
	os.Exit(2)
}
