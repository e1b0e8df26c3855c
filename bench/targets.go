package bench

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Target is one performance goal, stated as a ratio (or a figure) that is
// measured in one run on the machine at hand, so that it holds on any
// disk: durable rates are compared with the raw fsync rate measured in the
// same run, and a change with the behaviour it replaces, run alongside.
type Target struct {
	Name   string  `json:"name"`
	Want   string  `json:"want"`   // the goal, e.g. ">= 20x"
	Ratio  float64 `json:"ratio"`  // what was measured, in the goal's unit
	Figure string  `json:"figure"` // the figures the ratio comes from
	Pass   bool    `json:"pass"`
}

// TargetWorkloads are the runs RunTargets makes, in order.
var TargetWorkloads = []string{"W1P", "W4", "W6", "W6 split", "W7", "W7 parked", "W8", "W9"}

// TargetParked is how many idle claimers the W7 target parks beside the
// one a trial needs.
const TargetParked = 1000

// RunTargets runs the workloads the targets need, with base's durability
// and sizes (zero sizes take the targets' defaults), and judges each
// target; fsyncPerSec is the raw fsync rate measured just before (0 in
// memory: the targets against it are then left out). skip names workloads
// of TargetWorkloads not to run (their targets are left out). Each result
// is passed to done as it comes.
func RunTargets(ctx context.Context, base Config, fsyncPerSec float64, skip map[string]bool, done func(Result)) ([]Target, error) {
	res := map[string]Result{}
	for _, w := range TargetWorkloads {
		if skip[w] || skip[w[:2]] {
			continue
		}
		cfg := base
		cfg.Workload = w[:2]
		switch w {
		case "W1P":
			cfg.Workload = "W1P"
		case "W6 split":
			cfg.SplitCommits = true
		case "W7", "W7 parked":
			if cfg.N == 0 {
				cfg.N = 2000
			}
			cfg.Parked = 0
			if w == "W7 parked" {
				cfg.Parked = TargetParked
			}
		case "W8":
			if cfg.N == 0 {
				cfg.N = 1_000_000
			}
			if base.InMemory {
				continue
			}
		}
		r, err := Run(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", w, err)
		}
		res[w] = r
		if done != nil {
			done(r)
		}
	}
	workers := base.Workers
	if workers == 0 {
		workers = 16 // W4's default
	}
	return judge(res, fsyncPerSec, workers), nil
}

// judge computes the targets the results allow.
func judge(res map[string]Result, fsync float64, w4Workers int) []Target {
	var out []Target
	add := func(name, want string, ratio float64, pass bool, figure string, args ...any) {
		out = append(out, Target{Name: name, Want: want, Ratio: ratio, Pass: pass, Figure: fmt.Sprintf(figure, args...)})
	}
	if r, ok := res["W1P"]; ok && fsync > 0 {
		x := r.TasksPerSec / fsync
		add("W1P pipelined enqueues vs raw fsync", ">= 20x", x, x >= 20, "%s tasks/s, raw fsync %s/s", rate(r.TasksPerSec), rate(fsync))
	}
	if r, ok := res["W4"]; ok && fsync > 0 {
		workers := float64(w4Workers)
		x := r.TasksPerSec / (workers * fsync)
		add(fmt.Sprintf("W4 drain vs %.0f workers x raw fsync", workers), ">= 0.8x", x, x >= 0.8,
			"%s tasks/s, raw fsync %s/s, %.1f commits/fsync", rate(r.TasksPerSec), rate(fsync), r.GroupSize)
	}
	if r, ok := res["W6"]; ok {
		if s, ok := res["W6 split"]; ok && s.TasksPerSec > 0 {
			x := r.TasksPerSec / s.TasksPerSec
			add("W6 completed/s vs complete and claim in two commits", ">= 3x", x, x >= 3,
				"%s vs %s completed/s", rate(r.TasksPerSec), rate(s.TasksPerSec))
		}
	}
	if r, ok := res["W7 parked"]; ok {
		if s, ok := res["W7"]; ok && s.Latency.P99 > 0 {
			x := float64(r.Latency.P99) / float64(s.Latency.P99)
			add(fmt.Sprintf("W7 wake-up p99 with %d parked vs none", r.Parked), "<= 1.5x", x, x <= 1.5,
				"p99 %s vs %s (p50 %s vs %s)", dur(r.Latency.P99), dur(s.Latency.P99), dur(r.Latency.P50), dur(s.Latency.P50))
		}
	}
	if r, ok := res["W8"]; ok && r.Recovery != nil {
		rc := r.Recovery
		snap, log := rc.FromSnapshot, rc.FromLog
		x := log.Seconds() / snap.Seconds()
		add(fmt.Sprintf("W8 open of %d tasks from a snapshot", rc.Tasks), "<= 0.4 s and >= 3x faster than the log",
			x, snap <= 400*time.Millisecond && x >= 3, "snapshot %v, log %v", snap.Round(time.Millisecond), log.Round(time.Millisecond))
	}
	if r, ok := res["W9"]; ok && r.Footprint != nil {
		f := r.Footprint
		add("W9 heap per pending task beyond the payload", "<= 150 B", f.HeapBeyondPayload, f.HeapBeyondPayload <= 150,
			"%.0f B per task, %d-byte payloads", f.HeapBeyondPayload, f.PayloadBytes)
	}
	return out
}

// WriteTargets writes the targets as a table with PASS or FAIL.
func WriteTargets(w io.Writer, ts []Target) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "target\twant\tmeasured\t\tfrom")
	for _, t := range ts {
		verdict := "FAIL"
		if t.Pass {
			verdict = "PASS"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%s\t%s\n", t.Name, t.Want, t.Ratio, verdict, t.Figure)
	}
	return tw.Flush()
}
