package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/docketdb/docket/bench"
)

func runBench(ctx context.Context, c cli, args []string) error {
	fs := newFlags(c, "bench")
	workloads := fs.String("workload", "W1,W2,W3,W4,W5,W6,W6R,W7", "workloads, comma separated: "+strings.Join(bench.Workloads, ","))
	n := fs.Int("n", 0, "tasks per workload (0: the workload's default, 100,000 for most)")
	duration := fs.Duration("duration", 0, "length of W6 and W6R (0: 10s)")
	producers := fs.Int("producers", 0, "producer goroutines (0: the workload's default)")
	workers := fs.Int("workers", 0, "worker goroutines (0: the workload's default)")
	claim := fs.Int("claim", 0, "tasks per claim (0: the workload's default)")
	payload := fs.Int("payload", 0, "payload bytes (0: about 100)")
	rate := fs.Int("rate", 0, "W6R offered load in tasks/s (0: 10,000)")
	durability := fs.String("durability", "always", "always, interval, never or memory")
	dir := fs.String("dir", "", "directory for the data (default: a temporary one)")
	asJSON := fs.Bool("json", false, "print JSON instead of tables")
	fsyncFor := fs.Duration("fsync", 3*time.Second, "how long to measure the raw fsync rate first (0: skip)")
	inFlight := fs.Int("inflight", 0, "W1P enqueues in flight (0: 1,024)")
	parked := fs.Int("parked", 0, "W7 claimers parked beside the one woken")
	split := fs.Bool("split", false, "W4, W6, W6R workers complete and claim in two commits")
	targets := fs.Bool("targets", false, "run the workloads of the performance targets ("+strings.Join(bench.TargetWorkloads, ", ")+
		") and judge each target PASS or FAIL, instead of -workload")
	skip := fs.String("skip", "", "with -targets, workloads not to run, comma separated (W8 takes longest)")
	if err := parse(c, fs, args); err != nil {
		return err
	}
	base := bench.Config{N: *n, Duration: *duration, Producers: *producers, Workers: *workers, ClaimBatch: *claim,
		PayloadBytes: *payload, OfferedRate: *rate, Dir: *dir, InFlight: *inFlight, Parked: *parked, SplitCommits: *split}
	if *durability == "memory" {
		base.InMemory = true
	} else {
		d, err := parseDurability(*durability)
		if err != nil {
			return err
		}
		base.Durability = d
	}
	if !*asJSON && isTerminal(c.stderr) {
		base.Progress = c.stderr
	}
	out := struct {
		Fsync   *bench.FsyncResult `json:"fsync,omitempty"`
		Results []bench.Result     `json:"results"`
		Targets []bench.Target     `json:"targets,omitempty"`
	}{}
	if *fsyncFor > 0 && !base.InMemory {
		fdir := *dir
		if fdir == "" {
			fdir = os.TempDir()
		}
		f, err := bench.MeasureFsync(fdir, *fsyncFor)
		if err != nil {
			return fmt.Errorf("measuring fsync: %w", err)
		}
		out.Fsync = &f
		if !*asJSON {
			fmt.Fprintln(c.stdout, "raw fsync of this machine (write 128 bytes + fsync):")
			f.Table(c.stdout)
			fmt.Fprintln(c.stdout)
		}
	}
	if *targets {
		var measure func() (float64, error)
		if out.Fsync != nil {
			fdir := *dir
			if fdir == "" {
				fdir = os.TempDir()
			}
			measure = func() (float64, error) {
				f, err := bench.MeasureFsync(fdir, min(*fsyncFor, time.Second))
				if err == nil && !*asJSON {
					fmt.Fprintf(c.stdout, "raw fsync now: %.0f/s\n", f.PerSec)
				}
				return f.PerSec, err
			}
		}
		skipped := map[string]bool{}
		for _, w := range strings.Split(*skip, ",") {
			if w = strings.TrimSpace(w); w != "" {
				skipped[strings.ToUpper(w)] = true
			}
		}
		ts, err := bench.RunTargets(ctx, base, measure, skipped, func(res bench.Result) {
			out.Results = append(out.Results, res)
			if !*asJSON {
				res.Table(c.stdout)
				fmt.Fprintln(c.stdout)
			}
		})
		if err != nil {
			return err
		}
		out.Targets = ts
		if *asJSON {
			enc := json.NewEncoder(c.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(out)
		}
		fmt.Fprintln(c.stdout, "summary:")
		if err := bench.WriteTable(c.stdout, out.Results); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "\ntargets (%s):\n", base.Mode())
		return bench.WriteTargets(c.stdout, ts)
	}
	for _, w := range strings.Split(*workloads, ",") {
		cfg := base
		cfg.Workload = strings.TrimSpace(w)
		res, err := bench.Run(ctx, cfg)
		if err != nil {
			return fmt.Errorf("%s: %w", cfg.Workload, err)
		}
		out.Results = append(out.Results, res)
		if !*asJSON {
			res.Table(c.stdout)
			if out.Fsync != nil && out.Fsync.PerSec > 0 && res.TasksPerSec > 0 && res.Recovery == nil && res.Footprint == nil {
				fmt.Fprintf(c.stdout, "vs raw fsync\t%.2fx the raw fsync rate\n", res.TasksPerSec/out.Fsync.PerSec)
			}
			fmt.Fprintln(c.stdout)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	fmt.Fprintln(c.stdout, "summary:")
	return bench.WriteTable(c.stdout, out.Results)
}
