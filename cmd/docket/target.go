package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/docketdb/docket/cluster"
	"github.com/docketdb/docket/engine"
)

// reach says what a command acts on, and so which of -ns and -queue it has.
type reach int

const (
	wholeDB  reach = iota // every namespace (stats, top)
	oneNS                 // one namespace (kv)
	oneQueue              // one queue of a namespace
)

// targetFlags are the flags of the commands that read or change queues:
// where the queues are (a data directory, or a live server and the token to
// present), which queue, and whether to print JSON.
type targetFlags struct {
	c      cli
	fs     *flag.FlagSet
	reach  reach
	dir    *string
	server *string
	token  *string
	json   *bool
	nsFlag *string
	queue  *string

	ns engine.Namespace // parsed -ns
}

func addTargetFlags(c cli, fs *flag.FlagSet, r reach) *targetFlags {
	t := &targetFlags{c: c, fs: fs, reach: r}
	t.dir = fs.String("dir", "./docket-data", "data directory to open (offline; read-only unless the command changes something)")
	t.server = fs.String("server", "", "URL of a live docket serve (several: comma separated), instead of -dir")
	t.token = fs.String("token", "", "bearer token for -server (default $DOCKET_TOKEN)")
	t.json = fs.Bool("json", false, "print JSON, for scripts")
	if r >= oneNS {
		t.nsFlag = fs.String("ns", demoNS.String(), "namespace PROJECT/SCOPE")
	}
	if r >= oneQueue {
		t.queue = fs.String("queue", demoQueue, "queue name")
	}
	return t
}

// newTargetFlags is addTargetFlags on the flag set of the command name.
func newTargetFlags(c cli, name string, r reach) *targetFlags {
	return addTargetFlags(c, newFlags(c, name), r)
}

// parse parses args and returns the positional arguments, of which there
// must be between min and max (max < 0: no bound).
func (t *targetFlags) parse(args []string, min, max int) ([]string, error) {
	pos, err := parseMixed(t.c, t.fs, args)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	t.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if len(pos) < min || max >= 0 && len(pos) > max {
		switch {
		case max == 0:
			return nil, usageError{fmt.Sprintf("%s: unexpected argument %q (the directory is -dir DIR)", t.fs.Name(), pos[0])}
		case len(pos) < min:
			return nil, usageError{fmt.Sprintf("%s: missing argument; run 'docket %s -h'", t.fs.Name(), t.fs.Name())}
		default:
			return nil, usageError{fmt.Sprintf("%s: too many arguments (%q); run 'docket %s -h'", t.fs.Name(), pos[max], t.fs.Name())}
		}
	}
	if set["dir"] && set["server"] {
		return nil, usageError{t.fs.Name() + ": -dir and -server exclude each other"}
	}
	if set["token"] && *t.server == "" {
		return nil, usageError{t.fs.Name() + ": -token is for -server"}
	}
	if t.nsFlag != nil {
		if t.ns, err = parseNS(*t.nsFlag); err != nil {
			return nil, usageError{err.Error()}
		}
	}
	return pos, nil
}

// target is what a command acts on: the DB of a directory or a server's
// API, through one interface.
type target struct {
	api   engine.API
	where string           // the directory or the server, for people
	ns    engine.Namespace // -ns
	queue string           // -queue
}

// Queue returns the queue -ns and -queue name.
func (t *target) Queue() engine.Queue { return t.api.Queue(t.ns, t.queue) }

// mustExist returns an error matching engine.ErrNotFound when the queue
// -ns and -queue name holds no task and has no settings: a name mistyped,
// which the commands that read or act on a queue's tasks report (exit 1)
// rather than show as empty. Pause, resume and limits may set up a queue
// before its first task; enqueue starts one.
func (t *target) mustExist(ctx context.Context) error {
	qs, err := t.api.Queues(ctx)
	if err != nil {
		return err
	}
	for _, q := range qs {
		if q.Namespace == t.ns && q.Name == t.queue {
			return nil
		}
	}
	// The list holds only the namespaces the caller may read: a caller who
	// may act on the queue without reading it is not told it is missing.
	if _, err := t.Queue().Counts(ctx); err != nil {
		if errors.Is(err, engine.ErrPermission) {
			return nil
		}
		return err
	}
	return fmt.Errorf("%w: no queue %q in %s: it holds no task and has no settings (a typo? 'docket stats' lists the queues)",
		engine.ErrNotFound, t.queue, t.ns)
}

// KV returns the key-value entries of -ns.
func (t *target) KV() engine.KV { return t.api.KV(t.ns) }

// Close closes the DB, or the connection to the server.
func (t *target) Close() error { return t.api.Close() }

// open opens the target: the server when -server is given, else the
// directory, read-only unless write is set. Looking must not change
// anything, nor create a data directory where there was none.
func (t *targetFlags) open(ctx context.Context, write bool) (*target, error) {
	tg := &target{ns: t.ns}
	if t.queue != nil {
		tg.queue = *t.queue
	}
	if *t.server != "" {
		token := *t.token
		if token == "" {
			token = os.Getenv("DOCKET_TOKEN")
		}
		api, err := t.c.dial(ctx, *t.server, token)
		if err != nil {
			return nil, err
		}
		tg.api, tg.where = api, *t.server
		return tg, nil
	}
	db, err := openDir(t.c.stderr, *t.dir, write)
	if err != nil {
		return nil, err
	}
	tg.api, tg.where = db, *t.dir
	return tg, nil
}

// openDir opens a data directory, read-only unless write is set. Warnings
// of the recovery go to w. A cluster node's directory is read offline, as
// of its raft log (cluster.OpenReadOnly); changes to it go through the
// cluster.
func openDir(w io.Writer, dir string, write bool) (engine.API, error) {
	opts := engine.Options{Logger: slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if cluster.IsNodeDir(dir) {
		if write {
			return nil, fmt.Errorf("%w: %s is a cluster node's directory: changes go through the cluster (-server URL of a node); offline, only reading works", engine.ErrInvalid, dir)
		}
		ro, err := cluster.OpenReadOnly(dir, opts)
		if err != nil {
			return nil, err
		}
		return ro, nil
	}
	if !write {
		return engine.OpenReadOnly(dir, opts)
	}
	// Refuse what is not a docket directory (or is missing) rather than
	// create one there: the read-only open says so.
	ro, err := engine.OpenReadOnly(dir, opts)
	if err != nil {
		return nil, err
	}
	ro.Close()
	return engine.Open(dir, opts)
}

// engineStats returns the engine's counters when api has them: a DB does,
// and so may a server's client.
func engineStats(ctx context.Context, api engine.API) (engine.Stats, bool, error) {
	switch s := api.(type) {
	case interface{ Stats() engine.Stats }:
		return s.Stats(), true, nil
	case interface {
		Stats(context.Context) (engine.Stats, error)
	}:
		st, err := s.Stats(ctx)
		return st, err == nil, err
	}
	return engine.Stats{}, false, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func parseNS(s string) (engine.Namespace, error) {
	p, sc, ok := strings.Cut(s, "/")
	if !ok {
		return engine.Namespace{}, fmt.Errorf("namespace %q: want PROJECT/SCOPE", s)
	}
	return engine.NS(p, sc), nil
}

func parseState(s string) (engine.State, error) {
	for _, st := range []engine.State{engine.Ready, engine.Scheduled, engine.InFlight, engine.Dead, engine.Completed, engine.Waiting} {
		if st.String() == s {
			return st, nil
		}
	}
	return 0, fmt.Errorf("unknown state %q (ready, scheduled, in-flight, dead, completed, waiting)", s)
}

// parseIDs parses task ids given as arguments, each possibly a comma
// separated list.
func parseIDs(args []string) ([]uint64, error) {
	var ids []uint64
	for _, a := range args {
		for _, s := range strings.Split(a, ",") {
			s = strings.TrimSpace(s)
			id, err := strconv.ParseUint(s, 10, 64)
			if err != nil || id == 0 {
				return nil, usageError{fmt.Sprintf("task id %q: want a positive number", s)}
			}
			ids = append(ids, id)
		}
	}
	if len(ids) > engine.MaxBatch {
		return nil, usageError{fmt.Sprintf("%d task ids: at most %d at once", len(ids), engine.MaxBatch)}
	}
	return ids, nil
}
