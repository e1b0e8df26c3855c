package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
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
	c     cli
	fs    *flag.FlagSet
	dir   *string
	ns    *string
	queue *string
}

func newOpenFlags(c cli, name string, withQueue bool) openFlags {
	fs := newFlags(c, name)
	o := openFlags{c: c, fs: fs, dir: fs.String("dir", "./docket-data", "data directory")}
	if withQueue {
		o.ns = fs.String("ns", demoNS.String(), "namespace PROJECT/SCOPE")
		o.queue = fs.String("queue", demoQueue, "queue name")
	}
	return o
}

func (o openFlags) parse(args []string) error {
	if err := parse(o.c, o.fs, args); err != nil {
		return err
	}
	if o.fs.NArg() > 0 {
		return usageError{fmt.Sprintf("%s: unexpected argument %q (the directory is -dir DIR)", o.fs.Name(), o.fs.Arg(0))}
	}
	return nil
}

// open opens the directory, read-only unless write is set: looking must
// not change anything, nor create a data directory where there was none.
func (o openFlags) open(write bool) (*engine.DB, engine.Queue, error) {
	var ns engine.Namespace
	if o.ns != nil {
		var err error
		if ns, err = parseNS(*o.ns); err != nil {
			return nil, nil, usageError{err.Error()}
		}
	}
	opts := engine.Options{Logger: slog.New(slog.NewTextHandler(o.c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	var db *engine.DB
	var err error
	if write {
		// Refuse what is not a docket directory (or is missing) rather
		// than create one there: the read-only open says so.
		ro, err := engine.OpenReadOnly(*o.dir, opts)
		if err != nil {
			return nil, nil, err
		}
		ro.Close()
		db, err = engine.Open(*o.dir, opts)
	} else {
		db, err = engine.OpenReadOnly(*o.dir, opts)
	}
	if err != nil {
		return nil, nil, err
	}
	if o.ns == nil {
		return db, nil, nil
	}
	return db, db.Queue(ns, *o.queue), nil
}

func runStats(ctx context.Context, c cli, args []string) error {
	o := newOpenFlags(c, "stats", false)
	if err := o.parse(args); err != nil {
		return err
	}
	db, _, err := o.open(false)
	if err != nil {
		return err
	}
	defer db.Close()
	qs, err := db.Queues(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "namespace\tqueue\tready\tscheduled\tin-flight\tdead\tcompleted\t")
	for _, q := range qs {
		n := q.Counts
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t\n", q.Namespace, q.Name, n.Ready, n.Scheduled, n.InFlight, n.Dead, n.Completed)
	}
	tw.Flush()
	st := db.Stats()
	fmt.Fprintf(c.stdout, "\n%d tasks held, last commit %d\n", st.Tasks, st.Seq)
	return nil
}

func printTasks(w io.Writer, tasks []engine.TaskInfo) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
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

func runInspect(ctx context.Context, c cli, args []string) error {
	o := newOpenFlags(c, "inspect", true)
	state := o.fs.String("state", "ready", "state to list: ready, scheduled, in-flight, dead, completed")
	limit := o.fs.Int("limit", 20, "tasks per page")
	cursor := o.fs.String("cursor", "", "continue after a previous page")
	if err := o.parse(args); err != nil {
		return err
	}
	st, err := parseState(*state)
	if err != nil {
		return usageError{err.Error()}
	}
	db, q, err := o.open(false)
	if err != nil {
		return err
	}
	defer db.Close()
	page, err := q.List(ctx, engine.ListOptions{State: st, Limit: *limit, Cursor: *cursor})
	if err != nil {
		return err
	}
	printTasks(c.stdout, page.Tasks)
	if page.Next != "" {
		fmt.Fprintf(c.stdout, "more: -cursor %s\n", page.Next)
	}
	return nil
}

func runDead(ctx context.Context, c cli, args []string) error {
	o := newOpenFlags(c, "dead", true)
	redrive := o.fs.Uint64("redrive", 0, "move this dead task back to ready")
	all := o.fs.Bool("redrive-all", false, "move every dead task of the queue back to ready")
	limit := o.fs.Int("limit", 20, "tasks to list")
	if err := o.parse(args); err != nil {
		return err
	}
	if *redrive != 0 && *all {
		return usageError{"dead: -redrive and -redrive-all exclude each other"}
	}
	db, q, err := o.open(*redrive != 0 || *all)
	if err != nil {
		return err
	}
	defer db.Close()
	switch {
	case *redrive != 0:
		if err := q.Redrive(ctx, *redrive); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "task %d redriven\n", *redrive)
	case *all:
		n, err := q.RedriveAll(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "%d tasks redriven\n", n)
	default:
		page, err := q.List(ctx, engine.ListOptions{State: engine.Dead, Limit: *limit})
		if err != nil {
			return err
		}
		printTasks(c.stdout, page.Tasks)
	}
	return nil
}

func runVerify(ctx context.Context, c cli, args []string) error {
	fs := newFlags(c, "verify")
	if err := parse(c, fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"usage: docket verify DIR"}
	}
	rep, err := engine.Check(fs.Arg(0))
	if err != nil && !errors.Is(err, engine.ErrCorrupt) {
		return err // missing, not a docket directory, unreadable: not damage
	}
	rep.Print(c.stdout)
	if err != nil {
		fmt.Fprintln(c.stdout, "DAMAGED: Open would refuse this directory:", message(err))
		fmt.Fprintf(c.stdout, "'docket repair -salvage %s' keeps what can be kept and says what is lost\n", shellQuote(fs.Arg(0)))
		return exitError(1)
	}
	fmt.Fprintln(c.stdout, "OK: Open would open this directory")
	return nil
}

func runRepair(ctx context.Context, c cli, args []string) error {
	fs := newFlags(c, "repair")
	salvage := fs.Bool("salvage", false, "when the log is damaged after the newest good snapshot, keep the longest valid part, move the rest aside and report what is lost")
	if err := parse(c, fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError{"usage: docket repair [-salvage] DIR"}
	}
	if *salvage {
		rep, err := engine.Salvage(fs.Arg(0))
		if err != nil {
			return err
		}
		rep.Print(c.stdout)
		return nil
	}
	msg, err := engine.Repair(fs.Arg(0))
	if err != nil {
		if errors.Is(err, engine.ErrCorrupt) {
			return fmt.Errorf("%w\n(to keep what can be kept: docket repair -salvage %s)", err, shellQuote(fs.Arg(0)))
		}
		return err
	}
	fmt.Fprintln(c.stdout, msg)
	return nil
}

// shellQuote quotes s for a POSIX shell when it needs it, so that a printed
// command can be pasted as it is.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=+,@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
