package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestServeTargets judges fixed results: the verdicts and ratios are
// logic, not timing.
func TestServeTargets(t *testing.T) {
	t.Parallel()
	r := func(system, w, mode string, tps float64) Result {
		return Result{System: system, Workload: w, Mode: mode, TasksPerSec: tps, Tasks: 1000}
	}
	w1never := r(Serve, "W1", "never", 20_000)
	w1never.Latency = Percentiles{Count: 1000, P50: 35 * time.Microsecond, P99: 90 * time.Microsecond}
	w2 := r(Serve, "W2", "always", 900)
	w2.ServerMeasured, w2.ServerCPUPerTask = true, 30*time.Microsecond
	rs := []Result{
		r(Serve, "W1", "always", 100), r("nats-server", "W1", "durable", 200),
		r(Serve, "W1", "always", 300), r("nats-server", "W1", "durable", 200), // second round
		r(Serve, "W1", "always", 200), r("nats-server", "W1", "durable", 150), // third: medians 200 and 200
		r(Serve, "W1P", "always", 2500), r("nats-server", "W1P", "durable", 1000),
		w1never, r("nats-server", "W1", "nosync", 40_000),
		r(Serve, "W1P", "never", 160_000),
		w2, r("nats-server", "W2", "durable", 300), r("docket", "W2", "always", 2000),
		r(Serve, "W3", "always", 500), r("nats-server", "W3", "durable", 0),
		r(Serve, "W4", "always", 500), // no peer: left out
	}
	kept := func(system, mode string, p99 time.Duration) Result {
		x := r(system, "W6R", mode, 10_000)
		x.KeptUp, x.EndToEnd = true, &Percentiles{P99: p99}
		return x
	}
	rs = append(rs, kept(Serve, "always", 4*time.Millisecond), kept("nats-server", "durable", 2*time.Millisecond))
	ts := ServeTargets(rs, Serve, "nats-server", 40*time.Microsecond)
	got := map[string]PerfTarget{}
	for _, tg := range ts {
		got[tg.Name] = tg
	}
	want := map[string]struct {
		pass  bool
		ratio float64
	}{
		"W1 always: docket-serve vs nats-server":                           {true, 1}, // the medians, equal: >= 1.0 passes
		"W1P always: docket-serve vs nats-server":                          {true, 2.5},
		"W2 always: docket-serve vs nats-server":                           {true, 3},
		"W3 always: docket-serve vs nats-server":                           {true, 500},  // the peer did nothing
		"W6R always: docket-serve vs nats-server":                          {false, 0.5}, // both kept up: the e2e p99 decides
		"W1 never: docket-serve vs nats-server":                            {false, 0.5},
		"W1P always vs W1 always, docket-serve":                            {true, 12.5},
		"W1P never tasks/s, docket-serve":                                  {true, 0.16},
		"W2 always, docket-serve vs in process":                            {false, 0.45},
		"lone call without fsync (W1 never p50), docket-serve":             {true, 35},
		"W2 always server CPU/task, docket-serve vs the recorded baseline": {true, 0.75},
	}
	if len(got) != len(want) {
		t.Errorf("%d targets, want %d: %+v", len(got), len(want), ts)
	}
	for name, w := range want {
		tg, ok := got[name]
		if !ok {
			t.Errorf("no target %q", name)
			continue
		}
		if tg.Pass != w.pass || tg.Ratio < w.ratio-1e-9 || tg.Ratio > w.ratio+1e-9 {
			t.Errorf("%s: pass %v ratio %v, want %v %v (%s)", name, tg.Pass, tg.Ratio, w.pass, w.ratio, tg.Figure)
		}
	}
	if !strings.Contains(got["W2 always server CPU/task, docket-serve vs the recorded baseline"].Figure, "the pre-session build's (bench/README.md") {
		t.Error("the CPU target does not say what it compares with")
	}
	// Over the baseline fails; without one the target is left out.
	w2.ServerCPUPerTask = 41 * time.Microsecond
	for _, tg := range ServeTargets([]Result{w2}, Serve, "nats-server", 40*time.Microsecond) {
		if strings.Contains(tg.Name, "CPU") && tg.Pass {
			t.Errorf("41 µs against a baseline of 40 passed: %+v", tg)
		}
	}
	for _, tg := range ServeTargets([]Result{w2}, Serve, "nats-server", 0) {
		if strings.Contains(tg.Name, "CPU") {
			t.Errorf("a CPU target without a baseline: %+v", tg)
		}
	}
	// W1P at 149,999/s without fsync fails.
	for _, tg := range ServeTargets([]Result{r(Serve, "W1P", "never", 149_999)}, Serve, "nats-server", 0) {
		if tg.Pass {
			t.Errorf("%+v passed", tg)
		}
	}

	var b bytes.Buffer
	if err := WriteServeTable(&b, rs, Serve, "nats-server"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"durable: docket-serve", "2.50x", "server CPU/task", "30.0µs", "lone call (W1, never): docket-serve p50 35.0µs"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("table does not say %q:\n%s", s, b.String())
		}
	}
	b.Reset()
	if err := WritePerfTargets(&b, ts); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "PASS") || !strings.Contains(b.String(), "FAIL") {
		t.Errorf("targets:\n%s", b.String())
	}
}
