//go:build linux

package fuzz

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/enginetest"
	"github.com/docketdb/docket/internal/vfs/errorfs"
)

// The failpoints of the log and of snapshot writing (engine.Options).
var (
	logPoints      = []string{"append.write", "sync", "sync.after", "segment.create", "truncate"}
	snapshotPoints = []string{"write.middle", "sync.before", "rename.before", "rename.after", "dirsync.after"}
)

// faultWorkload is the recorded workload the failpoint tests replay, once
// per time a failpoint is passed: shorter than the crash workload, with
// small segments so that segments are started and truncated often.
func faultWorkload(cfg byte) recordOptions {
	return recordOptions{seed: *crashSeed, ops: 80, segBytes: 700, weights: crashWorkload, cfg: cfg}
}

// faultConfigs are the configuration bytes the failure tests run under
// (see programConfig): values in line, and a value threshold of 64 bytes,
// so that writes, fsyncs and creations of the value log fail too.
var faultConfigs = []struct {
	name string
	cfg  byte
}{{"inline", 0x0d}, {"values", 0x1d}}

// TestFailpoints fails every failpoint at every time the recorded workload
// passes it, in a run of its own. The call that hits a log failure must
// get ErrFailed and so must every later call (fail-stop: memory may be
// ahead of the disk); a snapshot failure is reported to the Checkpoint or
// Close that hit it while the engine goes on. Then the directory is
// reopened twice - as it was at the failing moment (a crash there) and as
// the engine left it - and the state must be the model's after some prefix
// of the calls that includes every acknowledged one.
func TestFailpoints(t *testing.T) {
	t.Parallel()
	for _, c := range faultConfigs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			failpoints(t, c.cfg)
		})
	}
}

func failpoints(t *testing.T, cfg byte) {
	clean := record(t, faultWorkload(cfg))
	hits := map[string]int{}
	for _, e := range clean.events {
		hits[e.name]++
	}
	total := 0
	for _, name := range append(slices.Clone(logPoints), snapshotPoints...) {
		if hits[name] == 0 {
			t.Errorf("the workload never passes failpoint %q", name)
		}
		// With -short, the first and the last time each point is passed.
		for h := 1; h <= hits[name]; h++ {
			if testing.Short() && h != 1 && h != hits[name] {
				continue
			}
			t.Run(fmt.Sprintf("%s/%d", name, h), func(t *testing.T) {
				t.Parallel()
				checkFailpoint(t, cfg, name, h)
			})
			total++
		}
	}
	t.Logf("%d injected failures: %v", total, hits)
}

func checkFailpoint(t *testing.T, cfg byte, name string, hit int) {
	o := faultWorkload(cfg)
	o.lean = true
	o.inject = func(n string, h int) bool { return n == name && h == hit }
	rec := record(t, o)
	r := rec.r
	e := rec.injected
	if e == nil {
		t.Fatalf("the run never reached %s #%d", name, hit)
	}
	if slices.Contains(logPoints, name) {
		if !r.failed {
			t.Fatalf("the engine went on after a failed log %s (%s)", name, e.desc)
		}
		if !r.closeFailed {
			checkFailStop(t, r)
		}
	} else {
		if r.snapshotFailures == 0 {
			t.Fatalf("no call reported the failed snapshot step %s (%s)", name, e.desc)
		}
		if r.failed && !r.closeFailed {
			t.Fatalf("a failed snapshot step %s stopped the engine:\n  %s", name, strings.Join(r.hist[max(len(r.hist)-3, 0):], "\n  "))
		}
		if !r.failed {
			r.checkState("after the failed snapshot")
		}
	}
	dir := scratchDir(t)
	rec.checkImage(t, dir, e.img, e.ack, e.applied, "crash at "+e.where(), false)
	r.db.Close()
	r.db = nil
	rec.checkImage(t, dir, capture(t, r.dir), r.ackSeq, r.m.Seq, fmt.Sprintf("reopen after %s #%d failed", name, hit), false)
}

// TestFailEveryOp fails, in a run of its own, each file operation that
// changes the data directory while the recorded workload runs (every
// write, fsync, creation, rename, removal and truncation of the log and
// the snapshots), whatever the point is named: the failpoints mark some
// of them, this covers them all. A failed log operation must stop the
// engine (fail-stop, unless it was the removal of a temporary file, which
// is best effort); a failed snapshot step is reported to the Checkpoint or
// Close that hit it. Then the directory is reopened as it was at the
// failing moment and as the engine left it, as TestFailpoints does.
func TestFailEveryOp(t *testing.T) {
	t.Parallel()
	for _, c := range faultConfigs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			failEveryOp(t, c.cfg)
		})
	}
}

func failEveryOp(t *testing.T, cfg byte) {
	kinds := map[string]int{}
	total, values := 0, 0
	valueOps := map[int]bool{}
	o := faultWorkload(cfg)
	o.lean = true
	o.injectOp = func(op errorfs.Op, n int) bool {
		kinds[op.Kind.String()]++
		total = n
		if strings.Contains(filepath.ToSlash(op.Path), "/vlog") {
			// With -short, every third operation of the value log.
			valueOps[n] = values%shortOr("", 1, 3) == 0
			values++
		}
		return false
	}
	record(t, o)
	if total < 100 {
		t.Fatalf("the workload makes only %d file operations", total)
	}
	if cfg&0x10 != 0 && values == 0 {
		t.Fatal("the workload makes no operation on the value log")
	}
	// With -short, every 25th operation, the last, and a sample of those
	// of the value log.
	stride := shortOr("", 1, 25)
	swept := 0
	for n := 1; n <= total; n++ {
		if n%stride != 1%stride && n != total && !valueOps[n] {
			continue
		}
		swept++
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			checkFailOp(t, cfg, n)
		})
	}
	t.Logf("%d of %d file operations failed in turn (%d of the value log): %v", swept, total, values, kinds)
}

func checkFailOp(t *testing.T, cfg byte, n int) {
	o := faultWorkload(cfg)
	o.lean = true
	var failed errorfs.Op
	o.injectOp = func(op errorfs.Op, i int) bool {
		if i == n {
			failed = op
			return true
		}
		return false
	}
	rec := record(t, o)
	r := rec.r
	e := rec.injected
	if e == nil {
		t.Fatalf("the run never reached operation %d", n)
	}
	rel := strings.TrimPrefix(filepath.ToSlash(failed.Path), r.dir+"/")
	quiet := failed.Kind == errorfs.OpRemove && (strings.HasSuffix(rel, ".TEMP") || strings.HasSuffix(rel, ".tmp"))
	switch {
	case quiet:
	case inDir(rel, "wal") || rel == "wal" || inDir(rel, "vlog") || rel == "vlog":
		if !r.failed {
			t.Fatalf("the engine went on after a failed log operation (%s %s, %s)", failed.Kind, rel, e.desc)
		}
		if !r.closeFailed {
			checkFailStop(t, r)
		}
	case inDir(rel, "snap") || rel == "snap":
		if r.snapshotFailures == 0 && !r.failed {
			t.Fatalf("no call reported the failed snapshot operation %s %s (%s)", failed.Kind, rel, e.desc)
		}
	}
	if !r.failed {
		r.checkState("after the failed operation")
	}
	dir := scratchDir(t)
	rec.checkImage(t, dir, e.img, e.ack, e.applied, "crash at "+e.where(), false)
	r.db.Close()
	r.db = nil
	rec.checkImage(t, dir, capture(t, r.dir), r.ackSeq, r.m.Seq, fmt.Sprintf("reopen after %s %s failed", failed.Kind, rel), false)
}

// checkFailStop requires every kind of call to fail with ErrFailed.
func checkFailStop(t *testing.T, r *runner) {
	t.Helper()
	q := r.q(queues[0])
	l, lq := r.pickLease(0)
	calls := map[string]error{}
	_, calls["enqueue"] = q.Enqueue(ctx, engine.Task{})
	_, calls["claim"] = q.Claim(ctx, "w0", time.Second, 1)
	fq := r.q(lq) // a lease is presented to its own queue
	calls["complete"] = errOnly(fq.Complete(ctx, l, engine.Done{}))
	calls["fail"] = fq.Fail(ctx, l, engine.Failure{})
	_, calls["heartbeat"] = hb(ctx, fq, l, time.Second, nil)
	calls["snooze"] = fq.Snooze(ctx, l, 0)
	calls["cancel"] = q.Cancel(ctx, 1)
	calls["redrive"] = q.Redrive(ctx, 1)
	_, calls["kv commit"] = r.db.KV(nsProd).Commit(ctx, engine.Set("a", nil))
	_, calls["get"] = q.Get(ctx, 1)
	_, calls["list"] = q.List(ctx, engine.ListOptions{State: engine.Ready})
	_, calls["counts"] = q.Counts(ctx)
	_, calls["kv get"] = r.db.KV(nsProd).Get(ctx, "a")
	_, calls["scan"] = r.db.KV(nsProd).Scan(ctx, engine.ScanOptions{})
	cctx, cancel := contextWithTimeout(time.Second)
	_, calls["claim wait"] = q.ClaimWait(cctx, "w0", time.Second, 1)
	cancel()
	for what, err := range calls {
		if !errors.Is(err, engine.ErrFailed) {
			t.Errorf("%s on a failed engine: %v, want ErrFailed", what, err)
		}
	}
	if err := r.db.Checkpoint(ctx); err == nil {
		t.Error("checkpoint on a failed engine succeeded")
	}
}

// TestGroupCommitFsyncFailure fails one fsync while many goroutines commit:
// no commit the failed fsync was to cover may report success, no call that
// starts after it may succeed, and every commit that did report success is
// there after reopening.
func TestGroupCommitFsyncFailure(t *testing.T) {
	t.Parallel()
	for round := range 5 {
		var failedAt atomic.Int64 // unix nanos of the injected failure
		var syncs atomic.Int32
		dir := scratchDir(t)
		// Fail the log's nth fsync.
		opts := engine.Options{Logger: quiet, SnapshotBytes: -1}
		enginetest.FS(&opts, errorfs.Wrap(fsOf(dir), errorfs.InjectorFunc(func(op errorfs.Op) error {
			if op.Kind == errorfs.OpSync && inDir(filepath.ToSlash(op.Path), filepath.ToSlash(dir)+"/wal") && syncs.Add(1) == int32(20+10*round) {
				failedAt.Store(time.Now().UnixNano())
				return errInjected
			}
			return nil
		})))
		db, err := engine.Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		type outcome struct {
			key        string
			start, end int64
			err        error
		}
		var mu sync.Mutex
		var outs []outcome
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					key := fmt.Sprintf("w%d-%d", w, i)
					start := time.Now().UnixNano()
					_, err := db.KV(nsProd).Commit(ctx, engine.Set(key, []byte(key)))
					mu.Lock()
					outs = append(outs, outcome{key, start, time.Now().UnixNano(), err})
					mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
		}
		wg.Wait()
		db.Close()
		if failedAt.Load() == 0 {
			t.Fatal("the injected fsync failure never happened")
		}
		db, err = openDB(dir, engine.Options{Logger: quiet, SnapshotBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		ok, lost := 0, 0
		for _, o := range outs {
			if o.err == nil {
				ok++
				if o.start > failedAt.Load() {
					t.Errorf("a commit started after the failed fsync succeeded (%s)", o.key)
				}
				if _, err := db.KV(nsProd).Get(ctx, o.key); err != nil {
					lost++
					t.Errorf("commit %s was acknowledged and is gone after reopening: %v", o.key, err)
				}
			} else if !errors.Is(o.err, engine.ErrFailed) {
				t.Errorf("commit %s failed with %v, want ErrFailed", o.key, o.err)
			}
		}
		if err := db.Verify(); err != nil {
			t.Fatal(err)
		}
		db.Close()
		if round == 0 {
			t.Logf("%d commits acknowledged before the failure, %d failed, %d lost", ok, len(outs)-ok, lost)
		}
	}
}

// TestDiskFull runs the engine on a tiny tmpfs until the disk is full: the
// first failed write stops it with ErrFailed, nothing reports success
// after, and once there is room again the directory reopens with every
// acknowledged write. It needs to mount a tmpfs (root with CAP_SYS_ADMIN),
// and skips otherwise.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		snapshot int64
	}{{"log only", -1}, {"with snapshots", 16 << 10}} {
		t.Run(c.name, func(t *testing.T) {
			mnt := t.TempDir()
			if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=192k"); err != nil {
				t.Skipf("cannot mount a small tmpfs to fill (needs root with CAP_SYS_ADMIN): %v", err)
			}
			defer syscall.Unmount(mnt, syscall.MNT_DETACH)
			dir := filepath.Join(mnt, "db")
			clock := engine.NewManualClock(t0)
			opts := engine.Options{Clock: clock, Logger: quiet, SnapshotBytes: c.snapshot, SegmentBytes: 8 << 10}
			db, err := engine.Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			m := NewModel(Config{}, t0)
			// The model's view after each batch, from the last acknowledged
			// one on: recovery may end at any of them, and only there.
			views := map[uint64]View{0: m.View(queues, allNS)}
			m.OnBatch = func(m *Model) { views[m.Seq] = m.View(queues, allNS) }
			q := queues[0]
			var ack uint64
			pad := strings.Repeat("x", 900)
			var firstErr error
			for i := 0; i < 1000 && firstErr == nil; i++ {
				task := engine.Task{Payload: []byte(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, pad))}
				_, firstErr = db.Queue(q.NS, q.Name).Enqueue(ctx, task)
				if _, err := m.Enqueue(q, []engine.Task{task}, nil); err != nil {
					t.Fatal(err)
				}
				if firstErr == nil {
					ack = m.Seq
					clear(views)
					views[ack] = m.View(queues, allNS)
				}
			}
			if firstErr == nil {
				t.Fatal("the disk never filled up")
			}
			if !errors.Is(firstErr, engine.ErrFailed) {
				t.Fatalf("the first failed write returned %v, want ErrFailed", firstErr)
			}
			if _, err := db.Queue(q.NS, q.Name).Enqueue(ctx, engine.Task{}); !errors.Is(err, engine.ErrFailed) {
				t.Fatalf("an enqueue after the disk filled returned %v, want ErrFailed", err)
			}
			if _, err := db.Queue(q.NS, q.Name).Claim(ctx, "w", time.Second, 1); !errors.Is(err, engine.ErrFailed) {
				t.Fatalf("a claim after the disk filled returned %v, want ErrFailed", err)
			}
			db.Close()
			// Room again.
			if err := syscall.Mount("tmpfs", mnt, "tmpfs", syscall.MS_REMOUNT, "size=64m"); err != nil {
				t.Fatalf("remount bigger: %v", err)
			}
			db, err = engine.Open(dir, opts)
			if err != nil {
				t.Fatalf("reopen with room again: %v", err)
			}
			defer db.Close()
			v, err := readView(db)
			if err != nil {
				t.Fatal(err)
			}
			if v.Seq < ack || v.Seq > m.Seq {
				t.Fatalf("recovered batch %d, acknowledged %d, written at most %d", v.Seq, ack, m.Seq)
			}
			if d := Diff(v.String(), views[v.Seq].String()); d != "" {
				t.Fatalf("recovered state is not the model's after batch %d: %s", v.Seq, d)
			}
			if err := db.Verify(); err != nil {
				t.Fatal(err)
			}
			// It takes writes again.
			if _, err := db.Queue(q.NS, q.Name).Enqueue(ctx, engine.Task{}); err != nil {
				t.Fatal(err)
			}
			t.Logf("disk full after %d acknowledged enqueues (%v); recovered %d", ack, firstErr, v.Seq)
		})
	}
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}
