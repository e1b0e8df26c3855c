package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestJudge: each target passes exactly when its ratio meets the goal, and
// a target whose runs are missing is left out.
func TestJudge(t *testing.T) {
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
	if ts := judge(map[string]Result{"W6": {TasksPerSec: 1}}, nil, 16); len(ts) != 0 {
		t.Fatalf("judged %v without the runs it needs", ts)
	}
}

// TestRunTargets runs the targets' workloads small, in memory, and prints
// a verdict for each one it ran.
func TestRunTargets(t *testing.T) {
	cfg := memory.config(t, "", 300)
	cfg.Duration = 200 * time.Millisecond
	var ran []string
	ts, err := RunTargets(ctx, cfg, nil, map[string]bool{"W7 parked": true}, func(r Result) { ran = append(ran, r.Workload) })
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ran, ",") != "W1P,W4,W6,W6 split,W7,W9" {
		t.Fatalf("ran %v", ran)
	}
	var b bytes.Buffer
	if err := WritePerfTargets(&b, ts); err != nil {
		t.Fatal(err)
	}
	if len(ts) != 1 || !strings.Contains(b.String(), "W9 heap") {
		t.Fatalf("targets in memory without an fsync rate:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "PASS") && !strings.Contains(b.String(), "FAIL") {
		t.Fatalf("no verdict:\n%s", b.String())
	}
}
