package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBacklogStandingProfiles: W10 reports what the runtime did over its
// standing phase, writes a CPU profile and an execution trace of the phase
// when asked, and fails with the error when it cannot.
func TestBacklogStandingProfiles(t *testing.T) {
	cfg := syncNever.config(t, "W10", 500)
	cfg.Duration = 50 * time.Millisecond
	cfg.StandingProfile = filepath.Join(t.TempDir(), "standing.cpu")
	cfg.StandingTrace = filepath.Join(t.TempDir(), "standing.trace")
	res := run(t, cfg)
	b, err := os.ReadFile(cfg.StandingProfile)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b { // a profile is gzipped
		t.Fatalf("profile of %d bytes: %v", len(b), err)
	}
	if b, err := os.ReadFile(cfg.StandingTrace); err != nil || !bytes.HasPrefix(b, []byte("go 1.")) {
		t.Fatalf("trace of %d bytes: %v", len(b), err)
	}
	rt := res.Filled.StandingRuntime
	if res.Filled.Standing.Count == 0 || rt.HeapGoal == 0 || rt.SchedP99 <= 0 || rt.GCCPU < 0 || rt.GCCPU > 1 {
		t.Errorf("standing phase: %+v, runtime %+v", res.Filled.Standing, rt)
	}
	missing := filepath.Join(t.TempDir(), "no such dir", "x")
	for _, tc := range []struct {
		what string
		set  func(*Config)
	}{
		{"standing profile", func(c *Config) { c.StandingProfile = missing }},
		{"standing trace", func(c *Config) { c.StandingTrace = missing }},
	} {
		c := cfg
		c.StandingProfile, c.StandingTrace = "", ""
		tc.set(&c)
		if _, err := Run(ctx, c); err == nil || !strings.Contains(err.Error(), tc.what) {
			t.Fatalf("a %s to a missing directory: %v", tc.what, err)
		}
	}
}

// TestBacklogStandingPaced: a paced standing phase claims no faster than
// its schedule (a claim is due every 1/rate; the workers may run at most
// one claim ahead each), says the rate it was paced to, and a negative
// rate is refused.
func TestBacklogStandingPaced(t *testing.T) {
	cfg := syncNever.config(t, "W10", 500)
	cfg.Duration = 200 * time.Millisecond
	cfg.StandingRate = 500
	res := run(t, cfg)
	b := res.Filled
	if b.StandingRate != 500 || b.Standing.Count == 0 || b.StandingLate == nil || b.StandingLate.Count != b.Standing.Count {
		t.Fatalf("standing phase paced to %d: %d claims", b.StandingRate, b.Standing.Count)
	}
	// 200 ms at 500/s schedules about 100 claims; the schedule's first
	// claims are due at once and each worker may hold one more.
	if most := int64(100 + 2*cfg.Workers + 16); int64(b.Standing.Count) > most {
		t.Fatalf("%d claims in a phase paced to about 100 (at most %d)", b.Standing.Count, most)
	}
	var table strings.Builder
	if err := res.Table(&table); err != nil || !strings.Contains(table.String(), "paced to 500/s") || !strings.Contains(table.String(), "began late by") {
		t.Errorf("the report does not say the phase was paced (%v):\n%s", err, table.String())
	}
	c := cfg
	c.StandingRate = -1
	if _, err := Run(ctx, c); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Fatalf("a negative standing rate: %v", err)
	}
}

// TestGCShare: the GC's share of the CPU used, from the runtime's
// estimates, is a share: at most 1 when the estimates overlap (as they did
// on an idle machine, 1.5), 0 when nothing was used.
func TestGCShare(t *testing.T) {
	for _, c := range []struct {
		gc, total, idle, want float64
	}{
		{0.1, 2, 1, 0.1},
		{0.5, 1, 0.5, 1},
		{0.75, 1, 0.5, 1}, // 1.5 of what was used: the estimates overlap
		{0.1, 1, 1, 0},    // nothing used
		{0.1, 1, 2, 0},
		{0, 2, 1, 0},
	} {
		if got := gcShare(c.gc, c.total, c.idle); got != c.want {
			t.Errorf("gcShare(%v, %v, %v) = %v, want %v", c.gc, c.total, c.idle, got, c.want)
		}
	}
}
