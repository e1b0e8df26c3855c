//go:build unix || windows

package flock

import (
	"errors"
	"os"
	"path/filepath"
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
