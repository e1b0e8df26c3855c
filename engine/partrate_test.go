package engine

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/internal/index"
)

// buckets returns the partition bucket records of the DB's state.
func buckets(e *env) []index.PartBucket {
	c := e.db.c
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []index.PartBucket
	c.store.Copy().Buckets.Scan(func(b index.PartBucket) bool {
		out = append(out, b)
		return true
	})
	return out
}

// claimDone claims up to max tasks of q and completes them, so that no
// lease expires and serves its task again as time passes.
func (e *env) claimDone(q Queue, max int) []Lease {
	e.t.Helper()
	ls := e.claim(q, max)
	for _, l := range ls {
		if _, err := q.Complete(ctx, l, Done{}); err != nil {
			e.t.Fatal(err)
		}
	}
	return ls
}

// TestPartitionRate: each partition's bucket limits its claims over time
// while the other partitions are served; a burst is leased at once after a
// quiet spell; the default partition has a bucket too.
func TestPartitionRate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	for range 10 {
		e.enqueue(q, Task{Partition: "busy"})
	}
	for range 3 {
		e.enqueue(q, Task{Partition: "quiet"})
		e.enqueue(q, Task{})
	}
	// 1 a second per partition, bursts of 2.
	mustDo(t, q.SetLimits(ctx, Limits{PartitionRate: 1, PartitionPer: time.Second, PartitionBurst: 2}))
	if got := byPart(e.claimDone(q, 100)); !mapsEqual(got, map[string]int{"busy": 2, "quiet": 2, "": 2}) {
		t.Fatalf("full buckets gave %v", got)
	}
	if ls := e.claimDone(q, 100); len(ls) != 0 {
		t.Fatalf("empty buckets gave %v", byPart(ls))
	}
	if n := len(buckets(e)); n != 3 {
		t.Fatalf("%d bucket records, want 3", n)
	}
	e.clock.Advance(500 * time.Millisecond)
	if ls := e.claimDone(q, 100); len(ls) != 0 {
		t.Fatalf("half a token gave %v", byPart(ls))
	}
	e.clock.Advance(500 * time.Millisecond)
	if got := byPart(e.claimDone(q, 100)); !mapsEqual(got, map[string]int{"busy": 1, "quiet": 1, "": 1}) {
		t.Fatalf("a second gave %v", got)
	}
	// quiet and the default partition are drained; busy alone goes on at
	// its rate, at most its burst after a quiet spell.
	e.clock.Advance(time.Hour)
	if got := byPart(e.claimDone(q, 100)); !mapsEqual(got, map[string]int{"busy": 2}) {
		t.Fatalf("after an hour %v", got)
	}
	e.clock.Advance(3 * time.Second)
	if got := byPart(e.claimDone(q, 100)); !mapsEqual(got, map[string]int{"busy": 2}) {
		t.Fatalf("after 3 s %v", got)
	}
	mustDo(t, e.db.Verify())
	// The records of quiet and the default partition were full again and
	// are gone; busy's is kept.
	if bs := buckets(e); len(bs) != 1 || bs[0].Key != "busy" {
		t.Fatalf("bucket records %+v", bs)
	}
	// Removing the limit removes the records.
	mustDo(t, q.SetLimits(ctx, Limits{}))
	if bs := buckets(e); len(bs) != 0 {
		t.Fatalf("bucket records after the limit went: %+v", bs)
	}
	if n := len(e.claimDone(q, 100)); n != 3 {
		t.Fatalf("without a limit: %d", n)
	}
}

// TestPartitionRateWithQueueLimits: a claim leases what both the queue's
// rate limit and each partition's allow.
func TestPartitionRateWithQueueLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	for _, p := range []string{"a", "a", "a", "b", "b", "b", "c", "c", "c"} {
		e.enqueue(q, Task{Partition: p})
	}
	mustDo(t, q.SetLimits(ctx, Limits{Rate: 4, Per: time.Second, PartitionRate: 2, PartitionPer: time.Second}))
	if n := len(e.claim(q, 100)); n != 4 {
		t.Fatalf("the queue's bucket of 4 gave %d", n)
	}
	e.clock.Advance(time.Second)
	// The queue holds 4 tokens again; the partitions 2 each, less what
	// the first claim took (a full bucket of 2 refilled by 2).
	if n := len(e.claim(q, 100)); n != 4 {
		t.Fatalf("second claim %d", n)
	}
	mustDo(t, e.db.Verify())
}

// TestPartitionRateUnpartitioned: on a queue whose tasks name no
// partition, the default partition's bucket is a second rate limit on the
// queue, also across a switch to partitioned.
func TestPartitionRateUnpartitioned(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	for range 5 {
		e.enqueue(q, Task{})
	}
	mustDo(t, q.SetLimits(ctx, Limits{PartitionRate: 1, PartitionPer: time.Minute}))
	if n := len(e.claimDone(q, 10)); n != 1 {
		t.Fatalf("a bucket of 1 gave %d", n)
	}
	if n := len(e.claimDone(q, 10)); n != 0 {
		t.Fatalf("an empty bucket gave %d", n)
	}
	e.enqueue(q, Task{Partition: "p"}) // partitioned now: the default bucket is still empty
	if got := byPart(e.claimDone(q, 10)); !mapsEqual(got, map[string]int{"p": 1}) {
		t.Fatalf("claimed %v", got)
	}
	e.clock.Advance(time.Minute)
	if got := byPart(e.claimDone(q, 10)); !mapsEqual(got, map[string]int{"": 1}) {
		t.Fatalf("after a minute %v", got)
	}
	mustDo(t, e.db.Verify())
}

// TestCompleteAndClaimPartitionRate: a completion that claims leases only
// what the partitions' buckets allow.
func TestCompleteAndClaimPartitionRate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	for _, p := range []string{"a", "a", "a", "b"} {
		e.enqueue(q, Task{Partition: p})
	}
	mustDo(t, q.SetLimits(ctx, Limits{PartitionRate: 1, PartitionPer: time.Minute}))
	held := e.claim(q, 1)
	if len(held) != 1 {
		t.Fatalf("claimed %d", len(held))
	}
	_, ls, err := q.CompleteAndClaim(ctx, held[0], Done{}, "w", time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	// One partition gave its token to the first claim; the other one now.
	if len(ls) != 1 || ls[0].Partition == held[0].Partition {
		t.Fatalf("completion claimed %v after %q", byPart(ls), held[0].Partition)
	}
	_, ls, err = q.CompleteAndClaim(ctx, ls[0], Done{}, "w", time.Minute, 10)
	if err != nil || len(ls) != 0 {
		t.Fatalf("out of tokens, the completion claimed %v (%v)", byPart(ls), err)
	}
	mustDo(t, e.db.Verify())
}

// TestClaimWaitPartitionToken: a claim parked on a queue whose partitions
// are out of tokens is woken by its timer when one of them gains one, not
// before and not by polling.
func TestClaimWaitPartitionToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	mustDo(t, q.SetLimits(ctx, Limits{PartitionRate: 1, PartitionPer: time.Second}))
	e.enqueue(q, Task{Partition: "a"})
	e.enqueue(q, Task{Partition: "a"})
	e.enqueue(q, Task{Partition: "b"})
	e.enqueue(q, Task{Partition: "b"})
	if n := len(e.claim(q, 10)); n != 2 {
		t.Fatalf("claimed %d", n)
	}
	e.clock.Advance(300 * time.Millisecond)
	ch := parkClaim(q, ctx)
	waitParked(t, e, q, 1)
	before := parkedOn(e, q)
	p := parks(t, e)
	e.clock.Advance(699 * time.Millisecond)
	stillParked(t, e, q, before, ch)
	e.clock.Advance(time.Millisecond)
	if r := recv(t, ch); r.err != nil || !mapsEqual(byPart(r.ls), map[string]int{"a": 1, "b": 1}) {
		t.Fatalf("at the next tokens: %v %v", byPart(r.ls), r.err)
	}
	if n := parks(t, e); n != p {
		t.Fatalf("the claim parked %d more times before its token came", n-p)
	}
	// A partition with tokens is served at once while another waits.
	ch = parkClaim(q, ctx)
	waitParked(t, e, q, 1)
	c := e.enqueue(q, Task{Partition: "c"})
	expectClaim(t, ch, c)
}

// TestPartitionRateSurvivesCrashAndReopen: the buckets' levels are in the
// log and in snapshots.
func TestPartitionRateSurvivesCrashAndReopen(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.SnapshotBytes = -1 })
	q := e.q("q")
	for _, p := range []string{"a", "a", "a", "b", "b", "", ""} {
		e.enqueue(q, Task{Partition: p})
	}
	mustDo(t, q.SetLimits(ctx, Limits{PartitionRate: 1, PartitionPer: time.Minute}))
	if n := len(e.claim(q, 10)); n != 3 {
		t.Fatalf("claimed %d", n)
	}
	want := buckets(e)
	e.crash() // log replay
	e.open()
	mustDo(t, e.db.Verify())
	if got := buckets(e); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("buckets after a crash %+v, before %+v", got, want)
	}
	if ls := e.claim(q, 10); len(ls) != 0 {
		t.Fatalf("empty buckets gave %v after a crash", byPart(ls))
	}
	e.reopen() // through a snapshot (reopen compares every record)
	if snaps, _ := filepath.Glob(filepath.Join(e.dir, "snap", "*.snap")); len(snaps) == 0 {
		t.Fatal("the reopen wrote no snapshot")
	}
	if ls := e.claim(q, 10); len(ls) != 0 {
		t.Fatalf("empty buckets gave %v after a reopen", byPart(ls))
	}
	e.clock.Advance(time.Minute)
	if got := byPart(e.claim(q, 10)); !mapsEqual(got, map[string]int{"a": 1, "b": 1, "": 1}) {
		t.Fatalf("after a minute %v", got)
	}
	e.reopen()
}

// TestPartitionRateRefusesBadInput: partition rate limits out of range are
// ErrInvalid and change nothing.
func TestPartitionRateRefusesBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.q("q")
	before := dump(e.db)
	for name, l := range map[string]Limits{
		"negative rate":    {PartitionRate: -1, PartitionPer: time.Second},
		"rate too large":   {PartitionRate: MaxRateTokens + 1, PartitionPer: time.Second},
		"rate without per": {PartitionRate: 1},
		"per too short":    {PartitionRate: 1, PartitionPer: time.Nanosecond},
		"per too long":     {PartitionRate: 1, PartitionPer: MaxRatePer + time.Microsecond},
		"per without rate": {PartitionPer: time.Second},
		"burst alone":      {PartitionBurst: 3},
		"negative burst":   {PartitionRate: 1, PartitionPer: time.Second, PartitionBurst: -1},
		"burst too large":  {PartitionRate: 1, PartitionPer: time.Second, PartitionBurst: MaxRateTokens + 1},
	} {
		err := q.SetLimits(ctx, l)
		if err == nil || !strings.Contains(err.Error(), "partition") {
			t.Errorf("%s: %v, want an error naming the partition limit", name, err)
		}
		wantErr(t, err, ErrInvalid)
	}
	if dump(e.db) != before {
		t.Fatal("a refused call changed the state")
	}
}

// TestReplicatedPartitionRateMatchesStandalone: a replicated log plans the
// same rate-limited claims as a standalone DB, and a member restored from
// an image goes on planning them alike.
func TestReplicatedPartitionRateMatchesStandalone(t *testing.T) {
	t.Parallel()
	matchStandalone(t, 6, func(api API, clock *ManualClock) []func() string {
		q := api.Queue(ns, "q")
		show := func(v any, err error) string { return fmt.Sprintf("%+v err=%v", v, err) }
		var leases []Lease
		claim := func(n int) string {
			ls, err := q.Claim(ctx, "w", time.Minute, n)
			leases = append(leases, ls...)
			return show(fmt.Sprint(ids(ls), byPart(ls)), err)
		}
		batch := func(parts ...string) func() string {
			return func() string {
				var ts []Task
				for _, p := range parts {
					ts = append(ts, Task{Partition: p})
				}
				return show(q.EnqueueBatch(ctx, ts))
			}
		}
		return []func() string{
			batch("a", "a", "a", "b", "b", "", "c", "a", "c", "d", "d"),
			func() string {
				return show(nil, q.SetLimits(ctx, Limits{PartitionRate: 2, PartitionPer: time.Second, PartitionBurst: 2}))
			},
			func() string { return claim(3) },
			func() string { return claim(10) },
			func() string { clock.Advance(700 * time.Millisecond); return claim(10) },
			func() string {
				_, ls, err := q.CompleteAndClaim(ctx, leases[0], Done{}, "w", time.Minute, 3)
				return show(ids(ls), err)
			},
			func() string { clock.Advance(300 * time.Millisecond); return claim(10) },
			batch("e", "e", "a"),
			func() string { clock.Advance(time.Hour); return claim(10) },
			func() string { return claim(10) },
			func() string { return show(q.Settings(ctx)) },
		}
	})
}
