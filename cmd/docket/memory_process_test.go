//go:build linux

package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docketdb/docket/client"
	"github.com/docketdb/docket/engine"
)

// peakRSSOf reads a process's peak resident set (VmHWM) in bytes.
func peakRSSOf(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/PID/status")
	return 0
}

// TestServeProcessMemoryBudget: a producer that never stops fills a server
// started with -max-memory and gets ErrFull; the server's peak RSS stays
// within the budget, its reserve and 64 MiB; after a kill -9 the restarted
// server holds every acknowledged task, still refuses more once the room
// a refused batch left is taken, and a
// consumer drains them all, after which enqueues are taken again.
func TestServeProcessMemoryBudget(t *testing.T) {
	const budget = 16 << 20
	dir := filepath.Join(t.TempDir(), "data")
	// The payloads stay in memory, where the budget counts their bytes.
	args := []string{"-dir", dir, "-durability", "never", "-max-memory", "16MiB", "-value-threshold", "off"}
	p := startServe(t, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dial := func(url string) *client.Client {
		c, err := client.Dial(ctx, url, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	q := dial(p.base).Queue(engine.NS("acme", "prod"), "backlog")
	payload := []byte(`"` + strings.Repeat("x", 1022) + `"`)
	batch := make([]engine.Task, 50)
	for i := range batch {
		batch[i] = engine.Task{Payload: payload}
	}
	acked := map[uint64]bool{}
	var err error
	for len(acked) < 100_000 {
		var res []engine.Enqueued
		if res, err = q.EnqueueBatch(ctx, batch); err != nil {
			break
		}
		for _, r := range res {
			acked[r.ID] = true
		}
	}
	if !errors.Is(err, engine.ErrFull) {
		t.Fatalf("after %d tasks: %v, want ErrFull", len(acked), err)
	}
	if len(acked) < budget/2048 {
		t.Fatalf("a budget of 16 MiB took %d tasks of 1 KiB", len(acked))
	}
	if rss := peakRSSOf(t, p.cmd.Process.Pid); rss > budget+budget/8+64<<20 {
		t.Fatalf("peak RSS %d MiB with a budget of 16 MiB", rss>>20)
	}

	p.signal(t, syscall.SIGKILL)
	p = startServe(t, args...)
	q = dial(p.base).Queue(engine.NS("acme", "prod"), "backlog")
	// The refused batch left room for a few single tasks, and no more.
	for i := 0; ; i++ {
		res, err := q.Enqueue(ctx, engine.Task{Payload: payload})
		if errors.Is(err, engine.ErrFull) {
			break
		}
		if err != nil || i == 60 {
			t.Fatalf("enqueue %d after the restart: %v, want ErrFull by the 50th", i, err)
		}
		acked[res.ID] = true
	}
	for len(acked) > 0 {
		ls, err := q.Claim(ctx, "drain", time.Minute, 500)
		if err != nil {
			t.Fatal(err)
		}
		if len(ls) == 0 {
			t.Fatalf("the queue is empty with %d acknowledged tasks not seen", len(acked))
		}
		errs, err := q.CompleteBatch(ctx, ls)
		if err := errors.Join(append(errs, err)...); err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			if !acked[l.ID] {
				t.Fatalf("task %d was claimed but never acknowledged", l.ID)
			}
			delete(acked, l.ID)
		}
	}
	if _, err := q.Enqueue(ctx, engine.Task{Payload: payload}); err != nil {
		t.Fatalf("an enqueue once drained: %v", err)
	}
}
