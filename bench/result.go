package bench

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Percentiles summarise a latency distribution. The histogram behind them
// has 1.6% resolution.
type Percentiles struct {
	Count uint64        `json:"count"`
	P50   time.Duration `json:"p50_ns"`
	P99   time.Duration `json:"p99_ns"`
	P999  time.Duration `json:"p999_ns"`
	Max   time.Duration `json:"max_ns"`
}

// Result is what one run measured. Rates are over the measured window
// only: the setup a workload needs (the backlog W4 drains, say) is neither
// timed nor counted.
type Result struct {
	System   string `json:"system"` // "docket", "remote" (docket through the client), or the peer's name
	Workload string `json:"workload"`
	// Mode is docket's: "memory", "always", "interval", "never" ("server"
	// for a server of unknown settings); a peer's: "durable" or "nosync".
	Mode string `json:"mode"`

	// Tasks is the number of tasks enqueued (W1–W3), completed (W4–W6R),
	// woken (W7) or held (W8, W9) in the measured window.
	Tasks int64 `json:"tasks"`
	// Enqueued is, for W6 and W6R, how many tasks were enqueued in the
	// window (an enqueue counts from its call, since a worker may complete
	// the task before the call returns; a failed one fails the run);
	// Backlog is how many of those were not completed by its end.
	Enqueued int64 `json:"enqueued,omitempty"`
	Backlog  int64 `json:"backlog,omitempty"`
	// Calls counts the calls to the queue (enqueue, claim, complete).
	Calls int64 `json:"calls"`
	// Producers is, for W1–W3, how many goroutines enqueued: each waits
	// for its call, so Producers/TasksPerSec is a call's round (W1, W2).
	Producers int `json:"producers,omitempty"`
	// Redelivered counts deliveries beyond one per task (W4, W5), which an
	// at-least-once peer may make; docket fails the run instead.
	Redelivered int64         `json:"redelivered,omitempty"`
	Elapsed     time.Duration `json:"elapsed_ns"`

	TasksPerSec float64 `json:"tasks_per_sec"`
	CallsPerSec float64 `json:"calls_per_sec"`
	// Latency is per call (blocking claims excluded: their time is mostly
	// waiting for work); for W7 it is the wake-up latency, from just
	// before the enqueue until the parked claimer holds the task.
	Latency Percentiles `json:"latency"`
	// PerCall is Latency by kind of call: "enqueue", "enqueue_batch",
	// "claim" (non-blocking claims only), "complete", "complete_batch".
	PerCall map[string]Percentiles `json:"per_call,omitempty"`
	// EndToEnd is, for W6R, the time from the start of a task's enqueue
	// call to the return of its complete call.
	EndToEnd *Percentiles `json:"end_to_end,omitempty"`
	// OfferedRate is W6R's target enqueue rate; KeptUp says whether the
	// completions kept within 5% of it.
	OfferedRate int  `json:"offered_rate,omitempty"`
	KeptUp      bool `json:"kept_up,omitempty"`
	// Parked is, for W7, how many claimers were parked beside the one a
	// trial needs.
	Parked int `json:"parked,omitempty"`

	// Commits, Fsyncs and LogBytes come from the queue's own counters
	// (docket's DB.Stats) over the window; zero where a peer has none.
	Commits      uint64  `json:"commits,omitempty"`
	Fsyncs       uint64  `json:"fsyncs,omitempty"`
	FsyncsPerSec float64 `json:"fsyncs_per_sec,omitempty"`
	// GroupSize is commits per fsync: how many commits one fsync covered.
	GroupSize float64 `json:"group_size,omitempty"`
	// Groups is the histogram behind GroupSize: fsyncs by how many commits
	// each covered, where the queue counts them (docket's own).
	Groups []GroupCount `json:"groups,omitempty"`
	// SyncTime is the time the fsyncs took, in all: with Elapsed, how much
	// of a run the disk was busy and how long one took on average.
	SyncTime time.Duration `json:"sync_time,omitempty"`
	// Gathers counts the fsyncs whose leader first waited for committers
	// the one before released, and GatherMisses those of them whose
	// committers did not all come in time (engine.Stats.LogGathers).
	Gathers      uint64  `json:"gathers,omitempty"`
	GatherMisses uint64  `json:"gather_misses,omitempty"`
	LogBytes     uint64  `json:"log_bytes,omitempty"`
	BytesPerTask float64 `json:"bytes_per_task,omitempty"`

	// CPU is the CPU time (user and system) the whole process used in the
	// window: the load generator, the queue and, in remote mode, the
	// server and the client; CPUPerTask divides it by Tasks. On a machine
	// shared with other work it is steadier than the rates.
	CPU        time.Duration `json:"cpu_ns,omitempty"`
	CPUPerTask time.Duration `json:"cpu_per_task_ns,omitempty"`
	// ServerCPU is, where the server ran as a process of its own (a
	// ServerCPUer: `docket serve`, a nats-server), the CPU time that
	// process used in the window, read from /proc at both ends (10 ms
	// ticks), and ServerMeasured says it was read; ServerCPUPerTask
	// divides it by Tasks. CPU is then the load generator's and the
	// client's alone.
	ServerCPU        time.Duration `json:"server_cpu_ns,omitempty"`
	ServerCPUPerTask time.Duration `json:"server_cpu_per_task_ns,omitempty"`
	ServerMeasured   bool          `json:"server_measured,omitempty"`

	// PeakRSS is the process's peak resident set (VmHWM) during the run,
	// reset at its start where the kernel allows it.
	PeakRSS int64 `json:"peak_rss_bytes,omitempty"`

	Recovery  *Recovery  `json:"recovery,omitempty"`
	Footprint *Footprint `json:"footprint,omitempty"`
	Fairness  *Fairness  `json:"fairness,omitempty"`
	Filled    *Backlog   `json:"filled,omitempty"` // W10
}

// GroupCount is one bucket of Result.Groups: Fsyncs fsyncs covered from
// Min to Max commits each (Max 0: no bound).
type GroupCount struct {
	Min    int    `json:"min"`
	Max    int    `json:"max"`
	Fsyncs uint64 `json:"fsyncs"`
}

// groupHist writes gs on one line, "size:fsyncs" per bucket.
func groupHist(gs []GroupCount) string {
	var b strings.Builder
	for i, g := range gs {
		if i > 0 {
			b.WriteByte(' ')
		}
		switch {
		case g.Min == g.Max:
			fmt.Fprintf(&b, "%d:%d", g.Min, g.Fsyncs)
		case g.Max == 0:
			fmt.Fprintf(&b, "%d+:%d", g.Min, g.Fsyncs)
		default:
			fmt.Fprintf(&b, "%d-%d:%d", g.Min, g.Max, g.Fsyncs)
		}
	}
	return b.String()
}

// Recovery is what W8 measured.
type Recovery struct {
	Tasks int `json:"tasks"`
	// Build is how long enqueueing the tasks took, one per commit.
	Build time.Duration `json:"build_ns"`
	// SnapshotWrite is how long Close took, almost all of it writing the
	// snapshot.
	SnapshotWrite time.Duration `json:"snapshot_write_ns"`
	// FromSnapshot is how long Open took with the snapshot in place;
	// FromLog how long it took with the snapshot removed, replaying the
	// whole log.
	FromSnapshot time.Duration `json:"from_snapshot_ns"`
	FromLog      time.Duration `json:"from_log_ns"`
	// SnapshotBytes and LogFileBytes are the sizes on disk.
	SnapshotBytes int64 `json:"snapshot_bytes"`
	LogFileBytes  int64 `json:"log_file_bytes"`
}

// Footprint is what W9 measured.
type Footprint struct {
	Tasks        int `json:"tasks"`
	PayloadBytes int `json:"payload_bytes"`
	// HeapPerTask is the live heap growth per pending task, after a GC;
	// HeapBeyondPayload subtracts the payload's own bytes.
	HeapPerTask       float64 `json:"heap_per_task"`
	HeapBeyondPayload float64 `json:"heap_beyond_payload"`
	// Log bytes per task for each step of a task's life, one step per
	// commit, and their sum.
	LogEnqueue   float64 `json:"log_enqueue"`
	LogClaim     float64 `json:"log_claim"`
	LogComplete  float64 `json:"log_complete"`
	LogLifecycle float64 `json:"log_lifecycle"`
}

// finish derives the rates from the counts.
func (r *Result) finish() {
	if s := r.Elapsed.Seconds(); s > 0 {
		r.TasksPerSec = float64(r.Tasks) / s
		r.CallsPerSec = float64(r.Calls) / s
		r.FsyncsPerSec = float64(r.Fsyncs) / s
	}
	if r.Fsyncs > 0 {
		r.GroupSize = float64(r.Commits) / float64(r.Fsyncs)
	}
	if r.Tasks > 0 && r.CPU > 0 {
		r.CPUPerTask = r.CPU / time.Duration(r.Tasks)
	}
	if r.Tasks > 0 && r.ServerCPU > 0 {
		r.ServerCPUPerTask = r.ServerCPU / time.Duration(r.Tasks)
	}
	if r.Tasks > 0 && r.LogBytes > 0 {
		r.BytesPerTask = float64(r.LogBytes) / float64(r.Tasks)
	}
}

// Table writes the result as aligned name/value lines.
func (r Result) Table(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	line := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	line("workload", fmt.Sprintf("%s %s (%s)", r.System, r.Workload, r.Mode))
	if r.Recovery == nil && r.Footprint == nil && r.Filled == nil {
		line("tasks", fmt.Sprintf("%d in %v", r.Tasks, r.Elapsed.Round(time.Millisecond)))
		line("tasks/s", rate(r.TasksPerSec))
		line("calls/s", fmt.Sprintf("%s (%d calls)", rate(r.CallsPerSec), r.Calls))
		line("latency/call", pct(r.Latency))
		for _, name := range callNames {
			if p, ok := r.PerCall[name]; ok && len(r.PerCall) > 1 {
				line("  "+name, pct(p))
			}
		}
	}
	if r.Enqueued > 0 {
		line("enqueued", fmt.Sprintf("%d (%s/s), backlog %d at the end", r.Enqueued,
			rate(float64(r.Enqueued)/r.Elapsed.Seconds()), r.Backlog))
	}
	if r.EndToEnd != nil {
		line("end-to-end", pct(*r.EndToEnd))
	}
	if r.OfferedRate > 0 {
		line("offered", fmt.Sprintf("%d/s, kept up: %v", r.OfferedRate, r.KeptUp))
	}
	if r.Workload == "W7" {
		line("parked", fmt.Sprintf("%d claimers besides the one woken", r.Parked))
	}
	if r.Redelivered > 0 {
		line("redelivered", strconv.FormatInt(r.Redelivered, 10))
	}
	if r.Fsyncs > 0 || r.Commits > 0 {
		line("commits", fmt.Sprintf("%d, %d fsyncs (%s/s), %.1f commits/fsync", r.Commits, r.Fsyncs,
			rate(r.FsyncsPerSec), r.GroupSize))
	}
	if len(r.Groups) > 0 {
		line("commits/fsync", groupHist(r.Groups))
	}
	if r.SyncTime > 0 && r.Fsyncs > 0 {
		line("fsync time", fmt.Sprintf("mean %s, %.0f%% of the run", dur(r.SyncTime/time.Duration(r.Fsyncs)),
			100*r.SyncTime.Seconds()/r.Elapsed.Seconds()))
	}
	if r.Gathers > 0 {
		line("gathers", fmt.Sprintf("%d fsyncs waited for committers first, %d of them to the bound", r.Gathers, r.GatherMisses))
	}
	if r.LogBytes > 0 {
		line("log", fmt.Sprintf("%s, %.0f bytes/task", size(int64(r.LogBytes)), r.BytesPerTask))
	}
	if rc := r.Recovery; rc != nil {
		line("tasks", strconv.Itoa(rc.Tasks))
		line("build", rc.Build.Round(time.Millisecond).String())
		line("close (snapshot)", rc.SnapshotWrite.Round(time.Millisecond).String())
		line("open from snapshot", rc.FromSnapshot.Round(time.Millisecond).String())
		line("open from log", rc.FromLog.Round(time.Millisecond).String())
		line("on disk", fmt.Sprintf("snapshot %s, log %s", size(rc.SnapshotBytes), size(rc.LogFileBytes)))
	}
	if f := r.Footprint; f != nil {
		line("tasks", strconv.Itoa(f.Tasks))
		line("heap/task", fmt.Sprintf("%.0f bytes (%.0f beyond the %d-byte payload)", f.HeapPerTask,
			f.HeapBeyondPayload, f.PayloadBytes))
		line("log/lifecycle", fmt.Sprintf("%.0f bytes: enqueue %.0f, claim %.0f, complete %.0f",
			f.LogLifecycle, f.LogEnqueue, f.LogClaim, f.LogComplete))
	}
	if b := r.Filled; b != nil {
		line("backlog", fmt.Sprintf("%d tasks of %d bytes, filled in %v (%s/s)", b.Tasks, b.PayloadBytes,
			b.Fill.Round(time.Millisecond), rate(float64(b.Tasks)/b.Fill.Seconds())))
		for _, s := range b.Slices {
			line(fmt.Sprintf("  at %d", s.Held), fmt.Sprintf("%s/s, heap %s, RSS %s", rate(s.PerSec), size(int64(s.HeapBytes)), size(s.RSS)))
		}
		line("peak RSS (fill)", size(b.FillPeakRSS))
		line("heap/task", fmt.Sprintf("%.0f bytes", b.HeapPerTask))
		line("on disk", size(b.DiskBytes))
		line("reopen", b.Reopen.Round(time.Millisecond).String())
		paced := ""
		if b.StandingRate > 0 {
			paced = fmt.Sprintf(", paced to %d/s", b.StandingRate)
		}
		line("standing claim", fmt.Sprintf("%s at %s/s%s", pct(b.Standing), rate(b.StandingPerSec), paced))
		if b.StandingLate != nil {
			line("  began late by", pct(*b.StandingLate))
		}
		line("drain", fmt.Sprintf("%v (%s/s)", b.Drain.Round(time.Millisecond), rate(b.DrainPerSec)))
	}
	if f := r.Fairness; f != nil {
		verdict := "FAIL"
		if f.Pass {
			verdict = "PASS"
		}
		line("small tasks", fmt.Sprintf("%d partitions of %d, beside %d tasks of one partition", f.Partitions, f.PerPart, f.BigTasks))
		line("wait alone", pct(f.Alone))
		line("wait loaded", pct(f.Loaded))
		line("big claimed", fmt.Sprintf("%d before the last small task", f.BigClaimed))
		line("p99 ratio", fmt.Sprintf("%.2fx (target <= %.0fx): %s", f.Ratio, FairTarget, verdict))
	}
	if r.CPU > 0 {
		line("CPU", fmt.Sprintf("%v, %s per task", r.CPU.Round(time.Millisecond), dur(r.CPUPerTask)))
	}
	if r.ServerMeasured {
		line("server CPU", fmt.Sprintf("%v, %s per task (the server's process)", r.ServerCPU.Round(time.Millisecond), dur(r.ServerCPUPerTask)))
	}
	if r.PeakRSS > 0 {
		line("peak RSS", size(r.PeakRSS))
	}
	return tw.Flush()
}

// WriteTable writes results as one row each, for comparing runs.
func WriteTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tworkload\tmode\ttasks/s\tcalls/s\tp50\tp99\tp999\te2e p50\te2e p99\tfsyncs/s\tcommits/fsync\tlog B/task\tCPU/task\tpeak RSS\t")
	for _, r := range rs {
		e50, e99 := "-", "-"
		if r.EndToEnd != nil {
			e50, e99 = dur(r.EndToEnd.P50), dur(r.EndToEnd.P99)
		}
		fs, gs, bt := "-", "-", "-"
		if r.Fsyncs > 0 {
			fs, gs = rate(r.FsyncsPerSec), fmt.Sprintf("%.1f", r.GroupSize)
		}
		if r.BytesPerTask > 0 {
			bt = fmt.Sprintf("%.0f", r.BytesPerTask)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.System, r.Workload, r.Mode,
			rate(r.TasksPerSec), rate(r.CallsPerSec), dur(r.Latency.P50), dur(r.Latency.P99), dur(r.Latency.P999),
			e50, e99, fs, gs, bt, dur(r.CPUPerTask), size(r.PeakRSS))
	}
	return tw.Flush()
}

func pct(p Percentiles) string {
	return fmt.Sprintf("p50 %s  p99 %s  p999 %s  max %s", dur(p.P50), dur(p.P99), dur(p.P999), dur(p.Max))
}

func rate(v float64) string {
	switch {
	case v >= 10e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 10e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v > 0 && v < 10:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func dur(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", d)
	case d < time.Millisecond:
		return fmt.Sprintf("%.1fµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// signed is dur for a difference that may be negative.
func signed(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + dur(-d)
	case d == 0:
		return "0"
	}
	return "+" + dur(d)
}

func size(b int64) string {
	switch {
	case b <= 0:
		return "-"
	case b >= 10<<20:
		return fmt.Sprintf("%.0fMiB", float64(b)/(1<<20))
	case b >= 10<<10:
		return fmt.Sprintf("%.0fKiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%dB", b)
}

// peakRSS reads the process's peak resident set size (VmHWM); 0 where
// /proc is not there.
func peakRSS() int64 { return procStatus("VmHWM:") }

// currentRSS reads the process's resident set size (VmRSS); 0 where /proc
// is not there.
func currentRSS() int64 { return procStatus("VmRSS:") }

// procStatus reads a size in kB from /proc/self/status, in bytes.
func procStatus(field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// resetPeakRSS makes VmHWM start again from the current RSS (Linux 4.0+),
// so that each run reports its own peak; where that is refused, runs in
// one process report the peak so far.
func resetPeakRSS() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}
