//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docketdb/docket/client"
	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/worker"
)

// item names one task a producer asked for: producer p's n-th enqueue.
// It is the task's payload, so a claimed task says which call made it.
type item struct {
	P int `json:"p"`
	N int `json:"n"`
}

// ledger is what the producers and the workers saw, to be checked against
// each other and against the server once the load has run.
type ledger struct {
	mu sync.Mutex

	acked   map[item]uint64 // enqueue acknowledged, with the task's id
	unknown map[item]bool   // enqueue whose outcome is unknown (ErrOutcomeUnknown)
	refused map[item]bool   // enqueue no server took (ErrUnavailable): must never appear
	dedup   int             // acknowledged as a duplicate of an earlier try (keyed)

	taskOf    map[uint64]item              // from the leases claimed: each task's item
	tokens    map[uint64]map[uint64]bool   // task id → fencing tokens it was claimed with
	runs      map[uint64]int               // task id → handler runs
	done      map[uint64][]uint64          // task id → tokens of acknowledged completions
	doneMaybe map[uint64]int               // task id → completions whose outcome is unknown
	itemIDs   map[item]map[uint64]struct{} // item → task ids claimed for it
	claims    int
	okDone    int // acknowledged completions
	reclaimed int // claims of a task claimed before
	leaseLost int // completions refused with ErrLeaseLost only
	retries   int // completion calls no server took (retried by the worker)
	claimErrs int // claims that failed (no server, or a lost answer)
	noServer  int // calls of the workers that no server took

	problems []string
	changed  chan struct{} // closed and replaced whenever an outcome is recorded
}

func newLedger() *ledger {
	return &ledger{acked: map[item]uint64{}, unknown: map[item]bool{}, refused: map[item]bool{},
		taskOf: map[uint64]item{}, tokens: map[uint64]map[uint64]bool{}, runs: map[uint64]int{},
		done: map[uint64][]uint64{}, doneMaybe: map[uint64]int{}, itemIDs: map[item]map[uint64]struct{}{},
		changed: make(chan struct{})}
}

func (l *ledger) problem(format string, args ...any) {
	if len(l.problems) < 50 {
		l.problems = append(l.problems, fmt.Sprintf(format, args...))
	}
}

// wake returns a channel closed at the next recorded enqueue, completion
// or failed claim.
func (l *ledger) wake() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// enqueued records the outcome of an enqueue.
func (l *ledger) enqueued(it item, res engine.Enqueued, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.acked[it] = res.ID
		if res.Deduplicated {
			l.dedup++
		}
	case errors.Is(err, client.ErrOutcomeUnknown):
		l.unknown[it] = true
	case errors.Is(err, client.ErrUnavailable):
		l.refused[it] = true
	default:
		l.problem("enqueue %+v: %v", it, err)
	}
	l.notify()
}

// notify wakes the waiters on wake. Call with mu held.
func (l *ledger) notify() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// claimed records a claim: the leases it handed to a worker, or its error.
func (l *ledger) claimed(ls []engine.Lease, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
	case errors.Is(err, client.ErrUnavailable):
		l.claimErrs++
		l.noServer++
		l.notify()
	case errors.Is(err, client.ErrOutcomeUnknown):
		l.claimErrs++
	case errors.Is(err, context.Canceled):
	default:
		l.problem("claim: %v", err)
	}
	for _, ls := range ls {
		var it item
		if err := json.Unmarshal(ls.Payload, &it); err != nil {
			l.problem("task %d has a payload no producer sent: %q", ls.ID, ls.Payload)
			continue
		}
		if prev, ok := l.taskOf[ls.ID]; ok && prev != it {
			l.problem("task %d was claimed as %+v and as %+v", ls.ID, prev, it)
		}
		l.taskOf[ls.ID] = it
		if l.itemIDs[it] == nil {
			l.itemIDs[it] = map[uint64]struct{}{}
		}
		l.itemIDs[it][ls.ID] = struct{}{}
		if l.tokens[ls.ID] == nil {
			l.tokens[ls.ID] = map[uint64]bool{}
		} else {
			l.reclaimed++
		}
		if l.tokens[ls.ID][ls.Token] {
			l.problem("task %d was claimed twice with token %d", ls.ID, ls.Token)
		}
		l.tokens[ls.ID][ls.Token] = true
		l.claims++
	}
}

// completed records the outcome of a completion of l.
func (l *ledger) completed(ls engine.Lease, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.done[ls.ID] = append(l.done[ls.ID], ls.Token)
		l.okDone++
	case errors.Is(err, client.ErrOutcomeUnknown):
		// Also a lost lease whose earlier try got no answer: it may have
		// been committed.
		l.doneMaybe[ls.ID]++
	case errors.Is(err, engine.ErrLeaseLost):
		l.leaseLost++
	case errors.Is(err, client.ErrUnavailable):
		l.retries++
		l.noServer++
	default:
		l.problem("completing task %d: %v", ls.ID, err)
	}
	l.notify()
}

// noServers returns how many enqueues, and how many calls of the
// workers, found no server.
func (l *ledger) noServers() (refused, workers int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.refused), l.noServer
}

func (l *ledger) ran(id uint64) {
	l.mu.Lock()
	l.runs[id]++
	l.mu.Unlock()
}

// counts returns how many enqueues and how many completions were
// acknowledged.
func (l *ledger) counts() (acked, done int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked), l.okDone
}

// settled reports whether every acknowledged task has a completion that
// was, or may have been, committed.
func (l *ledger) settled() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range l.acked {
		if len(l.done[id]) == 0 && l.doneMaybe[id] == 0 {
			return false
		}
	}
	return true
}

// recAPI is a client as the workers see it, with every claim and
// completion recorded in the ledger. Every call of engine.Queue that claims
// or completes must be wrapped here: one that is not goes through unseen,
// and the ledger waits for completions it never hears of.
type recAPI struct {
	engine.API
	l *ledger
}

func (a recAPI) Queue(ns engine.Namespace, name string) engine.Queue {
	return recQueue{a.API.Queue(ns, name), a.l}
}

type recQueue struct {
	engine.Queue
	l *ledger
}

func (q recQueue) ClaimWait(ctx context.Context, owner string, lease time.Duration, max int) ([]engine.Lease, error) {
	ls, err := q.Queue.ClaimWait(ctx, owner, lease, max)
	q.l.claimed(ls, err)
	return ls, err
}

func (q recQueue) Complete(ctx context.Context, ls engine.Lease, d engine.Done) (engine.TxResult, error) {
	res, err := q.Queue.Complete(ctx, ls, d)
	q.l.completed(ls, err)
	return res, err
}

// CompleteAndClaim records the completion and, when it committed, the
// leases it took (the worker runtime completes this way while a queue has
// work). Without an answer the claim half is nobody's: its leases expire.
func (q recQueue) CompleteAndClaim(ctx context.Context, ls engine.Lease, d engine.Done, owner string, lease time.Duration, max int) (engine.TxResult, []engine.Lease, error) {
	res, claimed, err := q.Queue.CompleteAndClaim(ctx, ls, d, owner, lease, max)
	q.l.completed(ls, err)
	if err == nil {
		q.l.claimed(claimed, nil)
	}
	return res, claimed, err
}

func (q recQueue) CompleteBatch(ctx context.Context, ls []engine.Lease) ([]error, error) {
	errs, err := q.Queue.CompleteBatch(ctx, ls)
	for i := range ls {
		e := err
		if err == nil {
			e = errs[i]
		}
		q.l.completed(ls[i], e)
	}
	return errs, err
}

// freeAddr returns a loopback address with a port nothing listens on now,
// for a server that must come back on the same address. The port is below
// the ephemeral ranges of Linux (32768-60999) and the BSDs (49152-65535):
// one of those could be handed, while the server is down, to an outgoing
// connection (the clients' own, trying to reach it), and the restarted
// server could not listen.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000)))
		if err == nil {
			defer ln.Close()
			return ln.Addr().String()
		}
	}
	t.Fatal("no free port between 20000 and 32000")
	return ""
}

// waitUntil waits until cond holds, checking it whenever wake's channel
// closes and at least every tick; it fails the test after limit.
func waitUntil(t *testing.T, what string, limit, tick time.Duration, wake func() <-chan struct{}, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		w := wake()
		if cond() {
			return
		}
		tk := time.NewTimer(tick)
		select {
		case <-w:
		case <-tk.C:
		case <-deadline.C:
			tk.Stop()
			t.Fatalf("after %v: %s", limit, what)
		}
		tk.Stop()
	}
}

// TestServeProcessKillAndRestart is the server's fault test: `docket serve`
// runs as a real process on loopback while producers enqueue (half the
// tasks with idempotency keys) and two worker runtimes work the queue, all
// through network clients in this process. The server is killed with
// SIGKILL and stopped with SIGTERM in turn, and started again each time on
// the same directory and address. Then the load stops, the queue drains,
// and the test checks, from what the clients saw and from the server:
//
//   - every acknowledged enqueue was completed exactly once from the
//     workers' point of view: one acknowledged completion, or, where a
//     completion's answer was lost, one that may have been committed and
//     the task is gone; never two;
//   - each claim of a task had a token of its own, and no task's handler
//     ran more often than it was claimed;
//   - nothing appeared that no producer asked for, an enqueue whose
//     outcome was unknown made at most one task, and one no server took
//     made none;
//   - the workers never stopped, and the queue is empty at the end.
func TestServeProcessKillAndRestart(t *testing.T) {
	// In parallel with the package's other long tests: it mostly waits
	// on processes and timers.
	t.Parallel()
	docketBinary(t) // skipped in -short
	dir := filepath.Join(t.TempDir(), "data")
	addr := freeAddr(t)
	base := "http://" + addr
	args := []string{"-dir", dir, "-max-wait", "2s", "-grace", "10s"}
	const (
		cycles      = 8 // SIGKILL and SIGTERM in turn
		perCycle    = 100
		producers   = 3
		maxEnqueues = 20000 // per producer: the load is bounded even if the cycles are slow
		backlog     = 300   // most acknowledged tasks not yet completed before the producers wait
		lease       = 2 * time.Second
	)
	ns := engine.NS("acme", "prod")
	l := newLedger()
	ctx := context.Background()

	p := startServeOn(t, addr, args...)
	// Few retries, so that a restart is often longer than a client keeps
	// trying, and the callers see ErrUnavailable: the producers then move
	// on, the workers keep trying (claims and the commits of outcomes).
	dial := func(maxRetries int) *client.Client {
		copts := client.Options{MaxRetries: maxRetries, BackoffBase: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond, PollWait: time.Second}
		dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		c, err := client.Dial(dctx, base, copts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	// Two worker runtimes, each on a client of its own: one completes
	// each task in its own commit, the other in batches.
	wlog := slog.New(slog.DiscardHandler)
	var workers []*worker.Worker
	for i, qo := range []worker.QueueOptions{
		{Concurrency: 3, Lease: lease, HeartbeatEvery: lease / 8},
		{Concurrency: 2, ClaimBatch: 8, Lease: lease, HeartbeatEvery: lease / 8},
	} {
		w := worker.New(recAPI{dial(3), l}, worker.Options{Owner: fmt.Sprintf("w%d", i), Logger: wlog, ShutdownGrace: 10 * time.Second})
		w.HandleFunc(ns, "jobs", func(ctx context.Context, tk *worker.Task) error {
			l.ran(tk.ID)
			switch tk.ID % 10 {
			case 0:
				// A heartbeat of its own over the network, mid-run.
				return tk.Progress(ctx, []byte(`{"half":true}`))
			case 1, 2:
				// Work that takes a while (the load's shape, not a wait for
				// anything), so that a fault often finds handlers running and
				// their outcomes to commit across the restart.
				select {
				case <-time.After(50 * time.Millisecond):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		}, qo)
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		workers = append(workers, w)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	pc := dial(6)
	for pi := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := pc.Queue(ns, "jobs")
			for n := range maxEnqueues {
				for {
					// Keep the load to what the workers keep up with: the
					// queue drains in moments at the end.
					wake := l.wake()
					if a, d := l.counts(); a-d < backlog {
						break
					}
					select {
					case <-stop:
						return
					case <-wake:
					}
				}
				select {
				case <-stop:
					return
				default:
				}
				it := item{pi, n}
				payload, _ := json.Marshal(it)
				task := engine.Task{Payload: payload, MaxAttempts: 100, BackoffBase: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond}
				if n%2 == 0 {
					task.IdempotencyKey = fmt.Sprintf("p%d-%d", pi, n)
				}
				cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				res, err := q.Enqueue(cctx, task)
				cancel()
				l.enqueued(it, res, err)
			}
		}()
	}
	// progress waits until perCycle more enqueues were acknowledged and
	// perCycle more tasks completed since the last call.
	lastAcked, lastDone := 0, 0
	progress := func(what string) {
		t.Helper()
		waitUntil(t, what, 60*time.Second, 20*time.Millisecond, l.wake, func() bool {
			a, d := l.counts()
			return a >= lastAcked+perCycle && d >= lastDone+perCycle
		})
		lastAcked, lastDone = l.counts()
	}

	kills, stops, held := 0, 0, 0
	for cycle := range cycles {
		progress(fmt.Sprintf("cycle %d: no progress under load", cycle))
		sig := syscall.SIGKILL
		if cycle%2 == 1 {
			sig = syscall.SIGTERM
		}
		var seen struct{ refused, workers int }
		seen.refused, seen.workers = l.noServers()
		p.signal(t, sig)
		st, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
		switch sig {
		case syscall.SIGKILL:
			if st.Signal() != syscall.SIGKILL {
				t.Fatalf("cycle %d: serve ended with %v, not killed", cycle, p.err)
			}
			kills++
		case syscall.SIGTERM:
			if p.err != nil {
				t.Fatalf("cycle %d: after SIGTERM serve exited with %v:\n%s", cycle, p.err, p.log.String())
			}
			stops++
		}
		if cycle%4 == 2 {
			// An outage longer than a lease (its length is the fault, not a
			// wait for something): the leases held across it expire and are
			// claimed again, and their holders' late calls are fenced off.
			// It lasts until the workers and every producer (unless the
			// backlog holds them back) have also found no server.
			down, limit := time.NewTimer(lease+lease/4), time.NewTimer(30*time.Second)
			for over := false; ; {
				refused, workers := l.noServers()
				a, d := l.counts()
				if over && workers >= seen.workers+2 && (refused >= seen.refused+producers || a-d >= backlog) {
					break
				}
				select {
				case <-l.wake():
				case <-down.C:
					over = true
				case <-limit.C:
					t.Fatalf("cycle %d: in 30 s without a server the clients did not all notice", cycle)
				}
			}
			limit.Stop()
			held++
		}
		p = startServeOn(t, addr, args...)
		if code, _, body := get(t, base, "/readyz", ""); code != 200 {
			t.Fatalf("cycle %d: /readyz after the restart: %d %s", cycle, code, body)
		}
	}
	progress("after the last restart: no progress")
	close(stop)
	wg.Wait()

	// Let the workers finish what the producers left, tasks whose leases
	// the kills orphaned included (they come back when the lease expires).
	waitUntil(t, "not every acknowledged task was completed", 90*time.Second, 100*time.Millisecond, l.wake, l.settled)
	q := pc.Queue(ns, "jobs")
	var left engine.Counts
	waitUntil(t, "the queue did not drain", 60*time.Second, 100*time.Millisecond, l.wake, func() bool {
		c, err := q.Counts(ctx)
		left = c
		return err == nil && c == engine.Counts{}
	})
	for i, w := range workers {
		if err := w.Err(); err != nil {
			t.Errorf("worker %d stopped by itself: %v", i, err)
		}
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		if err := w.Stop(sctx); err != nil {
			t.Errorf("worker %d: Stop: %v", i, err)
		}
		cancel()
	}
	p.signal(t, syscall.SIGTERM)
	if p.err != nil {
		t.Fatalf("the last SIGTERM: %v", p.err)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	for _, pr := range l.problems {
		t.Error(pr)
	}
	completed, maybe := 0, 0
	for it, id := range l.acked {
		switch done := l.done[id]; {
		case len(done) > 1:
			t.Errorf("task %d (%+v) was completed %d times, tokens %v", id, it, len(done), done)
		case len(done) == 1:
			completed++
		case l.doneMaybe[id] > 0:
			maybe++ // its completion's answer was lost; the task is gone
		default:
			t.Errorf("acknowledged task %d (%+v) was never completed", id, it)
		}
		if got, ok := l.taskOf[id]; !ok || got != it {
			t.Errorf("acknowledged task %d (%+v) was claimed as %+v (claimed: %v)", id, it, got, ok)
		}
	}
	appeared := 0
	for it, ids := range l.itemIDs {
		switch id, acked := l.acked[it]; {
		case acked:
			if len(ids) != 1 {
				t.Errorf("%+v, acknowledged as task %d, was claimed as tasks %v", it, id, slices.Collect(maps.Keys(ids)))
			}
		case l.unknown[it]:
			appeared++
			if len(ids) != 1 {
				t.Errorf("%+v, whose enqueue's outcome was unknown, made tasks %v", it, slices.Collect(maps.Keys(ids)))
			}
		case l.refused[it]:
			t.Errorf("%+v, whose enqueue no server took, made tasks %v", it, slices.Collect(maps.Keys(ids)))
		default:
			t.Errorf("tasks %v appeared for %+v, which no producer enqueued", slices.Collect(maps.Keys(ids)), it)
		}
	}
	for id, n := range l.runs {
		if n > len(l.tokens[id]) {
			t.Errorf("task %d's handler ran %d times on %d claims", id, n, len(l.tokens[id]))
		}
	}
	for id, done := range l.done {
		for _, tok := range done {
			if !l.tokens[id][tok] {
				t.Errorf("task %d completed with token %d, which no claim handed out", id, tok)
			}
		}
	}
	if left != (engine.Counts{}) {
		t.Errorf("left in the queue: %+v", left)
	}
	if code, out, errs := docket(t, "verify", dir); code != 0 {
		t.Fatalf("verify after the restarts: %d\n%s%s", code, out, errs)
	}
	t.Logf("restarts %d (SIGKILL %d, SIGTERM %d; %d held down); enqueues acknowledged %d (%d of them as duplicates of a try whose answer was lost), "+
		"outcome unknown %d (%d of which made a task), refused %d; completed %d, completions whose outcome was unknown %d, "+
		"refused as lease lost %d, completion calls no server took %d; claims %d (%d reclaims), failed claims %d",
		kills+stops, kills, stops, held, len(l.acked), l.dedup, len(l.unknown), appeared, len(l.refused),
		completed, maybe, l.leaseLost, l.retries, l.claims, l.reclaimed, l.claimErrs)
}
