package engine

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// payloadOf returns a JSON payload of about n bytes.
func payloadOf(n int) []byte {
	return []byte(`"` + strings.Repeat("x", n-2) + `"`)
}

// fill enqueues 1 KiB tasks until the budget refuses one, and returns how
// many it took.
func fill(t *testing.T, q Queue) int {
	t.Helper()
	for n := 0; ; n++ {
		_, err := q.Enqueue(ctx, Task{Payload: payloadOf(1024)})
		if errors.Is(err, ErrFull) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		if n > 10_000 {
			t.Fatal("the budget never filled")
		}
	}
}

// TestMemoryBudgetRefusesWhatAdds fills a small budget and checks that
// writes that add state are refused with ErrFull and change nothing,
// that the state never passes the budget, and that claims, completions,
// failures, cancels and KV deletes still work, after which enqueues are
// taken again.
func TestMemoryBudgetRefusesWhatAdds(t *testing.T) {
	t.Parallel()
	for _, mem := range []bool{true, false} {
		t.Run(map[bool]string{true: "memory", false: "disk"}[mem], func(t *testing.T) {
			const budget = 64 << 10
			e := newEnv(t, mem, func(o *Options) {
				o.MaxMemory = budget
				o.Logger = quiet
				o.ValueThreshold = -1 /* payloads in memory */
			})
			q := e.q("q")
			kv := e.db.KV(ns)
			if _, err := kv.Commit(ctx, Set("keep", []byte(`1`))); err != nil {
				t.Fatal(err)
			}
			n := fill(t, q)
			if n < 20 || n > 64 {
				t.Fatalf("a budget of 64 KiB took %d tasks of 1 KiB", n)
			}
			st := e.db.Stats()
			if st.MemoryBudget != budget || st.Memory > budget || st.Memory < budget*3/4 {
				t.Fatalf("stats: %d of %d bytes used", st.Memory, st.MemoryBudget)
			}
			before := dump(e.db)
			_, err := q.Enqueue(ctx, Task{Payload: payloadOf(1024)})
			if !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "64.0 KiB") {
				t.Fatalf("enqueue past the budget: %v", err)
			}
			if _, err := q.EnqueueBatch(ctx, []Task{{Payload: payloadOf(100)}, {Payload: payloadOf(100)}}); !errors.Is(err, ErrFull) {
				t.Fatalf("batch past the budget: %v", err)
			}
			if _, err := q.EnqueueAsync(ctx, Task{Payload: payloadOf(1024)}).Wait(ctx); !errors.Is(err, ErrFull) {
				t.Fatalf("async enqueue past the budget: %v", err)
			}
			if _, err := kv.Commit(ctx, Set("big", payloadOf(4096))); !errors.Is(err, ErrFull) {
				t.Fatalf("KV set past the budget: %v", err)
			}
			if after := dump(e.db); after != before {
				t.Fatalf("refused writes changed the state:\nbefore:\n%s\nafter:\n%s", before, after)
			}

			// Whatever frees state works.
			if _, err := kv.Commit(ctx, Delete("keep")); err != nil {
				t.Fatalf("KV delete when full: %v", err)
			}
			ls := e.claim(q, 3)
			if _, err := q.Complete(ctx, ls[0], Done{}); err != nil {
				t.Fatalf("complete when full: %v", err)
			}
			if err := q.Fail(ctx, ls[1], Failure{Err: "boom", Permanent: true}); err != nil {
				t.Fatalf("fail when full: %v", err)
			}
			if err := q.Cancel(ctx, ls[2].ID+1); err != nil {
				t.Fatalf("cancel when full: %v", err)
			}
			if _, err := q.Enqueue(ctx, Task{Payload: payloadOf(1024)}); err != nil {
				t.Fatalf("enqueue once freed: %v", err)
			}
			if err := e.db.Verify(); err != nil {
				t.Fatal(err)
			}
			if !mem {
				e.reopen()
				if st := e.db.Stats(); st.Memory > budget {
					t.Fatalf("after reopen %d of %d bytes used", st.Memory, budget)
				}
			}
		})
	}
}

// TestMemoryCompletionUsesTheReserve: with the budget full, a completion
// that enqueues a follow-up is taken (from the reserve); once the reserve
// is spent too it is refused with ErrFull, its lease still held, and the
// same completion without the follow-up is taken.
func TestMemoryCompletionUsesTheReserve(t *testing.T) {
	t.Parallel()
	const budget = 64 << 10
	e := newEnv(t, true, func(o *Options) { o.MaxMemory = budget; o.Logger = quiet })
	q := e.q("q")
	n := fill(t, q)
	ls := e.claim(q, n)
	follow := func(l Lease) error {
		_, err := q.Complete(ctx, l, Done{FollowUps: []FollowUp{{Queue: "next", Task: Task{Payload: payloadOf(4096)}}}})
		return err
	}
	if err := follow(ls[0]); err != nil {
		t.Fatalf("a completion with a follow-up at a full budget: %v", err)
	}
	if st := e.db.Stats(); st.Memory <= budget {
		t.Fatalf("the follow-up did not use the reserve: %d of %d", st.Memory, budget)
	}
	i := 1
	var err error
	for ; i < len(ls); i++ {
		if err = follow(ls[i]); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrFull) {
		t.Fatalf("completions with follow-ups never ran out of the reserve: %v", err)
	}
	if st := e.db.Stats(); st.Memory > budget+budget/memoryReserveShare {
		t.Fatalf("the reserve was passed: %d bytes used of %d + %d", st.Memory, budget, budget/memoryReserveShare)
	}
	if info := e.get(q, ls[i].ID); info.State != InFlight {
		t.Fatalf("a refused completion left its task %s", info.State)
	}
	if _, err := q.Complete(ctx, ls[i], Done{}); err != nil {
		t.Fatalf("the same completion without the follow-up: %v", err)
	}
}

// TestMemoryClaimsUseTheReserve: each lease adds its owner's bytes to
// the state. With the budget full, claims are taken from the reserve, cut
// to what it holds; past it a claim leases one task, so the state passes
// the reserve by no more than the owner names of the leases held, and a
// state taken past the reserve by failures' errors with no lease held
// still drains; completions free what leases held.
func TestMemoryClaimsUseTheReserve(t *testing.T) {
	const budget = 64 << 10
	limit := int64(budget + budget/memoryReserveShare)
	e := newEnv(t, true, func(o *Options) { o.MaxMemory = budget; o.Logger = quiet })
	q := e.q("q")
	n := 0
	for ; ; n++ {
		if _, err := q.Enqueue(ctx, Task{Payload: []byte(`1`), MaxAttempts: 100}); errors.Is(err, ErrFull) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	owner := strings.Repeat("o", MaxNameBytes)
	var held []Lease
	cut, ones := false, 0
	for len(held) < n {
		ls, err := q.Claim(ctx, owner, time.Minute, 16)
		if err != nil || len(ls) == 0 {
			t.Fatalf("a claim with %d of %d tasks held: %d leases, %v", len(held), n, len(ls), err)
		}
		used := e.db.Stats().Memory
		if len(ls) < 16 && len(held)+len(ls) < n {
			cut = true
		}
		if len(ls) == 1 && used > limit {
			ones++
		}
		held = append(held, ls...)
		if over := used - limit; over > int64(ones*len(owner)) {
			t.Fatalf("claims passed the reserve by %d bytes with %d leases past it", over, ones)
		}
	}
	if !cut || ones == 0 {
		t.Fatalf("%d tasks leased: no claim was cut (%v) or none leased one past the reserve (%d)", n, cut, ones)
	}
	// Failures gather their errors past the reserve; with no lease held,
	// claims still lease one task at a time and the queue drains.
	for _, l := range held {
		if err := q.Fail(ctx, l, Failure{Err: strings.Repeat("e", 4000)}); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(time.Hour)
	if used := e.db.Stats().Memory; used <= limit {
		t.Fatalf("the failures did not take the state past the reserve: %d of %d", used, limit)
	}
	for done := 0; done < n; {
		ls, err := q.Claim(ctx, owner, time.Minute, 16)
		if err != nil || len(ls) == 0 {
			t.Fatalf("draining, %d of %d done: %d leases, %v", done, n, len(ls), err)
		}
		for _, l := range ls {
			if _, err := q.Complete(ctx, l, Done{}); err != nil {
				t.Fatal(err)
			}
			done++
		}
	}
	if st := e.db.Stats(); st.Tasks != 0 {
		t.Fatalf("%d tasks left after the drain", st.Tasks)
	}
	if err := e.db.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestMemoryBudgetOnAReplicatedLog: the node that submits a command
// admits it against its budget before it goes to the log; the log then
// holds no refused command, and every member applies what it holds.
func TestMemoryBudgetOnAReplicatedLog(t *testing.T) {
	t.Parallel()
	clock := NewManualClock(t0)
	l := newLocalLog(t, 2, func(i int) Options {
		o := Options{Clock: clock, MaxMemory: 64 << 10}
		if i == 1 {
			o.MaxMemory = -1 // a follower's own budget does not matter
		}
		return o
	})
	q := l.members[0].db.Queue(ns, "q")
	n := fill(t, q)
	entries := l.len()
	if entries != n {
		t.Fatalf("%d entries for %d enqueues taken", entries, n)
	}
	if _, err := q.Enqueue(ctx, Task{Payload: payloadOf(1024)}); !errors.Is(err, ErrFull) {
		t.Fatalf("enqueue past the budget: %v", err)
	}
	if l.len() != entries {
		t.Fatal("a refused command reached the log")
	}
	l.sameState(t, l.members[0].db, "full")
}

// TestMemoryWarnings: a warning when the state passes 80% of its budget,
// not repeated within a minute; a refusal logged at once, the ones after
// it within a minute counted in the next line.
func TestMemoryWarnings(t *testing.T) {
	t.Parallel()
	lines := make(recordsTo, 1024)
	e := newEnv(t, true, func(o *Options) { o.MaxMemory = 64 << 10; o.Logger = slog.New(lines) })
	q := e.q("q")
	fill(t, q)
	var near, refused []slog.Record
	for len(lines) > 0 {
		r := <-lines
		switch {
		case strings.Contains(r.Message, "near its memory budget"):
			near = append(near, r)
		case strings.Contains(r.Message, "memory budget is full"):
			refused = append(refused, r)
		}
	}
	if len(near) != 1 || len(refused) != 1 {
		t.Fatalf("%d warnings near the budget and %d refusals logged, want 1 and 1", len(near), len(refused))
	}
	if p := attr(near[0], "percent").Int64(); p < 80 || p > 100 {
		t.Fatalf("warned at %d%%", p)
	}
	for range 3 {
		q.Enqueue(ctx, Task{Payload: payloadOf(1024)})
	}
	if len(lines) != 0 {
		t.Fatalf("%d lines for refusals within the minute", len(lines))
	}
	e.clock.Advance(time.Minute)
	q.Enqueue(ctx, Task{Payload: payloadOf(1024)})
	r := <-lines
	if !strings.Contains(r.Message, "memory budget is full") || attr(r, "refused_since_last_line").Int64() != 3 {
		t.Fatalf("after a minute: %q with %v refused since", r.Message, attr(r, "refused_since_last_line"))
	}
}

func TestBudgetOf(t *testing.T) {
	t.Parallel()
	if got := budgetOf(12345); got != 12345 {
		t.Fatalf("budgetOf(12345) = %d", got)
	}
	if got := budgetOf(-1); got != 0 {
		t.Fatalf("budgetOf(-1) = %d, want none", got)
	}
	if avail := availableMemory(); avail > 0 && budgetOf(0) != avail/DefaultMemoryShare {
		t.Fatalf("budgetOf(0) = %d with %d available", budgetOf(0), avail)
	}
}

// TestUsageByNamespace: each namespace's tasks and bytes, largest first,
// bounded by max, none for a caller's view.
func TestUsageByNamespace(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	small, big := NS("acme", "small"), NS("acme", "big")
	for range 3 {
		if _, err := e.db.Queue(small, "q").Enqueue(ctx, Task{Payload: payloadOf(100)}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.db.Queue(big, "q").Enqueue(ctx, Task{Payload: payloadOf(5000)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.db.KV(small).Commit(ctx, Set("k", payloadOf(50))); err != nil {
		t.Fatal(err)
	}
	u := e.db.Usage(0)
	if len(u) != 2 || u[0].Namespace != big || u[1].Namespace != small || u[0].Tasks != 3 || u[1].Tasks != 3 {
		t.Fatalf("usage %+v", u)
	}
	if u[0].Bytes < 15000 || u[1].Bytes < 350 || u[0].Bytes+u[1].Bytes != e.db.Stats().Memory {
		t.Fatalf("usage %+v against %d in all", u, e.db.Stats().Memory)
	}
	if got := e.db.Usage(1); len(got) != 1 || got[0] != u[0] {
		t.Fatalf("Usage(1) = %+v", got)
	}
	if got := e.db.As(Caller{ID: "x"}).Usage(0); got != nil {
		t.Fatalf("a caller's view sees %+v", got)
	}
}

// TestMemoryPresenceUsesTheReserve: with the budget full, a worker still
// reports its presence (from the reserve), and a user's KV write is
// refused.
func TestMemoryPresenceUsesTheReserve(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true, func(o *Options) { o.MaxMemory = 64 << 10; o.Logger = quiet })
	fill(t, e.q("q"))
	if _, err := e.db.KV(ns).Commit(ctx, Set("user", payloadOf(2048))); !errors.Is(err, ErrFull) {
		t.Fatalf("a user's KV write at a full budget: %v", err)
	}
	if err := e.db.ReportWorker(ctx, ns, WorkerPresence{ID: "w1", Host: "h", PID: 1}, time.Minute); err != nil {
		t.Fatalf("a worker's presence at a full budget: %v", err)
	}
	ws, err := e.db.Workers(ctx, ns)
	if err != nil || len(ws) != 1 {
		t.Fatalf("workers %+v, %v", ws, err)
	}
}
