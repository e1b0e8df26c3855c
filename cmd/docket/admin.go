package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/docketdb/docket/engine"
)

func parseNS(s string) (engine.Namespace, error) {
	p, sc, ok := strings.Cut(s, "/")
	if !ok {
		return engine.Namespace{}, fmt.Errorf("namespace %q: want PROJECT/SCOPE", s)
	}
	return engine.NS(p, sc), nil
}

func parseState(s string) (engine.State, error) {
	for _, st := range []engine.State{engine.Ready, engine.Scheduled, engine.InFlight, engine.Dead, engine.Completed} {
		if st.String() == s {
			return st, nil
		}
	}
	return 0, fmt.Errorf("unknown state %q (ready, scheduled, in-flight, dead, completed)", s)
}

// openFlags parses the flags shared by the commands that open a directory.
type openFlags struct {
	fs    *flag.FlagSet
	dir   *string
	ns    *string
	queue *string
}

func newOpenFlags(name string, withQueue bool) openFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	o := openFlags{fs: fs, dir: fs.String("dir", "./docket-data", "data directory")}
	if withQueue {
		o.ns = fs.String("ns", demoNS.String(), "namespace PROJECT/SCOPE")
		o.queue = fs.String("queue", demoQueue, "queue name")
	}
	return o
}

func (o openFlags) open(args []string) (*engine.DB, engine.Queue, error) {
	if err := o.fs.Parse(args); err != nil {
		return nil, nil, err
	}
	if _, err := os.Stat(*o.dir); err != nil {
		return nil, nil, fmt.Errorf("data directory: %w", err)
	}
	db, err := engine.Open(*o.dir, engine.Options{})
	if err != nil {
		return nil, nil, err
	}
	if o.ns == nil {
		return db, nil, nil
	}
	ns, err := parseNS(*o.ns)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, db.Queue(ns, *o.queue), nil
}

func runStats(ctx context.Context, args []string) error {
	db, _, err := newOpenFlags("stats", false).open(args)
	if err != nil {
		return err
	}
	defer db.Close()
	qs, err := db.Queues(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "namespace\tqueue\tready\tscheduled\tin-flight\tdead\tcompleted\t")
	for _, q := range qs {
		c := q.Counts
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t\n", q.Namespace, q.Name, c.Ready, c.Scheduled, c.InFlight, c.Dead, c.Completed)
	}
	tw.Flush()
	st := db.Stats()
	fmt.Printf("\n%d tasks held, last commit %d\n", st.Tasks, st.Seq)
	return nil
}

func printTasks(tasks []engine.TaskInfo) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "id\tstate\tprio\tattempts\tnot before\towner\tpayload\tlast error")
	for _, t := range tasks {
		nb := ""
		if !t.NotBefore.IsZero() {
			nb = t.NotBefore.Format("2006-01-02 15:04:05.000")
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d/%d\t%s\t%s\t%.60s\t%.80s\n", t.ID, t.State, t.Priority, t.Attempts, t.MaxAttempts,
			nb, t.Owner, t.Payload, t.LastError)
	}
	tw.Flush()
}

func runInspect(ctx context.Context, args []string) error {
	o := newOpenFlags("inspect", true)
	state := o.fs.String("state", "ready", "state to list: ready, scheduled, in-flight, dead, completed")
	limit := o.fs.Int("limit", 20, "tasks per page")
	cursor := o.fs.String("cursor", "", "continue after a previous page")
	db, q, err := o.open(args)
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := parseState(*state)
	if err != nil {
		return err
	}
	page, err := q.List(ctx, engine.ListOptions{State: st, Limit: *limit, Cursor: *cursor})
	if err != nil {
		return err
	}
	printTasks(page.Tasks)
	if page.Next != "" {
		fmt.Printf("more: -cursor %s\n", page.Next)
	}
	return nil
}

func runDead(ctx context.Context, args []string) error {
	o := newOpenFlags("dead", true)
	redrive := o.fs.Uint64("redrive", 0, "move this dead task back to ready")
	all := o.fs.Bool("redrive-all", false, "move every dead task of the queue back to ready")
	limit := o.fs.Int("limit", 20, "tasks to list")
	db, q, err := o.open(args)
	if err != nil {
		return err
	}
	defer db.Close()
	switch {
	case *redrive != 0:
		if err := q.Redrive(ctx, *redrive); err != nil {
			return err
		}
		fmt.Printf("task %d redriven\n", *redrive)
	case *all:
		n, err := q.RedriveAll(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("%d tasks redriven\n", n)
	default:
		page, err := q.List(ctx, engine.ListOptions{State: engine.Dead, Limit: *limit})
		if err != nil {
			return err
		}
		printTasks(page.Tasks)
	}
	return nil
}

func runVerify(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: docket verify DIR")
	}
	rep, err := engine.Check(fs.Arg(0))
	rep.Print(os.Stdout)
	if err != nil {
		fmt.Println("DAMAGED:", err)
		return exitError(1)
	}
	fmt.Println("OK")
	return nil
}

func runRepair(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("repair", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: docket repair DIR")
	}
	msg, err := engine.Repair(fs.Arg(0))
	if err != nil {
		return err
	}
	fmt.Println(msg)
	return nil
}
