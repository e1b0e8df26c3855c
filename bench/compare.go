package bench

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// Median returns the run of rs with the median throughput (the upper one
// of an even count); rs must not be empty.
func Median(rs []Result) Result { return rs[medianRound(rs, nil)] }

// medianRound is the index in runs of the median (the upper one of an even
// count; equals keep their order): by tasks/s, or, where rates has a rate
// for a run, by its ratio to that rate (the fsync rate measured before
// it).
func medianRound(runs []Result, rates []float64) int {
	key := func(i int) float64 {
		if i < len(rates) && rates[i] > 0 {
			return runs[i].TasksPerSec / rates[i]
		}
		return runs[i].TasksPerSec
	}
	idx := make([]int, len(runs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(key(a), key(b)) })
	return idx[len(idx)/2]
}

// medians groups rs by system, workload and mode and keeps each group's
// median, in the order the groups first appear.
func medians(rs []Result) []Result {
	var keys []string
	groups := map[string][]Result{}
	for _, r := range rs {
		k := r.System + "/" + r.Workload + "/" + r.Mode
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], r)
	}
	out := make([]Result, len(keys))
	for i, k := range keys {
		out[i] = Median(groups[k])
	}
	return out
}

func find(rs []Result, system, workload, mode string) (Result, bool) {
	for _, r := range rs {
		if r.System == system && r.Workload == workload && r.Mode == mode {
			return r, true
		}
	}
	return Result{}, false
}

// peerMode is the Mode a peer's result has for docket's mode m.
func peerMode(m string) string {
	switch m {
	case "always":
		return "durable"
	case "never":
		return "nosync"
	}
	return m
}

// Target is one aim of the remote mode, checked against measured results.
type Target struct {
	Name string  // what is aimed at
	Want float64 // the least ratio that passes
	// Ratio is what was measured: remote over in-process throughput, or
	// remote over the peer's (for W6R when both kept up with the offered
	// load, the peer's end-to-end p99 over remote's). Figure says which.
	Ratio    float64
	Figure   string
	Measured bool // false: a result it needs was not in the run
	Pass     bool
}

// Targets checks the remote mode's aims against rs (several rounds of a
// system, workload and mode are reduced to their median): durable W2
// through the client at least 80% of in process, W5 at SyncNever at least
// 50%, and every durable driver workload (W1–W6R at SyncAlways) through
// the client ahead of the JetStream peer named peer, reached over
// loopback with the same durability. A target whose results are missing
// is listed with Measured false.
func Targets(rs []Result, peer string) []Target {
	ms := medians(rs)
	vsLocal := func(workload, mode string, want float64) Target {
		t := Target{Name: fmt.Sprintf("%s %s: remote >= %.0f%% of in process", workload, mode, 100*want),
			Want: want, Figure: "tasks/s remote/in-process"}
		local, ok1 := find(ms, "docket", workload, mode)
		remote, ok2 := find(ms, Remote, workload, mode)
		if ok1 && ok2 && local.TasksPerSec > 0 {
			t.Ratio, t.Measured = remote.TasksPerSec/local.TasksPerSec, true
			t.Pass = t.Ratio >= want
		}
		return t
	}
	out := []Target{vsLocal("W2", "always", 0.8), vsLocal("W5", "never", 0.5)}
	for _, w := range DriverWorkloads {
		t := Target{Name: fmt.Sprintf("%s always: remote ahead of %s (durable)", w, peer), Want: 1,
			Figure: "tasks/s remote/" + peer}
		remote, ok1 := find(ms, Remote, w, "always")
		p, ok2 := find(ms, peer, w, peerMode("always"))
		if ok1 && ok2 {
			t.Measured = true
			switch {
			case w == "W6R" && remote.KeptUp && p.KeptUp && remote.EndToEnd != nil && p.EndToEnd != nil && remote.EndToEnd.P99 > 0:
				// Both took the whole offered load: the one that is ahead
				// is the one that took it faster.
				t.Figure = "e2e p99 " + peer + "/remote"
				t.Ratio = float64(p.EndToEnd.P99) / float64(remote.EndToEnd.P99)
			case p.TasksPerSec > 0:
				t.Ratio = remote.TasksPerSec / p.TasksPerSec
			default:
				t.Ratio = remote.TasksPerSec // the peer did nothing: any progress is ahead
			}
			t.Pass = t.Ratio > t.Want
		}
		out = append(out, t)
	}
	return out
}

// WriteTargets writes one line per target: its name, the ratio measured
// and PASS or FAIL, or that it was not measured and what would measure it.
func WriteTargets(w io.Writer, ts []Target) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, t := range ts {
		switch {
		case !t.Measured:
			fmt.Fprintf(tw, "%s\t-\tnot measured\t\n", t.Name)
		case t.Pass:
			fmt.Fprintf(tw, "%s\t%.2fx\tPASS\t(%s)\n", t.Name, t.Ratio, t.Figure)
		default:
			fmt.Fprintf(tw, "%s\t%.2fx\tFAIL\t(%s)\n", t.Name, t.Ratio, t.Figure)
		}
	}
	return tw.Flush()
}

// WriteRemote compares each workload and mode run both in process and
// through the client: throughput and its ratio, then per kind of call
// the p50 and p99 latency of each and what the network added.
func WriteRemote(w io.Writer, rs []Result) error {
	ms := medians(rs)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tmode\tin-process tasks/s\tremote tasks/s\tremote/in-process\tin-process CPU/task\tremote CPU/task\t")
	type pair struct{ local, remote Result }
	var pairs []pair
	for _, l := range ms {
		if l.System != "docket" {
			continue
		}
		r, ok := find(ms, Remote, l.Workload, l.Mode)
		if !ok {
			// A server elsewhere: its durability is its own.
			if r, ok = find(ms, Remote, l.Workload, "server"); !ok {
				continue
			}
		}
		pairs = append(pairs, pair{l, r})
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", l.Workload, l.Mode, rate(l.TasksPerSec), rate(r.TasksPerSec),
			ratioOf(r.TasksPerSec, l.TasksPerSec), dur(l.CPUPerTask), dur(r.CPUPerTask))
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "workload\tmode\tcall\tin-process p50\tp99\tremote p50\tp99\tadded p50\tadded p99\t")
	for _, p := range pairs {
		for _, name := range callNames {
			l, ok1 := p.local.PerCall[name]
			r, ok2 := p.remote.PerCall[name]
			if !ok1 || !ok2 {
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", p.local.Workload, p.local.Mode, name,
				dur(l.P50), dur(l.P99), dur(r.P50), dur(r.P99), signed(r.P50-l.P50), signed(r.P99-l.P99))
		}
	}
	return tw.Flush()
}

func ratioOf(a, b float64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}
