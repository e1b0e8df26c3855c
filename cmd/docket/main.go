package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string) error
}

var commands []command

func init() {
	commands = []command{
		{"demo", "run producers and workers on a data directory, with live progress", runDemo},
		{"stats", "print counts per queue and the engine's counters", runStats},
		{"inspect", "list the tasks of a queue in one state", runInspect},
		{"dead", "list or redrive the dead-letter queue of a queue", runDead},
		{"verify", "check a data directory without changing it; exit 1 on damage", runVerify},
		{"repair", "cut a torn log tail the way Open does, after keeping a copy", runRepair},
		{"bench", "run the load generator's workloads and print throughput and latency", runBench},
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: docket <command> [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(os.Stderr, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(os.Stderr, "\nrun 'docket <command> -h' for a command's flags")
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, c := range commands {
		if c.name == os.Args[1] {
			if err := c.run(ctx, os.Args[2:]); err != nil {
				var ex exitError
				if errors.As(err, &ex) {
					os.Exit(int(ex))
				}
				fmt.Fprintln(os.Stderr, "docket:", err)
				os.Exit(1)
			}
			return
		}
	}
	usage()
	os.Exit(2)
}

// exitError ends the program with a status after the command printed what
// it found.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }
