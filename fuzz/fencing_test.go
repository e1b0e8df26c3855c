//go:build linux

package fuzz

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

// TestFencingUnderPauses runs workers that claim, then stall - often past
// their lease, as a worker does in a GC pause or behind a partition - and
// come back to complete, fail or heartbeat. Meanwhile others claim the
// expired leases. Over 200,000 lease operations no commit with a token
// other than the newest one handed out for the task may be accepted, no
// commit after its lease's deadline either, and every answer must be the
// model's.
func TestFencingUnderPauses(t *testing.T) {
	t.Parallel()
	wantOps := shortOr("", 200_000, 20_000)
	clock := engine.NewManualClock(t0)
	cfg := Config{IdempotencyTTL: -1}
	opts := engine.Options{Clock: clock, Logger: quiet}
	cfg.Apply(&opts)
	db, err := engine.OpenInMemory(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m := NewModel(cfg, t0)
	q := queues[0]
	eq := db.Queue(q.NS, q.Name)

	type held struct {
		l    engine.Lease
		back int64 // when the worker comes back to it, Unix micros
	}
	type worker struct {
		name string
		held []held
	}
	workers := make([]*worker, 16)
	for i := range workers {
		workers[i] = &worker{name: fmt.Sprintf("w%d", i)}
	}
	newest := map[uint64]uint64{} // task -> newest token handed out
	rng := rand.New(rand.NewPCG(7, 7))
	var ops, claims, accepted, refused, lateAccepted, lateRefused, stale, pauses int
	same := func(what string, got, want error) {
		t.Helper()
		if ErrClass(got) != ErrClass(want) {
			t.Fatalf("op %d, %s: engine %v, model %v", ops, what, got, want)
		}
	}
	for ops < wantOps {
		now := clock.Now().UnixMicro()
		m.Now = now
		if c := m.Counts(q); c.Ready+c.Scheduled < 20 {
			tasks := make([]engine.Task, 8)
			for i := range tasks {
				tasks[i] = engine.Task{MaxAttempts: 1 << 20, BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
					Priority: rng.IntN(3)}
			}
			got, gerr := eq.EnqueueBatch(ctx, tasks)
			want, werr := m.Enqueue(q, tasks, nil)
			same("enqueue", gerr, werr)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("enqueue: %v, model %v", got, want)
			}
		}
		w := workers[rng.IntN(len(workers))]
		// A worker acts on the lease it comes back to first, if it is back
		// by now; otherwise it claims more work.
		back := -1
		for i, h := range w.held {
			if h.back <= now && (back < 0 || h.back < w.held[back].back) {
				back = i
			}
		}
		if back < 0 {
			lease := time.Duration(200+rng.IntN(800)) * time.Millisecond
			max := 1 + rng.IntN(3)
			got, gerr := eq.Claim(ctx, w.name, lease, max)
			want, werr := m.Claim(q, w.name, lease, max)
			same("claim", gerr, werr)
			if g, w := leasesString(got), leasesString(want); g != w {
				t.Fatalf("op %d, claim:\nengine %s\nmodel  %s", ops, g, w)
			}
			m.Leased(got)
			for _, l := range got {
				if l.Token <= newest[l.ID] {
					t.Fatalf("task %d leased with token %d after token %d", l.ID, l.Token, newest[l.ID])
				}
				newest[l.ID] = l.Token
				// Most work fits in the lease; one in four stalls past it.
				work := time.Duration(rng.IntN(int(lease / 2)))
				if rng.IntN(4) == 0 {
					work = lease + time.Duration(rng.IntN(int(2*lease)))
					pauses++
				}
				w.held = append(w.held, held{l, now + work.Microseconds()})
				ops++
				claims++
			}
		} else {
			h := w.held[back]
			l := h.l
			late := now >= Micros(l.Deadline)
			var gerr, werr error
			what := ""
			switch x := rng.IntN(8); {
			case x < 4:
				what = "complete"
				gerr = errOnly(eq.Complete(ctx, l, engine.Done{}))
				werr = m.Complete(q, l, nil, nil, nil)
			case x < 6:
				what = "fail"
				f := engine.Failure{Err: "x"}
				gerr = eq.Fail(ctx, l, f)
				werr = m.Fail(q, l, f)
			default:
				what = "heartbeat"
				ext := time.Duration(200+rng.IntN(800)) * time.Millisecond
				var dl time.Time
				dl, gerr = hb(ctx, eq, l, ext, nil)
				_, werr = m.Heartbeat(q, l, ext, nil)
				if gerr == nil {
					l.Deadline = dl
				}
			}
			same(what, gerr, werr)
			ops++
			switch {
			case gerr == nil && l.Token != newest[l.ID]:
				stale++
				t.Errorf("op %d: %s of task %d with token %d accepted, but token %d was handed out since", ops, what, l.ID, l.Token, newest[l.ID])
			case gerr == nil:
				accepted++
				if late {
					lateAccepted++ // past its deadline: a lease ends then, taken over or not
					t.Errorf("op %d: %s of task %d accepted after its lease's deadline", ops, what, l.ID)
				}
			case errors.Is(gerr, engine.ErrLeaseLost):
				refused++
				if late {
					lateRefused++
				}
			default:
				t.Fatalf("op %d: %s: %v", ops, what, gerr)
			}
			if what == "heartbeat" && gerr == nil {
				w.held[back] = held{l, now + int64(rng.IntN(1200))*1000}
			} else {
				w.held = append(w.held[:back], w.held[back+1:]...)
			}
		}
		clock.Advance(time.Duration(rng.IntN(40)) * time.Millisecond)
	}
	m.Now = clock.Now().UnixMicro() // reads see the state as of now
	if got, err := readView(db); err != nil || got.String() != m.View(queues, allNS).String() {
		t.Fatalf("final state differs from the model (%v): %s", err, Diff(got.String(), m.View(queues, allNS).String()))
	}
	t.Logf("%d lease operations: %d leases handed out (%d stalled past their lease), %d fenced calls accepted (%d after their deadline), %d refused (%d late), %d stale commits accepted",
		ops, claims, pauses, accepted, lateAccepted, refused, lateRefused, stale)
	if lateRefused == 0 {
		t.Fatal("no late worker was ever refused: the test did not exercise fencing")
	}
}

// TestHeartbeatNeverExpiresTheLease: Claim refuses a lease under a
// microsecond (the engine's time unit), but Heartbeat takes an extension
// under a microsecond, rounds it to zero and sets the deadline to now: the
// lease it reports extended has already expired, and the next claim by
// anyone takes the task over. A heartbeat that succeeds must leave the
// lease running.
func TestHeartbeatNeverExpiresTheLease(t *testing.T) {
	clock := engine.NewManualClock(t0)
	db, err := engine.OpenInMemory(engine.Options{Clock: clock, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q := db.Queue(nsProd, "a")
	if _, err := q.Enqueue(ctx, engine.Task{}); err != nil {
		t.Fatal(err)
	}
	ls, err := q.Claim(ctx, "w1", time.Minute, 1)
	if err != nil || len(ls) != 1 {
		t.Fatalf("claim: %v %v", ls, err)
	}
	deadline, err := hb(ctx, q, ls[0], 500*time.Nanosecond, nil)
	if errors.Is(err, engine.ErrInvalid) {
		return // refused, like Claim refuses such a lease
	}
	if err != nil {
		t.Fatal(err)
	}
	if !deadline.After(clock.Now()) {
		stolen, _ := q.Claim(ctx, "w2", time.Minute, 1)
		t.Fatalf("Heartbeat(500ns) succeeded with deadline %v = now; another owner then claims the task at once: %d leases", deadline, len(stolen))
	}
}
