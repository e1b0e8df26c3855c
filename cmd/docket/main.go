// Command docket runs a demo of the docket durable task queue and inspects,
// verifies and repairs docket data directories.
//
//	docket demo [-dir ./docket-data] [-tasks 2000]   run producers and workers, with live progress
//	docket stats [-dir DIR]                           counts per queue and engine counters
//	docket inspect [-dir DIR] -ns P/S -queue Q [-state dead]   list tasks
//	docket dead [-dir DIR] -ns P/S -queue Q [-redrive ID|-redrive-all]   dead-letter queue
//	docket verify DIR                                 check a directory without changing it
//	docket repair DIR                                 cut a torn log tail, keeping a copy
//	docket bench [-workload W1,W2] [-durability always] [-json]   load generator
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
