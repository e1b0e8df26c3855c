package wal

import (
	"errors"
	"os"
	"testing"
)

// TestBeforeWrite: the hook runs before records reach the file, once per
// write of pending records; when it fails, nothing of those records is
// written and the log is failed (ErrFailed) for every later call.
func TestBeforeWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	calls := 0
	var hookErr error
	var sizeAtHook int64
	l := openLog(t, dir, Options{BeforeWrite: func() error {
		calls++
		sizeAtHook = segmentBytes(t, dir)
		return hookErr
	}})
	if err := l.Append(1, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if calls != 0 {
		t.Fatalf("the hook ran %d times before a write", calls)
	}
	before := segmentBytes(t, dir)
	if err := l.Sync(1); err != nil {
		t.Fatal(err)
	}
	if calls != 1 || sizeAtHook != before {
		t.Fatalf("hook ran %d times, saw %d bytes of segments (%d before the write)", calls, sizeAtHook, before)
	}
	if err := l.Sync(1); err != nil || calls != 1 {
		t.Fatalf("a sync with nothing pending ran the hook (%d) or failed: %v", calls, err)
	}

	hookErr = errors.New("the values could not be written")
	if err := l.Append(2, []byte("two")); err != nil {
		t.Fatal(err)
	}
	size := segmentBytes(t, dir)
	if err := l.Sync(2); !errors.Is(err, ErrFailed) || !errors.Is(err, hookErr) {
		t.Fatalf("sync with a failing hook: %v, want ErrFailed wrapping the hook's error", err)
	}
	if got := segmentBytes(t, dir); got != size {
		t.Fatalf("the records reached the file after the hook failed: %d bytes, were %d", got, size)
	}
	if err := l.Append(3, []byte("three")); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after the hook failed: %v, want ErrFailed", err)
	}
	l.Abandon()
}

// segmentBytes is the bytes of the segment files in dir that are not
// zeros written ahead (the files' sizes less their trailing zeros).
func segmentBytes(t *testing.T, dir string) int64 {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range ents {
		b, err := os.ReadFile(dir + "/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		end := len(b)
		for end > 0 && b[end-1] == 0 {
			end--
		}
		n += int64(end)
	}
	return n
}
