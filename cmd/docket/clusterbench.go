package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/docketdb/docket/bench"
	"github.com/docketdb/docket/client"
	"github.com/docketdb/docket/engine"
)

const clusterBenchAbout = `
Measures a replicated docket against a single server over the same network
API, with real 'docket serve' processes of this binary on loopback: for each
workload (see 'docket bench'; W1–W6R) one fresh standalone server (durable:
-durability always), one fresh one-node cluster (raft without replication:
what the replicated log costs by itself) and one fresh three-node cluster
(every entry fsynced on a majority), each driven through the client. Then the failover time: on a
three-node cluster under writes, the leader is killed with SIGKILL and the
time until the next write succeeds is taken, -failovers times (the killed
node restarts and catches up between kills).

W2 (16 producers on one client, durable) is judged: three nodes are to keep
at least half of one node's tasks/s, shown with PASS or FAIL (and in -json
as targets).

Everything shares this machine: the client, the servers and their disks.`

// benchBinary is the docket binary the benchmark runs as its servers:
// this one (tests give the one they built).
var benchBinary = os.Executable

// clusterBenchResult is what `docket cluster bench -json` prints.
type clusterBenchResult struct {
	Workloads []clusterBenchPair `json:"workloads"`
	// Targets are the cluster's targets the run measured, with PASS or
	// FAIL (clusterTargets).
	Targets  []bench.PerfTarget `json:"targets,omitempty"`
	Failover *failoverResult    `json:"failover,omitempty"`
}

// clusterW2Target is the least share of one node's durable W2 (16
// producers on one client) a three-node cluster is to keep.
const clusterW2Target = 0.5

// clusterTargets judges the pairs: durable W2, three nodes against one,
// each driven by its producers through one client.
func clusterTargets(pairs []clusterBenchPair) []bench.PerfTarget {
	var out []bench.PerfTarget
	for _, p := range pairs {
		if p.Single.Workload != "W2" || p.Single.Mode != "durable" || p.Single.TasksPerSec <= 0 {
			continue
		}
		out = append(out, bench.PerfTarget{
			Name:   fmt.Sprintf("W2 durable, 3 nodes vs 1 (%d producers on one client)", p.Single.Producers),
			Want:   fmt.Sprintf(">= %.1fx", clusterW2Target),
			Ratio:  p.Ratio,
			Pass:   p.Ratio >= clusterW2Target,
			Figure: fmt.Sprintf("%.0f vs %.0f tasks/s", p.Three.TasksPerSec, p.Single.TasksPerSec),
		})
	}
	return out
}

type clusterBenchPair struct {
	Single bench.Result `json:"single"`
	// OneRaft is a cluster of one node: raft's log without replication.
	OneRaft bench.Result `json:"one_raft"`
	Three   bench.Result `json:"three"`
	// Ratio is the cluster's tasks/s over the single server's.
	Ratio float64 `json:"ratio"`
	// RaftRatio is the three-node cluster's tasks/s over the one-node
	// cluster's: what replication costs beyond raft's own log.
	RaftRatio float64 `json:"raft_ratio"`
}

// failoverResult is the time from the kill of a leader to the first write
// that succeeded after it.
type failoverResult struct {
	Failovers int             `json:"failovers"`
	P50       time.Duration   `json:"p50_ns"`
	P99       time.Duration   `json:"p99_ns"`
	Max       time.Duration   `json:"max_ns"`
	Samples   []time.Duration `json:"samples_ns"`
}

func runClusterBench(ctx context.Context, c cli, args []string) error {
	fs := newFlagsFor(c, "cluster bench", "[-workload W1,W2,W5] [-n N] [-failovers N] [-json]", clusterBenchAbout)
	workloads := fs.String("workload", "W1,W2,W5", "workloads, comma separated: "+strings.Join(bench.DriverWorkloads, ","))
	n := fs.Int("n", 5000, "tasks per workload run")
	duration := fs.Duration("duration", 0, "length of W6 and W6R (0: 10s)")
	producers := fs.Int("producers", 0, "producer goroutines (0: the workload's default)")
	workers := fs.Int("workers", 0, "worker goroutines (0: the workload's default)")
	claim := fs.Int("claim", 0, "tasks per claim (0: the workload's default)")
	failovers := fs.Int("failovers", 20, "leader kills to time (0: none)")
	dir := fs.String("dir", "", "directory for the nodes' data (default: a temporary one)")
	asJSON := fs.Bool("json", false, "print JSON instead of tables")
	if err := parse(c, fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("cluster bench: unexpected argument %q", fs.Arg(0))}
	}
	if *n < 1 || *failovers < 0 {
		return usageError{"cluster bench: -n must be at least 1 and -failovers at least 0"}
	}
	bin, err := benchBinary()
	if err != nil {
		return err
	}
	var out clusterBenchResult
	for _, w := range strings.Split(*workloads, ",") {
		if w = strings.ToUpper(strings.TrimSpace(w)); w == "" {
			continue
		}
		if !slices.Contains(bench.DriverWorkloads, w) {
			return usageError{fmt.Sprintf("cluster bench: workload %q: want one of %s", w, strings.Join(bench.DriverWorkloads, ", "))}
		}
		cfg := bench.Config{Workload: w, N: *n, Duration: *duration, Producers: *producers, Workers: *workers,
			ClaimBatch: *claim, Dir: *dir, Durability: engine.SyncAlways}
		var pair clusterBenchPair
		if pair.Single, err = bench.RunDriver(ctx, "1 node", cfg, procOpener(bin, 1, false)); err != nil {
			return err
		}
		if pair.OneRaft, err = bench.RunDriver(ctx, "1-node cluster", cfg, procOpener(bin, 1, true)); err != nil {
			return err
		}
		if pair.Three, err = bench.RunDriver(ctx, "3 nodes", cfg, procOpener(bin, 3, true)); err != nil {
			return err
		}
		if pair.Single.TasksPerSec > 0 {
			pair.Ratio = pair.Three.TasksPerSec / pair.Single.TasksPerSec
		}
		if pair.OneRaft.TasksPerSec > 0 {
			pair.RaftRatio = pair.Three.TasksPerSec / pair.OneRaft.TasksPerSec
		}
		out.Workloads = append(out.Workloads, pair)
		if !*asJSON {
			fmt.Fprintf(c.stdout, "%s: 3 nodes at %.0f%% of 1 node's tasks/s (%.0f%% of a one-node cluster's)\n", w, 100*pair.Ratio, 100*pair.RaftRatio)
		}
	}
	out.Targets = clusterTargets(out.Workloads)
	if *failovers > 0 {
		f, err := measureFailovers(ctx, bin, *dir, *failovers, c.stderr, *asJSON)
		if err != nil {
			return err
		}
		out.Failover = &f
	}
	if *asJSON {
		return writeJSON(c.stdout, out)
	}
	if len(out.Workloads) > 0 {
		var rs []bench.Result
		for _, p := range out.Workloads {
			rs = append(rs, p.Single, p.OneRaft, p.Three)
		}
		fmt.Fprintln(c.stdout)
		if err := bench.WriteTable(c.stdout, rs); err != nil {
			return err
		}
	}
	if len(out.Targets) > 0 {
		fmt.Fprintln(c.stdout, "\ntargets:")
		if err := bench.WritePerfTargets(c.stdout, out.Targets); err != nil {
			return err
		}
	}
	if f := out.Failover; f != nil {
		tw := tabwriter.NewWriter(c.stdout, 0, 8, 2, ' ', 0)
		fmt.Fprintf(tw, "\nfailover (leader SIGKILL to the next successful write)\t%d kills\n", f.Failovers)
		fmt.Fprintf(tw, "p50\t%v\np99\t%v\nmax\t%v\n", f.P50.Round(time.Millisecond), f.P99.Round(time.Millisecond), f.Max.Round(time.Millisecond))
		return tw.Flush()
	}
	return nil
}

// tailBuffer keeps the last bytes written to it, for an error message.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if t.buf.Len() > 16<<10 {
		b := t.buf.Bytes()
		t.buf = *bytes.NewBuffer(append([]byte(nil), b[len(b)-8<<10:]...))
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}

// localCluster starts n nodes in dir (n == 1: a standalone server) and
// waits until they serve.
// localCluster starts n nodes of bin on loopback, each under dir: a
// cluster of them when raft is set (the first bootstraps it, the others
// join), or else one standalone server (n must be 1).
func localCluster(ctx context.Context, bin, dir string, n int, raft bool) ([]*nodeProc, error) {
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	var nodes []*nodeProc
	fail := func(err error) ([]*nodeProc, error) {
		var logs strings.Builder
		for _, p := range nodes {
			p.stop(syscall.SIGKILL)
			fmt.Fprintf(&logs, "\n--- %s:\n%s", p.id, p.log.(*tailBuffer).String())
		}
		return nil, fmt.Errorf("%w%s", err, logs.String())
	}
	for i := range n {
		p := &nodeProc{bin: bin, id: "n" + strconv.Itoa(i+1), dir: filepath.Join(dir, "n"+strconv.Itoa(i+1)),
			httpPort: ports[2*i], log: &tailBuffer{}, args: []string{"-log-level", "warn"}}
		p.url = "http://127.0.0.1:" + strconv.Itoa(p.httpPort)
		if raft {
			p.raftPort = ports[2*i+1]
		}
		nodes = append(nodes, p)
		var extra []string
		switch {
		case raft && i == 0:
			extra = []string{"-bootstrap"}
		case raft:
			extra = []string{"-join", nodes[0].url}
		}
		if err := p.start(extra...); err != nil {
			return fail(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err := p.waitReady(wctx)
		cancel()
		if err != nil {
			return fail(err)
		}
	}
	return nodes, nil
}

func urlsOf(nodes []*nodeProc) string {
	var u []string
	for _, p := range nodes {
		u = append(u, p.url)
	}
	return strings.Join(u, ",")
}

// procOpener opens a fresh local cluster of n nodes for each run.
func procOpener(bin string, n int, raft bool) bench.Opener[engine.Lease] {
	return func(ctx context.Context, cfg bench.Config, dir string) (bench.Driver[engine.Lease], error) {
		nodes, err := localCluster(ctx, bin, dir, n, raft)
		if err != nil {
			return nil, err
		}
		c, err := client.Dial(ctx, urlsOf(nodes), client.Options{})
		if err != nil {
			stopAll(nodes)
			return nil, err
		}
		return &remoteDriver{c: c, q: c.Queue(engine.NS("bench", "load"), "tasks"), nodes: nodes}, nil
	}
}

func stopAll(nodes []*nodeProc) error {
	var errs []error
	for _, p := range nodes {
		errs = append(errs, p.stop(syscall.SIGTERM))
	}
	return errors.Join(errs...)
}

// remoteDriver is the load generator's queue over the client.
type remoteDriver struct {
	c     *client.Client
	q     engine.Queue
	nodes []*nodeProc
}

var (
	_ bench.Driver[engine.Lease]         = (*remoteDriver)(nil)
	_ bench.BatchCompleter[engine.Lease] = (*remoteDriver)(nil)
)

func (d *remoteDriver) Enqueue(ctx context.Context, payload []byte) error {
	_, err := d.q.Enqueue(ctx, engine.Task{Payload: payload})
	return err
}

func (d *remoteDriver) EnqueueBatch(ctx context.Context, payloads [][]byte) error {
	ts := make([]engine.Task, len(payloads))
	for i, p := range payloads {
		ts[i].Payload = p
	}
	_, err := d.q.EnqueueBatch(ctx, ts)
	return err
}

func (d *remoteDriver) Claim(ctx context.Context, max int, wait bool) ([]engine.Lease, error) {
	if wait {
		return d.q.ClaimWait(ctx, "bench", 10*time.Minute, max)
	}
	return d.q.Claim(ctx, "bench", 10*time.Minute, max)
}

func (d *remoteDriver) Complete(ctx context.Context, l *engine.Lease) error {
	_, err := d.q.Complete(ctx, *l, engine.Done{})
	return completed(err)
}

func (d *remoteDriver) CompleteBatch(ctx context.Context, ls []engine.Lease) error {
	errs, err := d.q.CompleteBatch(ctx, ls)
	if err != nil {
		return completed(err)
	}
	for i := range errs {
		errs[i] = completed(errs[i])
	}
	return errors.Join(errs...)
}

// completed is the error of a completion: none for a lost lease. The
// benchmark's leases outlast the run and nobody else claims, so a lease is
// lost only to a try of the same completion that got no answer (a leader
// that stepped down with the entry on a majority) and was taken: the
// client repeats a fenced call, and the repeat finds the task gone.
func completed(err error) error {
	if errors.Is(err, engine.ErrLeaseLost) {
		return nil
	}
	return err
}

func (d *remoteDriver) Payload(l *engine.Lease) []byte { return l.Payload }

func (d *remoteDriver) Close() error {
	return errors.Join(d.c.Close(), stopAll(d.nodes))
}

// nodeStatus asks the node at url for its view of the cluster.
func nodeStatus(ctx context.Context, url string) (client.ClusterStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := client.Dial(ctx, url, client.Options{MaxRetries: 1})
	if err != nil {
		return client.ClusterStatus{}, err
	}
	defer c.Close()
	return c.ClusterStatus(ctx)
}

// measureFailovers times kills of the leader of a three-node cluster
// under writes.
func measureFailovers(ctx context.Context, bin, dir string, kills int, progress io.Writer, quiet bool) (failoverResult, error) {
	root, err := os.MkdirTemp(dir, "docket-failover-")
	if err != nil {
		return failoverResult{}, err
	}
	defer os.RemoveAll(root)
	nodes, err := localCluster(ctx, bin, root, 3, true)
	if err != nil {
		return failoverResult{}, err
	}
	defer stopAll(nodes)
	// Short backoff: the figure is the cluster's, not the client's waits.
	c, err := client.Dial(ctx, urlsOf(nodes), client.Options{MaxRetries: 200, BackoffBase: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond})
	if err != nil {
		return failoverResult{}, err
	}
	defer c.Close()
	q := c.Queue(engine.NS("bench", "failover"), "tasks")
	write := func() error {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := q.Enqueue(wctx, engine.Task{})
		return err
	}
	var res failoverResult
	for k := range kills {
		// Writes go on all the time, as they would in production.
		for range 20 {
			if err := write(); err != nil {
				return res, fmt.Errorf("a write before kill %d: %w", k+1, err)
			}
		}
		leader := -1
		for i, p := range nodes {
			if st, err := nodeStatus(ctx, p.url); err == nil && st.State == "Leader" {
				leader = i
			}
		}
		if leader < 0 {
			return res, fmt.Errorf("no leader before kill %d", k+1)
		}
		start := time.Now()
		if err := nodes[leader].stop(syscall.SIGKILL); err != nil {
			return res, err
		}
		for {
			err := write()
			if err == nil {
				break
			}
			if ctx.Err() != nil || time.Since(start) > time.Minute {
				return res, fmt.Errorf("no write succeeded within a minute of kill %d: %w", k+1, err)
			}
		}
		d := time.Since(start)
		res.Samples = append(res.Samples, d)
		if !quiet {
			fmt.Fprintf(progress, "failover %d/%d: %s killed, a write succeeded %v later\n", k+1, kills, nodes[leader].id, d.Round(time.Millisecond))
		}
		if err := nodes[leader].start("-join", urlsOf(nodes)); err != nil {
			return res, err
		}
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err := nodes[leader].waitReady(wctx)
		cancel()
		if err != nil {
			return res, err
		}
		if err := caughtUp(ctx, nodes); err != nil {
			return res, err
		}
	}
	sorted := slices.Clone(res.Samples)
	slices.Sort(sorted)
	res.Failovers = len(sorted)
	res.P50 = sorted[(len(sorted)-1)/2]
	res.P99 = sorted[min(len(sorted)-1, (len(sorted)*99+99)/100-1)]
	res.Max = sorted[len(sorted)-1]
	return res, nil
}

// caughtUp waits until every node has applied what the leader had
// committed when it was called.
func caughtUp(ctx context.Context, nodes []*nodeProc) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var commit uint64
	for _, p := range nodes {
		if st, err := nodeStatus(ctx, p.url); err == nil && st.State == "Leader" {
			commit = st.CommitIndex
		}
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for _, p := range nodes {
		for {
			if st, err := nodeStatus(ctx, p.url); err == nil && st.AppliedIndex >= commit {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s did not catch up: %w", p.id, ctx.Err())
			case <-tick.C:
			}
		}
	}
	return nil
}
