package vlog

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/docketdb/docket/internal/vfs/errorfs"
)

// armedIndex fails the nth matching operation once armed.
func armedIndex(n int, kinds ...errorfs.OpKind) (*errorfs.OnIndex, *atomic.Bool, errorfs.Injector) {
	var armed atomic.Bool
	idx := errorfs.NewOnIndex(n, errorfs.Kinds(kinds...))
	return idx, &armed, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !armed.Load() {
			return nil
		}
		return idx.MaybeError(op)
	})
}

// TestSyncFailure fails each create, write, sync and directory sync of a
// Sync in turn: Sync reports it, the log refuses appends, syncs and
// compactions from then on (ErrFailed), values synced before still read
// back, and so they do after a power loss.
func TestSyncFailure(t *testing.T) {
	t.Parallel()
	for i := 1; ; i++ {
		m := newMem(t)
		idx, armed, inj := armedIndex(i, errorfs.OpCreate, errorfs.OpOpen, errorfs.OpWrite, errorfs.OpSync, errorfs.OpDirSync)
		l := open(t, errorfs.Wrap(m, inj), 1000)
		synced := appendN(t, l, 0, 10)
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		appendN(t, l, 10, 20) // into the head and a new file
		armed.Store(true)
		err := l.Sync()
		armed.Store(false)
		op, hit := idx.Hit()
		if !hit {
			if err != nil {
				t.Fatal(err)
			}
			if i < 4 {
				t.Fatalf("only %d operations to fail", i-1)
			}
			break
		}
		if !errors.Is(err, ErrFailed) || !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("failing %v: Sync returned %v, want ErrFailed wrapping the injected error", op, err)
		}
		if _, err := l.Append(1, Payload, nil); !errors.Is(err, ErrFailed) {
			t.Fatalf("Append after a failed Sync: %v", err)
		}
		if err := l.Sync(); !errors.Is(err, ErrFailed) {
			t.Fatalf("Sync after a failed Sync: %v", err)
		}
		if _, err := l.Compact(0, nil); !errors.Is(err, ErrFailed) {
			t.Fatalf("Compact after a failed Sync: %v", err)
		}
		if err := readBack(l, synced); err != nil {
			t.Fatalf("failing %v: %v", op, err)
		}
		l.Close()
		l = open(t, m.CrashClone(), 1000)
		if err := readBack(l, synced); err != nil {
			t.Fatalf("failing %v, then power loss: %v", op, err)
		}
		l.Close()
	}
}

// TestRemoveFailure: a Remove whose unlink fails leaves the file readable
// and removable again.
func TestRemoveFailure(t *testing.T) {
	t.Parallel()
	m := newMem(t)
	_, armed, inj := armedIndex(1, errorfs.OpRemove)
	l := open(t, errorfs.Wrap(m, inj), 600)
	defer l.Close()
	es := appendN(t, l, 1, 20)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	if err := l.Remove(0); !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("Remove: %v, want the injected error", err)
	}
	if err := readBack(l, es); err != nil {
		t.Fatalf("after a failed Remove: %v", err)
	}
	if err := l.Remove(0); err != nil {
		t.Fatalf("Remove again: %v", err)
	}
	if _, err := l.Read(es[0].ref, es[0].owner, kindOf(es[0].owner), nil); !errors.Is(err, ErrMissing) {
		t.Fatalf("Read of a removed file: %v, want ErrMissing", err)
	}
}

// TestRemoveKeepsNumbers: removing the highest file keeps a higher one on
// disk, so that a reopened log never numbers a file as a removed one, and
// a stale ref into it cannot name a new record.
func TestRemoveKeepsNumbers(t *testing.T) {
	t.Parallel()
	m := newMem(t)
	l := open(t, m, 600)
	es := appendN(t, l, 1, 20)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = open(t, m, 600) // the head is past every file, none there yet
	last := es[len(es)-1].ref.File
	if err := l.Remove(last); err != nil {
		t.Fatal(err)
	}
	crashed := m.CrashClone()
	l.Close()
	l = open(t, crashed, 600)
	defer l.Close()
	r, err := l.Append(1, Payload, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.File <= last {
		t.Fatalf("after removing file %d and reopening, appends go to file %d", last, r.File)
	}
}
