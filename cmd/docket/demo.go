package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
)

var demoNS = engine.NS("demo", "local")

const demoQueue = "emails"

type demoJob struct {
	N    int    `json:"n"`
	Kind string `json:"kind"` // ok, flaky (fails once) or poison (always fails)
	Run  int    `json:"run"`
}

type demoCounters struct {
	enqueued, completed, retried, dead atomic.Int64
}

func runDemo(ctx context.Context, c cli, args []string) error {
	fs := newFlags(c, "demo")
	dir := fs.String("dir", "./docket-data", "data directory (kept between runs)")
	tasks := fs.Int("tasks", 2000, "tasks to enqueue")
	workers := fs.Int("workers", 4, "worker goroutines")
	durability := fs.String("durability", "always", "always, interval or never")
	if err := parse(c, fs, args); err != nil {
		return err
	}
	mode, err := parseDurability(*durability)
	if err != nil {
		return usageError{err.Error()}
	}
	if *tasks < 1 || *workers < 1 {
		return usageError{"-tasks and -workers must be at least 1"}
	}
	out := c.stdout
	// The demo reports dead-lettered tasks and failed attempts itself;
	// everything else the engine or the runtime warns about goes to stderr.
	logger := slog.New(&demoLogHandler{slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})})
	start := time.Now()
	db, err := engine.Open(*dir, engine.Options{Durability: mode, Logger: logger})
	if err != nil {
		return err
	}
	defer db.Close()
	fmt.Fprintf(out, "docket demo: data directory %s (durability %s), opened in %v\n", *dir, mode, time.Since(start).Round(time.Millisecond))

	run, err := countRun(ctx, db)
	if err != nil {
		return err
	}
	q := db.Queue(demoNS, demoQueue)
	before, err := q.Counts(ctx)
	if err != nil {
		return err
	}
	if run == 1 {
		fmt.Fprintln(out, "first run: the directory was empty")
	} else {
		fmt.Fprintf(out, "run %d: found what earlier runs left: %d dead-lettered, %d ready, %d scheduled, %d in flight\n",
			run, before.Dead, before.Ready, before.Scheduled, before.InFlight)
	}
	announce(out, *tasks, *workers)

	var cnt demoCounters
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, *workers+1)
	began := time.Now()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := produce(ctx, q, *tasks, run, &cnt); err != nil {
			errc <- err
		}
	}()
	w := worker.New(db, worker.Options{Owner: "demo", Logger: logger})
	w.HandleFunc(demoNS, demoQueue, func(ctx context.Context, t *worker.Task) error {
		return handle(t, &cnt)
	}, worker.QueueOptions{Concurrency: *workers, Lease: 5 * time.Second, ClaimBatch: 16})
	if err := w.Start(ctx); err != nil {
		return err
	}
	// Leftovers of an interrupted earlier run are worked off too.
	target := int64(*tasks) + int64(before.Ready+before.Scheduled+before.InFlight)
	err = progress(ctx, out, q, &cnt, target)
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 10*time.Second)
	if serr := w.Stop(stopCtx); err == nil {
		err = serr
	}
	stopCancel()
	cancel()
	wg.Wait()
	close(errc)
	for e := range errc {
		if err == nil {
			err = e
		}
	}
	if err != nil {
		return err
	}
	elapsed := time.Since(began)
	return summary(context.Background(), out, db, q, &cnt, elapsed, *dir)
}

// demoLogHandler drops the engine's dead-letter line and the runtime's
// failed-attempt line, which the demo provokes on purpose and reports in
// its own words.
type demoLogHandler struct{ slog.Handler }

func (h *demoLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "dead-letter") || strings.Contains(r.Message, "task failed") {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h *demoLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &demoLogHandler{h.Handler.WithAttrs(as)}
}

func (h *demoLogHandler) WithGroup(name string) slog.Handler {
	return &demoLogHandler{h.Handler.WithGroup(name)}
}

// Task kinds of the demo.
const (
	kindOK     = "ok"
	kindFlaky  = "flaky"  // fails its first attempt
	kindPoison = "poison" // fails every attempt
)

// demoMaxAttempts is the attempt budget of every demo task.
const demoMaxAttempts = 3

// jobKind decides what task i of a run does: 2 in 100 are poison, 8 in
// 100 flaky, and 15 in 100 of the others wait a little first. It is a fixed
// pattern, so that the demo can say up front exactly what will happen.
func jobKind(i int) (kind string, delayed bool) {
	switch {
	case i%50 == 7:
		return kindPoison, false
	case i%25 == 3 || i%25 == 11:
		return kindFlaky, false
	}
	return kindOK, i%20 == 1 || i%20 == 5 || i%20 == 9
}

// announce says what the run is about to do, before it does it.
func announce(out io.Writer, tasks, workers int) {
	var ok, delayed, flaky, poison int
	for i := range tasks {
		switch k, d := jobKind(i); k {
		case kindPoison:
			poison++
		case kindFlaky:
			flaky++
		default:
			ok++
			if d {
				delayed++
			}
		}
	}
	fmt.Fprintf(out, "this run enqueues %d tasks on queue %s/%s and works them with %d workers (%d attempts each):\n",
		tasks, demoNS, demoQueue, workers, demoMaxAttempts)
	fmt.Fprintf(out, "  %5d succeed on their first attempt (%d of them wait 0.1-1 s first: timers)\n", ok, delayed)
	fmt.Fprintf(out, "  %5d fail their first attempt on purpose and succeed on a retry, to show retries with backoff\n", flaky)
	fmt.Fprintf(out, "  %5d fail every attempt on purpose and end in the dead-letter queue, to show it and redrive\n", poison)
}

func parseDurability(s string) (engine.Durability, error) {
	for _, d := range []engine.Durability{engine.SyncAlways, engine.SyncInterval, engine.SyncNever} {
		if d.String() == s {
			return d, nil
		}
	}
	return 0, fmt.Errorf("unknown durability %q (always, interval or never)", s)
}

// countRun bumps the run counter kept in the demo's KV, with a version
// assertion so two demos on one directory cannot both claim a number.
func countRun(ctx context.Context, db *engine.DB) (int, error) {
	kv := db.KV(demoNS)
	n := 1
	op := engine.IfAbsent("runs")
	if e, err := kv.Get(ctx, "runs"); err == nil {
		prev, _ := strconv.Atoi(string(e.Value))
		n, op = prev+1, engine.IfVersion("runs", e.Version)
	} else if !errors.Is(err, engine.ErrNotFound) {
		return 0, err
	}
	_, err := kv.Commit(ctx, op, engine.Set("runs", []byte(strconv.Itoa(n))))
	return n, err
}

func produce(ctx context.Context, q engine.Queue, n, run int, c *demoCounters) error {
	const batch = 50
	tasks := make([]engine.Task, 0, batch)
	for i := 0; i < n; i++ {
		kind, delayed := jobKind(i)
		job := demoJob{N: i, Kind: kind, Run: run}
		t := engine.Task{MaxAttempts: demoMaxAttempts, BackoffBase: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond}
		if delayed {
			t.Delay = time.Duration(100+rand.IntN(900)) * time.Millisecond
		}
		if i%10 == 0 {
			t.Priority = 1
		}
		t.Payload, _ = json.Marshal(job)
		t.IdempotencyKey = fmt.Sprintf("run-%d-task-%d", run, i)
		tasks = append(tasks, t)
		if len(tasks) == batch || i == n-1 {
			res, err := q.EnqueueBatch(ctx, tasks)
			if err != nil {
				return err
			}
			for _, r := range res {
				if !r.Deduplicated {
					c.enqueued.Add(1)
				}
			}
			tasks = tasks[:0]
			// Spread the stream out a little so the progress is visible.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return nil
}

// handle is the demo's task handler: most tasks succeed, flaky ones fail
// their first attempt and poison ones every attempt, so the runtime retries
// them with backoff and dead-letters the poison.
func handle(t *worker.Task, c *demoCounters) error {
	var job demoJob
	if err := json.Unmarshal(t.Payload, &job); err != nil {
		return worker.Permanent(err)
	}
	if job.Kind == kindPoison || job.Kind == kindFlaky && t.Attempt == 1 {
		if t.Attempt >= t.MaxAttempts {
			c.dead.Add(1)
		} else {
			c.retried.Add(1)
		}
		return fmt.Errorf("smtp 451: %s task %d, attempt %d", job.Kind, job.N, t.Attempt)
	}
	res, _ := json.Marshal(map[string]any{"sent": true, "by": t.Owner})
	t.SetResult(res)
	c.completed.Add(1)
	return nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress prints the counters until every task of the run is finished.
func progress(ctx context.Context, out io.Writer, q engine.Queue, c *demoCounters, target int64) error {
	tty := isTerminal(out)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		n, err := q.Counts(ctx)
		if err != nil {
			return err
		}
		finished := c.completed.Load() + c.dead.Load()
		line := fmt.Sprintf("enqueued %5d  completed %5d  retried %4d  dead %3d  |  ready %4d  scheduled %4d  in flight %3d",
			c.enqueued.Load(), c.completed.Load(), c.retried.Load(), c.dead.Load(), n.Ready, n.Scheduled, n.InFlight)
		if tty {
			fmt.Fprintf(out, "\r%s", line)
		} else if time.Since(last) >= time.Second {
			fmt.Fprintln(out, line)
			last = time.Now()
		}
		if finished >= target && n.Ready+n.Scheduled+n.InFlight == 0 {
			if tty {
				fmt.Fprintln(out)
			} else {
				fmt.Fprintln(out, line)
			}
			return nil
		}
	}
}

func summary(ctx context.Context, out io.Writer, db *engine.DB, q engine.Queue, c *demoCounters, elapsed time.Duration, dir string) error {
	n, err := q.Counts(ctx)
	if err != nil {
		return err
	}
	done := c.completed.Load() + c.dead.Load()
	st := db.Stats()
	fmt.Fprintf(out, "\ndone in %v: %d tasks finished (%.0f tasks/s), %d commits, %d log fsyncs\n",
		elapsed.Round(time.Millisecond), done, float64(done)/elapsed.Seconds(), st.Commits, st.LogSyncs)
	fmt.Fprintf(out, "queue %s/%s now: ready %d, scheduled %d, in flight %d, dead %d\n",
		demoNS, demoQueue, n.Ready, n.Scheduled, n.InFlight, n.Dead)
	page, err := q.List(ctx, engine.ListOptions{State: engine.Dead, Limit: 5})
	if err != nil {
		return err
	}
	if len(page.Tasks) > 0 {
		fmt.Fprintf(out, "dead-letter queue (%d in all, first %d):\n", n.Dead, len(page.Tasks))
		for _, t := range page.Tasks {
			fmt.Fprintf(out, "  task %-6d attempts %d/%d  %s  last error: %s\n", t.ID, t.Attempts, t.MaxAttempts, t.Payload, t.LastError)
		}
		fmt.Fprintln(out, "list them with:")
		fmt.Fprintf(out, "  docket dead -dir %s -ns %s -queue %s\n", shellQuote(dir), demoNS, demoQueue)
		fmt.Fprintln(out, "redrive them (back to ready, for the next run to work off) with:")
		fmt.Fprintf(out, "  docket dead -dir %s -ns %s -queue %s -redrive-all\n", shellQuote(dir), demoNS, demoQueue)
	}
	fmt.Fprintln(out, "run the demo again: the dead-lettered tasks and the run counter survive in the directory")
	return nil
}
