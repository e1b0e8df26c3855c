package engine

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine/internal/verify"
	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/internal/vfs/errorfs"
)

// valuesDir is a closed data directory whose value log holds the payloads
// of tasks, the result of one completed task and the progress of one in
// flight, each record's place known.
type valuesDir struct {
	dir  string
	opts Options
	// want is every task's payload; refs where each value of a task is.
	want map[uint64][]byte
	ids  []uint64 // in enqueue order
	refs map[uint64]map[index.ValueKind]index.ValueRef
}

func newValuesDir(t *testing.T) *valuesDir {
	t.Helper()
	e := newEnv(t, false, func(o *Options) {
		o.ValueThreshold = 64
		o.RetainCompleted = time.Hour
		o.SnapshotBytes = -1
	})
	v := &valuesDir{dir: e.dir, opts: e.opts, want: map[uint64][]byte{}, refs: map[uint64]map[index.ValueKind]index.ValueRef{}}
	q := e.q("q")
	for i := range 8 {
		p := bigJSON(i, 100+10*i)
		id := e.enqueue(q, Task{Payload: p})
		v.want[id] = p
		v.ids = append(v.ids, id)
	}
	ls := e.claim(q, 2)
	if _, err := q.Complete(ctx, ls[0], Done{Result: bigJSON(100, 200)}); err != nil {
		t.Fatal(err)
	}
	if err := q.Heartbeat(ctx, &ls[1], time.Minute, bigJSON(101, 150)); err != nil {
		t.Fatal(err)
	}
	c := e.db.c
	c.mu.Lock()
	for _, r := range stateRefs(c.store) {
		if v.refs[r.ID] == nil {
			v.refs[r.ID] = map[index.ValueKind]index.ValueRef{}
		}
		v.refs[r.ID][r.Kind] = r.Ref
	}
	c.mu.Unlock()
	if err := e.db.Close(); err != nil {
		t.Fatal(err)
	}
	e.db = nil
	if len(v.refs) != 8 || len(v.refs[ls[0].ID]) != 2 || len(v.refs[ls[1].ID]) != 2 {
		t.Fatalf("values by reference: %v", v.refs)
	}
	return v
}

// file is the path of value log file n.
func (v *valuesDir) file(n uint32) string { return filepath.Join(v.dir, "vlog", verify.FileName(n)) }

// lostTasks checks that Check fails with ErrCorrupt, changes nothing, and
// reports as lost exactly the values want lists (task: kind), each with
// its file and offset; it returns the report.
func (v *valuesDir) lost(t *testing.T, want map[uint64][]index.ValueKind) CheckReport {
	t.Helper()
	before := dirBytes(t, v.dir)
	rep, err := Check(v.dir)
	wantErr(t, err, ErrCorrupt)
	if !sameFiles(before, dirBytes(t, v.dir)) {
		t.Fatal("Check changed the directory")
	}
	got := map[uint64][]index.ValueKind{}
	for _, d := range rep.Values.Lost {
		if !d.Referenced || d.Namespace != ns || d.Queue != "q" {
			t.Fatalf("lost value without its task: %+v", d)
		}
		var k index.ValueKind
		for kk := index.ValuePayload; kk <= index.ValueProgress; kk++ {
			if kk.String() == d.Kind {
				k = kk
			}
		}
		r := v.refs[d.Task][k]
		if d.File != verify.FileName(r.File) || d.Offset != r.Off {
			t.Fatalf("lost %s of task %d reported at %s offset %d, it is at %+v", d.Kind, d.Task, d.File, d.Offset, r)
		}
		got[d.Task] = append(got[d.Task], k)
	}
	for id := range got {
		slices.Sort(got[id])
	}
	for id := range want {
		slices.Sort(want[id])
	}
	if len(got) != len(want) {
		t.Fatalf("lost %v, want %v", got, want)
	}
	for id, ks := range want {
		if !slices.Equal(got[id], ks) {
			t.Fatalf("lost %v, want %v", got, want)
		}
	}
	var out strings.Builder
	rep.Print(&out)
	first := rep.Values.Lost[0]
	for _, s := range []string{"LOST", first.File, "task " + itoa(first.Task), "acme/prod/q"} {
		if !strings.Contains(out.String(), s) {
			t.Fatalf("the report does not say %q:\n%s", s, out.String())
		}
	}
	if !strings.Contains(err.Error(), "task "+itoa(first.Task)) {
		t.Fatalf("the error does not name task %d: %v", first.Task, err)
	}
	return rep
}

// TestCheckValues: Check reads back every value the state refers to and
// names the task of each one that does not (a missing file, a truncated
// one, a flipped bit, a reference past the end), with its file and offset,
// as ErrCorrupt, without changing the directory; a sound one checks clean.
func TestCheckValues(t *testing.T) {
	t.Parallel()
	t.Run("sound", func(t *testing.T) {
		v := newValuesDir(t)
		rep, err := Check(v.dir)
		if err != nil || rep.Values.Refs != 10 || rep.Values.Files != 1 || len(rep.Values.Lost)+len(rep.Values.Damage) != 0 {
			t.Fatalf("sound directory: %+v %v", rep.Values, err)
		}
	})
	all := func(v *valuesDir) map[uint64][]index.ValueKind {
		out := map[uint64][]index.ValueKind{}
		for id, m := range v.refs {
			for k := range m {
				out[id] = append(out[id], k)
			}
		}
		return out
	}
	t.Run("missing file", func(t *testing.T) {
		v := newValuesDir(t)
		if err := os.Remove(v.file(0)); err != nil {
			t.Fatal(err)
		}
		v.lost(t, all(v))
	})
	t.Run("missing directory", func(t *testing.T) {
		v := newValuesDir(t)
		if err := os.RemoveAll(filepath.Join(v.dir, "vlog")); err != nil {
			t.Fatal(err)
		}
		v.lost(t, all(v))
	})
	t.Run("flipped bit", func(t *testing.T) {
		v := newValuesDir(t)
		id := v.ids[4]
		r := v.refs[id][index.ValuePayload]
		flipByte(t, v.file(r.File), r.Off+HeaderSizeForTest+int64(r.Len)/2)
		v.lost(t, map[uint64][]index.ValueKind{id: {index.ValuePayload}})
	})
	t.Run("flipped header bit", func(t *testing.T) {
		v := newValuesDir(t)
		id := v.ids[2]
		r := v.refs[id][index.ValuePayload]
		flipByte(t, v.file(r.File), r.Off+12)
		v.lost(t, map[uint64][]index.ValueKind{id: {index.ValuePayload}})
	})
	// The values of the last records: the progress, then the result.
	last := func(v *valuesDir) (index.ValueRef, uint64, index.ValueKind) {
		var lr index.ValueRef
		var lid uint64
		var lk index.ValueKind
		for id, m := range v.refs {
			for k, r := range m {
				if r.Off > lr.Off {
					lr, lid, lk = r, id, k
				}
			}
		}
		return lr, lid, lk
	}
	t.Run("truncated", func(t *testing.T) {
		v := newValuesDir(t)
		r, id, k := last(v)
		if err := os.Truncate(v.file(r.File), r.Off+HeaderSizeForTest+1); err != nil {
			t.Fatal(err)
		}
		rep := v.lost(t, map[uint64][]index.ValueKind{id: {k}})
		if len(rep.Values.Damage) != 0 {
			t.Fatalf("the cut record is reported twice: %v", rep.Values.Damage)
		}
	})
	t.Run("ref past the end", func(t *testing.T) {
		v := newValuesDir(t)
		r, id, k := last(v)
		if err := os.Truncate(v.file(r.File), r.Off); err != nil {
			t.Fatal(err)
		}
		rep := v.lost(t, map[uint64][]index.ValueKind{id: {k}})
		if !strings.Contains(rep.Values.Lost[0].Reason, "missing") {
			t.Fatalf("reason: %q", rep.Values.Lost[0].Reason)
		}
	})
	t.Run("torn tail no task refers to", func(t *testing.T) {
		v := newValuesDir(t)
		f, err := os.OpenFile(v.file(0), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(bytes.Repeat([]byte{7}, 30))
		f.Close()
		rep, err := Check(v.dir)
		if err != nil || len(rep.Values.Damage) != 1 || !rep.Values.Damage[0].Torn || len(rep.Values.Lost) != 0 {
			t.Fatalf("a torn tail no task refers to is not damage: %+v %v", rep.Values, err)
		}
	})
}

// HeaderSizeForTest is the value log's record header size.
const HeaderSizeForTest = 22

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x10
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyValues: DB.Verify reads back every value the state refers to
// and fails with ErrCorrupt naming the task of a damaged one.
func TestVerifyValues(t *testing.T) {
	t.Parallel()
	v := newValuesDir(t)
	id := v.ids[5]
	r := v.refs[id][index.ValuePayload]
	db, err := Open(v.dir, v.opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Verify(); err != nil {
		t.Fatalf("sound: %v", err)
	}
	db.Close()
	flipByte(t, v.file(r.File), r.Off+HeaderSizeForTest+3)
	db, err = Open(v.dir, v.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Verify()
	wantErr(t, err, ErrCorrupt)
	if !strings.Contains(err.Error(), "task "+itoa(id)) {
		t.Fatalf("the error does not name task %d: %v", id, err)
	}
}

// TestSalvageValues: Repair refuses a directory where a value the state
// refers to does not read back, naming its task; Salvage deletes that task
// and keeps every other with its bytes, and the directory then opens and
// checks clean.
func TestSalvageValues(t *testing.T) {
	t.Parallel()
	v := newValuesDir(t)
	// A flipped bit in one payload, and the last record (the progress of
	// an in-flight task) cut.
	bad := v.ids[3]
	r := v.refs[bad][index.ValuePayload]
	flipByte(t, v.file(r.File), r.Off+HeaderSizeForTest+7)
	var cut uint64
	var cr index.ValueRef
	for id, m := range v.refs {
		for _, rr := range m {
			if rr.Off > cr.Off {
				cr, cut = rr, id
			}
		}
	}
	if err := os.Truncate(v.file(cr.File), cr.Off+5); err != nil {
		t.Fatal(err)
	}

	_, err := Repair(v.dir)
	wantErr(t, err, ErrCorrupt)
	if !strings.Contains(err.Error(), "task ") {
		t.Fatalf("repair does not name the task: %v", err)
	}

	rep, err := Salvage(v.dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := (ValuesCheck{Lost: rep.Dropped}).LostTasks(); !slices.Equal(got, sortedIDs(bad, cut)) {
		t.Fatalf("dropped %v, want %v", got, sortedIDs(bad, cut))
	}
	var out strings.Builder
	rep.Print(&out)
	if !strings.Contains(out.String(), "DROPPED task "+itoa(bad)) {
		t.Fatalf("the report does not name task %d:\n%s", bad, out.String())
	}
	if crep, err := Check(v.dir); err != nil || len(crep.Values.Lost) != 0 {
		t.Fatalf("after salvage: %+v %v", crep.Values, err)
	}
	db, err := Open(v.dir, v.opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	q := db.Queue(ns, "q")
	for _, id := range v.ids {
		info, err := q.Get(ctx, id)
		if id == bad || id == cut {
			wantErr(t, err, ErrNotFound)
			continue
		}
		if err != nil || !bytes.Equal(info.Payload, v.want[id]) {
			t.Fatalf("task %d after salvage: %v, payload %q", id, err, info.Payload)
		}
	}
	db.Close()
	// A second salvage finds nothing to drop.
	rep, err = Salvage(v.dir)
	if err != nil || len(rep.Dropped) != 0 {
		t.Fatalf("second salvage: %+v %v", rep, err)
	}
}

func sortedIDs(ids ...uint64) []uint64 {
	slices.Sort(ids)
	return slices.Compact(ids)
}

// TestValuesFailedWriteClose: a commit whose values the value log failed
// to write is not acknowledged, and Close of the failed engine does not
// write its batch to the log either: the directory as Close leaves it
// opens with every value it refers to readable, and checks clean.
func TestValuesFailedWriteClose(t *testing.T) {
	t.Parallel()
	for _, kind := range []errorfs.OpKind{errorfs.OpWrite, errorfs.OpCreate, errorfs.OpSync} {
		t.Run(kind.String(), func(t *testing.T) {
			mem := newMemFS(t)
			broken := false
			fsys := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
				if broken && strings.Contains(op.Path, "/vlog/") && op.Kind == kind {
					return errorfs.ErrInjected
				}
				return nil
			}))
			const dir = "/data/db"
			opts := Options{Durability: SyncAlways, ValueThreshold: 256, Logger: quietLogger(), fs: fsys, valueFileSize: 1}
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
			if _, err := q.Enqueue(ctx, Task{Payload: bigJSON(1, 1000)}); err == nil {
				t.Fatal("an enqueue whose value was not written succeeded")
			}
			db.Close()
			broken = false
			if _, err := checkFS(mem, dir); err != nil {
				t.Fatalf("check after close: %v", err)
			}
			o := opts
			o.fs = mem
			db, err = Open(dir, o)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Verify(); err != nil {
				t.Fatalf("verify after close: %v", err)
			}
			// The failed enqueue may be there (its value written, not
			// fsynced) or not; the acknowledged one is.
			info, err := db.Queue(ns, "q").Get(ctx, enq.ID)
			if err != nil || !bytes.Equal(info.Payload, p) {
				t.Fatalf("the acknowledged task after close: %v, payload of %d bytes", err, len(info.Payload))
			}
		})
	}
}
