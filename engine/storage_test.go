package engine

import (
	"errors"
	"testing"
)

// TestStorageModes pins what each way of opening a DB does with its
// batches (storage.go): which take writes, which keep a log and snapshots,
// and that Close releases what the storage holds, so that the directory
// opens again.
func TestStorageModes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seed, err := Open(dir, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := seed.Queue(nsA, "q").Enqueue(ctx, Task{}); err != nil {
		t.Fatal(err)
	}
	if err := seed.Close(); err != nil {
		t.Fatal(err)
	}
	open := map[string]func(t *testing.T) *DB{
		"disk": func(t *testing.T) *DB {
			db, err := Open(dir, Options{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			return db
		},
		"memory": func(t *testing.T) *DB {
			db, err := OpenInMemory(Options{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			return db
		},
		"read-only": func(t *testing.T) *DB {
			db, err := OpenReadOnly(dir, Options{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			return db
		},
		"replicated": func(t *testing.T) *DB {
			l := &localLog{}
			m := &member{log: l}
			db, err := OpenReplicated(Options{Logger: quiet}, m)
			if err != nil {
				t.Fatal(err)
			}
			m.db = db
			l.members = append(l.members, m)
			return db
		},
	}
	for _, tc := range []struct {
		mode     string
		write    error // what a write returns
		logged   bool  // Stats count log bytes
		snapshot bool  // Checkpoint writes one
	}{
		{"disk", nil, true, true},
		{"memory", nil, false, false},
		{"read-only", ErrReadOnly, false, false},
		{"replicated", nil, false, false},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			db := open[tc.mode](t)
			_, err := db.Queue(nsA, "q").Enqueue(ctx, Task{})
			if !errors.Is(err, tc.write) {
				t.Fatalf("enqueue: %v, want %v", err, tc.write)
			}
			err = db.Checkpoint(ctx)
			if !errors.Is(err, tc.write) {
				t.Fatalf("checkpoint: %v, want %v", err, tc.write)
			}
			s := db.Stats()
			if got := s.LogBytes > 0; got != tc.logged {
				t.Errorf("log bytes %d: logged %v, want %v", s.LogBytes, got, tc.logged)
			}
			if got := s.Snapshots > 0; got != tc.snapshot {
				t.Errorf("%d snapshots, want some: %v", s.Snapshots, tc.snapshot)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			// Whatever the mode held of the directory is released.
			again, err := Open(dir, Options{Logger: quiet})
			if err != nil {
				t.Fatalf("open after close: %v", err)
			}
			if err := again.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
