package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/taskaction"
)

// cli is what a command runs with: where it writes and reads, and how it
// reaches a server. Tests fill in the hooks.
type cli struct {
	stdout, stderr io.Writer
	stdin          io.Reader
	// dial connects to a live server for -server (dialServer).
	dial func(ctx context.Context, url, token string) (engine.API, error)
	// reload, when set, stands in for SIGHUP in serve.
	reload <-chan struct{}
}

type command struct {
	name, args, summary string
	run                 func(ctx context.Context, c cli, args []string) error
}

var commands []command

func init() {
	commands = []command{
		{"demo", "[-dir DIR] [-tasks N]", "run producers and workers on a data directory, with live progress", runDemo},
		{"serve", "[-dir DIR] [-listen ADDR] [flags]", "serve a data directory over the network (API, dashboard, metrics)", runServe},
		{"token", "CALLER GRANT...", "make a bearer token and the line of the tokens file that grants it", runTokenChecked},
		{"stats", "[-dir DIR | -server URL] [-ns P/S] [-queue Q] [-json]", "print counts per queue and the engine's counters", runStats},
		{"top", "[-dir DIR | -server URL] [-once] [-every D]", "show every queue's counts and rates, refreshed live", runTop},
		{"inspect", "[-dir DIR | -server URL] [-ns P/S] [-queue Q] [-state S] [-json]", "list the tasks of a queue in one state", runInspect},
		{"get", "[-dir DIR | -server URL] [-ns P/S] [-queue Q] [-json] ID", "show one task (found in any queue unless -queue says which): payload, result, attempts", runGet},
		{"search", "[-dir DIR | -server URL] [-ns P/S] [-queue Q] [filter flags] [-newest] [-count] [-json]", "search a whole queue by state, kind, error text, partition, header, ids and age, and count the matches", runSearch},
		{"bulk", "[-dir DIR | -server URL] [-ns P/S] [-queue Q] -action retry|cancel|run-now|delete [filter flags] [-yes]", "retry, cancel, run now or delete every task a filter selects (counts first; acts with -yes)", runBulk},
		{"dead", "[-dir DIR | -server URL] [-ns P/S] [-queue Q] [-redrive ID,... | -redrive-all | -by-error | -redrive-error TEXT | -delete-error TEXT]", "list, group, redrive or delete the dead-letter queue of a queue", runDead},
		{"enqueue", "[-dir DIR | -server URL] [-ns P/S] [-queue Q] [flags] [PAYLOAD | -]", "add a task (payload JSON as an argument, or - for stdin)", runEnqueue},
		{"cancel", "[-dir DIR | -server URL] [-ns P/S] [-queue Q] [-completed] ID... | -completed-all", "delete tasks in any state (-completed: only retained completions)", runCancel},
		{"run-now", "[-dir DIR | -server URL] [-ns P/S] [-queue Q] ID...", "make scheduled tasks (timers, retries in backoff) due now", runRunNow},
		{"pause", "[-dir DIR | -server URL] [-ns P/S] [-queue Q]", "stop a queue's claims (workers wait) until resume", runPause},
		{"resume", "[-dir DIR | -server URL] [-ns P/S] [-queue Q]", "let a paused queue's tasks be claimed again", runResume},
		{"limits", "[-dir DIR | -server URL] [-ns P/S] [-queue Q] [flags]", "show or set a queue's in-flight bounds and rate limit", runLimits},
		{"partitions", "[-dir DIR | -server URL] [-ns P/S] [-queue Q] [-cursor C]", "list a queue's partitions and their tasks by state", runPartitions},
		{"workers", "[-dir DIR | -server URL] [-ns P/S] [-json]", "list the worker processes connected: queues, running tasks, heartbeat, draining", runWorkers},
		{"schedules", "[-dir DIR | -server URL] [-ns P/S] [-queue Q] [-pause NAME | -resume NAME | -run NAME]", "list the periodic schedules; pause, resume or run one now", runSchedules},
		{"quota", "[-dir DIR | -server URL] [-ns P/S] [-tasks N] [-bytes SIZE] [-json]", "show or set a namespace's quota of tasks and bytes, with what it holds", runQuota},
		{"kv", "get|scan|set|delete [-dir DIR | -server URL] [-ns P/S] ...", "read and write a namespace's key-value entries", runKV},
		{"verify", "[-dir] DIR", "check a data directory the way Open would, without changing it; exit 1 if Open would refuse it", runVerify},
		{"repair", "[-salvage] [-dir] DIR", "cut a torn log tail the way Open does, after keeping a copy; -salvage also drops a damaged log end", runRepair},
		{"cluster", "[remove ID | transfer [ID] | bench] [-server URL]", "show a cluster's members, leader and indexes; remove a member, move the leadership", runCluster},
		{"bench", "[-workload W1,W2] [-json]", "run the load generator's workloads and print throughput and latency", runBench},
		{"version", "", "print the version of docket and of Go it was built with", runVersion},
	}
	// The task actions of engine.Queue without a command of their own,
	// after the hand-written ones.
	i := slices.IndexFunc(commands, func(c command) bool { return c.name == "run-now" }) + 1
	commands = slices.Insert(commands, i, taskActionCommands(taskaction.Actions())...)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: docket <command> [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "  help     print this")
	fmt.Fprintln(w, "\nThe commands that read or change queues work on a data directory (-dir, the")
	fmt.Fprintln(w, "default; read-only unless they change something) or on a live server (-server URL,")
	fmt.Fprintln(w, "with -token or $DOCKET_TOKEN). -json prints JSON for scripts.")
	fmt.Fprintln(w, "\nrun 'docket <command> -h' for a command's flags")
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command line args (without the program name) and returns
// the exit status: 0 on success, 1 on failure, 2 on a usage error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runCLI(ctx, cli{stdout: stdout, stderr: stderr, stdin: os.Stdin, dial: dialServer}, args)
}

// runCLI is run with everything a command reaches outside given in c.
func runCLI(ctx context.Context, c cli, args []string) int {
	stderr := c.stderr
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		usage(c.stdout)
		return 0
	}
	for _, cmd := range commands {
		if cmd.name != args[0] {
			continue
		}
		err := cmd.run(ctx, c, args[1:])
		var ex exitError
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.As(err, &ex):
			return int(ex)
		case errors.As(err, new(usageError)):
			fmt.Fprintln(stderr, "docket:", message(err))
			return 2
		}
		fmt.Fprintln(stderr, "docket:", message(err))
		explainLocked(stderr, err)
		return 1
	}
	fmt.Fprintf(stderr, "docket: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// message is err's text without the "docket: " the engine's sentinels start
// with, also where a command wrapped one ("task 5: docket: not found"), so
// that a line carries the prefix once.
func message(err error) string {
	return strings.ReplaceAll(strings.TrimPrefix(err.Error(), "docket: "), ": docket: ", ": ")
}

// exitError ends the program with a status after the command printed what
// it found.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// usageError is a command line the command cannot run: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// newFlags returns the flag set of a command. Its usage names the
// positional arguments and goes to stdout when asked for with -h (exit 0),
// to stderr after a mistake (exit 2).
func newFlags(c cli, name string) *flag.FlagSet {
	return newFlagsFor(c, name, commandArgs(name), "")
}

// commandArgs returns the arguments line of the command name.
func commandArgs(name string) string {
	for _, cmd := range commands {
		if cmd.name == name {
			return cmd.args
		}
	}
	return ""
}

// newFlagsFor is newFlags with the usage line's arguments and a paragraph
// of explanation (may be empty) given.
func newFlagsFor(c cli, name, argsLine, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: docket %s %s\n", name, argsLine)
		if about != "" {
			fmt.Fprintf(fs.Output(), "\n%s\n", strings.TrimSpace(about))
		}
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(fs.Output(), "\nflags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parse parses args, sending the usage to stdout for -h, and turns a
// mistake into a usageError (the flag package has printed why).
func parse(c cli, fs *flag.FlagSet, args []string) error {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" || a == "--h" {
			fs.SetOutput(c.stdout)
		}
	}
	err := fs.Parse(args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return exitError(2)
	}
	return err
}

// parseMixed is parse for a command with positional arguments, which may
// come before, between or after the flags ("docket get 42 -json").
// Everything after "--" is positional.
func parseMixed(c cli, fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parse(c, fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func runVersion(ctx context.Context, c cli, args []string) error {
	fs := newFlags(c, "version")
	if err := parse(c, fs, args); err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, versionString())
	return nil
}

// versionString describes the build: the module version (or "devel" for a
// build from a work tree), the commit when the build recorded it, and Go's
// version.
func versionString() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "docket (no build information)"
	}
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+dirty"
			}
		}
	}
	out := "docket " + v
	if rev != "" {
		out += " (" + rev[:min(12, len(rev))] + modified + ")"
	}
	return out + " " + info.GoVersion
}
