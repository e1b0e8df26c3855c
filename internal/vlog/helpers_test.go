package vlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/docketdb/docket/internal/vfs"
)

const dir = "/data/vlog"

// newMem returns a strict memory file system whose /data is durable.
func newMem(t testing.TB) *vfs.MemFS {
	t.Helper()
	m := vfs.NewMem()
	if err := m.MkdirAll("/data", 0o755); err != nil {
		t.Fatal(err)
	}
	d, _ := m.Open("/")
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	d.Close()
	return m
}

func open(t testing.TB, fsys vfs.FS, size int64) *Log {
	t.Helper()
	l, err := Open(dir, Options{FS: fsys, FileSize: size})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// value is the value owner i holds: its length varies, including 0.
func value(i uint64) []byte {
	n := int(i*37) % 300
	return bytes.Repeat([]byte{byte(i), byte(i >> 8), 'v'}, n)[:n]
}

func kindOf(i uint64) Kind { return Kind(i%4) + 1 }

// entry is a value the test expects the log to hold.
type entry struct {
	owner uint64
	ref   Ref
}

// appendN appends the values of owners from..to-1.
func appendN(t testing.TB, l *Log, from, to uint64) []entry {
	t.Helper()
	var out []entry
	for i := from; i < to; i++ {
		r, err := l.Append(i, kindOf(i), value(i))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{i, r})
	}
	return out
}

// readBack returns an error unless every entry reads back its value.
func readBack(l *Log, es []entry) error {
	for _, e := range es {
		got, err := l.Read(e.ref, e.owner, kindOf(e.owner), nil)
		if err != nil {
			return fmt.Errorf("owner %d at %v: %w", e.owner, e.ref, err)
		}
		if !bytes.Equal(got, value(e.owner)) {
			return fmt.Errorf("owner %d at %v: wrong bytes", e.owner, e.ref)
		}
	}
	return nil
}

// lostOK checks that a ref whose bytes may be gone fails cleanly or reads
// the right value.
func lostOK(l *Log, e entry) error {
	got, err := l.Read(e.ref, e.owner, kindOf(e.owner), nil)
	switch {
	case err == nil && !bytes.Equal(got, value(e.owner)):
		return fmt.Errorf("owner %d at %v: wrong bytes", e.owner, e.ref)
	case err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrMissing):
		return fmt.Errorf("owner %d at %v: %w, want ErrCorrupt or ErrMissing", e.owner, e.ref, err)
	}
	return nil
}

func fileBytes(t testing.TB, m *vfs.MemFS, n uint32) []byte {
	t.Helper()
	b, ok := m.Files(dir)[fileName(n)]
	if !ok {
		t.Fatalf("no file %s", fileName(n))
	}
	return b
}

// memWith returns a strict memory file system holding, durably, the
// files given by number.
func memWith(t testing.TB, files map[uint32][]byte) *vfs.MemFS {
	t.Helper()
	m := newMem(t)
	if err := m.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for n, b := range files {
		f, err := m.OpenFile(dir+"/"+fileName(n), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(b)
		f.Sync()
		f.Close()
	}
	for _, d := range []string{"/data", dir} {
		h, _ := m.Open(d)
		h.Sync()
		h.Close()
	}
	return m
}
