//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docketdb/docket/client"
	"github.com/docketdb/docket/engine"
)

// The failure harness: three real `docket serve -raft` processes on
// loopback, producers and workers through the client, and a nemesis that
// kills, restarts and partitions nodes while they work. Each raft link
// (one direction between two nodes) runs through a TCP proxy of the test,
// named to each node with -raft-peer, so that the test can cut any link
// and heal it.

var (
	nemesisEvents = flag.Int("nemesis-events", 24, "nemesis events of TestClusterNemesis (-nemesis-events=500 for a long run)")
	nemesisSeed   = flag.Uint64("nemesis-seed", 0, "seed of TestClusterNemesis's schedule (0: a random one, printed)")
)

// linkProxy carries one direction of a raft link: the connections one node
// opens to another. Cut, it closes what it carries and every connection
// it accepts.
type linkProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newLinkProxy(t *testing.T, target string) *linkProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &linkProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *linkProxy) addr() string { return p.ln.Addr().String() }

func (p *linkProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if cut {
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.carry(c)
	}
}

func (p *linkProxy) carry(in net.Conn) {
	defer p.wg.Done()
	out, err := net.DialTimeout("tcp", p.target, time.Second)
	if err != nil {
		in.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		in.Close()
		out.Close()
		return
	}
	p.conns[in], p.conns[out] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-done
	in.Close()
	out.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, in)
	delete(p.conns, out)
	p.mu.Unlock()
}

// setCut cuts the link (closing what it carries) or heals it.
func (p *linkProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
	}
}

func (p *linkProxy) close() {
	p.ln.Close()
	p.setCut(true)
	p.wg.Wait()
}

// procCluster is three `docket serve -raft` processes and the proxies of
// their raft links.
type procCluster struct {
	t     *testing.T
	nodes []*nodeProc
	logs  []*logLines
	links map[[2]int]*linkProxy // [from, to]
}

func startProcCluster(t *testing.T, n int, extra ...string) *procCluster {
	t.Helper()
	bin := docketBinary(t)
	ports, err := freePorts(2 * n)
	if err != nil {
		t.Fatal(err)
	}
	pc := &procCluster{t: t, links: map[[2]int]*linkProxy{}}
	root := t.TempDir()
	for i := range n {
		lg := newLogLines()
		p := &nodeProc{bin: bin, id: "n" + strconv.Itoa(i+1), dir: filepath.Join(root, "n"+strconv.Itoa(i+1)),
			httpPort: ports[2*i], raftPort: ports[2*i+1], log: lg}
		p.url = "http://127.0.0.1:" + strconv.Itoa(p.httpPort)
		pc.nodes, pc.logs = append(pc.nodes, p), append(pc.logs, lg)
	}
	for i, from := range pc.nodes {
		from.args = append([]string{"-log-level", "info", "-grace", "5s"}, extra...)
		for j, to := range pc.nodes {
			if i == j {
				continue
			}
			l := newLinkProxy(t, to.raftAddr())
			pc.links[[2]int{i, j}] = l
			from.args = append(from.args, "-raft-peer", to.id+"="+l.addr())
		}
	}
	t.Cleanup(func() {
		for _, p := range pc.nodes {
			p.stop(syscall.SIGKILL)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := pc.nodes[0].start("-bootstrap"); err != nil {
		t.Fatal(err)
	}
	pc.must(pc.nodes[0].waitReady(ctx))
	for _, p := range pc.nodes[1:] {
		if err := p.start("-join", pc.nodes[0].url); err != nil {
			t.Fatal(err)
		}
		pc.must(p.waitReady(ctx))
	}
	return pc
}

// must fails the test on err, with the tail of every node's log.
func (pc *procCluster) must(err error) {
	pc.t.Helper()
	if err == nil {
		return
	}
	var b strings.Builder
	for i, l := range pc.logs {
		s := l.String()
		if len(s) > 4000 {
			s = "…" + s[len(s)-4000:]
		}
		fmt.Fprintf(&b, "\n--- log of %s:\n%s", pc.nodes[i].id, s)
	}
	pc.t.Fatalf("%v%s", err, b.String())
}

func (pc *procCluster) urls() string {
	var u []string
	for _, p := range pc.nodes {
		u = append(u, p.url)
	}
	return strings.Join(u, ",")
}

// statusOf asks node i for its view of the cluster.
func (pc *procCluster) statusOf(ctx context.Context, i int) (client.ClusterStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := client.Dial(ctx, pc.nodes[i].url, client.Options{MaxRetries: 1})
	if err != nil {
		return client.ClusterStatus{}, err
	}
	defer c.Close()
	return c.ClusterStatus(ctx)
}

// waitLeader returns the node that leads, once one that is running says so
// and is not in not; it waits at most 30 s.
func (pc *procCluster) waitLeader(not ...int) int {
	pc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		for i, p := range pc.nodes {
			if !p.running() || slices.Contains(not, i) {
				continue
			}
			if st, err := pc.statusOf(ctx, i); err == nil && st.State == "Leader" {
				return i
			}
		}
		select {
		case <-ctx.Done():
			pc.must(errors.New("no leader within 30 s"))
		case <-tick.C:
		}
	}
}

// waitNotLeader waits until node i no longer says it leads (a leader cut
// off from its quorum steps down).
func (pc *procCluster) waitNotLeader(i int) {
	pc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if st, err := pc.statusOf(ctx, i); err == nil && st.State != "Leader" {
			return
		}
		select {
		case <-ctx.Done():
			pc.must(fmt.Errorf("%s still leads a minority after 30 s", pc.nodes[i].id))
		case <-tick.C:
		}
	}
}

// isolate cuts (or heals) every raft link from and to node i.
func (pc *procCluster) isolate(i int, cut bool) {
	for k, l := range pc.links {
		if k[0] == i || k[1] == i {
			l.setCut(cut)
		}
	}
}

// waitAllReady waits until every node runs and knows a leader.
func (pc *procCluster) waitAllReady() {
	pc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, p := range pc.nodes {
		pc.must(p.waitReady(ctx))
	}
}

// restart starts node i again on its directory and waits until it is
// ready.
func (pc *procCluster) restart(i int) {
	pc.t.Helper()
	if err := pc.nodes[i].start("-join", pc.urls()); err != nil {
		pc.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pc.must(pc.nodes[i].waitReady(ctx))
}

// ackCounter counts acknowledged enqueues and lets the nemesis wait for
// more.
type ackCounter struct {
	mu   sync.Mutex
	n    int
	wake chan struct{}
}

func (p *ackCounter) add() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	close(p.wake)
	p.wake = make(chan struct{})
}

// waitMore waits until k more enqueues were acknowledged than when it was
// called, at most d.
func (p *ackCounter) waitMore(k int, d time.Duration) error {
	p.mu.Lock()
	target := p.n + k
	p.mu.Unlock()
	deadline := time.After(d)
	for {
		p.mu.Lock()
		n, wake := p.n, p.wake
		p.mu.Unlock()
		if n >= target {
			return nil
		}
		select {
		case <-wake:
		case <-deadline:
			return fmt.Errorf("%d of %d more enqueues acknowledged within %v", n-(target-k), k, d)
		}
	}
}

// leaseSeen is one lease a worker was granted: which task, to whom, with
// which token, and when the claim was sent and answered.
type leaseSeen struct {
	id, token  uint64
	owner      string
	sent, recv time.Time
}

// history is what producers and workers saw.
type history struct {
	mu        sync.Mutex
	attempted map[string]bool   // idempotency keys sent
	acked     map[string]uint64 // key → the task id of an acknowledged enqueue
	leases    []leaseSeen
	prog      ackCounter
}

// TestClusterNemesis runs producers and workers through the client against
// three real processes while a nemesis kills the leader or a follower with
// SIGKILL, restarts nodes cleanly (SIGTERM), and partitions the leader (a
// minority-side leader, which must step down and acknowledge nothing) or a
// follower away from the others. Then it heals everything, drains the
// queue and checks: every acknowledged enqueue was delivered and completed
// (lost = 0), nothing completed that was not enqueued, nor twice (unexpected
// = 0), no two owners held a task with one token, and a task's tokens grew
// with real time, with the completing lease holding the newest.
func TestClusterNemesis(t *testing.T) {
	// In parallel with the package's other long tests: it mostly waits
	// on processes and timers.
	t.Parallel()
	seed := *nemesisSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("nemesis seed %d (-nemesis-seed=%d replays the schedule)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1|1))
	pc := startProcCluster(t, 3, "-retain-completed", "1h")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, err := client.Dial(ctx, pc.urls(), client.Options{MaxRetries: 12, BackoffBase: 20 * time.Millisecond,
		BackoffMax: 500 * time.Millisecond, PollWait: 2 * time.Second, CallTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ns := engine.NS("nemesis", "run")
	q := c.Queue(ns, "tasks")
	h := &history{attempted: map[string]bool{}, acked: map[string]uint64{}, prog: ackCounter{wake: make(chan struct{})}}

	var producing, working sync.WaitGroup
	pctx, stopProducers := context.WithCancel(ctx)
	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopProducers()
	defer stopWorkers()
	for p := range 2 {
		producing.Add(1)
		go func() {
			defer producing.Done()
			nemesisProduce(pctx, q, p, h)
		}()
	}
	for w := range 4 {
		working.Add(1)
		go func() {
			defer working.Done()
			nemesisWork(wctx, q, "w"+strconv.Itoa(w), h)
		}()
	}
	pc.must(h.prog.waitMore(50, 60*time.Second))

	kinds := []string{"kill-leader", "kill-follower", "restart", "partition-leader", "partition-follower"}
	counts := map[string]int{}
	start := time.Now()
	for e := range *nemesisEvents {
		kind := kinds[rng.IntN(len(kinds))]
		if e < len(kinds) {
			kind = kinds[e] // every kind at least once
		}
		counts[kind]++
		evStart := time.Now()
		leader := pc.waitLeader()
		follower := (leader + 1 + rng.IntN(2)) % 3
		switch kind {
		case "kill-leader":
			pc.must(pc.nodes[leader].stop(syscall.SIGKILL))
			pc.waitLeader(leader)
			pc.must(h.prog.waitMore(20, 60*time.Second))
			pc.restart(leader)
		case "kill-follower":
			pc.must(pc.nodes[follower].stop(syscall.SIGKILL))
			pc.must(h.prog.waitMore(20, 60*time.Second))
			pc.restart(follower)
		case "restart":
			i := rng.IntN(3)
			pc.must(pc.nodes[i].stop(syscall.SIGTERM))
			if err := pc.nodes[i].err; err != nil {
				pc.must(fmt.Errorf("%s after SIGTERM: %v", pc.nodes[i].id, err))
			}
			pc.must(h.prog.waitMore(20, 60*time.Second))
			pc.restart(i)
		case "partition-leader":
			pc.isolate(leader, true)
			pc.waitNotLeader(leader)
			pc.waitLeader(leader)
			pc.must(h.prog.waitMore(20, 60*time.Second))
			pc.isolate(leader, false)
		case "partition-follower":
			pc.isolate(follower, true)
			pc.must(h.prog.waitMore(20, 60*time.Second))
			pc.isolate(follower, false)
		}
		pc.waitAllReady()
		if testing.Verbose() {
			t.Logf("event %d: %s (leader was %s) in %v", e+1, kind, pc.nodes[leader].id, time.Since(evStart).Round(time.Millisecond))
		}
	}
	elapsed := time.Since(start)

	// Heal, stop producing, and let the workers finish everything
	// (including leases whose completion went unanswered, once they expire).
	stopProducers()
	producing.Wait()
	drain, cancelDrain := context.WithTimeout(ctx, 120*time.Second)
	defer cancelDrain()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		n, err := q.Counts(drain)
		if err == nil && n.Ready+n.Scheduled+n.InFlight == 0 {
			if n.Dead != 0 {
				pc.must(fmt.Errorf("%d tasks dead-lettered", n.Dead))
			}
			break
		}
		select {
		case <-drain.Done():
			pc.must(fmt.Errorf("the queue did not drain: %+v %v", n, err))
		case <-tick.C:
		}
	}
	stopWorkers()
	working.Wait()

	completed := map[uint64]engine.TaskInfo{}
	for cursor := ""; ; {
		page, err := q.List(drain, engine.ListOptions{State: engine.Completed, Limit: engine.MaxBatch, Cursor: cursor})
		if err != nil {
			pc.must(err)
		}
		for _, ti := range page.Tasks {
			completed[ti.ID] = ti
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	v := h.check(completed)
	t.Logf("nemesis: %d events in %v (%v), %d enqueues acknowledged, %d tasks completed, %d leases seen",
		*nemesisEvents, elapsed.Round(time.Second), counts, len(h.acked), len(completed), len(h.leases))
	t.Logf("nemesis totals: events=%d acknowledged=%d lost=%d unexpected=%d double_leases=%d tokens_backwards=%d",
		*nemesisEvents, len(h.acked), v.lost, v.unexpected, v.doubleLeases, v.tokensBackwards)
	if v.lost+v.unexpected+v.doubleLeases+v.tokensBackwards != 0 {
		t.Fatalf("violations (seed %d):\n%s", seed, strings.Join(v.examples, "\n"))
	}
}

// nemesisProduce enqueues tasks with an idempotency key each, about 100 a second,
// repeating a key until its enqueue is acknowledged (a repeat is
// deduplicated), until ctx ends.
func nemesisProduce(ctx context.Context, q engine.Queue, p int, h *history) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ; {
		key := fmt.Sprintf("p%d-%d", p, n)
		payload, _ := json.Marshal(map[string]string{"key": key})
		h.mu.Lock()
		h.attempted[key] = true
		h.mu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		res, err := q.Enqueue(cctx, engine.Task{Payload: payload, IdempotencyKey: key, MaxAttempts: 100})
		cancel()
		if err == nil {
			h.mu.Lock()
			h.acked[key] = res.ID
			h.mu.Unlock()
			h.prog.add()
			n++
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// nemesisWork claims and completes tasks until ctx ends, recording every lease.
func nemesisWork(ctx context.Context, q engine.Queue, owner string, h *history) {
	for ctx.Err() == nil {
		sent := time.Now()
		ls, err := q.ClaimWait(ctx, owner, 3*time.Second, 8)
		recv := time.Now()
		if err != nil {
			if ctx.Err() == nil {
				t := time.NewTimer(20 * time.Millisecond) // the cluster is electing: try again soon
				select {
				case <-ctx.Done():
				case <-t.C:
				}
				t.Stop()
			}
			continue
		}
		h.mu.Lock()
		for _, l := range ls {
			h.leases = append(h.leases, leaseSeen{id: l.ID, token: l.Token, owner: owner, sent: sent, recv: recv})
		}
		h.mu.Unlock()
		for _, l := range ls {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			q.Complete(cctx, l, engine.Done{})
			cancel()
		}
	}
}

// violations are what check found wrong, with a few examples.
type violations struct {
	lost, unexpected, doubleLeases, tokensBackwards int
	examples                                        []string
}

func (v *violations) note(format string, args ...any) {
	if len(v.examples) < 20 {
		v.examples = append(v.examples, fmt.Sprintf(format, args...))
	}
}

// check compares the history with the completed tasks.
func (h *history) check(completed map[uint64]engine.TaskInfo) violations {
	var v violations
	for key, id := range h.acked {
		ti, ok := completed[id]
		if !ok {
			v.lost++
			v.note("lost: task %d (key %s) was acknowledged and never completed", id, key)
		} else if ti.IdempotencyKey != key {
			v.unexpected++
			v.note("task %d was acknowledged for key %s but holds key %q", id, key, ti.IdempotencyKey)
		}
	}
	byKey := map[string]uint64{}
	for id, ti := range completed {
		switch {
		case !h.attempted[ti.IdempotencyKey]:
			v.unexpected++
			v.note("unexpected: task %d (key %q) was never enqueued", id, ti.IdempotencyKey)
		case byKey[ti.IdempotencyKey] != 0:
			v.unexpected++
			v.note("unexpected: key %s completed as tasks %d and %d", ti.IdempotencyKey, byKey[ti.IdempotencyKey], id)
		}
		byKey[ti.IdempotencyKey] = id
	}
	type lease struct{ id, token uint64 }
	owners := map[lease]string{}
	perTask := map[uint64][]leaseSeen{}
	for _, l := range h.leases {
		k := lease{l.id, l.token}
		if o, ok := owners[k]; ok && o != l.owner {
			v.doubleLeases++
			v.note("double lease: task %d token %d held by %s and %s", l.id, l.token, o, l.owner)
		}
		owners[k] = l.owner
		perTask[l.id] = append(perTask[l.id], l)
	}
	for id, ls := range perTask {
		for _, a := range ls {
			for _, b := range ls {
				if a.recv.Before(b.sent) && a.token >= b.token {
					v.tokensBackwards++
					v.note("task %d: token %d granted before token %d was asked for", id, a.token, b.token)
				}
			}
			if ti, ok := completed[id]; ok && a.token > ti.Token {
				v.tokensBackwards++
				v.note("task %d completed with token %d after token %d was granted", id, ti.Token, a.token)
			}
		}
	}
	return v
}

// TestClusterBench runs `docket cluster bench` small: a workload on one
// server, on a one-node cluster and on three nodes, and two timed
// failovers.
func TestClusterBench(t *testing.T) {
	bin := docketBinary(t)
	old := benchBinary
	benchBinary = func() (string, error) { return bin, nil }
	defer func() { benchBinary = old }()
	code, out, errs := docket(t, "cluster", "bench", "-workload", "W2", "-n", "300", "-failovers", "2", "-json", "-dir", t.TempDir())
	if code != 0 {
		t.Fatalf("cluster bench: exit %d\n%s%s", code, out, errs)
	}
	res := decode[clusterBenchResult](t, out)
	if len(res.Workloads) != 1 {
		t.Fatalf("%d workloads", len(res.Workloads))
	}
	p := res.Workloads[0]
	if p.Single.Tasks != 300 || p.OneRaft.Tasks != 300 || p.Three.Tasks != 300 || p.Single.System != "1 node" ||
		p.OneRaft.System != "1-node cluster" || p.Three.System != "3 nodes" || p.Ratio <= 0 || p.RaftRatio <= 0 {
		t.Fatalf("W2: %+v", p)
	}
	if want := p.Three.TasksPerSec / p.OneRaft.TasksPerSec; p.RaftRatio != want {
		t.Fatalf("raft ratio %v, want %v", p.RaftRatio, want)
	}
	if len(res.Targets) != 1 || res.Targets[0].Ratio != p.Ratio || res.Targets[0].Pass != (p.Ratio >= clusterW2Target) {
		t.Fatalf("targets: %+v", res.Targets)
	}
	f := res.Failover
	if f == nil || f.Failovers != 2 || len(f.Samples) != 2 || f.P50 <= 0 || f.P99 < f.P50 || f.Max != f.P99 {
		t.Fatalf("failovers: %+v", f)
	}
}
