//go:build linux

package fuzz

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/enginetest"
	"github.com/docketdb/docket/internal/vfs"
	"github.com/docketdb/docket/internal/vfs/errorfs"
)

// gate is an errorfs injector that parks the first operation match
// accepts, once armed, until released, so a test can act while a commit
// is stuck at that point.
type gate struct {
	match   func(errorfs.Op) bool
	mu      sync.Mutex
	armed   bool
	reached chan struct{}
	release chan struct{}
}

func newGate(match func(errorfs.Op) bool) *gate {
	return &gate{match: match, reached: make(chan struct{}), release: make(chan struct{})}
}

func (g *gate) MaybeError(op errorfs.Op) error {
	g.mu.Lock()
	park := g.armed && g.match(op)
	if park {
		g.armed = false
	}
	g.mu.Unlock()
	if park {
		close(g.reached)
		<-g.release
	}
	return nil
}

func (g *gate) arm() {
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
}

// The tests below park a commit at its first write to the log - applied in
// memory, not yet written - and make a second call meanwhile. Whatever the
// second call answers must survive a crash at the moment it returns: if it
// answered from the parked commit's state without waiting for it to be
// durable, a crash then takes back what the caller was told.

// durabilityCase is one such probe.
type durabilityCase struct {
	name string
	// setup prepares the state (durably) and returns what first and second
	// need.
	setup func(t *testing.T, db *engine.DB) any
	// first is the commit that gets parked.
	first func(db *engine.DB, x any) error
	// second runs while first is parked; it returns an error if its answer
	// is not the expected one.
	second func(db *engine.DB, x any) error
	// holds reports whether what second answered is still true of a DB
	// opened on the crash image.
	holds func(db *engine.DB, x any) bool
	// threshold is Options.ValueThreshold (0: the default).
	threshold int
}

var qa = func(db *engine.DB) engine.Queue { return db.Queue(nsProd, "a") }

// bigPayload crosses a value threshold of 64 bytes.
var bigPayload = []byte(`"` + strings.Repeat("value log ", 12) + `"`)

// TestAnswersRestOnDurableState: under SyncAlways, a call's answer must not
// rest on a commit that a crash can still take back. A deduplicated enqueue
// tells the caller the task exists; an assertion-only transaction returns
// the version it checked.
func TestAnswersRestOnDurableState(t *testing.T) {
	t.Parallel()
	for _, c := range []durabilityCase{{
		name:  "deduplicated enqueue",
		setup: func(*testing.T, *engine.DB) any { return nil },
		first: func(db *engine.DB, _ any) error {
			_, err := qa(db).Enqueue(ctx, engine.Task{IdempotencyKey: "k", Payload: []byte(`"a"`)})
			return err
		},
		second: func(db *engine.DB, _ any) error {
			res, err := qa(db).Enqueue(ctx, engine.Task{IdempotencyKey: "k", Payload: []byte(`"b"`)})
			if err == nil && !res.Deduplicated {
				return fmt.Errorf("not deduplicated: %+v", res)
			}
			return err
		},
		holds: func(db *engine.DB, _ any) bool {
			page, err := qa(db).List(ctx, engine.ListOptions{State: engine.Ready})
			return err == nil && len(page.Tasks) == 1 && page.Tasks[0].IdempotencyKey == "k"
		},
	}, {
		name:  "assertion-only transaction",
		setup: func(*testing.T, *engine.DB) any { return nil },
		first: func(db *engine.DB, _ any) error {
			_, err := db.KV(nsProd).Commit(ctx, engine.Set("kk", []byte("v")))
			return err
		},
		second: func(db *engine.DB, _ any) error {
			_, err := db.KV(nsProd).Commit(ctx, engine.IfExists("kk"))
			return err
		},
		holds: func(db *engine.DB, _ any) bool {
			_, err := db.KV(nsProd).Get(ctx, "kk")
			return err == nil
		},
	}, {
		// The payload lives in the value log, written and synced before
		// the batch: a read of it must not answer before the batch is
		// durable either, and must find the same bytes after a crash.
		name:      "read of a value in the value log",
		threshold: 64,
		setup:     func(*testing.T, *engine.DB) any { return nil },
		first: func(db *engine.DB, _ any) error {
			_, err := qa(db).Enqueue(ctx, engine.Task{Payload: bigPayload})
			return err
		},
		second: func(db *engine.DB, _ any) error {
			info, err := qa(db).Get(ctx, 1)
			if err == nil && !bytes.Equal(info.Payload, bigPayload) {
				return fmt.Errorf("payload %q", info.Payload)
			}
			return err
		},
		holds: func(db *engine.DB, _ any) bool {
			info, err := qa(db).Get(ctx, 1)
			return err == nil && bytes.Equal(info.Payload, bigPayload)
		},
	}, {
		name:  "read",
		setup: func(*testing.T, *engine.DB) any { return nil },
		first: func(db *engine.DB, _ any) error {
			_, err := qa(db).Enqueue(ctx, engine.Task{})
			return err
		},
		second: func(db *engine.DB, _ any) error {
			n, err := qa(db).Counts(ctx)
			if err == nil && n.Ready != 1 {
				return fmt.Errorf("counts %+v", n)
			}
			return err
		},
		holds: func(db *engine.DB, _ any) bool {
			n, err := qa(db).Counts(ctx)
			return err == nil && n.Ready == 1
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			checkDurableAnswer(t, c)
		})
	}
}

// TestRefusalsRestOnDurableState is the same for refusals: a call refused
// because of a commit that is not durable yet tells its caller something a
// crash can take back - the task is gone (ErrNotFound), the lease is lost
// (ErrLeaseLost), the key exists (ErrConflict) - while after the crash the
// task, the lease or the absence of the key is back.
func TestRefusalsRestOnDurableState(t *testing.T) {
	t.Parallel()
	claimOne := func(t *testing.T, db *engine.DB) any {
		if _, err := qa(db).Enqueue(ctx, engine.Task{}); err != nil {
			t.Fatal(err)
		}
		ls, err := qa(db).Claim(ctx, "w", time.Minute, 1)
		if err != nil || len(ls) != 1 {
			t.Fatalf("claim: %v %v", ls, err)
		}
		return ls[0]
	}
	for _, c := range []durabilityCase{{
		name:  "not found",
		setup: claimOne,
		first: func(db *engine.DB, x any) error {
			return errOnly(qa(db).Complete(ctx, x.(engine.Lease), engine.Done{}))
		},
		second: func(db *engine.DB, x any) error {
			if err := qa(db).Cancel(ctx, x.(engine.Lease).ID); !errors.Is(err, engine.ErrNotFound) {
				return fmt.Errorf("cancel: %v, want ErrNotFound", err)
			}
			return nil
		},
		holds: func(db *engine.DB, x any) bool {
			_, err := qa(db).Get(ctx, x.(engine.Lease).ID)
			return errors.Is(err, engine.ErrNotFound)
		},
	}, {
		name:  "lease lost",
		setup: claimOne,
		first: func(db *engine.DB, x any) error { return qa(db).Cancel(ctx, x.(engine.Lease).ID) },
		second: func(db *engine.DB, x any) error {
			if _, err := qa(db).Complete(ctx, x.(engine.Lease), engine.Done{}); !errors.Is(err, engine.ErrLeaseLost) {
				return fmt.Errorf("complete: %v, want ErrLeaseLost", err)
			}
			return nil
		},
		holds: func(db *engine.DB, x any) bool {
			info, err := qa(db).Get(ctx, x.(engine.Lease).ID)
			return err != nil || info.State != engine.InFlight || info.Token != x.(engine.Lease).Token
		},
	}, {
		name:  "conflict",
		setup: func(*testing.T, *engine.DB) any { return nil },
		first: func(db *engine.DB, _ any) error {
			_, err := db.KV(nsProd).Commit(ctx, engine.Set("lock", []byte("a")))
			return err
		},
		second: func(db *engine.DB, _ any) error {
			if _, err := db.KV(nsProd).Commit(ctx, engine.IfAbsent("lock"), engine.Set("lock", []byte("b"))); !errors.Is(err, engine.ErrConflict) {
				return fmt.Errorf("commit: %v, want ErrConflict", err)
			}
			return nil
		},
		holds: func(db *engine.DB, _ any) bool {
			_, err := db.KV(nsProd).Get(ctx, "lock")
			return err == nil
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			checkDurableAnswer(t, c)
		})
	}
}

func checkDurableAnswer(t *testing.T, c durabilityCase) {
	dir := scratchDir(t)
	g := newGate(func(op errorfs.Op) bool { return op.Kind == errorfs.OpWrite && strings.HasPrefix(op.Path, dir+"/wal/") })
	opts := engine.Options{Durability: engine.SyncAlways, SnapshotBytes: -1, Logger: quiet, Clock: engine.NewManualClock(t0),
		ValueThreshold: c.threshold}
	enginetest.FS(&opts, errorfs.Wrap(scratch, g))
	db, err := engine.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	x := c.setup(t, db)
	g.arm()
	first := make(chan error, 1)
	go func() { first <- c.first(db, x) }()
	<-g.reached
	done := make(chan error, 1)
	go func() { done <- c.second(db, x) }()
	var img image
	select {
	case err := <-done:
		// Answered while the first commit is not even written: a crash now
		// shows whether the answer was honest.
		img = capture(t, dir)
		close(g.release)
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(200 * time.Millisecond):
		// It waits, as it should; let the first commit finish.
		close(g.release)
		err := <-done
		img = capture(t, dir)
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	crashDir := scratchDir(t)
	img.materialize(t, crashDir)
	crashed, err := openDB(crashDir, engine.Options{Logger: quiet, SnapshotBytes: -1})
	if err != nil {
		t.Fatalf("open the crash image: %v", err)
	}
	defer crashed.Close()
	if err := crashed.Verify(); err != nil {
		t.Fatalf("verify the crash image: %v", err)
	}
	if !c.holds(crashed, x) {
		t.Fatal("the call answered from a commit that was not durable yet: after a crash at the moment it returned, its answer is no longer true")
	}
}

// TestCheckpointReportsLogFailure: once a write or fsync of the log fails
// the engine returns ErrFailed, including from the call that hit the
// failure. A Checkpoint whose log truncation (or log fsync) fails returns
// the log's error without ErrFailed, although the engine is failed from
// then on.
func TestCheckpointReportsLogFailure(t *testing.T) {
	t.Parallel()
	for _, point := range []string{"truncate", "sync"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			var armed sync.Map
			opts := engine.Options{SnapshotBytes: -1, Logger: quiet, Durability: engine.SyncNever, Clock: engine.NewManualClock(t0)}
			enginetest.Failpoint(&opts, func(name string) error {
				if _, ok := armed.Load(name); ok {
					return errors.New("injected " + name + " failure")
				}
				return nil
			})
			db, err := openDB(scratchDir(t), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			q := db.Queue(nsProd, "a")
			for range 3 {
				if _, err := q.Enqueue(ctx, engine.Task{}); err != nil {
					t.Fatal(err)
				}
				if err := db.Checkpoint(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := q.Enqueue(ctx, engine.Task{}); err != nil {
				t.Fatal(err)
			}
			armed.Store(point, true)
			err = db.Checkpoint(ctx)
			if _, probe := q.Counts(ctx); !errors.Is(probe, engine.ErrFailed) {
				t.Fatalf("the engine should be failed after the %s failure: %v", point, probe)
			}
			if !errors.Is(err, engine.ErrFailed) {
				t.Fatalf("Checkpoint hit a failed log %s and returned %v, which does not wrap ErrFailed", point, err)
			}
		})
	}
}

// TestNewDataDirIsDurable: when Open creates the data directory, the
// directory entry itself must be made durable (by syncing its parent)
// before anything written inside it is acknowledged; otherwise a power
// loss can take the whole directory, and every acknowledged write with it.
// wal syncs the parent of every directory it creates, but the engine
// creates the data directory first, so wal finds it existing. On the
// strict memory file system, a power loss right after Open and after each
// acknowledged write, with small segments and snapshots so that segments
// are started and the log truncated, must keep every acknowledged write.
func TestNewDataDirIsDurable(t *testing.T) {
	t.Parallel()
	mem := vfs.NewMem()
	if err := mem.MkdirAll("/parent", 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := mem.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	if err := root.Sync(); err != nil { // the parent exists durably; data does not yet
		t.Fatal(err)
	}
	root.Close()
	const dir = "/parent/data"
	opts := engine.Options{Logger: quiet, Durability: engine.SyncAlways, SegmentBytes: 512, SnapshotBytes: 2 << 10}
	enginetest.FS(&opts, mem)
	db, err := engine.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// crashed opens the file system as a power loss now leaves it and
	// returns how many tasks it holds.
	crashed := func() int {
		t.Helper()
		o := engine.Options{Logger: quiet, SnapshotBytes: -1}
		enginetest.FS(&o, mem.CrashClone())
		db, err := engine.Open(dir, o)
		if err != nil {
			t.Fatalf("open after a power loss: %v", err)
		}
		defer db.Close()
		n, err := db.Queue(nsProd, "a").Counts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Verify(); err != nil {
			t.Fatal(err)
		}
		return n.Ready
	}
	if n := crashed(); n != 0 {
		t.Fatalf("a power loss right after Open: %d tasks, want none", n)
	}
	for i := 1; i <= 40; i++ {
		if _, err := db.Queue(nsProd, "a").Enqueue(ctx, engine.Task{Payload: []byte(fmt.Sprintf(`{"i":%d,"pad":"%0100d"}`, i, 0))}); err != nil {
			t.Fatal(err)
		}
		if n := crashed(); n < i {
			t.Fatalf("a power loss after %d acknowledged enqueues left %d tasks: Open created %s without syncing %s, or a write was acknowledged before it was durable",
				i, n, dir, "/parent")
		}
	}
}
