package bench

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

// TestRemoteWorkloads runs the workloads through the client to a server
// on 127.0.0.1, at a tiny size: the counts are the in-process runs' own,
// and the commits the server's DB saw match the calls made.
func TestRemoteWorkloads(t *testing.T) {
	t.Parallel()
	for _, m := range []mode{remoteMemory, remoteNever} {
		for _, w := range []string{"W1", "W3", "W4", "W5", "W6", "W7"} {
			if testing.Short() && m.name != "memory" && w != "W1" && w != "W5" {
				continue // on disk the same calls, and the commits checked by W1
			}
			t.Run(w+"/"+m.name, func(t *testing.T) {
				n := 300
				cfg := m.config(t, w, n)
				if w == "W6" {
					cfg.N, cfg.Duration = 0, 200*time.Millisecond
				}
				if w == "W7" {
					cfg.N = 30
				}
				res := run(t, cfg)
				switch w {
				case "W1", "W3":
					if res.Tasks != int64(n) {
						t.Fatalf("enqueued %d tasks, want %d", res.Tasks, n)
					}
					kind := map[string]string{"W1": "enqueue", "W3": "enqueue_batch"}[w]
					if p := res.PerCall[kind]; p.Count != uint64(res.Calls) || len(res.PerCall) != 1 {
						t.Fatalf("per call %+v for %d calls", res.PerCall, res.Calls)
					}
					if !m.mem && res.Commits != uint64(res.Calls) {
						t.Fatalf("%d commits for %d calls", res.Commits, res.Calls)
					}
				case "W4", "W5":
					if res.Tasks != int64(n) {
						t.Fatalf("completed %d tasks, want %d", res.Tasks, n)
					}
					// W4's workers claim one task: each completion claims
					// the next (Pipeline.CompleteAndClaim over the network).
					done := map[string]string{"W4": "complete_claim", "W5": "complete_batch"}[w]
					if res.PerCall["claim"].Count == 0 || res.PerCall[done].Count == 0 {
						t.Fatalf("per call %+v", res.PerCall)
					}
				case "W6":
					if res.Tasks <= 0 || res.Enqueued < res.Tasks {
						t.Fatalf("completed %d of %d enqueued", res.Tasks, res.Enqueued)
					}
				case "W7":
					if res.Tasks != 30 || res.Latency.Count != 30 {
						t.Fatalf("%d wake-ups, %d timed", res.Tasks, res.Latency.Count)
					}
				}
			})
		}
	}
	t.Run("W1P/memory", func(t *testing.T) {
		// One producer's enqueues through the client's EnqueueAsync.
		res := run(t, remoteMemory.config(t, "W1P", 300))
		if res.System != Remote || res.Tasks != 300 || res.Latency.Count != 300 || res.Producers != 1 {
			t.Fatalf("%s: %d tasks, %d timed", res.System, res.Tasks, res.Latency.Count)
		}
	})
	t.Run("W2/always", func(t *testing.T) {
		res := run(t, remoteAlways.config(t, "W2", 200))
		// The server commits the enqueues of a session that arrive together
		// in one step: at most one commit per task.
		if res.Tasks != 200 || res.Fsyncs == 0 || res.Commits == 0 || res.Commits > 200 {
			t.Fatalf("%d tasks, %d commits, %d fsyncs", res.Tasks, res.Commits, res.Fsyncs)
		}
	})
	t.Run("W2/memory/single", func(t *testing.T) {
		cfg := remoteMemory.config(t, "W2", 200)
		cfg.NoCoalesce = true
		res := run(t, cfg)
		if res.System != RemoteSingle || res.Tasks != 200 || res.PerCall["enqueue"].Count != 200 {
			t.Fatalf("%s: %d tasks, per call %+v", res.System, res.Tasks, res.PerCall)
		}
	})
	t.Run("W6R/memory", func(t *testing.T) {
		// The run ends once n tasks have completed (Duration is a
		// generous bound): a fixed short Duration on a loaded machine
		// could end before any task completed, or late.
		const n, rate, producers = 50, 1000, 4
		cfg := remoteMemory.config(t, "W6R", n)
		cfg.Duration, cfg.OfferedRate, cfg.Producers = time.Minute, rate, producers
		res := run(t, cfg)
		if res.Tasks < n || res.Elapsed >= cfg.Duration || res.EndToEnd == nil || res.EndToEnd.Count < uint64(res.Tasks) {
			t.Fatalf("%d tasks in %v, end to end %+v", res.Tasks, res.Elapsed, res.EndToEnd)
		}
		// Paced: producer p's k-th enqueue is due (k*P+p)/rate after the
		// start, so at most rate*Elapsed+P have begun by the end.
		if due := int64(rate*res.Elapsed.Seconds()) + producers; res.Enqueued < res.Tasks || res.Enqueued > due {
			t.Fatalf("%d enqueued (%d completed) in %v at %d/s, at most %d due", res.Enqueued, res.Tasks, res.Elapsed, rate, due)
		}
	})
}

// TestServeLoopback checks that a remote run's server listens on a TCP
// port of 127.0.0.1 and that its calls reach the DB it serves.
func TestServeLoopback(t *testing.T) {
	t.Parallel()
	db, err := engine.OpenInMemory(engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	addr, stop, err := serveLoopback(db)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(addr)
	if err != nil || u.Scheme != "http" || u.Hostname() != "127.0.0.1" || u.Port() == "" || u.Port() == "0" {
		t.Fatalf("served at %q (%v)", addr, err)
	}
	// Against a running server: a queue of the run's own, the server's
	// counters, and the mode says the durability is the server's.
	res, err := Run(ctx, Config{Workload: "W1", N: 50, Server: addr, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.System != Remote || res.Mode != "server" || res.Tasks != 50 || res.Commits != 50 {
		t.Fatalf("%s %s: %d tasks, %d commits", res.System, res.Mode, res.Tasks, res.Commits)
	}
	qs, err := db.Queues(ctx)
	if err != nil || len(qs) != 1 || !strings.HasPrefix(qs[0].Name, "bench-W1-") || qs[0].Counts.Ready != 50 {
		t.Fatalf("queues %+v, %v", qs, err)
	}
	// W7 cannot see a server's parked claims: it pauses before each
	// enqueue, and counts only the trials whose claim was parked.
	res, err = Run(ctx, Config{Workload: "W7", N: 10, Parked: 3, Server: addr, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Tasks != 10 || res.Latency.Count != 10 || res.Parked != 3 {
		t.Fatalf("W7 against a server: %d wake-ups, %d timed, %d parked", res.Tasks, res.Latency.Count, res.Parked)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// The client tries again with backoff until its context ends.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := Run(short, Config{Workload: "W1", N: 5, Server: addr, Dir: t.TempDir()}); err == nil {
		t.Fatal("ran against a server that stopped")
	}
}

func TestRemoteConfigErrors(t *testing.T) {
	t.Parallel()
	for _, w := range []string{"W8", "W9", "WF"} {
		_, err := Run(ctx, Config{Workload: w, N: 10, Remote: true, Dir: t.TempDir()})
		if !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("%s remote: %v, want ErrInvalid", w, err)
		}
	}
	// A docket serve process serves a directory of its own, on disk.
	for _, cfg := range []Config{
		{Workload: "W1", N: 10, ServeBinary: "docket", InMemory: true},
		{Workload: "W1", N: 10, ServeBinary: "docket", Server: "http://127.0.0.1:1"},
	} {
		cfg.Dir = t.TempDir()
		if _, err := Run(ctx, cfg); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", cfg, err)
		}
	}
	// W1P needs a queue that pipelines.
	_, err := RunDriver(ctx, "plain", Config{Workload: "W1P", N: 10, Durability: engine.SyncNever, Dir: t.TempDir()},
		func(ctx context.Context, cfg Config, dir string) (Driver[engine.Lease], error) {
			d, err := openDocket(cfg, dir, nil)
			return plainDriver{d}, err
		})
	if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "pipelines") {
		t.Errorf("W1P on a queue that does not pipeline: %v", err)
	}
}

// plainDriver hides every method beyond Driver's.
type plainDriver struct{ Driver[engine.Lease] }

func TestTargets(t *testing.T) {
	t.Parallel()
	r := func(system, w, mode string, tps float64) Result {
		return Result{System: system, Workload: w, Mode: mode, TasksPerSec: tps}
	}
	rs := []Result{
		r("docket", "W2", "always", 1000), r(Remote, "W2", "always", 850),
		r("docket", "W2", "always", 2000), r(Remote, "W2", "always", 700), // second round
		r("docket", "W2", "always", 1500), r(Remote, "W2", "always", 900),
		r("docket", "W5", "never", 1000), r(Remote, "W5", "never", 400),
		r("nats-tcp", "W2", "durable", 500),
		r(Remote, "W1", "always", 100), r("nats-tcp", "W1", "durable", 200),
	}
	kept := func(system, mode string, p99 time.Duration) Result {
		x := r(system, "W6R", mode, 10_000)
		x.KeptUp, x.EndToEnd = true, &Percentiles{P99: p99}
		return x
	}
	rs = append(rs, kept(Remote, "always", 2*time.Millisecond), kept("nats-tcp", "durable", 5*time.Millisecond))
	got := map[string]Target{}
	for _, tg := range Targets(rs, "nats-tcp") {
		got[tg.Name] = tg
	}
	if len(got) != 2+len(DriverWorkloads) {
		t.Fatalf("%d targets: %+v", len(got), got)
	}
	check := func(name string, measured, pass bool, ratio float64) {
		t.Helper()
		tg, ok := got[name]
		if !ok || tg.Measured != measured || tg.Pass != pass || (measured && (tg.Ratio < ratio-1e-9 || tg.Ratio > ratio+1e-9)) {
			t.Errorf("%s: %+v, want measured %v pass %v ratio %v", name, tg, measured, pass, ratio)
		}
	}
	// The medians of the three rounds: in process 1500, remote 850.
	check("W2 always: remote >= 80% of in process", true, false, 850.0/1500)
	check("W5 never: remote >= 50% of in process", true, false, 0.4)
	check("W1 always: remote ahead of nats-tcp (durable)", true, false, 0.5)
	check("W2 always: remote ahead of nats-tcp (durable)", true, true, 850.0/500)
	check("W3 always: remote ahead of nats-tcp (durable)", false, false, 0)
	// W6R: both kept up, so the end-to-end p99 decides.
	check("W6R always: remote ahead of nats-tcp (durable)", true, true, 2.5)
	var b bytes.Buffer
	if err := WriteTargets(&b, Targets(rs, "nats-tcp")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PASS", "FAIL", "not measured", "0.57x"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("targets do not say %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	local, remote := r("docket", "W4", "never", 1000), r(Remote, "W4", "never", 500)
	local.PerCall = map[string]Percentiles{"claim": {P50: time.Microsecond, P99: 3 * time.Microsecond}}
	remote.PerCall = map[string]Percentiles{"claim": {P50: 80 * time.Microsecond, P99: 2 * time.Microsecond}}
	if err := WriteRemote(&b, []Result{local, remote}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"0.50x", "+79.0µs", "-1.0µs"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("comparison does not say %q:\n%s", want, b.String())
		}
	}
}
