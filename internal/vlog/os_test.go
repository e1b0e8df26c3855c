package vlog

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestOS runs append, sync, read, reopen, compact and remove on the
// operating system's file system, with a Read's file open while it goes.
func TestOS(t *testing.T) {
	t.Parallel()
	d := filepath.Join(t.TempDir(), "vlog")
	l, err := Open(d, Options{FileSize: 2000})
	if err != nil {
		t.Fatal(err)
	}
	e := scene(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(d, Options{FileSize: 2000})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := readBack(l, e.entries()); err != nil {
		t.Fatal(err)
	}
	if err := compactAndRemove(l, e, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d, fileName(1))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file 1 after Remove: %v", err)
	}
	if err := readBack(l, e.entries()); err != nil {
		t.Fatal(err)
	}
	if dmg, err := l.Check(); err != nil || len(dmg) > 0 {
		t.Fatalf("Check: %v %v", dmg, err)
	}
}

// TestForeignNames: Open ignores names that are not value log files and
// never numbers a file as one of them.
func TestForeignNames(t *testing.T) {
	t.Parallel()
	m := newMem(t)
	l := open(t, m, 0)
	es := appendN(t, l, 1, 4)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	for _, name := range []string{"notes.txt", "0000000001.vlog.tmp", "1.vlog", "99999999999.vlog", "000000000x.vlog"} {
		f, err := m.OpenFile(dir+"/"+name, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("not a record"))
		f.Close()
	}
	if err := m.Mkdir(dir+"/0000000007.vlog", 0o755); err != nil {
		t.Fatal(err)
	}
	l = open(t, m, 0)
	defer l.Close()
	if fs := l.Files(); len(fs) != 1 || fs[0].Num != 0 {
		t.Fatalf("Files: %v, want file 0 alone", fs)
	}
	if err := readBack(l, es); err != nil {
		t.Fatal(err)
	}
	if r, err := l.Append(1, Payload, nil); err != nil || r.File != 1 {
		t.Fatalf("Append: %v %v, want file 1", r, err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
}
