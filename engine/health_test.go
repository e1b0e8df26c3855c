package engine

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
)

func TestErrReportsClosed(t *testing.T) {
	t.Parallel()
	db, err := OpenInMemory(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Err(); err != nil {
		t.Fatalf("Err on an open DB: %v", err)
	}
	db.Close()
	if err := db.Err(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Err after Close: %v", err)
	}
}

func TestErrReportsFailure(t *testing.T) {
	t.Parallel()
	var broken atomic.Bool
	db, err := Open(t.TempDir(), Options{failpoint: func(name string) error {
		if broken.Load() && name == "append.write" {
			return errors.New("disk on fire")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q := db.Queue(NS("p", "s"), "q")
	broken.Store(true)
	if _, err := q.Enqueue(context.Background(), Task{}); !errors.Is(err, ErrFailed) {
		t.Fatalf("enqueue with a failing log: %v", err)
	}
	if err := db.Err(); !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("Err after a failed write: %v", err)
	}
}
