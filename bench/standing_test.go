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
