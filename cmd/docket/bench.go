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
	durability := fs.String("durability", "always", "always, interval, never or memory; several comma separated run in turn")
	dir := fs.String("dir", "", "directory for the data (default: a temporary one)")
	asJSON := fs.Bool("json", false, "print JSON instead of tables")
	fsyncFor := fs.Duration("fsync", 3*time.Second, "how long to measure the raw fsync rate first (0: skip)")
	remote := fs.Bool("remote", false, "run each workload in process and through the client to a server on 127.0.0.1 (started in this process), alternating; print the network's cost and the remote targets")
	server := fs.String("server", "", "with -remote: drive the running server at this URL instead (each run on a queue of its own; its durability is its own)")
	token := fs.String("token", "", "bearer token for -server (default $DOCKET_TOKEN)")
	rounds := fs.Int("rounds", 1, "runs of each workload and system, alternating; the median is reported")
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
	base := bench.Config{N: *n, Duration: *duration, Producers: *producers, Workers: *workers, ClaimBatch: *claim,
		PayloadBytes: *payload, OfferedRate: *rate, Dir: *dir}
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
		modes = append(modes, cfg)
	}
	out := struct {
		Fsync   *bench.FsyncResult `json:"fsync,omitempty"`
		Results []bench.Result     `json:"results"`
		Targets []bench.Target     `json:"targets,omitempty"`
	}{}
	if *fsyncFor > 0 && anyDisk {
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
	for range *rounds {
		for _, mode := range modes {
			for _, w := range strings.Split(*workloads, ",") {
				cfg := mode
				cfg.Workload = strings.TrimSpace(w)
				if !*asJSON && isTerminal(c.stderr) {
					cfg.Progress = c.stderr
				}
				ways := []bench.Config{cfg}
				if up := strings.ToUpper(cfg.Workload); *remote && up != "W8" && up != "W9" {
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
	out.Targets = bench.Targets(out.Results, benchPeer)
	if *asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	fmt.Fprintln(c.stdout, "summary:")
	if err := bench.WriteTable(c.stdout, out.Results); err != nil {
		return err
	}
	if *remote {
		fmt.Fprintln(c.stdout, "\nremote (through the client over loopback) against in process:")
		if err := bench.WriteRemote(c.stdout, out.Results); err != nil {
			return err
		}
	}
	fmt.Fprintln(c.stdout, "\ntargets (-remote measures the first two; the JetStream ones need bench/peers -remote):")
	return bench.WriteTargets(c.stdout, out.Targets)
}
