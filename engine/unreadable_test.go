package engine

import (
	"bytes"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docketdb/docket/engine/internal/verify"
	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/internal/vfs"
	"github.com/docketdb/docket/internal/vfs/errorfs"
	"github.com/docketdb/docket/internal/vlog"
)

// lockedBuffer is a bytes.Buffer a logger writes to from several
// goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// unreadEnv is a DB on a memory file system whose value log reads fail
// while failReads is set, and whose records damage can flip.
type unreadEnv struct {
	t         *testing.T
	mem       *vfs.MemFS
	db        *DB
	q         Queue
	clock     *ManualClock
	logs      *lockedBuffer
	failReads atomic.Bool
	// onRead, when set, is called before each read of the value log.
	onRead atomic.Pointer[func(errorfs.Op)]
}

const unreadDir = "/data/db"

func newUnreadEnv(t *testing.T, tweak ...func(*Options)) *unreadEnv {
	t.Helper()
	u := &unreadEnv{t: t, mem: newMemFS(t), clock: NewManualClock(t0), logs: &lockedBuffer{}}
	fsys := errorfs.Wrap(u.mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind != errorfs.OpRead || !strings.Contains(op.Path, "/vlog/") {
			return nil
		}
		if f := u.onRead.Load(); f != nil {
			(*f)(op)
		}
		if u.failReads.Load() {
			return &fs.PathError{Op: "read", Path: op.Path, Err: errorfs.ErrInjected}
		}
		return nil
	}))
	opts := Options{ValueThreshold: 256, Clock: u.clock, fs: fsys, Logger: slog.New(slog.NewTextHandler(u.logs, nil))}
	for _, f := range tweak {
		f(&opts)
	}
	db, err := Open(unreadDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	u.db, u.q = db, db.Queue(ns, "q")
	return u
}

func (u *unreadEnv) enqueue(tk Task) uint64 {
	u.t.Helper()
	enq, err := u.q.Enqueue(ctx, tk)
	if err != nil {
		u.t.Fatal(err)
	}
	return enq.ID
}

// ref is where the payload of task id is in the value log.
func (u *unreadEnv) ref(id uint64) index.ValueRef { return u.refOf(id, vlog.Payload) }

// refOf is where the value of kind of task id is in the value log.
func (u *unreadEnv) refOf(id uint64, kind vlog.Kind) index.ValueRef {
	u.t.Helper()
	c := u.db.c
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.refOf(id, kind)
	if r.IsZero() {
		u.t.Fatalf("task %d has no %s in the value log", id, kind)
	}
	return r
}

// damage flips a byte of the payload of task id where the value log keeps
// it, as a bad sector would; it returns the value's file and offset.
func (u *unreadEnv) damage(id uint64) (string, int64) { return u.damageValue(id, vlog.Payload) }

// damageValue damages the value of kind of task id.
func (u *unreadEnv) damageValue(id uint64, kind vlog.Kind) (string, int64) {
	u.t.Helper()
	r := u.refOf(id, kind)
	name := verify.FileName(r.File)
	f, err := u.mem.OpenFile(unreadDir+"/vlog/"+name, os.O_RDWR, 0)
	if err != nil {
		u.t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	at := r.Off + vlog.HeaderSize + 5
	if _, err := f.ReadAt(b, at); err != nil {
		u.t.Fatal(err)
	}
	b[0] ^= 0x55
	if _, err := f.WriteAt(b, at); err != nil {
		u.t.Fatal(err)
	}
	return name, r.Off
}

// logLines counts the log lines about unreadable values of task id.
func (u *unreadEnv) logLines(id uint64) int {
	n := 0
	for _, line := range strings.Split(u.logs.String(), "\n") {
		if strings.Contains(line, "a value in the value log cannot be read") && strings.Contains(line, " id="+utoa(id)+" ") {
			n++
		}
	}
	return n
}

func utoa(id uint64) string { return strconv.FormatUint(id, 10) }

// TestClaimSkipsUnreadablePayload: a claim that leases a task whose
// payload is damaged in the value log returns the other leases, not an
// error; the damaged task is dead-lettered at once (its attempt counted)
// with an error naming the file, the offset and the cause, so the next
// claim does not meet it again; the read is counted and logged once.
func TestClaimSkipsUnreadablePayload(t *testing.T) {
	t.Parallel()
	u := newUnreadEnv(t)
	bad := u.enqueue(Task{Payload: bigJSON(1, 1000), Priority: 5})
	p2 := bigJSON(2, 1000)
	good := u.enqueue(Task{Payload: p2})
	small := u.enqueue(Task{Payload: []byte(`{"small":1}`)})
	file, off := u.damage(bad)

	ls, err := u.q.Claim(ctx, "w", time.Minute, 10)
	if err != nil {
		t.Fatalf("claim with one damaged payload: %v", err)
	}
	if got := ids(ls); len(got) != 2 || got[0] != good || got[1] != small {
		t.Fatalf("claimed %v, want [%d %d]", got, good, small)
	}
	if !bytes.Equal(ls[0].Payload, p2) || string(ls[1].Payload) != `{"small":1}` {
		t.Fatal("a lease's payload differs")
	}

	info, err := u.q.Get(ctx, bad)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), file) {
		t.Fatalf("Get of the damaged task: %v, want ErrCorrupt naming %s", err, file)
	}
	where := file + " offset " + utoa(uint64(off))
	if info.ID != bad || info.State != Dead || info.Attempts != 1 || info.Payload != nil {
		t.Fatalf("the damaged task: id %d, state %v, attempts %d, payload %d bytes", info.ID, info.State, info.Attempts, len(info.Payload))
	}
	if !strings.Contains(info.LastError, where) || !strings.Contains(info.LastError, "checksum") {
		t.Fatalf("its last error %q does not name %q and the cause", info.LastError, where)
	}
	if !strings.Contains(info.Unreadable, where) {
		t.Fatalf("its Unreadable %q does not name %q", info.Unreadable, where)
	}
	n, err := u.q.Counts(ctx)
	if err != nil || n.InFlight != 2 || n.Dead != 1 || n.Ready != 0 {
		t.Fatalf("counts %+v, %v", n, err)
	}
	if again, err := u.q.Claim(ctx, "w", time.Minute, 10); err != nil || len(again) != 0 {
		t.Fatalf("a claim after: %v, %v", ids(again), err)
	}
	st := u.db.Stats()
	if st.UnreadableValues != 2 || st.DeadLettered != 1 {
		t.Fatalf("stats: %d unreadable values (a claim and a Get), %d dead-lettered", st.UnreadableValues, st.DeadLettered)
	}
	if n := u.logLines(bad); n != 1 {
		t.Fatalf("%d log lines about task %d, want 1:\n%s", n, bad, u.logs.String())
	}
}

// TestClaimRetriesOnReadError: a value whose read fails with an I/O error
// (not damage) fails its task by its retry policy: the attempt counts, the
// task is claimed again after its backoff, and then, with the read
// working, handed out with its payload.
func TestClaimRetriesOnReadError(t *testing.T) {
	t.Parallel()
	u := newUnreadEnv(t)
	p := bigJSON(1, 1000)
	big := u.enqueue(Task{Payload: p, MaxAttempts: 3})
	small := u.enqueue(Task{Payload: []byte(`2`)})
	u.failReads.Store(true)
	ls, err := u.q.Claim(ctx, "w", time.Hour, 10)
	if err != nil || len(ls) != 1 || ls[0].ID != small {
		t.Fatalf("claim with the value log failing reads: %v, %v", ids(ls), err)
	}
	// The task stays listed, with the error, while its value cannot be read.
	page, err := u.q.List(ctx, ListOptions{State: Scheduled})
	if err != nil || len(page.Tasks) != 1 || page.Tasks[0].ID != big {
		t.Fatalf("list of scheduled tasks: %d, %v", len(page.Tasks), err)
	}
	info := page.Tasks[0]
	if info.Attempts != 1 || !strings.Contains(info.LastError, errorfs.ErrInjected.Error()) ||
		!strings.Contains(info.LastError, verify.FileName(u.ref(big).File)) || !strings.Contains(info.Unreadable, "injected") {
		t.Fatalf("the task: attempts %d, last error %q, unreadable %q", info.Attempts, info.LastError, info.Unreadable)
	}
	u.failReads.Store(false)
	u.clock.Advance(time.Minute)
	ls, err = u.q.Claim(ctx, "w", time.Minute, 10)
	if err != nil || len(ls) != 1 || ls[0].ID != big || ls[0].Attempt != 2 || !bytes.Equal(ls[0].Payload, p) {
		t.Fatalf("claim once reads work: %v, %v", ids(ls), err)
	}
}

// TestClaimWaitSkipsUnreadable: ClaimWait passes over tasks whose
// payloads are damaged, however many come first (more than one claim's
// rounds), and returns the first it can read.
func TestClaimWaitSkipsUnreadable(t *testing.T) {
	t.Parallel()
	u := newUnreadEnv(t)
	var bad []uint64
	for i := range claimRounds + 2 {
		bad = append(bad, u.enqueue(Task{Payload: bigJSON(i, 600), Priority: 9}))
	}
	p := bigJSON(100, 600)
	good := u.enqueue(Task{Payload: p})
	for _, id := range bad {
		u.damage(id)
	}
	ls, err := u.q.ClaimWait(ctx, "w", time.Minute, 1)
	if err != nil || len(ls) != 1 || ls[0].ID != good || !bytes.Equal(ls[0].Payload, p) {
		t.Fatalf("ClaimWait: %v, %v; want [%d]", ids(ls), err, good)
	}
	if n, _ := u.q.Counts(ctx); n.Dead != len(bad) {
		t.Fatalf("%d dead, want the %d damaged tasks", n.Dead, len(bad))
	}
}

// TestCompleteAndClaimSkipsUnreadable: a completion whose claim meets a
// damaged payload completes, and returns the leases it could read, not
// an error that would make the caller think nothing committed.
func TestCompleteAndClaimSkipsUnreadable(t *testing.T) {
	t.Parallel()
	u := newUnreadEnv(t)
	first := u.enqueue(Task{Payload: []byte(`1`), Priority: 9})
	l := u.db.Queue(ns, "q")
	ls, err := l.Claim(ctx, "w", time.Minute, 1)
	if err != nil || len(ls) != 1 || ls[0].ID != first {
		t.Fatalf("claim: %v, %v", ids(ls), err)
	}
	bad := u.enqueue(Task{Payload: bigJSON(1, 1000), Priority: 5})
	p := bigJSON(2, 1000)
	good := u.enqueue(Task{Payload: p})
	u.damage(bad)
	_, next, err := u.q.CompleteAndClaim(ctx, ls[0], Done{}, "w", time.Minute, 5)
	if err != nil || len(next) != 1 || next[0].ID != good || !bytes.Equal(next[0].Payload, p) {
		t.Fatalf("CompleteAndClaim: %v, %v; want [%d]", ids(next), err, good)
	}
	if _, err := u.q.Get(ctx, first); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the completed task: %v", err)
	}
	if info, _ := u.q.Get(ctx, bad); info.State != Dead {
		t.Fatalf("the damaged task is %v", info.State)
	}
}

// TestReadsOfUnreadableValues: List and Search return their page when one
// task's value is damaged, that task without the value and naming the
// damage; Get returns the task's record with an error. The log says it
// once per task, at most once a second, then how many it left out.
func TestReadsOfUnreadableValues(t *testing.T) {
	t.Parallel()
	u := newUnreadEnv(t)
	want := map[uint64][]byte{}
	var all []uint64
	for i := range 4 {
		p := bigJSON(i, 700)
		id := u.enqueue(Task{Payload: p})
		want[id] = p
		all = append(all, id)
	}
	bad1, bad2 := all[1], all[2]
	file, off := u.damage(bad1)
	u.damage(bad2)
	check := func(what string, tasks []TaskInfo, err error) {
		t.Helper()
		if err != nil || len(tasks) != len(all) {
			t.Fatalf("%s: %d tasks, %v", what, len(tasks), err)
		}
		for _, ti := range tasks {
			damaged := ti.ID == bad1 || ti.ID == bad2
			switch {
			case damaged && (ti.Payload != nil || !strings.Contains(ti.Unreadable, "payload of task "+utoa(ti.ID))):
				t.Fatalf("%s: damaged task %d: payload %d bytes, unreadable %q", what, ti.ID, len(ti.Payload), ti.Unreadable)
			case !damaged && (!bytes.Equal(ti.Payload, want[ti.ID]) || ti.Unreadable != ""):
				t.Fatalf("%s: task %d: payload %d bytes, unreadable %q", what, ti.ID, len(ti.Payload), ti.Unreadable)
			}
		}
	}
	page, err := u.q.List(ctx, ListOptions{State: Ready})
	check("List", page.Tasks, err)
	sp, err := u.q.Search(ctx, SearchOptions{})
	check("Search", sp.Tasks, err)
	info, err := u.q.Get(ctx, bad1)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), file+" offset "+utoa(uint64(off))) ||
		info.ID != bad1 || info.State != Ready || info.Payload != nil {
		t.Fatalf("Get of a damaged task: %v; id %d, state %v", err, info.ID, info.State)
	}
	if info, err := u.q.Get(ctx, all[0]); err != nil || !bytes.Equal(info.Payload, want[all[0]]) {
		t.Fatalf("Get of a sound task: %v", err)
	}
	if got := u.db.Stats().UnreadableValues; got != 5 {
		t.Fatalf("%d unreadable values counted, want 5", got)
	}
	// The List logged bad1 and left bad2 for the next second.
	if u.logLines(bad1) != 1 || u.logLines(bad2) != 0 {
		t.Fatalf("log lines: %d about task %d, %d about %d:\n%s", u.logLines(bad1), bad1, u.logLines(bad2), bad2, u.logs.String())
	}
	u.clock.Advance(2 * unreadableEvery)
	if _, err := u.q.Get(ctx, bad2); !errors.Is(err, ErrCorrupt) {
		t.Fatal(err)
	}
	if u.logLines(bad2) != 1 || !strings.Contains(u.logs.String(), "unlogged=2") {
		t.Fatalf("after a second, task %d's line with what was left out:\n%s", bad2, u.logs.String())
	}
}

// TestClaimLeavesOutATaskGoneWhileRead: a task cancelled, and its value
// compacted away, while the claim that leased it reads the values of its
// leases is left out of the claim's answer; the call does not fail with
// ErrNotFound, and the other leases are handed out.
func TestClaimLeavesOutATaskGoneWhileRead(t *testing.T) {
	t.Parallel()
	// Each value takes a file of its own.
	u := newUnreadEnv(t, func(o *Options) { o.valueFileSize = 4 << 10 })
	pa := bigJSON(1, 5000)
	a := u.enqueue(Task{Payload: pa, Priority: 9})
	b := u.enqueue(Task{Payload: bigJSON(2, 5000), Priority: 5})
	u.enqueue(Task{Payload: bigJSON(3, 5000)})
	fileA, fileB := verify.FileName(u.ref(a).File), u.ref(b).File
	if u.ref(a).File == fileB {
		t.Fatal("the two values share a file")
	}
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hook := func(op errorfs.Op) {
		if strings.HasSuffix(op.Path, fileA) {
			once.Do(func() {
				close(reached)
				<-release
			})
		}
	}
	u.onRead.Store(&hook)
	type answer struct {
		ls  []Lease
		err error
	}
	done := make(chan answer, 1)
	go func() {
		ls, err := u.q.Claim(ctx, "w", time.Minute, 2)
		done <- answer{ls, err}
	}()
	<-reached // the claim leased a and b, and reads a's payload
	if err := u.q.Cancel(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := u.db.CompactValues(ctx); err != nil {
		t.Fatal(err)
	}
	for _, f := range u.db.c.vals.log.Files() {
		if f.Num == fileB {
			t.Fatalf("compaction left file %d, which holds nothing live", fileB)
		}
	}
	close(release)
	got := <-done
	if got.err != nil || len(got.ls) != 1 || got.ls[0].ID != a || !bytes.Equal(got.ls[0].Payload, pa) {
		t.Fatalf("claim: %v, %v; want [%d]", ids(got.ls), got.err, a)
	}
}

// TestClaimFailsATaskWithUnreadableProgress: a lease whose progress
// record is damaged is not handed out either (a worker would resume from
// a checkpoint it cannot see): the next claim after its lease expires
// dead-letters it, naming its progress.
func TestClaimFailsATaskWithUnreadableProgress(t *testing.T) {
	t.Parallel()
	u := newUnreadEnv(t)
	id := u.enqueue(Task{Payload: []byte(`1`), Priority: 5})
	other := u.enqueue(Task{Payload: []byte(`2`)})
	ls, err := u.q.Claim(ctx, "w", time.Minute, 1)
	if err != nil || len(ls) != 1 || ls[0].ID != id {
		t.Fatalf("claim: %v, %v", ids(ls), err)
	}
	if err := u.q.Heartbeat(ctx, &ls[0], time.Minute, bigJSON(7, 2000)); err != nil {
		t.Fatal(err)
	}
	file, _ := u.damageValue(id, vlog.Progress)
	u.clock.Advance(2 * time.Minute)
	again, err := u.q.Claim(ctx, "w", time.Minute, 5)
	if err != nil || len(again) != 1 || again[0].ID != other {
		t.Fatalf("claim after the lease expired: %v, %v; want [%d]", ids(again), err, other)
	}
	info, err := u.q.Get(ctx, id)
	if !errors.Is(err, ErrCorrupt) || info.State != Dead || info.Progress != nil ||
		!strings.Contains(info.LastError, "progress of task") || !strings.Contains(info.LastError, file) {
		t.Fatalf("the task: %v; state %v, last error %q", err, info.State, info.LastError)
	}
}

// TestClaimWhenFailingTheUnreadableTaskFails: when the commit that fails a
// task whose value cannot be read fails itself (here the log cannot be
// written, which stops the engine), the claim still returns the leases it
// read, the failure is logged, and the next call reports the engine's
// failure.
func TestClaimWhenFailingTheUnreadableTaskFails(t *testing.T) {
	t.Parallel()
	var walBroken atomic.Bool
	u := newUnreadEnv(t, func(o *Options) {
		fsys := o.fs
		o.fs = errorfs.Wrap(fsys, errorfs.InjectorFunc(func(op errorfs.Op) error {
			if walBroken.Load() && op.Kind == errorfs.OpWrite && strings.Contains(op.Path, "/wal/") {
				return errorfs.ErrInjected
			}
			return nil
		}))
	})
	big := u.enqueue(Task{Payload: bigJSON(1, 1000), Priority: 5})
	small := u.enqueue(Task{Payload: []byte(`2`)})
	// The claim's own commit is written before it reads the values.
	hook := func(errorfs.Op) { walBroken.Store(true) }
	u.onRead.Store(&hook)
	u.failReads.Store(true)
	ls, err := u.q.Claim(ctx, "w", time.Minute, 5)
	if err != nil || len(ls) != 1 || ls[0].ID != small {
		t.Fatalf("claim: %v, %v; want [%d]", ids(ls), err, small)
	}
	if !strings.Contains(u.logs.String(), "failing a task whose value cannot be read") ||
		!strings.Contains(u.logs.String(), "id="+utoa(big)) {
		t.Fatalf("the failed commit is not logged:\n%s", u.logs.String())
	}
	if _, err := u.q.Claim(ctx, "w", time.Minute, 5); !errors.Is(err, ErrFailed) {
		t.Fatalf("the next claim: %v, want ErrFailed", err)
	}
}
