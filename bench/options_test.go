package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

// TestValueOptions: Config's ValueThreshold and MaxMemory reach the DB a
// workload opens: a payload over the threshold goes to the value log, one
// under it (or with the threshold negative) stays out of it, and the
// budget is the one asked for.
func TestValueOptions(t *testing.T) {
	payload := makePayload(2048, 0)
	for _, tc := range []struct {
		name      string
		threshold int
		maxMemory int64
		inLog     bool
		budget    int64
	}{
		{"defaults", 0, 64 << 20, true, 64 << 20},
		{"in memory", -1, 32 << 20, false, 32 << 20},
		{"over the payload", 4096, -1, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{Durability: engine.SyncNever, ValueThreshold: tc.threshold, MaxMemory: tc.maxMemory}
			d, err := openDocket(cfg, dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Enqueue(context.Background(), payload); err != nil {
				t.Fatal(err)
			}
			if got := d.db.Stats().MemoryBudget; got != tc.budget {
				t.Errorf("memory budget %d, want %d", got, tc.budget)
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			if n := dirBytes(filepath.Join(dir, "vlog")); (n >= int64(len(payload))) != tc.inLog {
				t.Errorf("value log of %d bytes after a payload of %d; want it there: %v", n, len(payload), tc.inLog)
			}
		})
	}
}

// TestBacklogHeapProfile: W10 writes the heap's profile once the backlog
// is full and a CPU profile of its reopen when asked, and fails with the
// error when it cannot.
func TestBacklogHeapProfile(t *testing.T) {
	cfg := syncNever.config(t, "W10", 500)
	cfg.Duration = 20 * time.Millisecond
	cfg.HeapProfile = filepath.Join(t.TempDir(), "heap.pprof")
	cfg.ReopenProfile = filepath.Join(t.TempDir(), "reopen.cpu")
	run(t, cfg)
	for _, p := range []string{cfg.HeapProfile, cfg.ReopenProfile} {
		b, err := os.ReadFile(p)
		if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b { // a profile is gzipped
			t.Fatalf("profile %s of %d bytes: %v", filepath.Base(p), len(b), err)
		}
	}
	missing := filepath.Join(t.TempDir(), "no such dir", "x.pprof")
	for _, tc := range []struct {
		what string
		set  func(*Config)
	}{
		{"heap profile", func(c *Config) { c.HeapProfile = missing }},
		{"reopen profile", func(c *Config) { c.ReopenProfile = missing }},
	} {
		c := cfg
		c.HeapProfile, c.ReopenProfile = "", ""
		tc.set(&c)
		if _, err := Run(ctx, c); err == nil || !strings.Contains(err.Error(), tc.what) {
			t.Fatalf("a %s to a missing directory: %v", tc.what, err)
		}
	}
}
