//go:build linux

package fuzz

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

// FuzzBudget runs programs of enqueues, batches, KV writes, claims,
// completions with follow-ups, failures, cancels and KV deletes against a
// DB with a small memory budget, and checks what the budget promises
// after every call: a write refused with ErrFull changed nothing, and
// only writes that add state are refused; what frees state (a claim, a
// completion without follow-ups, a failure, a cancel, a KV delete, a
// claim) never is; the state stays within the budget, and within the
// budget and its reserve once claims (each lease adds its owner's bytes)
// or completions with follow-ups run, past which claims lease one task
// each and may pass it by the owner names of the leases held; and the usage the engine
// keeps verifies against its records, also after a reopen.
func FuzzBudget(f *testing.F) {
	f.Add([]byte{0x40, 0, 50, 0, 1, 3, 9, 3, 2, 0, 4, 1, 60, 5, 0, 0})
	f.Add([]byte(strings.Repeat("\x00\xff\x10", 80) + strings.Repeat("\x03\x04\x00\x04\x00\x40", 20)))
	f.Add([]byte(strings.Repeat("\x01\x03\x40\x02\x09\x30\x03\x04\x00\x05\x00\x00\x06\x09\x00", 30)))
	f.Fuzz(func(t *testing.T, prog []byte) { runBudget(t, prog) })
}

// TestBudgetPrograms runs FuzzBudget's shapes with generated programs.
func TestBudgetPrograms(t *testing.T) {
	t.Parallel()
	seeds := 40
	if testing.Short() {
		seeds = 8
	}
	// The seeds side by side, in a group that ends before the count is read.
	var refused atomic.Int64
	t.Run("seeds", func(t *testing.T) {
		for seed := range seeds {
			prog := make([]byte, 900)
			x := uint32(seed*2654435761 + 1)
			for i := range prog {
				x ^= x << 13
				x ^= x >> 17
				x ^= x << 5
				prog[i] = byte(x)
			}
			// Mostly enqueues first, so that the budget fills.
			for i := 1; i+2 < 300; i += 3 {
				prog[i] &^= 0x06
			}
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				refused.Add(int64(runBudget(t, prog)))
			})
		}
	})
	if refused.Load() == 0 {
		t.Fatal("no program filled its budget: the checks of a refusal never ran")
	}
}

// runBudget runs prog and returns how many of its calls were refused
// with ErrFull.
func runBudget(t *testing.T, prog []byte) (refused int) {
	if len(prog) < 4 {
		return 0
	}
	budget := int64(16<<10) + int64(prog[0])<<8 // 16 KiB to 80 KiB
	reserve := budget / 8
	clock := engine.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := engine.Options{Clock: clock, MaxMemory: budget, Logger: quiet}
	dir := t.TempDir()
	db, err := engine.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	ns := engine.NS("acme", "prod")
	q := db.Queue(ns, "q")
	kv := db.KV(ns)
	var leases []engine.Lease
	reserved := false // a claim or a completion with follow-ups ran: they may use the reserve
	// gathered is what failures added (an attempt's error kept on its
	// task), which the budget does not refuse (README "Memory").
	var gathered int64
	payload := func(n byte) []byte { return []byte(`"` + strings.Repeat("x", int(n)*8) + `"`) }
	for i := 1; i+2 < len(prog) && i < 3*400; i += 3 {
		op, a, b := prog[i]%7, prog[i+1], prog[i+2]
		before := db.Stats()
		var err error
		var adds, frees bool
		var desc string
		switch op {
		case 0:
			desc, adds = "enqueue", true
			_, err = q.Enqueue(ctx, engine.Task{Payload: payload(a), Headers: map[string]string{"h": strings.Repeat("v", int(b%32))}})
		case 1:
			desc, adds = "enqueue batch", true
			ts := make([]engine.Task, 1+int(a%4))
			for j := range ts {
				ts[j] = engine.Task{Payload: payload(b)}
			}
			_, err = q.EnqueueBatch(ctx, ts)
		case 2:
			desc, adds = "kv set", true
			_, err = kv.Commit(ctx, engine.Set(fmt.Sprintf("k%d", a%16), payload(b)))
		case 3:
			desc, frees = "claim", true
			var ls []engine.Lease
			ls, err = q.Claim(ctx, strings.Repeat("w", 1+int(b%64)), time.Minute, 1+int(a%5))
			leases = append(leases, ls...)
			reserved = reserved || len(ls) > 0
		case 4:
			if len(leases) == 0 {
				continue
			}
			l := leases[0]
			leases = leases[1:]
			var d engine.Done
			if b != 0 {
				desc, adds = "complete with a follow-up", true
				d.FollowUps = []engine.FollowUp{{Queue: "next", Task: engine.Task{Payload: payload(b)}}}
			} else {
				desc, frees = "complete", true
			}
			_, err = q.Complete(ctx, l, d)
			if err == nil && b != 0 {
				reserved = true
			}
			if errors.Is(err, engine.ErrFull) {
				leases = append(leases, l) // the lease is still held
			}
		case 5:
			if len(leases) == 0 {
				continue
			}
			l := leases[0]
			leases = leases[1:]
			desc, frees = "fail", true
			err = q.Fail(ctx, l, engine.Failure{Err: "boom", Permanent: a&1 == 0})
		case 6:
			if a&1 == 0 {
				desc, frees = "kv delete", true
				_, err = kv.Commit(ctx, engine.Delete(fmt.Sprintf("k%d", a%16)))
			} else {
				desc, frees = "cancel", true
				err = q.Cancel(ctx, uint64(b)+1)
				if errors.Is(err, engine.ErrNotFound) {
					err = nil
				}
			}
		}
		after := db.Stats()
		switch {
		case errors.Is(err, engine.ErrFull):
			refused++
			if !adds {
				t.Fatalf("step %d: %s refused for a full budget: it adds nothing", i/3, desc)
			}
			if after.Memory != before.Memory || after.Tasks != before.Tasks {
				t.Fatalf("step %d: a refused %s changed the state: %d bytes and %d tasks, were %d and %d",
					i/3, desc, after.Memory, after.Tasks, before.Memory, before.Tasks)
			}
		case err != nil && !errors.Is(err, engine.ErrLeaseLost):
			t.Fatalf("step %d: %s: %v", i/3, desc, err)
		}
		_ = frees
		if op == 5 && err == nil && after.Memory > before.Memory {
			gathered += after.Memory - before.Memory
		}
		limit := budget + gathered
		if reserved {
			limit += reserve
			for _, l := range leases {
				limit += int64(len(l.Owner))
			}
		}
		if after.Memory > limit {
			t.Fatalf("step %d: after %s the state holds %d bytes, past %d (budget %d)", i/3, desc, after.Memory, limit, budget)
		}
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	held := db.Stats().Memory
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = engine.Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	if got := db.Stats().Memory; got != held {
		t.Fatalf("the state held %d bytes before a reopen and %d after", held, got)
	}
	return refused
}
