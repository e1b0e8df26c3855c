// Command peers runs docket's load workloads against docket and against
// other embeddable durable queues, goqite (on SQLite), NATS JetStream
// (embedded in-process) and a minimal queue on bbolt, alternating between
// them, and prints each one's figures and docket's ratio to each peer.
//
// It is a module of its own so that docket does not depend on the peers.
//
//	go run . -workloads W1,W2,W3,W4,W5,W6,W6R -n 20000 -duration 5s -durable
//
// With -systems docket it runs docket alone, and then also accepts the
// docket-only workloads W7 (wake-up), W8 (recovery) and W9 (footprint).
//
// With -remote it compares servers, each a process of its own on
// 127.0.0.1: docket's client against `docket serve` ("docket-serve", the
// binary built from this repository's cmd/docket) and JetStream's client
// against a nats-server process ("nats-server", built from the
// nats-server module this one requires), every workload W1–W6R in both
// durabilities, W2 also in process, and prints the table of ratios and
// the targets with PASS or FAIL. The systems "remote" (docket's server in
// this process, on a loopback port) and "nats-tcp" (JetStream embedded,
// reached over loopback) stay for -systems.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/docketdb/docket/bench"
	"github.com/docketdb/docket/engine"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	var (
		workloads = flag.String("workloads", "W1,W2,W3,W4,W5,W6,W6R", "comma-separated workloads")
		systems   = flag.String("systems", "docket,goqite,nats,bbolt", "comma-separated systems: docket, docket-serve (docket's client against a `docket serve` process), nats-server (JetStream's client against a nats-server process), remote (docket through its client to a server in this process, over loopback), remote-single (the same, every call in a request of its own), goqite, nats, nats-tcp (JetStream embedded, over loopback), bbolt (a minimal queue on go.etcd.io/bbolt)")
		remote    = flag.Bool("remote", false, "compare servers, each a process of its own on 127.0.0.1: -systems defaults to docket,docket-serve,nats-server, -workloads to W1,W1P,W2,W3,W4,W5,W6,W6R, both durabilities unless -durable is given, docket in process only for -local; prints the ratios and the targets with PASS or FAIL")
		local     = flag.String("local", "W2", "with -remote: the workloads docket also runs in process (W2's target needs it; 'all': every one)")
		docketBin = flag.String("docket-bin", "", "the docket binary docket-serve starts (default: go build of "+bench.DocketPackage+" into a temporary directory)")
		natsBin   = flag.String("nats-bin", "", "the nats-server binary nats-server starts (default: go build of "+natsServerPackage+" into a temporary directory)")
		n         = flag.Int("n", 20_000, "tasks per workload (0: each workload's default); W6 and W6R run for -duration, W7 uses -trials, W8 -recover-n")
		trials    = flag.Int("trials", 10_000, "wake-up trials of W7")
		recoverN  = flag.Int("recover-n", 1_000_000, "pending tasks W8 recovers")
		duration  = flag.Duration("duration", 5*time.Second, "how long W6 and W6R run")
		durable   = flag.Bool("durable", true, "fsync every commit (docket SyncAlways, SQLite synchronous=FULL, NATS sync always); false: leave fsync to the OS")
		memory    = flag.Bool("memory", false, "run docket in memory, in process and remote (the peers are skipped)")
		rounds    = flag.Int("rounds", 1, "runs of each workload per system; the median is reported")
		rate      = flag.Int("rate", 0, "W6R offered load, tasks/s (0: 10,000)")
		producers = flag.Int("producers", 0, "producers (0: the workload's default)")
		workers   = flag.Int("workers", 0, "workers (0: the workload's default)")
		claim     = flag.Int("claim", 0, "claim batch (0: the workload's default)")
		payload   = flag.Int("payload", 0, "payload bytes (0: 100)")
		dir       = flag.String("dir", "", "parent of the temporary data directories (default: the system's temp dir)")
		fsync     = flag.Duration("fsync", 2*time.Second, "measure the raw fsync rate of -dir for this long first (0: skip)")
		jsonOut   = flag.String("json", "", "also write every result as JSON to this file")
		progress  = flag.Bool("progress", false, "print progress lines to stderr while a run goes on")
		cpuBase   = flag.Duration("server-cpu-baseline", bench.ServeCPUBaseline, "with -remote: the server CPU per task at W2 durable that docket serve must not exceed, the pre-session build's as measured on this machine (bench/README.md says how; 0: leave the target out)")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	defer runCleanups()

	base := bench.Config{
		N: *n, Duration: *duration, Producers: *producers, Workers: *workers, ClaimBatch: *claim,
		PayloadBytes: *payload, InMemory: *memory, Dir: *dir, OfferedRate: *rate,
	}
	if !*durable {
		base.Durability = engine.SyncNever
	}
	if *progress {
		base.Progress = os.Stderr
	}
	sys := split(*systems)
	wls := split(strings.ToUpper(*workloads))
	if *remote && !flagSet("systems") {
		sys = []string{"docket", bench.Serve, "nats-server"}
	}
	if *remote && !flagSet("workloads") {
		wls = slices.Clone(bench.ServeWorkloads)
	}
	modes := []bench.Config{base}
	if *remote && !flagSet("durable") && !*memory {
		never := base
		never.Durability = engine.SyncNever
		modes = []bench.Config{base, never}
	}
	locals := map[string]bool{}
	for _, w := range split(strings.ToUpper(*local)) {
		locals[w] = true
	}
	// inProcess says whether docket in process runs w: with -remote only
	// the -local workloads.
	inProcess := func(w string) bool { return !*remote || locals["ALL"] || locals[w] }
	if *memory {
		sys = slices.DeleteFunc(sys, func(s string) bool { return s != "docket" && s != bench.Remote && s != bench.RemoteSingle })
	}
	for _, s := range sys {
		if _, ok := runners[s]; !ok {
			fatal(fmt.Errorf("unknown system %q", s))
		}
	}
	if slices.Contains(sys, bench.Serve) || slices.Contains(sys, "nats-server") {
		bins, err := buildServers(ctx, slices.Contains(sys, bench.Serve), slices.Contains(sys, "nats-server"), *docketBin, *natsBin)
		if err != nil {
			fatal(err)
		}
		serveBin, natsServerBin = bins[0], bins[1]
	}

	fmt.Printf("# %s, %d cores, load average %s, %s, %s\n", time.Now().Format("2006-01-02 15:04"), runtime.NumCPU(),
		loadAverage(), modeNames(modes), flagLine())
	// The raw fsync rate and the floor of a durable call are measured in
	// the directory of the runs.
	syncDir := *dir
	if syncDir == "" {
		syncDir = os.TempDir()
	}
	var fsyncRes *bench.FsyncResult
	if *fsync > 0 && !*memory {
		f, err := bench.MeasureFsync(syncDir, *fsync)
		if err != nil {
			fatal(err)
		}
		fsyncRes = &f
		f.Table(os.Stdout)
	}
	// Remote and durable, each round starts with the floor of a durable
	// call over HTTP/1.1 (bench.HTTPFloor); the median round's is reported.
	var floors []bench.HTTPFloor
	measureFloor := fsyncRes != nil && slices.Contains(sys, bench.Remote)

	all := map[string][]bench.Result{} // by workload/system/mode
	var order []string
	for r := range *rounds {
		for _, base := range modes {
			if measureFloor && base.Durability == engine.SyncAlways {
				f, err := bench.MeasureHTTPFloor(ctx, syncDir, *fsync)
				if err != nil {
					fatal(err)
				}
				floors = append(floors, f)
			}
			for _, w := range wls {
				for _, s := range sys {
					if !runs(s, w) || s == "docket" && !inProcess(w) {
						continue
					}
					cfg := base
					cfg.Workload = w
					switch w {
					case "W6", "W6R":
						cfg.N = 0 // they run for -duration
					case "W7":
						cfg.N = *trials
					case "W8":
						cfg.N = *recoverN
					}
					res, err := runners[s](ctx, cfg)
					if err != nil {
						fatal(err)
					}
					fmt.Fprintf(os.Stderr, "round %d: %s %s %s: %s tasks/s\n", r+1, s, w, res.Mode, short(res.TasksPerSec))
					key := w + "/" + s + "/" + base.Mode()
					if all[key] == nil {
						order = append(order, key)
					}
					all[key] = append(all[key], res)
				}
			}
		}
	}

	var medians []bench.Result
	for _, k := range order {
		medians = append(medians, bench.Median(all[k]))
	}
	fmt.Println()
	bench.WriteTable(os.Stdout, medians)
	for _, r := range medians {
		if r.Redelivered > 0 {
			fmt.Printf("%s %s: %d tasks were delivered twice\n", r.System, r.Workload, r.Redelivered)
		}
	}
	for _, r := range medians {
		if r.Recovery != nil || r.Footprint != nil || r.Workload == "W7" {
			fmt.Println()
			r.Table(os.Stdout)
		}
	}
	var every []bench.Result
	for _, k := range order {
		every = append(every, all[k]...)
	}
	if len(sys) > 1 {
		for _, m := range modes {
			fmt.Println()
			if len(modes) > 1 {
				fmt.Printf("%s:\n", modeName(m))
			}
			writeRatios(os.Stdout, wls, sys, byMode(all, m.Mode()))
		}
	}
	if ts := boltTargets(byMode(all, base.Mode())); len(ts) > 0 {
		fmt.Println("\ntargets:")
		bench.WritePerfTargets(os.Stdout, ts)
	}
	var floor *bench.HTTPFloor
	if slices.Contains(sys, bench.Serve) {
		fmt.Printf("\n%s (docket's client against `docket serve`) and nats-server (JetStream's client against nats-server), each a process on 127.0.0.1:\n", bench.Serve)
		bench.WriteServeTable(os.Stdout, every, bench.Serve, "nats-server")
		fmt.Println("\ntargets:")
		bench.WritePerfTargets(os.Stdout, bench.ServeTargets(every, bench.Serve, "nats-server", *cpuBase))
		if *cpuBase > 0 {
			fmt.Printf("(the server CPU target compares with %v per task, the pre-session build's measured apart (-server-cpu-baseline; bench/README.md), not with a run of the old build beside this one)\n", *cpuBase)
		}
	}
	if slices.Contains(sys, bench.Remote) {
		fmt.Println("\nremote (through the client over loopback) against in process:")
		bench.WriteRemote(os.Stdout, every)
		fmt.Println("\ntargets:")
		bench.WriteTargets(os.Stdout, bench.Targets(every, "nats-tcp"))
		if len(floors) > 0 {
			f := bench.MedianFloor(floors)
			floor = &f
			fmt.Println()
			bench.WriteFloor(os.Stdout, f, every)
		}
	}
	if fsyncRes != nil {
		for _, r := range medians {
			if r.System == "docket" && r.Workload == "W1" && r.Mode == "always" {
				fmt.Printf("\nW1 at SyncAlways is %.0f%% of the raw fsync rate (%.0f/s)\n",
					100*r.TasksPerSec/fsyncRes.PerSec, fsyncRes.PerSec)
			}
		}
	}
	if *jsonOut != "" {
		data, err := json.MarshalIndent(struct {
			Fsync   *bench.FsyncResult `json:"fsync,omitempty"`
			Floor   *bench.HTTPFloor   `json:"floor,omitempty"`
			Results []bench.Result     `json:"results"`
		}{fsyncRes, floor, medians}, "", "  ")
		if err == nil {
			err = os.WriteFile(*jsonOut, data, 0o644)
		}
		if err != nil {
			fatal(err)
		}
	}
}

// runners run one workload on one system.
var runners = map[string]func(context.Context, bench.Config) (bench.Result, error){
	"docket": bench.Run,
	"goqite": func(ctx context.Context, cfg bench.Config) (bench.Result, error) {
		return bench.RunDriver(ctx, "goqite", cfg, openGoqite)
	},
	"bbolt": func(ctx context.Context, cfg bench.Config) (bench.Result, error) {
		return bench.RunDriver(ctx, "bbolt", cfg, openBolt)
	},
	bench.Remote: func(ctx context.Context, cfg bench.Config) (bench.Result, error) {
		cfg.Remote = true
		return bench.Run(ctx, cfg)
	},
	bench.RemoteSingle: func(ctx context.Context, cfg bench.Config) (bench.Result, error) {
		cfg.Remote, cfg.NoCoalesce = true, true
		return bench.Run(ctx, cfg)
	},
	"nats": func(ctx context.Context, cfg bench.Config) (bench.Result, error) {
		return bench.RunDriver(ctx, "nats", cfg, func(ctx context.Context, cfg bench.Config, dir string) (bench.Driver[jetstream.Msg], error) {
			return openNATS(ctx, cfg, dir, false)
		})
	},
	"nats-tcp": func(ctx context.Context, cfg bench.Config) (bench.Result, error) {
		return bench.RunDriver(ctx, "nats-tcp", cfg, func(ctx context.Context, cfg bench.Config, dir string) (bench.Driver[jetstream.Msg], error) {
			return openNATS(ctx, cfg, dir, true)
		})
	},
	bench.Serve: func(ctx context.Context, cfg bench.Config) (bench.Result, error) {
		cfg.ServeBinary = serveBin
		return bench.Run(ctx, cfg)
	},
	"nats-server": func(ctx context.Context, cfg bench.Config) (bench.Result, error) {
		return bench.RunDriver(ctx, "nats-server", cfg, func(ctx context.Context, cfg bench.Config, dir string) (bench.Driver[jetstream.Msg], error) {
			return openNATSProcess(ctx, natsServerBin, cfg, dir)
		})
	},
}

// serveBin and natsServerBin are the binaries the docket-serve and
// nats-server systems start.
var serveBin, natsServerBin string

// natsServerPackage is the nats-server command, in the module this one
// requires.
const natsServerPackage = "github.com/nats-io/nats-server/v2"

// pipelines are the systems that run W1P (a producer with many enqueues in
// flight), and remotes those that run W7 through docket's client.
var (
	pipelines = map[string]bool{"docket": true, bench.Remote: true, bench.RemoteSingle: true, bench.Serve: true,
		"nats": true, "nats-tcp": true, "nats-server": true}
	remotes = map[string]bool{bench.Remote: true, bench.RemoteSingle: true, bench.Serve: true}
)

// runs says whether system s runs workload w: every system the driver
// workloads, W1P those that pipeline, W7 docket's, the rest docket in
// process alone.
func runs(s, w string) bool {
	switch {
	case slices.Contains(bench.DriverWorkloads, w):
		return true
	case w == "W1P":
		return pipelines[s]
	case w == "W7":
		return s == "docket" || remotes[s]
	}
	return s == "docket"
}

// buildServers builds the docket and nats-server binaries the run needs
// into a temporary directory (removed at exit), unless given.
func buildServers(ctx context.Context, docket, natsServer bool, docketBin, natsBin string) ([2]string, error) {
	out := [2]string{docketBin, natsBin}
	if (!docket || docketBin != "") && (!natsServer || natsBin != "") {
		return out, nil
	}
	dir, err := os.MkdirTemp("", "peers-bin-")
	if err != nil {
		return out, err
	}
	atExit(func() { os.RemoveAll(dir) })
	if docket && docketBin == "" {
		fmt.Fprintf(os.Stderr, "building %s\n", bench.DocketPackage)
		if out[0], err = bench.GoBuild(ctx, bench.DocketPackage, dir, "docket"); err != nil {
			return out, fmt.Errorf("%w(it builds inside the repository's go.work; -docket-bin takes a built docket)", err)
		}
	}
	if natsServer && natsBin == "" {
		fmt.Fprintf(os.Stderr, "building %s\n", natsServerPackage)
		if out[1], err = bench.GoBuild(ctx, natsServerPackage, dir, "nats-server"); err != nil {
			return out, fmt.Errorf("%w(-nats-bin takes a built nats-server)", err)
		}
	}
	for i, b := range out {
		if b != "" {
			if out[i], err = filepath.Abs(b); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// byMode is the results of all (keyed workload/system/mode) of docket's
// mode m, keyed workload/system.
func byMode(all map[string][]bench.Result, m string) map[string][]bench.Result {
	out := map[string][]bench.Result{}
	for k, rs := range all {
		if i := strings.LastIndexByte(k, '/'); i >= 0 && k[i+1:] == m {
			out[k[:i]] = rs
		}
	}
	return out
}

var cleanups []func()

// atExit runs f when main returns or fatal exits.
func atExit(f func()) { cleanups = append(cleanups, f) }

func runCleanups() {
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	cleanups = nil
}

// boltTarget is how many times a minimal bbolt queue's W3 rate docket's
// is to reach, measured in the same run (issue 13, item 5).
const boltTarget = 2.0

// boltTargets judges W3 docket against W3 bbolt, the medians of the
// rounds, where both ran.
func boltTargets(all map[string][]bench.Result) []bench.PerfTarget {
	d, ok1 := all["W3/docket"]
	b, ok2 := all["W3/bbolt"]
	if !ok1 || !ok2 {
		return nil
	}
	dm, bm := bench.Median(d), bench.Median(b)
	if bm.TasksPerSec <= 0 {
		return nil
	}
	x := dm.TasksPerSec / bm.TasksPerSec
	return []bench.PerfTarget{{
		Name:   fmt.Sprintf("W3 docket (%s) vs a bbolt queue (%s)", dm.Mode, bm.Mode),
		Want:   fmt.Sprintf(">= %.0fx", boltTarget),
		Ratio:  x,
		Pass:   x >= boltTarget,
		Figure: fmt.Sprintf("%.0f vs %.0f tasks/s, peak RSS %.0f vs %.0f MB", dm.TasksPerSec, bm.TasksPerSec, float64(dm.PeakRSS)/1e6, float64(bm.PeakRSS)/1e6),
	}}
}

// writeRatios prints, per workload, docket's figure over each peer's and
// remote docket's over each other system's: throughput ratios above 1 and
// latency ratios above 1 both favour the first.
func writeRatios(w io.Writer, wls, sys []string, all map[string][]bench.Result) {
	type pair struct{ a, b string }
	var pairs []pair
	for _, a := range []string{"docket", bench.Remote} {
		if !slices.Contains(sys, a) {
			continue
		}
		for _, b := range sys {
			if b != a && b != "docket" && (a == bench.Remote || b != bench.Remote) {
				pairs = append(pairs, pair{a, b})
			}
		}
		if a == bench.Remote && slices.Contains(sys, "docket") {
			pairs = append(pairs, pair{a, "docket"})
		}
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "workload\tfigure\t")
	for _, p := range pairs {
		fmt.Fprintf(tw, "%s/%s\t", p.a, p.b)
	}
	fmt.Fprintln(tw)
	for _, wl := range wls {
		row := func(figure string, f func(a, b bench.Result) string) {
			line := wl + "\t" + figure + "\t"
			any := false
			for _, p := range pairs {
				a, ok1 := all[wl+"/"+p.a]
				b, ok2 := all[wl+"/"+p.b]
				if !ok1 || !ok2 {
					line += "-\t"
					continue
				}
				line += f(bench.Median(a), bench.Median(b)) + "\t"
				any = true
			}
			if any {
				fmt.Fprintln(tw, line)
			}
		}
		row("tasks/s", func(a, b bench.Result) string { return ratio(a.TasksPerSec, b.TasksPerSec) })
		if wl == "W6R" {
			row("e2e p99 (second/first)", func(a, b bench.Result) string {
				if a.EndToEnd == nil || b.EndToEnd == nil {
					return "-"
				}
				return ratio(float64(b.EndToEnd.P99), float64(a.EndToEnd.P99))
			})
		}
	}
	tw.Flush()
}

func ratio(a, b float64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func modeNames(cs []bench.Config) string {
	var names []string
	for _, c := range cs {
		names = append(names, modeName(c))
	}
	return strings.Join(names, ", then ")
}

func modeName(c bench.Config) string {
	if c.InMemory {
		return "docket in memory"
	}
	if c.Durability == engine.SyncAlways {
		return "durable (fsync per commit)"
	}
	return "no fsync (left to the OS)"
}

func flagLine() string {
	var parts []string
	flag.Visit(func(f *flag.Flag) { parts = append(parts, "-"+f.Name+"="+f.Value.String()) })
	if len(parts) == 0 {
		return "default flags"
	}
	return strings.Join(parts, " ")
}

func short(v float64) string {
	if v >= 10_000 {
		return fmt.Sprintf("%.1fk", v/1000)
	}
	return fmt.Sprintf("%.0f", v)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "peers:", err)
	runCleanups()
	os.Exit(1)
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// loadAverage is the machine's 1, 5 and 15 minute load averages, "-"
// where /proc does not give them: other work on a shared machine shows in
// the figures.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "-"
}
