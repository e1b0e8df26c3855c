package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/docketdb/docket/bench"
	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/bytesize"
)

// benchPeer is the name bench/peers gives NATS JetStream reached over
// loopback, the peer of the remote targets.
const benchPeer = "nats-tcp"

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
	threshold := fs.Int("value-threshold", 0, "payloads of at least this many bytes are kept in the value log on disk (0: the engine's 1 KiB; negative: every payload in memory)")
	var maxMemory int64
	fs.Func("max-memory", "memory `budget` of the DB: bytes, or with a unit (512MiB, 4GiB), or off (default: a quarter of the machine's or the cgroup's memory)", func(v string) error {
		n, err := bytesize.Parse(v)
		maxMemory = n
		return err
	})
	heapProfile := fs.String("heap-profile", "", "W10 writes the heap's profile to this `file` once the backlog is full (go tool pprof reads it)")
	reopenProfile := fs.String("reopen-profile", "", "W10 writes a CPU profile of its reopen to this `file`")
	standingProfile := fs.String("standing-profile", "", "W10 writes a CPU profile of its standing phase to this `file`")
	standingRate := fs.Int("standing-rate", 0, "W10 paces its standing phase to this many claims a second, each claim's latency counted from its scheduled time (0: as fast as the workers go)")
	standingTrace := fs.String("standing-trace", "", "W10 writes an execution trace (go tool trace) of its standing phase to this `file`")
	durability := fs.String("durability", "always", "always, interval, never or memory; several comma separated run in turn")
	dir := fs.String("dir", "", "directory for the data (default: a temporary one)")
	asJSON := fs.Bool("json", false, "print JSON instead of tables")
	fsyncFor := fs.Duration("fsync", 3*time.Second, "how long to measure the raw fsync rate first (0: skip)")
	inFlight := fs.Int("inflight", 0, "W1P enqueues in flight (0: 1,024)")
	parked := fs.Int("parked", 0, "W7 claimers parked beside the one woken")
	split := fs.Bool("split", false, "W4, W6, W6R workers complete and claim in two commits")
	targets := fs.Bool("targets", false, "run the workloads of the performance targets ("+strings.Join(bench.TargetWorkloads, ", ")+
		") in each -durability and judge each target PASS or FAIL, instead of -workload (in process only)")
	skip := fs.String("skip", "", "with -targets, workloads not to run, comma separated (W8 takes longest)")
	remote := fs.Bool("remote", false, "run each workload in process and through the client to a server on 127.0.0.1 (started in this process), alternating; print the network's cost and the remote targets")
	server := fs.String("server", "", "with -remote: drive the running server at this URL instead (each run on a queue of its own; its durability is its own)")
	token := fs.String("token", "", "bearer token for -server (default $DOCKET_TOKEN)")
	rounds := fs.Int("rounds", 1, "runs of each workload and system, alternating; the median is reported (with -targets: a throughput workload runs this many times in a row, each after its own fsync measurement at -durability always, and its median round is judged; W7, W8, W9 run once)")
	if err := parse(c, fs, args); err != nil {
		return err
	}
	if *rounds < 1 {
		return usageError{"bench: -rounds must be at least 1"}
	}
	if *server != "" {
		*remote = true
		if *token == "" {
			*token = os.Getenv("DOCKET_TOKEN")
		}
	}
	if *targets && *remote {
		return usageError{"bench: -targets runs in process; the remote targets are those of -remote"}
	}
	base := bench.Config{N: *n, Duration: *duration, Producers: *producers, Workers: *workers, ClaimBatch: *claim,
		PayloadBytes: *payload, ValueThreshold: *threshold, MaxMemory: maxMemory, HeapProfile: *heapProfile, ReopenProfile: *reopenProfile, StandingProfile: *standingProfile, StandingTrace: *standingTrace, StandingRate: *standingRate, OfferedRate: *rate, Dir: *dir, InFlight: *inFlight, Parked: *parked, SplitCommits: *split}
	var modes []bench.Config
	anyDisk := false
	for _, m := range strings.Split(*durability, ",") {
		cfg := base
		if m = strings.TrimSpace(m); m == "memory" {
			cfg.InMemory = true
		} else {
			d, err := parseDurability(m)
			if err != nil {
				return err
			}
			cfg.Durability = d
			anyDisk = true
		}
		if !*asJSON && isTerminal(c.stderr) {
			cfg.Progress = c.stderr
		}
		modes = append(modes, cfg)
	}
	out := struct {
		Fsync *bench.FsyncResult `json:"fsync,omitempty"`
		// Floor is, with -remote at SyncAlways, what a bare net/http call
		// adds to an fsync (bench.HTTPFloor).
		Floor   *bench.HTTPFloor `json:"floor,omitempty"`
		Results []bench.Result   `json:"results"`
		// Targets are the remote mode's; PerfTargets those of -targets.
		Targets     []bench.Target     `json:"targets,omitempty"`
		PerfTargets []bench.PerfTarget `json:"perf_targets,omitempty"`
	}{}
	fdir := *dir
	if fdir == "" {
		fdir = os.TempDir()
	}
	if *fsyncFor > 0 && anyDisk {
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
	// With -remote at SyncAlways, each round starts with the floor of a
	// durable call (bench.HTTPFloor); the median round's is reported.
	var floors []bench.HTTPFloor
	measureFloor := out.Fsync != nil && *remote && *server == "" && slices.ContainsFunc(modes, func(m bench.Config) bool {
		return !m.InMemory && m.Durability == engine.SyncAlways
	})
	writeJSON := func() error {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if *targets {
		var measure func() (float64, error)
		if out.Fsync != nil {
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
		var judged [][]bench.PerfTarget
		for _, mode := range modes {
			ts, err := bench.RunTargets(ctx, mode, *rounds, measure, skipped, func(res bench.Result) {
				out.Results = append(out.Results, res)
				if !*asJSON {
					res.Table(c.stdout)
					fmt.Fprintln(c.stdout)
				}
			})
			if err != nil {
				return err
			}
			out.PerfTargets = append(out.PerfTargets, ts...)
			judged = append(judged, ts)
		}
		if *asJSON {
			return writeJSON()
		}
		fmt.Fprintln(c.stdout, "summary:")
		if err := bench.WriteTable(c.stdout, out.Results); err != nil {
			return err
		}
		for i, ts := range judged {
			fmt.Fprintf(c.stdout, "\ntargets (%s):\n", modes[i].Mode())
			if err := bench.WritePerfTargets(c.stdout, ts); err != nil {
				return err
			}
		}
		return nil
	}
	for range *rounds {
		if measureFloor {
			f, err := bench.MeasureHTTPFloor(ctx, fdir, *fsyncFor)
			if err != nil {
				return fmt.Errorf("measuring a bare net/http call: %w", err)
			}
			floors = append(floors, f)
		}
		for _, mode := range modes {
			for _, w := range strings.Split(*workloads, ",") {
				cfg := mode
				cfg.Workload = strings.TrimSpace(w)
				ways := []bench.Config{cfg}
				if up := strings.ToUpper(cfg.Workload); *remote && up != "W8" && up != "W9" && up != "W1P" {
					r := cfg
					r.Remote, r.Server, r.Token = true, *server, *token
					ways = append(ways, r)
				}
				for _, cfg := range ways {
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
			}
		}
	}
	if *remote {
		out.Targets = bench.Targets(out.Results, benchPeer)
	}
	if len(floors) > 0 {
		f := bench.MedianFloor(floors)
		out.Floor = &f
	}
	if *asJSON {
		return writeJSON()
	}
	fmt.Fprintln(c.stdout, "summary:")
	if err := bench.WriteTable(c.stdout, out.Results); err != nil {
		return err
	}
	if !*remote {
		return nil
	}
	fmt.Fprintln(c.stdout, "\nremote (through the client over loopback) against in process:")
	if err := bench.WriteRemote(c.stdout, out.Results); err != nil {
		return err
	}
	if out.Floor != nil {
		fmt.Fprintln(c.stdout)
		if err := bench.WriteFloor(c.stdout, *out.Floor, out.Results); err != nil {
			return err
		}
	}
	fmt.Fprintln(c.stdout, "\ntargets (-remote measures the first two; the JetStream ones need bench/peers -remote):")
	return bench.WriteTargets(c.stdout, out.Targets)
}
