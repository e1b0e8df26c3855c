package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/internal/index"
)

var (
	ctx = context.Background()
	t0  = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	ns  = NS("acme", "prod")
)

type env struct {
	t     *testing.T
	dir   string
	opts  Options
	clock *ManualClock
	db    *DB
}

// newEnv opens a DB in a temp dir with a manual clock; mem selects an
// in-memory DB.
func newEnv(t *testing.T, mem bool, tweak ...func(*Options)) *env {
	t.Helper()
	e := &env{t: t, clock: NewManualClock(t0)}
	e.opts = Options{Clock: e.clock}
	for _, f := range tweak {
		f(&e.opts)
	}
	if !mem {
		e.dir = t.TempDir()
	}
	e.open()
	t.Cleanup(func() {
		if e.db != nil {
			e.db.Close()
		}
	})
	return e
}

func (e *env) open() {
	e.t.Helper()
	db, err := Open(e.dir, e.opts)
	if e.dir == "" {
		db, err = OpenInMemory(e.opts)
	}
	if err != nil {
		e.t.Fatalf("open: %v", err)
	}
	if e.db != nil {
		// Keep handles taken before a reopen working: they point at e.db.
		*e.db = *db
		return
	}
	e.db = db
}

// reopen closes and reopens the DB, checking that the state is unchanged
// and the indexes verify.
func (e *env) reopen() {
	e.t.Helper()
	before := dump(e.db)
	hash, err := e.db.StateHash()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.db.Close(); err != nil {
		e.t.Fatalf("close: %v", err)
	}
	e.open()
	if err := e.db.Verify(); err != nil {
		e.t.Fatalf("verify after reopen: %v", err)
	}
	if after := dump(e.db); after != before {
		e.t.Fatalf("state changed across reopen:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if e.dir != "" {
		// Lease secrets and the last batch's time too.
		if h, err := e.db.StateHash(); err != nil || h != hash {
			e.t.Fatalf("state hash changed across reopen (%v)", err)
		}
	}
}

func (e *env) q(name string) Queue { return e.db.Queue(ns, name) }

func (e *env) enqueue(q Queue, t Task) uint64 {
	e.t.Helper()
	res, err := q.Enqueue(ctx, t)
	if err != nil {
		e.t.Fatalf("enqueue: %v", err)
	}
	return res.ID
}

func (e *env) claim(q Queue, max int) []Lease {
	e.t.Helper()
	ls, err := q.Claim(ctx, "w1", 30*time.Second, max)
	if err != nil {
		e.t.Fatalf("claim: %v", err)
	}
	return ls
}

func (e *env) get(q Queue, id uint64) TaskInfo {
	e.t.Helper()
	info, err := q.Get(ctx, id)
	if err != nil {
		e.t.Fatalf("get %d: %v", id, err)
	}
	return info
}

func ids(ls []Lease) []uint64 {
	out := make([]uint64, len(ls))
	for i, l := range ls {
		out[i] = l.ID
	}
	return out
}

// dump renders every record of the state, for comparing states.
func dump(db *DB) string {
	c := db.c
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "seq=%d next=%d\n", c.store.Seq(), c.store.NextID())
	img := c.store.Copy()
	img.Tasks.Scan(func(t *index.Task) bool {
		x := t.Ex()
		fmt.Fprintf(&b, "task %d %v %s a=%d/%d p=%d nb=%d bo=%d/%d own=%q tok=%d lease=%d c=%d u=%d pay=%q kind=%q idem=%q err=%q prog=%q res=%q h=%v errs=%v parent=%d follow=%v policy=%d part=%q\n",
			t.ID, t.Queue.Key, t.State, t.Attempts, t.MaxAttempts(), t.Priority, t.NotBefore, t.BackoffBase(), t.BackoffMax(),
			t.Owner(), t.Token(), t.LeaseUntil(), t.Created, t.Updated(), t.Payload(), x.Kind, x.IdemKey, x.LastError,
			x.Progress, x.Result, x.Headers, x.Errors, x.Parent, x.FollowUps, x.DepPolicy, t.PartitionKey())
		return true
	})
	img.Totals.Scan(func(r index.QueueTotals) bool {
		fmt.Fprintf(&b, "totals %v %+v idle=%d\n", r.Queue, r.Totals, r.Idle)
		return true
	})
	img.KV.Scan(func(e index.KV) bool {
		fmt.Fprintf(&b, "kv %v %q=%q v%d\n", e.Namespace, e.Key, e.Value, e.Version)
		return true
	})
	img.Idem.Scan(func(e index.Idem) bool {
		fmt.Fprintf(&b, "idem %v %q -> %d exp=%d states=%#x\n", e.Queue, e.Key, e.ID, e.Expires, e.States)
		return true
	})
	img.Confs.Scan(func(c index.QueueConf) bool {
		fmt.Fprintf(&b, "conf %+v\n", c)
		return true
	})
	img.Deps.Scan(func(d index.Dep) bool {
		fmt.Fprintf(&b, "dep %d <- %d\n", d.Parent, d.Child)
		return true
	})
	img.Buckets.Scan(func(p index.PartBucket) bool {
		fmt.Fprintf(&b, "bucket %+v\n", p)
		return true
	})
	return b.String()
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want %v", err, target)
	}
}

// errOnly drops a call's result and keeps its error.
func errOnly[T any](_ T, err error) error { return err }

// hb heartbeats a copy of l and returns the new deadline.
func hb(ctx context.Context, q Queue, l Lease, extend time.Duration, progress []byte) (time.Time, error) {
	if err := q.Heartbeat(ctx, &l, extend, progress); err != nil {
		return time.Time{}, err
	}
	return l.Deadline, nil
}
