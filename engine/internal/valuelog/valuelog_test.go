package valuelog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/internal/vfs"
	"github.com/docketdb/docket/internal/vlog"
)

// host is a Host whose state refers to no value.
type host struct{}

func (host) Locked(bool, func(*index.Store)) error          { return nil }
func (host) Live([]vlog.Record, []bool)                     {}
func (host) Commit(context.Context, []index.Mutation) error { return nil }
func (host) Fail(err error) error                           { return err }

// TestWants: a task's values by reference are wanted, the result only
// when all are, and a value in line never.
func TestWants(t *testing.T) {
	t.Parallel()
	r := func(off int64) index.ValueRef { return index.ValueRef{File: 1, Off: off, Len: 10} }
	task := func(pay index.ValueRef, res, prog index.ValueRef) *index.Task {
		tk := &index.Task{ID: 7}
		if !pay.IsZero() {
			tk.SetPayloadRef(pay)
		}
		if !res.IsZero() || !prog.IsZero() {
			tk.Extra = &index.Extra{Refs: &index.TaskRefs{Result: res, Progress: prog}}
		}
		return tk
	}
	for _, c := range []struct {
		name string
		t    *index.Task
		all  bool
		want []index.ValueKind
	}{
		{"in line", task(index.ValueRef{}, index.ValueRef{}, index.ValueRef{}), true, nil},
		{"payload", task(r(0), index.ValueRef{}, index.ValueRef{}), false, []index.ValueKind{index.ValuePayload}},
		{"result left out", task(r(0), r(10), r(20)), false, []index.ValueKind{index.ValuePayload, index.ValueProgress}},
		{"all", task(r(0), r(10), r(20)), true, []index.ValueKind{index.ValuePayload, index.ValueProgress, index.ValueResult}},
		{"result only", task(index.ValueRef{}, r(10), index.ValueRef{}), true, []index.ValueKind{index.ValueResult}},
	} {
		var got []index.ValueKind
		for _, w := range Wants(nil, 3, c.t, c.all) {
			if w.I != 3 || w.ID != 7 || w.Ref.IsZero() {
				t.Errorf("%s: want %+v", c.name, w)
			}
			got = append(got, w.Kind)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: wants %v, want %v", c.name, got, c.want)
		}
	}
}

// TestBorrows: a payload the value log will copy is borrowed, whatever
// else is copied.
func TestBorrows(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		threshold, n int
		want         bool
	}{{1024, 1024, true}, {1024, 1023, false}, {0, 0, false}, {0, 1, true}, {-1, 1 << 20, false}} {
		if got := (&Log{Threshold: c.threshold}).Borrows(make([]byte, c.n)); got != c.want {
			t.Errorf("threshold %d, %d bytes: borrows %v", c.threshold, c.n, got)
		}
	}
}

// TestDrop: the leases whose values all read are kept in order; each
// task with a value that does not read is failed once, with what the
// engine does about it, and one whose task went is left out unfailed.
func TestDrop(t *testing.T) {
	t.Parallel()
	ls := []dockettype.Lease{{ID: 1}, {ID: 2}, {ID: 3}, {ID: 4}}
	damaged := fmt.Errorf("%w: damaged", dockettype.ErrCorrupt)
	bad := []Bad{
		{W: Want{I: 1, ID: 2}, Err: damaged, Permanent: true},
		{W: Want{I: 1, ID: 2, Kind: index.ValueProgress}, Err: damaged}, // a second value of the same task
		{W: Want{I: 2, ID: 3}, Gone: true},
		{W: Want{I: 3, ID: 4}, Err: damaged},
	}
	var failed []string
	kept := Drop(ls, bad, func(l *dockettype.Lease, b *Bad, what string) {
		failed = append(failed, fmt.Sprintf("%d: %s", l.ID, what))
	})
	var ids []uint64
	for _, l := range kept {
		ids = append(ids, l.ID)
	}
	if !slices.Equal(ids, []uint64{1}) {
		t.Fatalf("kept %v, want [1]", ids)
	}
	want := []string{"2: the task is dead-lettered, not leased", "4: the task is failed by its retry policy, not leased"}
	if !slices.Equal(failed, want) {
		t.Fatalf("failed %q, want %q", failed, want)
	}
	if ls[1].ID != 0 || ls[2].ID != 0 || ls[3].ID != 0 {
		t.Fatalf("leases past the kept ones not cleared: %+v", ls)
	}
}

// TestUnreadable: a read's error is a bad value of the task (damage is
// permanent, an I/O error is not, a task gone is gone) or an error of the
// call (the value log closed, anything not a read of the log).
func TestUnreadable(t *testing.T) {
	t.Parallel()
	w := &Want{ID: 9, Kind: index.ValuePayload, Ref: index.ValueRef{File: 2, Off: 40, Len: 5}}
	read := func(err error) error { return &readError{kind: w.Kind, id: w.ID, ref: w.Ref, err: err} }
	for _, c := range []struct {
		name                string
		err                 error
		ok, gone, permanent bool
	}{
		{"damage", read(vlog.ErrCorrupt), true, false, true},
		{"missing", read(vlog.ErrMissing), true, false, true},
		{"I/O", read(errors.New("input/output error")), true, false, false},
		{"gone", fmt.Errorf("task 9: %w", ErrGone), true, true, false},
		{"closed", read(vlog.ErrClosed), false, false, false},
		{"the engine failed", fmt.Errorf("%w: disk", dockettype.ErrFailed), false, false, false},
	} {
		b, ok := unreadable(w, c.err)
		if ok != c.ok || b.Gone != c.gone || b.Permanent != c.permanent {
			t.Errorf("%s: %+v, %v", c.name, b, ok)
			continue
		}
		if ok && !c.gone && !errors.Is(b.Err, dockettype.ErrCorrupt) {
			t.Errorf("%s: %v does not wrap ErrCorrupt", c.name, b.Err)
		}
	}
}

// TestReadGone: a value whose file went (a compaction moved it) and
// whose task refers to none any more is ErrGone, not damage; a value
// appended and not written yet is read once the log is flushed.
func TestReadGone(t *testing.T) {
	t.Parallel()
	l, err := Open(vfs.NewMem(), "/vlog", 4, false, 64, host{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.VLog.Close()
	first, err := l.VLog.Append(1, vlog.Payload, []byte(`"a value that fills its file"`))
	if err != nil {
		t.Fatal(err)
	}
	w := Want{ID: 1, Kind: index.ValuePayload, Ref: index.ValueRef(first)}
	if b, err := l.Read(&w); err != nil || string(b) != `"a value that fills its file"` {
		t.Fatalf("read of a value not flushed: %q, %v", b, err)
	}
	for l.VLog.Head() == first.File {
		if _, err := l.VLog.Append(2, vlog.Payload, []byte(`"more"`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.VLog.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := l.VLog.Remove(first.File); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(&w); !errors.Is(err, ErrGone) {
		t.Fatalf("read of a value moved away: %v, want ErrGone", err)
	}
	bad, err := l.ReadAll([]Want{w}, func(*Want, []byte) { t.Fatal("a value read") })
	if err != nil || len(bad) != 1 || !bad[0].Gone {
		t.Fatalf("ReadAll: %+v, %v", bad, err)
	}
}
