package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/docketdb/docket/engine"
)

var ctx = context.Background()

type mode struct {
	name   string
	mem    bool
	dur    engine.Durability
	remote bool
}

var (
	memory     = mode{name: "memory", mem: true, dur: engine.SyncAlways}
	syncNever  = mode{name: "never", dur: engine.SyncNever}
	syncAlways = mode{name: "always", dur: engine.SyncAlways}

	remoteMemory = mode{name: "memory", mem: true, dur: engine.SyncAlways, remote: true}
	remoteNever  = mode{name: "never", dur: engine.SyncNever, remote: true}
	remoteAlways = mode{name: "always", dur: engine.SyncAlways, remote: true}
)

func (m mode) config(t testing.TB, workload string, n int) Config {
	return Config{Workload: workload, N: n, InMemory: m.mem, Durability: m.dur, Dir: t.TempDir(), Remote: m.remote}
}

func run(t *testing.T, cfg Config) Result {
	t.Helper()
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("%s: %v", cfg.Workload, err)
	}
	var b bytes.Buffer
	if err := res.Table(&b); err != nil || b.Len() == 0 {
		t.Fatalf("table: %v, %q", err, b.String())
	}
	if _, err := json.Marshal(res); err != nil {
		t.Fatalf("json: %v", err)
	}
	system := "docket"
	if cfg.Remote {
		system = remoteSystem(cfg)
	}
	if res.Mode != cfg.Mode() || res.Workload != cfg.Workload || res.System != system {
		t.Fatalf("result labelled %s %s %s", res.System, res.Workload, res.Mode)
	}
	return res
}

func TestEnqueueWorkloads(t *testing.T) {
	t.Parallel()
	for _, m := range []mode{memory, syncNever, syncAlways} {
		for _, w := range []string{"W1", "W1P", "W2", "W3"} {
			t.Run(w+"/"+m.name, func(t *testing.T) {
				n := 250
				if w == "W3" {
					n = 1050 // not a multiple of the batch
				}
				res := run(t, m.config(t, w, n))
				if res.Tasks != int64(n) {
					t.Fatalf("enqueued %d tasks, want %d", res.Tasks, n)
				}
				calls := int64(n)
				if w == "W3" {
					calls = int64((n + EnqueueBatchSize - 1) / EnqueueBatchSize)
				}
				if res.Calls != calls || res.Latency.Count != uint64(calls) {
					t.Fatalf("%d calls, %d timed, want %d", res.Calls, res.Latency.Count, calls)
				}
				if res.TasksPerSec <= 0 || res.Latency.P50 <= 0 || res.Latency.P50 > res.Latency.P99 {
					t.Fatalf("rates %+v", res)
				}
				if m.mem {
					if res.Fsyncs != 0 || res.LogBytes != 0 {
						t.Fatalf("in memory yet %d fsyncs, %d log bytes seen", res.Fsyncs, res.LogBytes)
					}
					return
				}
				if res.Commits != uint64(calls) {
					t.Fatalf("%d commits, want %d", res.Commits, calls)
				}
				if res.BytesPerTask < 100 {
					t.Fatalf("%.0f log bytes per task, less than the payload", res.BytesPerTask)
				}
				if m.dur == engine.SyncAlways && (res.Fsyncs == 0 || res.GroupSize < 1) {
					t.Fatalf("%d fsyncs, group %.1f", res.Fsyncs, res.GroupSize)
				}
				if m.dur == engine.SyncAlways {
					// Every fsync of the window made commits durable, and
					// the histogram covers each once.
					var fsyncs uint64
					lo := 0
					for _, g := range res.Groups {
						if g.Min <= lo || g.Max != 0 && g.Max < g.Min {
							t.Fatalf("groups out of order: %+v", res.Groups)
						}
						lo = g.Min
						fsyncs += g.Fsyncs
					}
					if fsyncs != res.Fsyncs {
						t.Fatalf("group histogram %+v counts %d fsyncs, want %d", res.Groups, fsyncs, res.Fsyncs)
					}
				}
				if w == "W1P" && m.dur == engine.SyncAlways && res.Fsyncs >= uint64(n) {
					t.Fatalf("%d fsyncs for %d pipelined commits: none shared", res.Fsyncs, n)
				}
			})
		}
	}
}

func TestDrainWorkloads(t *testing.T) {
	t.Parallel()
	for _, m := range []mode{memory, syncNever} {
		for _, w := range []string{"W4", "W4 split", "W5"} {
			t.Run(w+"/"+m.name, func(t *testing.T) {
				cfg := m.config(t, w[:2], 1234)
				cfg.SplitCommits = w == "W4 split"
				res := run(t, cfg)
				if res.Tasks != 1234 {
					t.Fatalf("completed %d tasks, want 1234", res.Tasks)
				}
				// W4 completes each task and claims the next in one commit,
				// or in two when split; W5 claims 100 at a time and
				// completes each claim in one batch.
				minCalls, minCommits, maxCommits := int64(1234), uint64(1234), uint64(1234+16)
				switch w {
				case "W4 split":
					minCalls, minCommits, maxCommits = 2*1234, 2*1234, 2*1234
				case "W5":
					minCalls, minCommits, maxCommits = 2*(1234/100+1), 2*(1234/100+1), 1234
				}
				if res.Calls < minCalls {
					t.Fatalf("%d calls for 1234 tasks, want at least %d", res.Calls, minCalls)
				}
				if !m.mem && (res.Commits < minCommits || res.Commits > maxCommits) {
					t.Fatalf("%d commits for 1234 completions, want %d to %d", res.Commits, minCommits, maxCommits)
				}
			})
		}
	}
}

func TestSteadyWorkloads(t *testing.T) {
	t.Parallel()
	for _, m := range []mode{memory, syncNever} {
		t.Run("W6/"+m.name, func(t *testing.T) {
			t.Parallel()
			cfg := m.config(t, "W6", 0)
			cfg.Duration = 300 * time.Millisecond
			res := run(t, cfg)
			if res.Tasks <= 0 || res.Tasks > res.Enqueued || res.Backlog != res.Enqueued-res.Tasks {
				t.Fatalf("completed %d, enqueued %d, backlog %d", res.Tasks, res.Enqueued, res.Backlog)
			}
			if res.Elapsed < cfg.Duration || res.Elapsed > cfg.Duration+time.Second {
				t.Fatalf("ran %v for a duration of %v", res.Elapsed, cfg.Duration)
			}
		})
		t.Run("W6R/"+m.name, func(t *testing.T) {
			t.Parallel()
			cfg := m.config(t, "W6R", 0)
			cfg.Duration = 500 * time.Millisecond
			cfg.OfferedRate, cfg.Producers = 2000, 4
			res := run(t, cfg)
			// Calls in flight when the window closes (enqueues and
			// completions) finish and are timed, but are not counted within
			// the window: allow a few.
			if res.EndToEnd == nil || res.EndToEnd.Count < uint64(res.Tasks) ||
				res.EndToEnd.Count > uint64(res.Enqueued)+16 || res.EndToEnd.P50 <= 0 {
				t.Fatalf("end to end %+v for %d tasks", res.EndToEnd, res.Tasks)
			}
			// Paced at 2,000/s: producer p's k-th enqueue is due (k*P+p)/rate
			// after the start, so at most rate*Elapsed+P have begun by the
			// end (about 1,000 in 0.5 s; more if a loaded machine ends the
			// run late, which a fixed bound took for a pacing failure).
			if due := int64(2000*res.Elapsed.Seconds()) + int64(cfg.Producers); res.Enqueued > due || res.Tasks > res.Enqueued {
				t.Fatalf("enqueued %d, completed %d at 2,000/s in %v: at most %d due", res.Enqueued, res.Tasks, res.Elapsed, due)
			}
		})
	}
	t.Run("W6/N", func(t *testing.T) {
		cfg := memory.config(t, "W6", 500)
		cfg.Duration = time.Minute
		res := run(t, cfg)
		if res.Tasks < 500 || res.Elapsed > 30*time.Second {
			t.Fatalf("completed %d in %v, want to stop at 500", res.Tasks, res.Elapsed)
		}
	})
}

func TestWakeUp(t *testing.T) {
	t.Parallel()
	for _, m := range []mode{memory, syncNever} {
		t.Run(m.name, func(t *testing.T) {
			for _, parked := range []int{0, 20} {
				cfg := m.config(t, "W7", 200)
				cfg.Parked = parked
				res := run(t, cfg)
				if res.Tasks != 200 || res.Latency.Count != 200 || res.Latency.P50 <= 0 || res.Parked != parked {
					t.Fatalf("%d parked: %d wake-ups, latency %+v", parked, res.Tasks, res.Latency)
				}
			}
		})
	}
}

func TestRecovery(t *testing.T) {
	t.Parallel()
	res := run(t, syncNever.config(t, "W8", 3000))
	rc := res.Recovery
	if rc == nil || rc.Tasks != 3000 || rc.FromSnapshot <= 0 || rc.FromLog <= 0 || rc.Build <= 0 {
		t.Fatalf("recovery %+v", rc)
	}
	if rc.SnapshotBytes < 3000*100 || rc.LogFileBytes < 3000*100 {
		t.Fatalf("snapshot %d bytes, log %d bytes for 3000 tasks", rc.SnapshotBytes, rc.LogFileBytes)
	}
	if _, err := Run(ctx, memory.config(t, "W8", 10)); err == nil {
		t.Fatal("W8 in memory ran")
	}
}

func TestFootprint(t *testing.T) {
	// Not parallel: it measures the heap.
	for _, m := range []mode{memory, syncNever} {
		t.Run(m.name, func(t *testing.T) {
			res := run(t, m.config(t, "W9", 5000))
			f := res.Footprint
			if f == nil || f.HeapPerTask < 100 || f.HeapPerTask > 100_000 {
				t.Fatalf("footprint %+v", f)
			}
			if f.LogEnqueue < 100 || f.LogClaim <= 0 || f.LogComplete <= 0 ||
				f.LogLifecycle != f.LogEnqueue+f.LogClaim+f.LogComplete {
				t.Fatalf("log bytes %+v", f)
			}
		})
	}
}

// TestBacklog runs W10 small: the fill's tenths are each sampled, the
// reopened queue holds every task, tasks flowed through the standing
// backlog, and the drain emptied it.
func TestBacklog(t *testing.T) {
	t.Parallel()
	cfg := syncNever.config(t, "W10", 5000)
	cfg.Duration = 50 * time.Millisecond
	res := run(t, cfg)
	b := res.Filled
	if b == nil || b.Tasks != 5000 || len(b.Slices) != 10 {
		t.Fatalf("backlog %+v", b)
	}
	for i, s := range b.Slices {
		// Producers cross the tenths concurrently: each slice holds at
		// least its tenth, and no fewer than the one before.
		if s.Held < int64(i+1)*500 || i > 0 && s.Held < b.Slices[i-1].Held || s.HeapBytes == 0 {
			t.Fatalf("slice %d: %+v", i, s)
		}
	}
	if last := b.Slices[9].Held; last != 5000 {
		t.Fatalf("the last slice holds %d tasks, want 5000", last)
	}
	if b.DiskBytes < 5000*100 || b.Reopen <= 0 || b.HeapPerTask < 100 {
		t.Fatalf("disk %d bytes, reopen %v, heap/task %.0f", b.DiskBytes, b.Reopen, b.HeapPerTask)
	}
	if b.Standing.Count == 0 || b.StandingPerSec <= 0 {
		t.Fatalf("standing phase: %+v at %.0f/s", b.Standing, b.StandingPerSec)
	}
	if b.DrainPerSec <= 0 {
		t.Fatalf("drain %+v", b)
	}
	if _, err := Run(ctx, memory.config(t, "W10", 10)); err == nil {
		t.Fatal("W10 in memory ran")
	}
}

func TestMeasureFsync(t *testing.T) {
	t.Parallel()
	res, err := MeasureFsync(t.TempDir(), 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.Syncs <= 0 || res.PerSec <= 0 || res.P50 <= 0 || res.P99 < res.P50 {
		t.Fatalf("%+v", res)
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{Workload: "W99"},
		{Workload: "W1", N: -1},
		{Workload: "W5", ClaimBatch: engine.MaxBatch + 1},
		{Workload: "W1", Durability: 7},
	} {
		if _, err := Run(ctx, cfg); err == nil {
			t.Errorf("Run(%+v) ran", cfg)
		}
	}
	if _, err := RunDriver(ctx, "docket", Config{Workload: "W7"}, Docket); err == nil {
		t.Error("RunDriver ran W7")
	}
}

func TestProgress(t *testing.T) {
	t.Parallel()
	var b syncBuffer
	cfg := memory.config(t, "W6", 0)
	// Lines every 25 ms, not 500: a run of 150 ms shows them, where one of
	// 1.2 s kept a CPU busy.
	cfg.Duration = 150 * time.Millisecond
	cfg.progressEvery = 25 * time.Millisecond
	cfg.Progress = &b
	run(t, cfg)
	if n := strings.Count(b.String(), "\n"); n < 2 {
		t.Fatalf("%d progress lines in 150 ms, one every 25 ms:\n%s", n, b.String())
	}
}

func TestPayload(t *testing.T) {
	t.Parallel()
	for _, size := range []int{0, 32, 100, 1000} {
		p := makePayload(size, 1732900000123456789)
		if !json.Valid(p) || len(p) != max(size, minPayload) {
			t.Fatalf("payload of %d: %q", size, p)
		}
		if got := stampOf(p); got != 1732900000123456789 {
			t.Fatalf("stamp %d", got)
		}
	}
}

func TestHist(t *testing.T) {
	t.Parallel()
	h := new(hist)
	for i := 1; i <= 100_000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, q := range []float64{0.5, 0.99, 0.999} {
		want := q * 100_000 * float64(time.Microsecond)
		got := float64(h.quantile(q))
		if got < want*0.98 || got > want*1.02 {
			t.Errorf("quantile %v = %v, want about %v", q, time.Duration(got), time.Duration(want))
		}
	}
	if h.quantile(1) != 100*time.Millisecond {
		t.Errorf("max %v", h.quantile(1))
	}
}

// TestFairness runs WF small: both runs claim every small task of every
// round, the loaded one also some of the big partition's, and the ratio
// is of the two p99 waits (its value is the machine's: not judged here).
func TestFairness(t *testing.T) {
	t.Parallel()
	for _, m := range []mode{memory, syncNever} {
		t.Run(m.name, func(t *testing.T) {
			res := run(t, m.config(t, "WF", 5000))
			f := res.Fairness
			small := uint64(FairRounds * FairSmallPartitions * FairSmallTasks)
			if f == nil || f.Alone.Count != small || f.Loaded.Count != small || f.BigTasks != 5000 {
				t.Fatalf("fairness %+v", f)
			}
			if f.Alone.P99 <= 0 || f.Loaded.P99 <= 0 || f.Ratio != float64(f.Loaded.P99)/float64(f.Alone.P99) ||
				f.Pass != (f.Ratio <= FairTarget) {
				t.Fatalf("fairness %+v", f)
			}
			if res.Tasks != int64(small)+f.BigClaimed || f.BigClaimed > 5000 {
				t.Fatalf("%d tasks, %d big", res.Tasks, f.BigClaimed)
			}
		})
	}
	cfg := remoteMemory.config(t, "WF", 10)
	if _, err := Run(ctx, cfg); err == nil {
		t.Fatal("WF ran remote")
	}
}

// counted is a driver (none of whose queue calls is used) that reports
// the counters it is given.
type counted struct{ c Counters }

func (d *counted) Counters() Counters { return d.c }

// TestWindowCountsGathers: a run's result holds the gathers and misses of
// its window only, and its table shows them when there were any.
func TestWindowCountsGathers(t *testing.T) {
	t.Parallel()
	d := &counted{c: Counters{Commits: 10, Fsyncs: 5, Gathers: 7, GatherMisses: 2}}
	w := openWindow(d)
	d.c = Counters{Commits: 40, Fsyncs: 15, Gathers: 12, GatherMisses: 3}
	var r Result
	w.close(&r)
	if r.Gathers != 5 || r.GatherMisses != 1 {
		t.Fatalf("gathers %d, missed %d; want 5 and 1", r.Gathers, r.GatherMisses)
	}
	var b bytes.Buffer
	if err := r.Table(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "5 fsyncs waited for committers first, 1 of them to the bound") {
		t.Fatalf("no gathers in\n%s", b.String())
	}
	r.Gathers, r.GatherMisses = 0, 0
	b.Reset()
	if err := r.Table(&b); err != nil || strings.Contains(b.String(), "gathers") {
		t.Fatalf("gathers shown for a run with none (%v):\n%s", err, b.String())
	}
}
