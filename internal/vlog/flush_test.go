package vlog

import (
	"bytes"
	"errors"
	"testing"
)

// TestFlush: a Flush makes refs readable at once without making them
// durable (a power loss may take them, but a Read never returns wrong
// bytes), and the next Sync makes durable everything flushed before it,
// also in files that Sync itself writes nothing to, with their directory
// entries.
func TestFlush(t *testing.T) {
	t.Parallel()
	m := newMem(t)
	l := open(t, m, 4000) // a few records a file: flushes cross files
	flushed := appendN(t, l, 0, 60)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := readBack(l, flushed); err != nil {
		t.Fatalf("after Flush: %v", err)
	}

	// A power loss now may lose what was flushed, never mix it up.
	lost := m.CrashClone()
	l2 := open(t, lost, 4000)
	for _, e := range flushed {
		got, err := l2.Read(e.ref, e.owner, kindOf(e.owner), nil)
		switch {
		case err == nil && !bytes.Equal(got, value(e.owner)):
			t.Fatalf("owner %d: wrong bytes after a power loss", e.owner)
		case err != nil && !errors.Is(err, ErrMissing) && !errors.Is(err, ErrCorrupt):
			t.Fatalf("owner %d: %v, want ErrMissing or ErrCorrupt", e.owner, err)
		}
	}
	l2.Close()

	// Sync with nothing pending still makes the flushed files durable.
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	more := appendN(t, l, 60, 70)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	last := appendN(t, l, 70, 72)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	all := append(append(flushed, more...), last...)
	crashed := m.CrashClone()
	l.Close()
	l = open(t, crashed, 4000)
	defer l.Close()
	if err := readBack(l, all); err != nil {
		t.Fatalf("after Sync and a power loss: %v", err)
	}
}

// TestFlushThenRemove: a file that a Flush wrote and a Remove deleted is
// not synced by the next Sync (which would fail the log on a closed file).
func TestFlushThenRemove(t *testing.T) {
	t.Parallel()
	m := newMem(t)
	l := open(t, m, 4000)
	defer l.Close()
	es := appendN(t, l, 0, 30)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	first := es[0].ref.File
	if first == l.Head() {
		t.Fatal("the test needs the first file to be sealed")
	}
	if err := l.Remove(first); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatalf("Sync after removing a flushed file: %v", err)
	}
	for _, e := range es {
		if e.ref.File == first {
			continue
		}
		if _, err := l.Read(e.ref, e.owner, kindOf(e.owner), nil); err != nil {
			t.Fatal(err)
		}
	}
}
