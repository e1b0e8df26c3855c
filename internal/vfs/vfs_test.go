package vfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/docketdb/docket/internal/flock"
)

// TestFS runs the same operations on the operating system's file system
// and on a MemFS: they must agree on results and errors.
func TestFS(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		fs   FS
		dir  string
	}{{"os", Default, t.TempDir()}, {"mem", NewMem(), "/data"}} {
		t.Run(c.name, func(t *testing.T) {
			fsys, dir := c.fs, c.dir
			if err := fsys.MkdirAll(filepath.Join(dir, "a", "b"), 0o755); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, "a", "f")
			f, err := fsys.OpenFile(p, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write([]byte("hello")); err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte("XY"), 7); err != nil {
				t.Fatal(err)
			}
			if err := f.Datasync(); err != nil {
				t.Fatal(err)
			}
			b := make([]byte, 9)
			if n, err := f.ReadAt(b, 0); n != 9 || err != nil && err != io.EOF {
				t.Fatalf("ReadAt: %d %v", n, err)
			}
			if !bytes.Equal(b, []byte("hello\x00\x00XY")) {
				t.Fatalf("content %q", b)
			}
			if err := f.Truncate(4); err != nil {
				t.Fatal(err)
			}
			if st, err := f.Stat(); err != nil || st.Size() != 4 || st.IsDir() {
				t.Fatalf("stat: %v %v", st, err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if got, err := ReadFile(fsys, p); err != nil || string(got) != "hell" {
				t.Fatalf("ReadFile: %q %v", got, err)
			}
			if _, err := fsys.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); !errors.Is(err, fs.ErrExist) {
				t.Fatalf("O_EXCL on an existing file: %v", err)
			}
			if _, err := fsys.Open(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("open missing: %v", err)
			}
			q := filepath.Join(dir, "a", "g")
			if err := fsys.Rename(p, q); err != nil {
				t.Fatal(err)
			}
			if _, err := fsys.Stat(p); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("stat of the old name: %v", err)
			}
			if err := fsys.Rename(p, q); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("rename of a missing file: %v", err)
			}
			ents, err := fsys.ReadDir(filepath.Join(dir, "a"))
			if err != nil || len(ents) != 2 || ents[0].Name() != "b" || !ents[0].IsDir() || ents[1].Name() != "g" || !ents[1].Type().IsRegular() {
				t.Fatalf("ReadDir: %v %v", ents, err)
			}
			d, err := fsys.Open(filepath.Join(dir, "a"))
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Sync(); err != nil {
				t.Fatal(err)
			}
			d.Close()
			if err := fsys.Remove(filepath.Join(dir, "a")); err == nil {
				t.Fatal("removed a directory that is not empty")
			}
			if err := fsys.Remove(q); err != nil {
				t.Fatal(err)
			}
			if err := fsys.Remove(q); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("remove twice: %v", err)
			}
			if err := fsys.Mkdir(filepath.Join(dir, "a", "b"), 0o755); !errors.Is(err, fs.ErrExist) {
				t.Fatalf("mkdir of an existing directory: %v", err)
			}
			// Locks: exclusive excludes a second open of the same file.
			lp := filepath.Join(dir, "LOCK")
			l1, err := fsys.OpenFile(lp, os.O_CREATE|os.O_RDWR, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if err := fsys.Lock(l1, true); err != nil {
				t.Fatal(err)
			}
			l2, err := fsys.Open(lp)
			if err != nil {
				t.Fatal(err)
			}
			if err := fsys.Lock(l2, false); !errors.Is(err, flock.ErrHeld) {
				t.Fatalf("shared lock beside an exclusive one: %v", err)
			}
			l1.Close()
			if err := fsys.Lock(l2, false); err != nil {
				t.Fatalf("shared lock once the exclusive one is released: %v", err)
			}
			l2.Close()
		})
	}
}

func write(t *testing.T, fsys FS, name, data string, sync bool) {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
}

func syncDir(t *testing.T, fsys FS, name string) {
	t.Helper()
	d, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	d.Close()
}

func content(fsys FS, name string) string {
	b, err := ReadFile(fsys, name)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// TestMemCrash: a power loss keeps what was synced and nothing else.
func TestMemCrash(t *testing.T) {
	t.Parallel()
	m := NewMem()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	syncDir(t, m, "/")
	write(t, m, "/d/synced", "one", true)
	write(t, m, "/d/unsynced", "two", false)
	syncDir(t, m, "/d")

	// After the directory sync: appends not synced are lost, a file never
	// synced is empty.
	f, _ := m.OpenFile("/d/synced", os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte("+more"))
	f.Close()
	c := m.CrashClone()
	if got := content(c, "/d/synced"); got != "one" {
		t.Errorf("synced file after a crash: %q, want %q", got, "one")
	}
	if got := content(c, "/d/unsynced"); got != "" {
		t.Errorf("never synced file after a crash: %q, want empty", got)
	}
	if got := content(m.Clone(), "/d/synced"); got != "one+more" {
		t.Errorf("a killed process keeps what it wrote: %q", got)
	}
	if got := content(m, "/d/synced"); got != "one+more" {
		t.Errorf("the crash changed the original: %q", got)
	}

	// A file created, synced, but its directory not: gone.
	write(t, m, "/d/new", "three", true)
	if got := content(m.CrashClone(), "/d/new"); got != "<open /d/new: file does not exist>" {
		t.Errorf("created without a directory sync, after a crash: %q", got)
	}
	// A rename not synced in its directory is undone; removed files stay.
	if err := m.Rename("/d/synced", "/d/renamed"); err != nil {
		t.Fatal(err)
	}
	if err := m.Remove("/d/unsynced"); err != nil {
		t.Fatal(err)
	}
	c = m.CrashClone()
	if got := content(c, "/d/synced"); got != "one" {
		t.Errorf("renamed without a directory sync, the old name after a crash: %q", got)
	}
	if _, err := c.Stat("/d/renamed"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("renamed without a directory sync, the new name after a crash: %v", err)
	}
	if _, err := c.Stat("/d/unsynced"); err != nil {
		t.Errorf("removed without a directory sync, after a crash: %v", err)
	}
	// Once the directory is synced, all of it holds.
	syncDir(t, m, "/d")
	c = m.CrashClone()
	if got := content(c, "/d/renamed"); got != "one" {
		t.Errorf("renamed and synced, after a crash: %q", got)
	}
	for _, gone := range []string{"/d/synced", "/d/unsynced"} {
		if _, err := c.Stat(gone); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after a synced rename or removal and a crash: %v", gone, err)
		}
	}
	// A directory made but its parent not synced is gone with its files.
	if err := m.MkdirAll("/e", 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, m, "/e/f", "x", true)
	syncDir(t, m, "/e")
	if _, err := m.CrashClone().Stat("/e"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a directory whose parent was never synced, after a crash: %v", err)
	}
	syncDir(t, m, "/")
	if got := content(m.CrashClone(), "/e/f"); got != "x" {
		t.Errorf("after the parent's sync: %q", got)
	}
	files := m.Files("/")
	if len(files) != 3 || string(files["d/new"]) != "three" || string(files["d/renamed"]) != "one+more" || string(files["e/f"]) != "x" {
		t.Errorf("Files: %q", files)
	}
}

// TestMemClosed: a closed file refuses every operation.
func TestMemClosed(t *testing.T) {
	t.Parallel()
	m := NewMem()
	f, err := m.OpenFile("/f", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := f.Write([]byte("x")); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("write after close: %v", err)
	}
	if err := f.Sync(); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("sync after close: %v", err)
	}
	if err := f.Close(); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("close twice: %v", err)
	}
	r, _ := m.Open("/f")
	if _, err := r.Write([]byte("x")); err == nil {
		t.Error("wrote to a file opened read-only")
	}
}
