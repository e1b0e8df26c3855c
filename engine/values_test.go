package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/internal/vfs"
	"github.com/docketdb/docket/internal/vfs/errorfs"
)

// bigJSON is a JSON string value of n bytes in all, different for each i.
func bigJSON(i, n int) []byte {
	head := fmt.Sprintf(`"%d-`, i)
	return []byte(head + strings.Repeat("x", n-len(head)-1) + `"`)
}

// dirSize is the size of the files under dir.
func dirSize(t *testing.T, fsys vfs.FS, dir string) int64 {
	t.Helper()
	var n int64
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if fi, err := fsys.Stat(dir + "/" + e.Name()); err == nil && !fi.IsDir() {
			n += fi.Size()
		}
	}
	return n
}

// newMemFS returns a strict memory file system whose /data survives a
// power loss.
func newMemFS(t *testing.T) *vfs.MemFS {
	t.Helper()
	mem := vfs.NewMem()
	if err := mem.MkdirAll("/data", 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := mem.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	d.Close()
	return mem
}

// TestValuesOutOfMemory: payloads, results and progress records at or
// over the threshold are kept in the value log, not in memory nor in
// snapshots, and every read returns them as they were, before and after
// a reopen; smaller values stay in line.
func TestValuesOutOfMemory(t *testing.T) {
	t.Parallel()
	const n, size = 40, 4 << 10
	e := newEnv(t, false, func(o *Options) { o.ValueThreshold = 1024; o.RetainCompleted = time.Hour })
	q := e.q("q")
	want := map[uint64][]byte{}
	for i := range n {
		p := bigJSON(i, size)
		if i%4 == 0 {
			p = []byte(fmt.Sprintf(`{"small":%d}`, i))
		}
		want[e.enqueue(q, Task{Payload: p})] = p
	}
	mem := e.db.Stats().Memory
	if mem >= n*size/2 {
		t.Fatalf("the state takes %d bytes of memory for %d payloads of %d bytes: the values are in memory", mem, n, size)
	}

	check := func(when string) {
		t.Helper()
		for id, p := range want {
			info, err := q.Get(ctx, id)
			if err != nil || !bytes.Equal(info.Payload, p) {
				t.Fatalf("%s: Get(%d): %v, payload of %d bytes, want %d", when, id, err, len(info.Payload), len(p))
			}
		}
		page, err := q.List(ctx, ListOptions{State: Ready, Limit: n})
		if err != nil || len(page.Tasks) != len(want) {
			t.Fatalf("%s: List: %d tasks, %v", when, len(page.Tasks), err)
		}
		for _, ti := range page.Tasks {
			if !bytes.Equal(ti.Payload, want[ti.ID]) {
				t.Fatalf("%s: List: task %d has a payload of %d bytes, want %d", when, ti.ID, len(ti.Payload), len(want[ti.ID]))
			}
		}
		sp, err := q.Search(ctx, SearchOptions{Limit: n})
		if err != nil || len(sp.Tasks) != len(want) {
			t.Fatalf("%s: Search: %d tasks, %v", when, len(sp.Tasks), err)
		}
		for _, ti := range sp.Tasks {
			if !bytes.Equal(ti.Payload, want[ti.ID]) {
				t.Fatalf("%s: Search: task %d differs", when, ti.ID)
			}
		}
	}
	check("before a reopen")
	if err := e.db.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if snap := dirSize(t, vfs.Or(nil), e.dir+"/snap"); snap >= n*size/2 {
		t.Fatalf("the snapshot takes %d bytes: it holds the values", snap)
	}
	e.reopen()
	check("after a reopen")

	// Claims read the payloads; progress and results go out of line too.
	ls, err := q.Claim(ctx, "w", time.Minute, n)
	if err != nil || len(ls) != n {
		t.Fatalf("claim: %d, %v", len(ls), err)
	}
	for _, l := range ls {
		if !bytes.Equal(l.Payload, want[l.ID]) {
			t.Fatalf("lease of task %d: payload of %d bytes, want %d", l.ID, len(l.Payload), len(want[l.ID]))
		}
	}
	prog, res := bigJSON(1000, 2000), bigJSON(2000, 3000)
	l := ls[1]
	if err := q.Heartbeat(ctx, &l, time.Minute, prog); err != nil {
		t.Fatal(err)
	}
	if info := e.get(q, l.ID); !bytes.Equal(info.Progress, prog) {
		t.Fatalf("progress of %d bytes, want %d", len(info.Progress), len(prog))
	}
	if _, err := q.Complete(ctx, l, Done{Result: res}); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	info := e.get(q, l.ID)
	if !bytes.Equal(info.Result, res) || !bytes.Equal(info.Progress, prog) || !bytes.Equal(info.Payload, want[l.ID]) {
		t.Fatalf("completed task: result %d bytes, progress %d, payload %d", len(info.Result), len(info.Progress), len(info.Payload))
	}

	// A lease that expires hands its progress to the next claim.
	l2 := ls[2]
	if err := q.Heartbeat(ctx, &l2, time.Second, prog); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Minute)
	again, err := q.Claim(ctx, "w2", time.Minute, n)
	if err != nil || len(again) != n-1 {
		t.Fatalf("claim after expiry: %d, %v", len(again), err)
	}
	for _, a := range again {
		if !bytes.Equal(a.Payload, want[a.ID]) {
			t.Fatalf("reclaimed task %d: payload differs", a.ID)
		}
		if a.ID == l2.ID && !bytes.Equal(a.Progress, prog) {
			t.Fatalf("reclaimed task %d: progress of %d bytes", a.ID, len(a.Progress))
		}
	}
}

// TestValuesThresholdOff: a negative threshold keeps every value in
// memory and writes no value log.
func TestValuesThresholdOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.ValueThreshold = -1 })
	q := e.q("q")
	p := bigJSON(1, 8<<10)
	id := e.enqueue(q, Task{Payload: p})
	if e.db.Stats().Memory < 8<<10 {
		t.Fatalf("memory %d: the payload is not in memory", e.db.Stats().Memory)
	}
	if _, err := vfs.Or(nil).Stat(e.dir + "/vlog"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a value log exists with the threshold off: %v", err)
	}
	if got := e.get(q, id); !bytes.Equal(got.Payload, p) {
		t.Fatal("payload differs")
	}
}

// TestValuesSurvivePowerLoss: with SyncAlways, every task acknowledged
// before a power loss is there after it with its payload, at every point
// of a run that also takes snapshots (which refer to the values and must
// not outlive them).
func TestValuesSurvivePowerLoss(t *testing.T) {
	t.Parallel()
	mem := newMemFS(t)
	const dir = "/data/db"
	opts := Options{Durability: SyncAlways, ValueThreshold: 256, SnapshotBytes: 4 << 10, SegmentBytes: 4 << 10,
		valueFileSize: 8 << 10, Logger: quietLogger(), fs: mem}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q := db.Queue(ns, "q")
	acked := map[uint64][]byte{}
	for i := range 60 {
		p := bigJSON(i, 300+i*37)
		enq, err := q.Enqueue(ctx, Task{Payload: p})
		if err != nil {
			t.Fatal(err)
		}
		acked[enq.ID] = p
		if i%7 != 0 {
			continue
		}
		o := opts
		o.fs = mem.CrashClone()
		o.SnapshotBytes = -1
		after, err := Open(dir, o)
		if err != nil {
			t.Fatalf("open after a power loss at task %d: %v", i, err)
		}
		aq := after.Queue(ns, "q")
		for id, p := range acked {
			info, err := aq.Get(ctx, id)
			if err != nil || !bytes.Equal(info.Payload, p) {
				t.Fatalf("power loss after task %d: task %d: %v (payload %d bytes, want %d)", i, id, err, len(info.Payload), len(p))
			}
		}
		ls, err := aq.Claim(ctx, "w", time.Minute, MaxBatch)
		if err != nil || len(ls) != len(acked) {
			t.Fatalf("power loss after task %d: claimed %d of %d: %v", i, len(ls), len(acked), err)
		}
		after.Close()
	}
}

// TestValuesWriteFails: a value log that cannot be written fails the
// commit that needed it, and the engine stops taking writes (as for the
// log), with nothing acknowledged lost.
func TestValuesWriteFails(t *testing.T) {
	t.Parallel()
	mem := newMemFS(t)
	broken := false
	fsys := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if broken && strings.Contains(op.Path, "/vlog/") && (op.Kind == errorfs.OpWrite || op.Kind == errorfs.OpCreate) {
			return errorfs.ErrInjected
		}
		return nil
	}))
	const dir = "/data/db"
	opts := Options{Durability: SyncAlways, ValueThreshold: 256, Logger: quietLogger(), fs: fsys}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	q := db.Queue(ns, "q")
	p := bigJSON(0, 1000)
	enq, err := q.Enqueue(ctx, Task{Payload: p})
	if err != nil {
		t.Fatal(err)
	}
	broken = true
	if _, err := q.Enqueue(ctx, Task{Payload: bigJSON(1, 1000)}); !errors.Is(err, errorfs.ErrInjected) && !errors.Is(err, ErrFailed) {
		t.Fatalf("enqueue with the value log failing: %v", err)
	}
	if _, err := q.Enqueue(ctx, Task{Payload: []byte(`1`)}); err == nil {
		t.Fatal("the engine took a write after its value log failed")
	}
	db.Close()
	broken = false
	o := opts
	o.fs = mem.CrashClone()
	db, err = Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	info, err := db.Queue(ns, "q").Get(ctx, enq.ID)
	if err != nil || !bytes.Equal(info.Payload, p) {
		t.Fatalf("the acknowledged task: %v, payload of %d bytes", err, len(info.Payload))
	}
}

// TestValuesOutOfTheBudget: the memory budget counts a value in the value
// log as its reference, so a budget that takes a few dozen tasks of 1 KiB
// in memory takes several times more with their payloads on disk.
func TestValuesOutOfTheBudget(t *testing.T) {
	t.Parallel()
	taken := map[int]int{}
	for _, threshold := range []int{-1, 512} {
		e := newEnv(t, false, func(o *Options) { o.MaxMemory = 64 << 10; o.Logger = quiet; o.ValueThreshold = threshold })
		taken[threshold] = fill(t, e.q("q"))
	}
	if taken[512] < 2*taken[-1] {
		t.Fatalf("a budget of 64 KiB took %d tasks of 1 KiB in memory and %d with the payloads on disk", taken[-1], taken[512])
	}
}

// TestValuesReadOnly: a DB opened read-only reads the values kept on disk.
func TestValuesReadOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.ValueThreshold = 256 })
	p := bigJSON(7, 4000)
	id := e.enqueue(e.q("q"), Task{Payload: p})
	if err := e.db.Close(); err != nil {
		t.Fatal(err)
	}
	e.db = nil
	db, err := OpenReadOnly(e.dir, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	info, err := db.Queue(ns, "q").Get(ctx, id)
	if err != nil || !bytes.Equal(info.Payload, p) {
		t.Fatalf("read-only Get: %v, payload of %d bytes", err, len(info.Payload))
	}
	page, err := db.Queue(ns, "q").List(ctx, ListOptions{State: Ready})
	if err != nil || len(page.Tasks) != 1 || !bytes.Equal(page.Tasks[0].Payload, p) {
		t.Fatalf("read-only List: %v", err)
	}
}

// TestValuesThresholdTurnedOff: a directory whose tasks keep values on
// disk, reopened with the threshold off, still reads them; new values stay
// in memory.
func TestValuesThresholdTurnedOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false, func(o *Options) { o.ValueThreshold = 256 })
	q := e.q("q")
	p := bigJSON(1, 4000)
	id := e.enqueue(q, Task{Payload: p})
	e.opts.ValueThreshold = -1
	e.reopen()
	if got := e.get(q, id); !bytes.Equal(got.Payload, p) {
		t.Fatalf("a payload on disk, the threshold off: %d bytes, want %d", len(got.Payload), len(p))
	}
	before := e.db.Stats()
	p2 := bigJSON(2, 8000)
	id2 := e.enqueue(q, Task{Payload: p2})
	after := e.db.Stats()
	if after.Memory-before.Memory < 8000 || after.ValueLogBytes != before.ValueLogBytes {
		t.Fatalf("a new payload with the threshold off: memory +%d, value log %d -> %d bytes",
			after.Memory-before.Memory, before.ValueLogBytes, after.ValueLogBytes)
	}
	ls := e.claim(q, 2)
	if len(ls) != 2 || !bytes.Equal(ls[0].Payload, p) || ls[1].ID != id2 || !bytes.Equal(ls[1].Payload, p2) {
		t.Fatalf("claimed %d leases with the wrong payloads", len(ls))
	}
}
