package bench

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestJudge: each target passes exactly when its ratio meets the goal, and
// a target whose runs are missing is left out.
func TestJudge(t *testing.T) {
	t.Parallel()
	res := map[string]Result{
		"W1P":       {TasksPerSec: 20_000},
		"W4":        {TasksPerSec: 12_000},
		"W6":        {TasksPerSec: 2.99 * W6Before * 1000},
		"W6 split":  {TasksPerSec: 1_000},
		"W7":        {Latency: Percentiles{P99: time.Millisecond}},
		"W7 parked": {Latency: Percentiles{P99: 1500 * time.Microsecond}, Parked: 1000},
		"W8":        {Recovery: &Recovery{Tasks: 10, FromSnapshot: 400 * time.Millisecond, FromLog: 1100 * time.Millisecond}},
		"W9":        {Footprint: &Footprint{HeapBeyondPayload: 150.5}},
	}
	got := map[string]bool{}
	rates := map[string]float64{"W1P": 1000, "W4": 1000, "W6": 1000}
	for _, tg := range judge(res, rates, 16) {
		got[strings.Fields(tg.Name)[0]] = tg.Pass
	}
	want := map[string]bool{"W1P": true, "W4": false, "W6": false, "W7": true, "W8": false, "W9": false}
	for k, v := range want {
		if p, ok := got[k]; !ok || p != v {
			t.Errorf("%s: pass=%v (judged %v), want %v", k, p, ok, v)
		}
	}
	res["W4"] = Result{TasksPerSec: 12_800}
	res["W6"] = Result{TasksPerSec: 3.01 * W6Before * 1000}
	res["W8"] = Result{Recovery: &Recovery{FromSnapshot: 300 * time.Millisecond, FromLog: time.Second}}
	for _, tg := range judge(res, rates, 16) {
		if n := strings.Fields(tg.Name)[0]; (n == "W4" || n == "W6" || n == "W8") && !tg.Pass {
			t.Errorf("%s fails at %.2f", n, tg.Ratio)
		}
	}
	if ts := judge(map[string]Result{"W6": {TasksPerSec: 1}, "W3": {Mode: "interval", Tasks: RSSTasks, TasksPerSec: 1e7}}, nil, 16); len(ts) != 0 {
		t.Fatalf("judged %v without the runs it needs", ts)
	}
}

// TestJudgeMachineTargets: each per-mode throughput goal is judged on a
// run in its mode only, passes at its figure and fails below it; W3's
// peak RSS is judged on a run of RSSTasks tasks outside memory.
func TestJudgeMachineTargets(t *testing.T) {
	t.Parallel()
	for _, m := range MachineTargets {
		for _, c := range []struct {
			perSec float64
			pass   bool
		}{{m.PerSec, true}, {m.PerSec * 0.99, false}} {
			res := map[string]Result{m.Workload: {Mode: m.Mode, Tasks: 1000, TasksPerSec: c.perSec}}
			var hit []PerfTarget
			for _, tg := range judge(res, nil, 16) {
				if strings.Contains(tg.Name, m.Why) {
					hit = append(hit, tg)
				}
			}
			if len(hit) != 1 || hit[0].Pass != c.pass || hit[0].Ratio != c.perSec/1e6 {
				t.Errorf("%s %s at %.0f/s: judged %+v, want one with pass=%v", m.Workload, m.Mode, c.perSec, hit, c.pass)
			}
		}
		other := "interval"
		res := map[string]Result{m.Workload: {Mode: other, Tasks: 1000, TasksPerSec: m.PerSec * 10}}
		for _, tg := range judge(res, nil, 16) {
			if strings.Contains(tg.Name, m.Why) {
				t.Errorf("%s %s judged on a run in %s: %+v", m.Workload, m.Mode, other, tg)
			}
		}
	}
	rss := func(r Result) (PerfTarget, bool) {
		for _, tg := range judge(map[string]Result{"W3": r}, nil, 16) {
			if strings.Contains(tg.Name, "RSS") {
				return tg, true
			}
		}
		return PerfTarget{}, false
	}
	if tg, ok := rss(Result{Mode: "always", Tasks: RSSTasks, PeakRSS: RSSTarget}); !ok || !tg.Pass || tg.Ratio != RSSTarget/1e6 {
		t.Errorf("RSS at the target: %+v, %v", tg, ok)
	}
	if tg, ok := rss(Result{Mode: "never", Tasks: RSSTasks, PeakRSS: RSSTarget + 1}); !ok || tg.Pass {
		t.Errorf("RSS over the target: %+v, %v", tg, ok)
	}
	for _, r := range []Result{
		{Mode: "memory", Tasks: RSSTasks, PeakRSS: 1},     // nothing to compare with the peers' files
		{Mode: "always", Tasks: 2 * RSSTasks, PeakRSS: 1}, // another size
		{Mode: "always", Tasks: RSSTasks},                 // not measured
	} {
		if tg, ok := rss(r); ok {
			t.Errorf("RSS judged on %+v: %+v", r, tg)
		}
	}
}

// TestRunTargets runs the targets' workloads small, in memory, and prints
// a verdict for each one it ran.
func TestRunTargets(t *testing.T) {
	t.Parallel()
	cfg := memory.config(t, "", 300)
	cfg.Duration = 200 * time.Millisecond
	var ran []string
	ts, err := RunTargets(ctx, cfg, 2, nil, map[string]bool{"W7 parked": true}, func(r Result) { ran = append(ran, r.Workload) })
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ran, ",") != "W1P,W1P,W3,W3,W4,W4,W6,W6,W6 split,W6 split,W7,W9" {
		t.Fatalf("ran %v", ran)
	}
	var b bytes.Buffer
	if err := WritePerfTargets(&b, ts); err != nil {
		t.Fatal(err)
	}
	if len(ts) != 3 || !strings.Contains(b.String(), "W9 heap") || !strings.Contains(b.String(), "W3 memory") || !strings.Contains(b.String(), "W4 memory") {
		t.Fatalf("targets in memory without an fsync rate:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "PASS") && !strings.Contains(b.String(), "FAIL") {
		t.Fatalf("no verdict:\n%s", b.String())
	}
}

// TestMedianRound: the median round is the median by tasks/s, or by the
// ratio to the fsync rate measured before each round where there is one;
// Median is the same by tasks/s.
func TestMedianRound(t *testing.T) {
	t.Parallel()
	runs := []Result{{TasksPerSec: 300}, {TasksPerSec: 100}, {TasksPerSec: 200}}
	if i := medianRound(runs, []float64{0, 0, 0}); i != 2 {
		t.Errorf("median by tasks/s: round %d", i)
	}
	// Ratios 300/300 = 1, 100/10 = 10, 200/50 = 4: the median is round 2.
	if i := medianRound(runs, []float64{300, 10, 50}); i != 2 {
		t.Errorf("median by ratio: round %d", i)
	}
	// Ratios 3, 10, 1: the median is round 0.
	if i := medianRound(runs, []float64{100, 10, 200}); i != 0 {
		t.Errorf("median by ratio: round %d", i)
	}
	if i := medianRound(runs[:1], []float64{0}); i != 0 {
		t.Errorf("one round: %d", i)
	}
	// Median: by tasks/s, the upper of an even count, equals in their order.
	if m := Median(runs); m.TasksPerSec != 200 {
		t.Errorf("Median of 300, 100, 200: %v", m.TasksPerSec)
	}
	if m := Median(runs[:2]); m.TasksPerSec != 300 {
		t.Errorf("Median of 300, 100: %v", m.TasksPerSec)
	}
	eq := []Result{{TasksPerSec: 1, Workload: "a"}, {TasksPerSec: 1, Workload: "b"}, {TasksPerSec: 1, Workload: "c"}}
	if m := Median(eq); m.Workload != "b" {
		t.Errorf("Median of equals: %q", m.Workload)
	}
}

// TestRunTargetsFsyncFailure: at SyncAlways a failed fsync measurement
// stops the targets before the workload it was for runs, with an error
// that names it.
func TestRunTargetsFsyncFailure(t *testing.T) {
	t.Parallel()
	cfg := syncAlways.config(t, "", 300)
	boom := errors.New("disk gone")
	var ran []string
	_, err := RunTargets(ctx, cfg, 1, func() (float64, error) { return 0, boom },
		map[string]bool{"W3": true}, func(r Result) { ran = append(ran, r.Workload) })
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "before W1P") || len(ran) != 0 {
		t.Fatalf("err %v, ran %v", err, ran)
	}
}
