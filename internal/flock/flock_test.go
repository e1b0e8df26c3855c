//go:build unix || windows

package flock

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func open(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestExclusiveExcludesEveryone: an exclusive lock keeps out a second
// exclusive and a shared one; closing the holder frees the file.
func TestExclusiveExcludesEveryone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	a, b := open(t, path), open(t, path)
	if err := Exclusive(a); err != nil {
		t.Fatal(err)
	}
	if err := Exclusive(b); !errors.Is(err, ErrHeld) {
		t.Fatalf("second exclusive: %v, want ErrHeld", err)
	}
	if err := Shared(b); !errors.Is(err, ErrHeld) {
		t.Fatalf("shared under exclusive: %v, want ErrHeld", err)
	}
	a.Close()
	if err := Exclusive(b); err != nil {
		t.Fatalf("after the holder closed: %v", err)
	}
}

// TestSharedLocksShare: readers share, a writer waits for all of them.
func TestSharedLocksShare(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	a, b, c := open(t, path), open(t, path), open(t, path)
	if err := Shared(a); err != nil {
		t.Fatal(err)
	}
	if err := Shared(b); err != nil {
		t.Fatalf("second shared: %v", err)
	}
	if err := Exclusive(c); !errors.Is(err, ErrHeld) {
		t.Fatalf("exclusive under shared: %v, want ErrHeld", err)
	}
}

// TestExclusiveRecordsHolder: the exclusive holder records its process id,
// which Holder reads while the lock is held; a shared holder records
// nothing, and a missing file has no holder.
func TestExclusiveRecordsHolder(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "lock")
	a, b := open(t, path), open(t, path)
	if err := Shared(a); err != nil {
		t.Fatal(err)
	}
	// Only the kernel knows a shared holder: it records nothing.
	want := 0
	if runtime.GOOS == "linux" {
		want = os.Getpid()
	}
	if pid := Holder(path); pid != want {
		t.Errorf("holder under a shared lock: %d, want %d", pid, want)
	}
	a.Close()
	if err := Exclusive(b); err != nil {
		t.Fatal(err)
	}
	if pid := Holder(path); pid != os.Getpid() {
		t.Errorf("holder: %d, want %d", pid, os.Getpid())
	}
	b.Close()
	// An id recorded by a process that is gone names no one.
	if err := os.WriteFile(path, []byte("\n1073741823\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if pid := Holder(path); pid != 0 {
		t.Errorf("holder recorded by a process that is gone: %d, want 0", pid)
	}
	if pid := Holder(filepath.Join(dir, "missing")); pid != 0 {
		t.Errorf("holder of a missing file: %d", pid)
	}
}

// TestUnlockReleases: Unlock frees the file while the holder stays open.
func TestUnlockReleases(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	a, b := open(t, path), open(t, path)
	if err := Exclusive(a); err != nil {
		t.Fatal(err)
	}
	if err := Unlock(a); err != nil {
		t.Fatal(err)
	}
	if err := Exclusive(b); err != nil {
		t.Fatalf("after the holder unlocked: %v", err)
	}
	if err := Shared(a); !errors.Is(err, ErrHeld) {
		t.Fatalf("shared under exclusive: %v, want ErrHeld", err)
	}
}
