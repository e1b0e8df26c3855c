package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/docketdb/docket/cluster"
	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/bytesize"
)

type statsJSON struct {
	Seq          uint64 `json:"seq"`
	Tasks        int    `json:"tasks"`
	Commits      uint64 `json:"commits"`
	Enqueued     uint64 `json:"enqueued"`
	Claimed      uint64 `json:"claimed"`
	Completed    uint64 `json:"completed"`
	Retried      uint64 `json:"retried"`
	DeadLettered uint64 `json:"dead_lettered"`
	Reclaimed    uint64 `json:"reclaimed"`
	LeaseLost    uint64 `json:"lease_lost"`
	Denied       uint64 `json:"denied"`
	LogSyncs     uint64 `json:"log_syncs"`
	LogBytes     uint64 `json:"log_bytes"`
	Snapshots    uint64 `json:"snapshots"`
	Memory       int64  `json:"memory_bytes"`
	MemoryBudget int64  `json:"memory_budget_bytes"`
	ValueLog     int64  `json:"value_log_bytes"`
	ValueLive    int64  `json:"value_live_bytes"`
	Unreadable   uint64 `json:"unreadable_values"`
}

func runStats(ctx context.Context, c cli, args []string) error {
	tf := newTargetFlags(c, "stats", wholeDB)
	nsFlag := tf.fs.String("ns", "", "only the queues of namespace `PROJECT/SCOPE`")
	queueFlag := tf.fs.String("queue", "", "only the queues of this name")
	if _, err := tf.parse(args, 0, 0); err != nil {
		return err
	}
	var only *engine.Namespace
	if *nsFlag != "" {
		ns, err := parseNS(*nsFlag)
		if err != nil {
			return usageError{err.Error()}
		}
		only = &ns
	}
	t, err := tf.open(ctx, false)
	if err != nil {
		return err
	}
	defer t.Close()
	qs, err := t.api.Queues(ctx)
	if err != nil {
		return err
	}
	if only != nil || *queueFlag != "" {
		qs = slices.DeleteFunc(qs, func(q engine.QueueInfo) bool {
			return only != nil && q.Namespace != *only || *queueFlag != "" && q.Name != *queueFlag
		})
		if len(qs) == 0 {
			what := "no queue"
			if *queueFlag != "" {
				what = fmt.Sprintf("no queue %q", *queueFlag)
			}
			if only != nil {
				what += " in " + only.String()
			}
			return fmt.Errorf("%w: %s holds a task or has settings (a typo? 'docket stats' lists the queues)", engine.ErrNotFound, what)
		}
	}
	st, haveStats, err := engineStats(ctx, t.api)
	if err != nil {
		return err
	}
	if *tf.json {
		out := struct {
			Queues []queueJSON `json:"queues"`
			Engine *statsJSON  `json:"engine,omitempty"`
		}{Queues: []queueJSON{}}
		for _, q := range qs {
			out.Queues = append(out.Queues, queueOf(q))
		}
		if haveStats {
			out.Engine = &statsJSON{st.Seq, st.Tasks, st.Commits, st.Enqueued, st.Claimed, st.Completed, st.Retried,
				st.DeadLettered, st.Reclaimed, st.LeaseLost, st.Denied, st.LogSyncs, st.LogBytes, st.Snapshots,
				st.Memory, st.MemoryBudget, st.ValueLogBytes, st.ValueLiveBytes, st.UnreadableValues}
		}
		return writeJSON(c.stdout, out)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "namespace\tqueue\tready\tscheduled\tin-flight\tdead\tcompleted\twaiting\t")
	var controlled []engine.QueueInfo
	for _, q := range qs {
		n := q.Counts
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", q.Namespace, q.Name, n.Ready, n.Scheduled, n.InFlight, n.Dead,
			n.Completed, n.Waiting)
		if q.Paused || q.Limits != (engine.Limits{}) {
			controlled = append(controlled, q)
		}
	}
	tw.Flush()
	for _, q := range controlled {
		var what []string
		if q.Paused {
			what = append(what, "paused")
		}
		if l := q.Limits.String(); l != "" {
			what = append(what, l)
		}
		fmt.Fprintf(c.stdout, "%s %s: %s\n", q.Namespace, q.Name, strings.Join(what, ", "))
	}
	if haveStats {
		fmt.Fprintf(c.stdout, "\n%d tasks held, last commit %d\n", st.Tasks, st.Seq)
		if st.MemoryBudget > 0 {
			fmt.Fprintf(c.stdout, "memory: %s of a budget of %s (%d%%)\n", bytesize.Format(st.Memory), bytesize.Format(st.MemoryBudget),
				st.Memory*100/st.MemoryBudget)
		} else if st.Memory > 0 {
			fmt.Fprintf(c.stdout, "memory: %s, no budget\n", bytesize.Format(st.Memory))
		}
		if st.ValueLogBytes > 0 {
			fmt.Fprintf(c.stdout, "values on disk: %s, %s of them live\n", bytesize.Format(st.ValueLogBytes), bytesize.Format(st.ValueLiveBytes))
		}
		if st.UnreadableValues > 0 {
			fmt.Fprintf(c.stdout, "values that could not be read: %d (see the log; docket verify lists the damage)\n", st.UnreadableValues)
		}
	}
	if ro, ok := t.api.(*cluster.ReadOnly); ok {
		r := ro.Report
		fmt.Fprintf(c.stdout, "a cluster node's directory, read offline: the state as of raft index %d, entries the node had not seen committed included\n",
			max(r.LastIndex, r.SnapshotIndex))
	}
	return nil
}

func runInspect(ctx context.Context, c cli, args []string) error {
	tf := newTargetFlags(c, "inspect", oneQueue)
	state := tf.fs.String("state", "ready", "state to list: ready, scheduled, in-flight, dead, completed, waiting")
	limit := tf.fs.Int("limit", 20, "tasks per page")
	cursor := tf.fs.String("cursor", "", "continue after a previous page")
	if _, err := tf.parse(args, 0, 0); err != nil {
		return err
	}
	st, err := parseState(*state)
	if err != nil {
		return usageError{err.Error()}
	}
	t, err := tf.open(ctx, false)
	if err != nil {
		return err
	}
	defer t.Close()
	if err := t.mustExist(ctx); err != nil {
		return err
	}
	page, err := t.Queue().List(ctx, engine.ListOptions{State: st, Limit: *limit, Cursor: *cursor})
	if err != nil {
		return err
	}
	return writePage(c, *tf.json, page)
}

// writePage prints one page of tasks, as JSON or as a table followed by the
// flag that fetches the next page.
func writePage(c cli, asJSON bool, page engine.Page) error {
	if asJSON {
		return writeJSON(c.stdout, pageOf(page))
	}
	printTasks(c.stdout, page.Tasks)
	if page.Next != "" {
		fmt.Fprintf(c.stdout, "more: -cursor %s\n", shellQuote(page.Next))
	}
	return nil
}

func runGet(ctx context.Context, c cli, args []string) error {
	tf := newTargetFlags(c, "get", oneQueue)
	pos, err := tf.parse(args, 1, 1)
	if err != nil {
		return err
	}
	ids, err := parseIDs(pos)
	if err != nil {
		return err
	}
	if len(ids) != 1 {
		return usageError{"get: one task id"}
	}
	set := map[string]bool{}
	tf.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	t, err := tf.open(ctx, false)
	if err != nil {
		return err
	}
	defer t.Close()
	var info engine.TaskInfo
	if set["queue"] {
		if err := t.mustExist(ctx); err != nil {
			return err
		}
		info, err = t.Queue().Get(ctx, ids[0])
	} else {
		var ns *engine.Namespace
		if set["ns"] {
			ns = &t.ns
		}
		info, err = findTask(ctx, t.api, ns, ids[0])
	}
	if err != nil {
		return fmt.Errorf("task %d: %w", ids[0], err)
	}
	if *tf.json {
		return writeJSON(c.stdout, taskOf(info))
	}
	printTask(c.stdout, info)
	return nil
}

// findTask looks task id up in every queue the caller can see (of ns only,
// when given), as the dashboard's search does: ids are unique across the
// DB, and a task's queue is what a caller may not know.
func findTask(ctx context.Context, api engine.API, ns *engine.Namespace, id uint64) (engine.TaskInfo, error) {
	qs, err := api.Queues(ctx)
	if err != nil {
		return engine.TaskInfo{}, err
	}
	for _, qi := range qs {
		if ns != nil && qi.Namespace != *ns {
			continue
		}
		info, err := api.Queue(qi.Namespace, qi.Name).Get(ctx, id)
		if errors.Is(err, engine.ErrNotFound) {
			continue
		}
		return info, err
	}
	where := "any queue"
	if ns != nil {
		where = "any queue of " + ns.String()
	}
	return engine.TaskInfo{}, fmt.Errorf("%w: not in %s (a completed task is kept only while its retention lasts)", engine.ErrNotFound, where)
}

// outcome is what an action did to each task it was given.
type outcome struct {
	Done   []uint64        `json:"done"`
	Failed []failedOutcome `json:"failed,omitempty"`
}

type failedOutcome struct {
	ID    uint64 `json:"id"`
	Error string `json:"error"`
}

// eachTask runs act on every id and reports per task: "task N <verb>" on
// stdout, each failure on stderr, or one JSON document. Every id is tried;
// a failure makes the command exit 1.
func eachTask(c cli, asJSON bool, ids []uint64, verb string, act func(uint64) error) error {
	out := outcome{Done: []uint64{}}
	for _, id := range ids {
		if err := act(id); err != nil {
			out.Failed = append(out.Failed, failedOutcome{id, message(err)})
			if !asJSON {
				fmt.Fprintf(c.stderr, "docket: task %d: %s\n", id, message(err))
			}
			continue
		}
		out.Done = append(out.Done, id)
		if !asJSON {
			fmt.Fprintf(c.stdout, "task %d %s\n", id, verb)
		}
	}
	if asJSON {
		if err := writeJSON(c.stdout, out); err != nil {
			return err
		}
	}
	if len(out.Failed) > 0 {
		return exitError(1)
	}
	return nil
}

const deadAbout = `
Lists the dead-letter queue of a queue (a page at a time), groups it by last
error (-by-error), or acts on it: redrive tasks by id, every dead task, or
every dead task whose last error is exactly TEXT; or delete every dead task
whose last error is exactly TEXT. TEXT is the whole last error, as
'dead -by-error -json' prints it (in a shell, $'a\nb' writes a newline).
The actions by error read at most -scan dead tasks, and say when more remain:

  docket dead -server http://127.0.0.1:7070 -ns acme/prod -queue emails -by-error
  docket dead -server http://127.0.0.1:7070 -ns acme/prod -queue emails -redrive-error 'smtp 451'`

func runDead(ctx context.Context, c cli, args []string) error {
	fs := newFlagsFor(c, "dead", commandArgs("dead"), deadAbout)
	tf := addTargetFlags(c, fs, oneQueue)
	redrive := tf.fs.String("redrive", "", "move these dead tasks (ids, comma separated) back to ready with a fresh attempt budget")
	all := tf.fs.Bool("redrive-all", false, "move every dead task of the queue back to ready")
	byError := tf.fs.Bool("by-error", false, "count the dead tasks by their last error instead of listing them")
	redriveErr := tf.fs.String("redrive-error", "", "move every dead task whose last error is exactly `TEXT` back to ready")
	deleteErr := tf.fs.String("delete-error", "", "delete every dead task whose last error is exactly `TEXT`")
	scan := tf.fs.Int("scan", 10000, "with -by-error, -redrive-error or -delete-error: how many dead tasks to read at most")
	limit := tf.fs.Int("limit", 20, "tasks to list")
	cursor := tf.fs.String("cursor", "", "continue the listing after a previous page")
	if _, err := tf.parse(args, 0, 0); err != nil {
		return err
	}
	set := map[string]bool{}
	tf.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	modes := 0
	for _, name := range []string{"redrive", "redrive-all", "by-error", "redrive-error", "delete-error"} {
		if set[name] {
			modes++
		}
	}
	if modes > 1 {
		return usageError{"dead: -redrive, -redrive-all, -by-error, -redrive-error and -delete-error exclude each other"}
	}
	for _, name := range []string{"redrive-error", "delete-error"} {
		if set[name] && tf.fs.Lookup(name).Value.String() == "" {
			return usageError{fmt.Sprintf("dead: -%s needs the error text", name)}
		}
	}
	var ids []uint64
	if set["redrive"] {
		var err error
		if ids, err = parseIDs([]string{*redrive}); err != nil {
			return err
		}
	}
	if *scan < 1 {
		return usageError{"dead: -scan must be at least 1"}
	}
	t, err := tf.open(ctx, *redrive != "" || *all || *redriveErr != "" || *deleteErr != "")
	if err != nil {
		return err
	}
	defer t.Close()
	if err := t.mustExist(ctx); err != nil {
		return err
	}
	q := t.Queue()
	switch {
	case *redrive != "":
		return eachTask(c, *tf.json, ids, "redriven", func(id uint64) error { return q.Redrive(ctx, id) })
	case *all:
		n, err := q.RedriveAll(ctx)
		if err != nil {
			return err
		}
		if *tf.json {
			return writeJSON(c.stdout, map[string]int{"redriven": n})
		}
		fmt.Fprintf(c.stdout, "%d tasks redriven\n", n)
		return nil
	case *byError:
		return deadByError(ctx, c, *tf.json, q, *scan)
	case *redriveErr != "":
		return deadWithError(ctx, c, *tf.json, q, *redriveErr, *scan, "redriven", q.Redrive)
	case *deleteErr != "":
		return deadWithError(ctx, c, *tf.json, q, *deleteErr, *scan, "deleted", q.Cancel)
	}
	page, err := q.List(ctx, engine.ListOptions{State: engine.Dead, Limit: *limit, Cursor: *cursor})
	if err != nil {
		return err
	}
	return writePage(c, *tf.json, page)
}

// deadWithError runs act (redrive or cancel) on every dead task of q whose
// last error is exactly text, reading at most scan dead tasks a page at a
// time, and reports how many it acted on (verb), how many it read, and
// whether dead tasks remained unread. Tasks that left the dead state
// meanwhile (another operator, a worker of a redriven task) are skipped.
func deadWithError(ctx context.Context, c cli, asJSON bool, q engine.Queue, text string, scan int, verb string,
	act func(context.Context, uint64) error) error {
	n, read, cursor := 0, 0, ""
	var err error
	for read < scan {
		var page engine.Page
		page, err = q.List(ctx, engine.ListOptions{State: engine.Dead, Limit: min(1000, scan-read), Cursor: cursor})
		if err != nil {
			break
		}
		read += len(page.Tasks)
		for _, t := range page.Tasks {
			if t.LastError != text {
				continue
			}
			switch aerr := act(ctx, t.ID); {
			case aerr == nil:
				n++
			case errors.Is(aerr, engine.ErrNotFound), errors.Is(aerr, engine.ErrConflict):
			default:
				err = fmt.Errorf("task %d: %w", t.ID, aerr)
			}
			if err != nil {
				break
			}
		}
		if cursor = page.Next; err != nil || cursor == "" || len(page.Tasks) == 0 {
			cursor = ""
			break
		}
	}
	more := err == nil && cursor != ""
	if asJSON {
		out := map[string]any{verb: n, "read": read, "more": more}
		if err != nil {
			out["error"] = message(err)
		}
		if werr := writeJSON(c.stdout, out); werr != nil || err == nil {
			return werr
		}
		return exitError(1)
	}
	if n > 0 || err == nil {
		fmt.Fprintf(c.stdout, "%d dead %s with last error %q %s\n", n, plural(n, "task", "tasks"), text, verb)
	}
	if more {
		fmt.Fprintf(c.stdout, "(read the first %d dead tasks; more remain: run it again, or raise -scan)\n", read)
	}
	return err
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

type errorGroup struct {
	Error  string   `json:"error"`
	Count  int      `json:"count"`
	Sample []uint64 `json:"sample"` // the first few ids
}

// deadByError groups up to scan dead tasks by their last error, most
// frequent first.
func deadByError(ctx context.Context, c cli, asJSON bool, q engine.Queue, scan int) error {
	groups := map[string]*errorGroup{}
	read, cursor := 0, ""
	for read < scan {
		page, err := q.List(ctx, engine.ListOptions{State: engine.Dead, Limit: min(1000, scan-read), Cursor: cursor})
		if err != nil {
			return err
		}
		for _, t := range page.Tasks {
			g := groups[t.LastError]
			if g == nil {
				g = &errorGroup{Error: t.LastError}
				groups[t.LastError] = g
			}
			g.Count++
			if len(g.Sample) < 5 {
				g.Sample = append(g.Sample, t.ID)
			}
		}
		read += len(page.Tasks)
		if cursor = page.Next; cursor == "" || len(page.Tasks) == 0 {
			break
		}
	}
	out := make([]errorGroup, 0, len(groups))
	for _, g := range groups {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b errorGroup) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Error, b.Error)
	})
	more := cursor != ""
	if asJSON {
		return writeJSON(c.stdout, struct {
			Groups []errorGroup `json:"groups"`
			Read   int          `json:"read"`
			More   bool         `json:"more"`
		}{out, read, more})
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "count\tlast error\ttasks")
	for _, g := range out {
		ids := make([]string, len(g.Sample))
		for i, id := range g.Sample {
			ids[i] = fmt.Sprint(id)
		}
		sample := strings.Join(ids, ",")
		if g.Count > len(g.Sample) {
			sample += ",…"
		}
		fmt.Fprintf(tw, "%d\t%.100s\t%s\n", g.Count, oneLine(g.Error), sample)
	}
	tw.Flush()
	if more {
		fmt.Fprintf(c.stdout, "(the first %d dead tasks; -scan N reads more)\n", read)
	}
	return nil
}

// headerFlag collects -header NAME=VALUE flags.
type headerFlag map[string]string

func (h headerFlag) String() string { return "" }

func (h headerFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want NAME=VALUE")
	}
	h[k] = v
	return nil
}

// maxInput bounds what a command reads from stdin: above any payload or
// value the engine accepts, so that the engine's limit is the one reported.
const maxInput = 64 << 20

// readArg returns the argument, or stdin when it is "-".
func readArg(c cli, arg string) ([]byte, error) {
	if arg != "-" {
		return []byte(arg), nil
	}
	if c.stdin == nil {
		return nil, usageError{"no standard input to read"}
	}
	data, err := io.ReadAll(io.LimitReader(c.stdin, maxInput))
	if err != nil {
		return nil, fmt.Errorf("reading standard input: %w", err)
	}
	return data, nil
}

const enqueueAbout = `
Adds one task. PAYLOAD is JSON (or nothing, for an empty payload); - reads it
from standard input. It prints the task's id, or with -key the id of the task
that already holds the key, or with -unique the id of a task of the same kind
and payload enqueued within the window (nothing is enqueued then). With -after
the task waits until the tasks it names (of any queue of the namespace)
complete; -on-failure says what it does if one of them is dead-lettered or
cancelled:

  docket enqueue -server http://127.0.0.1:7070 -ns acme/prod -queue emails '{"to":"a@b"}'
  some-program | docket enqueue -dir data -kind report -delay 10m -
  docket enqueue -dir data -queue reports -after 12,13 -on-failure wait '{"merge":true}'`

func runEnqueue(ctx context.Context, c cli, args []string) error {
	fs := newFlagsFor(c, "enqueue", "[-dir DIR | -server URL] [-ns P/S] [-queue Q] [flags] [PAYLOAD | -]", enqueueAbout)
	tf := addTargetFlags(c, fs, oneQueue)
	kind := tf.fs.String("kind", "", "the task's kind, for routing to a handler")
	delay := tf.fs.Duration("delay", 0, "make the task claimable after this long (a timer)")
	at := tf.fs.String("at", "", "make the task claimable at this time (RFC 3339), instead of -delay")
	priority := tf.fs.Int("priority", 0, "higher is claimed first (within the task's partition)")
	partition := tf.fs.String("partition", "", "the task's partition (a customer, a tenant): claims take turns between partitions")
	maxAttempts := tf.fs.Int("max-attempts", 0, "attempts before the task is dead-lettered (0: 5)")
	backoffBase := tf.fs.Duration("backoff-base", 0, "retry delay after the first failure, doubling each time (0: 1s)")
	backoffMax := tf.fs.Duration("backoff-max", 0, "the longest retry delay (0: 1m)")
	key := tf.fs.String("key", "", "idempotency key: while a task with it exists, enqueueing again returns that task")
	headers := headerFlag{}
	tf.fs.Var(headers, "header", "a `NAME=VALUE` pair carried with the task (repeat the flag for more)")
	after := tf.fs.String("after", "", "wait until these tasks (`ID,...`) complete before becoming claimable")
	onFailure := tf.fs.String("on-failure", "cancel", "with -after, if one of them dies or is cancelled: cancel this task too, wait for a redrive, or run anyway (cancel, wait, run)")
	unique := addUniqueFlags(tf.fs)
	pos, err := tf.parse(args, 0, 1)
	if err != nil {
		return err
	}
	if *backoffBase > 0 && *backoffMax > 0 && *backoffBase > *backoffMax {
		return usageError{fmt.Sprintf("enqueue: -backoff-base %v is over -backoff-max %v: the first retry delay cannot exceed the longest", *backoffBase, *backoffMax)}
	}
	task := engine.Task{Kind: *kind, Delay: *delay, Priority: *priority, MaxAttempts: *maxAttempts,
		BackoffBase: *backoffBase, BackoffMax: *backoffMax, IdempotencyKey: *key, Partition: *partition}
	if *after != "" {
		if task.DependsOn, err = parseIDs([]string{*after}); err != nil {
			return usageError{"enqueue: -after: " + message(err)}
		}
	}
	if task.OnParentFailure, err = engine.ParsePolicy(*onFailure); err != nil {
		return usageError{"enqueue: -on-failure " + *onFailure + ": want cancel, wait or run"}
	}
	if err := unique.apply(&task); err != nil {
		return err
	}
	if len(headers) > 0 {
		task.Headers = headers
	}
	if *at != "" {
		if *delay != 0 {
			return usageError{"enqueue: -at and -delay exclude each other"}
		}
		when, err := time.Parse(time.RFC3339Nano, *at)
		if err != nil {
			return usageError{fmt.Sprintf("enqueue: -at %q: want a time like 2006-01-02T15:04:05Z", *at)}
		}
		task.At = when
	}
	if len(pos) == 1 {
		payload, err := readArg(c, pos[0])
		if err != nil {
			return err
		}
		// A trailing newline (echo, a file) is not part of the JSON.
		task.Payload = bytes.TrimSpace(payload)
	}
	t, err := tf.open(ctx, true)
	if err != nil {
		return err
	}
	defer t.Close()
	res, err := t.Queue().Enqueue(ctx, task)
	if err != nil {
		return err
	}
	if *tf.json {
		return writeJSON(c.stdout, struct {
			ID           uint64 `json:"id"`
			Deduplicated bool   `json:"deduplicated"`
		}{res.ID, res.Deduplicated})
	}
	if res.Deduplicated && task.Unique != nil {
		fmt.Fprintf(c.stdout, "task %d has the same content: nothing enqueued\n", res.ID)
		return nil
	}
	if res.Deduplicated {
		fmt.Fprintf(c.stdout, "task %d already holds idempotency key %q: nothing enqueued\n", res.ID, *key)
		return nil
	}
	if len(task.Payload) == 0 {
		// No payload is a valid one (the engine takes empty or JSON), but
		// a forgotten argument looks the same: say what was done.
		fmt.Fprintf(c.stdout, "task %d enqueued on %s %s with an empty payload\n", res.ID, t.ns, t.queue)
	} else {
		fmt.Fprintf(c.stdout, "task %d enqueued on %s %s\n", res.ID, t.ns, t.queue)
	}
	if len(task.DependsOn) > 0 {
		// Dependencies that had completed are satisfied at once: say which
		// the task waits for.
		if info, err := t.Queue().Get(ctx, res.ID); err == nil && info.State == engine.Waiting {
			fmt.Fprintf(c.stdout, "waiting on %s\n", idList(info.WaitingOn))
		}
	}
	return nil
}

func runCancel(ctx context.Context, c cli, args []string) error {
	tf := newTargetFlags(c, "cancel", oneQueue)
	completed := tf.fs.Bool("completed", false, "delete only retained completed tasks (and their results): an id of a task in another state is refused")
	completedAll := tf.fs.Bool("completed-all", false, "delete every retained completed task of the queue (and its result)")
	pos, err := tf.parse(args, 0, -1)
	if err != nil {
		return err
	}
	if *completedAll == (len(pos) > 0) || *completed && *completedAll {
		return usageError{"cancel: give task ids (with or without -completed) or -completed-all"}
	}
	ids, err := parseIDs(pos)
	if err != nil {
		return err
	}
	t, err := tf.open(ctx, true)
	if err != nil {
		return err
	}
	defer t.Close()
	if err := t.mustExist(ctx); err != nil {
		return err
	}
	q := t.Queue()
	switch {
	case *completed:
		return eachTask(c, *tf.json, ids, "deleted", func(id uint64) error {
			info, err := q.Get(ctx, id)
			if err != nil {
				return err
			}
			if info.State != engine.Completed {
				return fmt.Errorf("%w: task %d is %s, not completed: nothing deleted", engine.ErrConflict, id, info.State)
			}
			return q.Cancel(ctx, id)
		})
	case !*completedAll:
		return eachTask(c, *tf.json, ids, "cancelled", func(id uint64) error { return q.Cancel(ctx, id) })
	}
	n, err := deleteCompleted(ctx, q)
	if *tf.json && err == nil {
		return writeJSON(c.stdout, map[string]int{"deleted": n})
	}
	if n > 0 || err == nil {
		fmt.Fprintf(c.stdout, "%d completed tasks deleted\n", n)
	}
	return err
}

// deleteCompleted cancels every retained completed task of q, a page at a
// time, and says how many. A task gone meanwhile (its retention ran out) is
// not counted.
func deleteCompleted(ctx context.Context, q engine.Queue) (int, error) {
	n, cursor := 0, ""
	for {
		page, err := q.List(ctx, engine.ListOptions{State: engine.Completed, Limit: 1000, Cursor: cursor})
		if err != nil {
			return n, err
		}
		for _, t := range page.Tasks {
			switch err := q.Cancel(ctx, t.ID); {
			case err == nil:
				n++
			case errors.Is(err, engine.ErrNotFound):
			default:
				return n, fmt.Errorf("task %d: %w", t.ID, err)
			}
		}
		if cursor = page.Next; cursor == "" || len(page.Tasks) == 0 {
			return n, nil
		}
	}
}

func runRunNow(ctx context.Context, c cli, args []string) error {
	tf := newTargetFlags(c, "run-now", oneQueue)
	pos, err := tf.parse(args, 1, -1)
	if err != nil {
		return err
	}
	ids, err := parseIDs(pos)
	if err != nil {
		return err
	}
	t, err := tf.open(ctx, true)
	if err != nil {
		return err
	}
	defer t.Close()
	if err := t.mustExist(ctx); err != nil {
		return err
	}
	q := t.Queue()
	return eachTask(c, *tf.json, ids, "is due now", func(id uint64) error { return q.RunNow(ctx, id) })
}
