package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docketdb/docket/client"
	"github.com/docketdb/docket/cluster"
	"github.com/docketdb/docket/cluster/clustertest"
	"github.com/docketdb/docket/engine"
	"github.com/hashicorp/raft"
)

var (
	nemesisEvents = flag.Int("nemesis-events", 0, "events of TestNemesis (default 8 with -short, 40 without)")
	nemesisSeed   = flag.Uint64("nemesis-seed", 1, "seed of TestNemesis's schedule")
)

// progress counts acknowledged calls and wakes those waiting for more.
type progress struct {
	mu sync.Mutex
	n  int
	ch chan struct{}
}

func newProgress() *progress { return &progress{ch: make(chan struct{})} }

func (p *progress) add() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	close(p.ch)
	p.ch = make(chan struct{})
}

func (p *progress) get() (int, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n, p.ch
}

// wait returns true once k more calls were acknowledged, false at timeout.
func (p *progress) wait(k int, timeout time.Duration) bool {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	start, _ := p.get()
	for {
		n, ch := p.get()
		if n >= start+k {
			return true
		}
		select {
		case <-ch:
		case <-timer.C:
			return false
		}
	}
}

// history is what the clients saw.
type history struct {
	mu        sync.Mutex
	attempted map[string]bool     // keys producers enqueued, answered or not
	acked     map[string]uint64   // key -> task id, for acknowledged enqueues
	claims    map[uint64][]uint64 // task id -> tokens of the leases granted
	claimKey  map[uint64]string   // task id -> key of its payload
	completed map[uint64][]uint64 // task id -> tokens of acknowledged completions
	maybe     map[uint64]bool     // completions whose outcome stayed unknown
	unknown   int                 // calls answered ErrOutcomeUnknown
}

func newHistory() *history {
	return &history{attempted: map[string]bool{}, acked: map[string]uint64{}, claims: map[uint64][]uint64{},
		claimKey: map[uint64]string{}, completed: map[uint64][]uint64{}, maybe: map[uint64]bool{}}
}

func (h *history) do(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f()
}

// retryable is an error a client meets while leadership moves or a node
// goes down: the call may be made again (on the leader).
func retryable(err error) bool {
	return errors.Is(err, engine.ErrNotLeader) || errors.Is(err, engine.ErrOutcomeUnknown) || errors.Is(err, engine.ErrClosed)
}

// leaderOf returns the API of the mesh's leader, waiting on leadership
// changes while there is none; nil once ctx ends.
func leaderOf(ctx context.Context, m *clustertest.Mesh) engine.API {
	for ctx.Err() == nil {
		if l := m.LeaderNode(); l != nil {
			return l.API()
		}
		for _, n := range m.Running() {
			wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			n.WaitLeader(wctx)
			cancel()
			break
		}
	}
	return nil
}

type taskPayload struct {
	Key string `json:"key"`
}

// TestNemesis runs producers and workers against a three-node cluster while
// a nemesis crashes the leader or a follower, stops the leader cleanly,
// cuts the leader or a follower off the others, and lets every lease run
// out, each followed by a restart or a heal. Producers retry an enqueue
// whose answer was lost with its idempotency key; workers complete with a
// KV write and retry a completion whose answer was lost (it is fenced).
// Then the queue is drained and checked: every acknowledged enqueue was
// delivered and completed (lost = 0), nothing was delivered that nobody
// enqueued and no key gave two tasks (unexpected = 0), no two leases of a
// task share a token, a task completes at most once and with its last
// token, every completion's KV write is there, and every node holds the
// same state.
func TestNemesis(t *testing.T) {
	events, producers, workers := 40, 3, 4
	if testing.Short() {
		events, producers, workers = 8, 2, 3
	}
	if *nemesisEvents > 0 {
		events = *nemesisEvents
	}
	const lease = 30 * time.Second
	clock := engine.NewManualClock(t0)
	m := clustertest.NewMesh(t, clustertest.MeshOptions{
		SegmentSize: 64 << 10,
		Engine: func(int) engine.Options {
			return engine.Options{Clock: clock, RetainCompleted: 24 * time.Hour}
		},
		Config: func(c *raft.Config) {
			// Snapshots often, so that restarts and slow followers install
			// them while commands apply.
			c.SnapshotInterval, c.SnapshotThreshold, c.TrailingLogs = 50*time.Millisecond, 64, 32
		},
	})
	h := newHistory()
	prog := newProgress()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	stopProducing, stopWorking := make(chan struct{}), make(chan struct{})
	var producing, working sync.WaitGroup

	// Calls with deadlines through the client, as an application makes
	// them against docket serve -raft: none that was done may be reported
	// as not done.
	fr := newFront(t, m)
	dc, err := client.Dial(ctx, strings.Join(fr.urls, ","), client.Options{BackoffBase: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	var deadlineCalls []deadlineCall
	for g := range 2 {
		producing.Add(1)
		go func() {
			defer producing.Done()
			deadlineCaller(ctx, t, dc, g, stopProducing, func(c deadlineCall) { h.do(func() { deadlineCalls = append(deadlineCalls, c) }) })
		}()
	}

	for p := range producers {
		producing.Add(1)
		go func() {
			defer producing.Done()
			for j := 0; j < 100_000; j++ {
				select {
				case <-stopProducing:
					return
				default:
				}
				key := fmt.Sprintf("p%d-%d", p, j)
				payload, _ := json.Marshal(taskPayload{Key: key})
				h.do(func() { h.attempted[key] = true })
				for {
					api := leaderOf(ctx, m)
					if api == nil {
						return
					}
					res, err := api.Queue(ns, "q").Enqueue(ctx, engine.Task{Payload: payload, IdempotencyKey: key, MaxAttempts: 1000})
					if err == nil {
						h.do(func() {
							if old, ok := h.acked[key]; ok && old != res.ID {
								t.Errorf("key %s acknowledged as task %d and %d", key, old, res.ID)
							}
							h.acked[key] = res.ID
						})
						prog.add()
						break
					}
					if !retryable(err) {
						t.Errorf("enqueue %s: %v", key, err)
						return
					}
					if errors.Is(err, engine.ErrOutcomeUnknown) {
						h.do(func() { h.unknown++ })
					}
				}
			}
		}()
	}

	complete := func(owner string, l engine.Lease, key string) {
		unknown := false
		for ctx.Err() == nil {
			api := leaderOf(ctx, m)
			if api == nil {
				return
			}
			_, err := api.Queue(ns, "q").Complete(ctx, l, engine.Done{Ops: []engine.Op{engine.Set("done/"+key, []byte(owner))}})
			switch {
			case err == nil:
				h.do(func() { h.completed[l.ID] = append(h.completed[l.ID], l.Token) })
				prog.add()
				return
			case errors.Is(err, engine.ErrLeaseLost):
				if unknown {
					h.do(func() { h.maybe[l.ID] = true })
				}
				return
			case retryable(err):
				if errors.Is(err, engine.ErrOutcomeUnknown) {
					unknown = true
					h.do(func() { h.unknown++ })
				}
			default:
				t.Errorf("complete %d: %v", l.ID, err)
				return
			}
		}
	}
	for w := range workers {
		working.Add(1)
		go func() {
			defer working.Done()
			owner := fmt.Sprintf("w%d", w)
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for {
				select {
				case <-stopWorking:
					return
				default:
				}
				api := leaderOf(ctx, m)
				if api == nil {
					return
				}
				cctx, ccancel := context.WithTimeout(ctx, 200*time.Millisecond)
				ls, err := api.Queue(ns, "q").ClaimWait(cctx, owner, lease, 4)
				ccancel()
				if err != nil && !retryable(err) && !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("claim: %v", err)
					return
				}
				for _, l := range ls {
					var p taskPayload
					if err := json.Unmarshal(l.Payload, &p); err != nil {
						t.Errorf("task %d payload %q: %v", l.ID, l.Payload, err)
					}
					h.do(func() {
						h.claims[l.ID] = append(h.claims[l.ID], l.Token)
						if old, ok := h.claimKey[l.ID]; ok && old != p.Key {
							t.Errorf("task %d carried key %s, then %s", l.ID, old, p.Key)
						}
						h.claimKey[l.ID] = p.Key
					})
					if rng.IntN(4) == 0 {
						if api := leaderOf(ctx, m); api != nil {
							if err := api.Queue(ns, "q").Heartbeat(ctx, &l, lease, []byte(`{"beat":1}`)); err != nil &&
								!retryable(err) && !errors.Is(err, engine.ErrLeaseLost) {
								t.Errorf("heartbeat %d: %v", l.ID, err)
							}
						}
					}
					complete(owner, l, p.Key)
				}
			}
		}()
	}

	// The nemesis.
	rng := rand.New(rand.NewPCG(*nemesisSeed, 11))
	kinds := []string{"crash leader", "crash follower", "stop leader", "cut leader off", "cut follower off", "leases run out"}
	counts := map[string]int{}
	for e := range events {
		if !prog.wait(5, 30*time.Second) {
			t.Fatalf("no progress before event %d", e)
		}
		kind := kinds[rng.IntN(len(kinds))]
		counts[kind]++
		l, err := m.WaitLeader(30 * time.Second)
		if err != nil {
			t.Fatalf("event %d: %v", e, err)
		}
		target := l
		if kind == "crash follower" || kind == "cut follower off" {
			target = follower(m, l)
		}
		switch kind {
		case "crash leader", "crash follower", "stop leader":
			var err error
			if kind == "stop leader" {
				err = m.Stop(target.I)
			} else {
				err = m.Kill(target.I)
			}
			if err != nil {
				t.Fatalf("event %d, %s %s: %v", e, kind, target.ID, err)
			}
			if !prog.wait(5, 30*time.Second) {
				t.Fatalf("event %d (%s %s): no progress on two nodes", e, kind, target.ID)
			}
			if err := m.Restart(target.I); err != nil {
				t.Fatalf("event %d: restart %s: %v", e, target.ID, err)
			}
		case "cut leader off", "cut follower off":
			m.Net.Isolate(target.Addr)
			if !prog.wait(5, 30*time.Second) {
				t.Fatalf("event %d (%s %s): no progress on the majority", e, kind, target.ID)
			}
			m.Net.Heal()
		case "leases run out":
			clock.Advance(lease + time.Second)
		}
	}
	close(stopProducing)
	producing.Wait()

	// Drain: whatever stays leased after a lost answer is reclaimed once
	// its lease runs out.
	drained := false
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		api := leaderOf(ctx, m)
		c, err := api.Queue(ns, "q").Counts(ctx)
		if err == nil && c.Ready+c.Scheduled+c.InFlight+c.Dead == 0 {
			drained = true
			break
		}
		if !prog.wait(1, time.Second) {
			clock.Advance(lease + time.Second)
		}
	}
	close(stopWorking)
	working.Wait()
	if !drained {
		t.Fatal("the queue did not drain")
	}
	if err := m.Converge(60 * time.Second); err != nil {
		t.Fatal(err)
	}

	// The final state, from the leader: every task completed and retained.
	l, err := m.WaitLeader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	final := map[uint64]engine.TaskInfo{}
	q := l.API().Queue(ns, "q")
	for cursor := ""; ; {
		page, err := q.List(ctx, engine.ListOptions{State: engine.Completed, Limit: engine.MaxBatch, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, ti := range page.Tasks {
			final[ti.ID] = ti
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	// done reports whether key's completion wrote its KV entry. Only
	// ErrNotFound says it did not: another error (leadership moving after
	// the check began, on a loaded machine) asks the leader again.
	done := func(key string) bool {
		for deadline := time.Now().Add(time.Minute); ; {
			_, err := leaderOf(ctx, m).KV(ns).Get(ctx, "done/"+key)
			switch {
			case err == nil:
				return true
			case errors.Is(err, engine.ErrNotFound):
				return false
			case time.Now().After(deadline):
				t.Fatalf("reading done/%s: %v", key, err)
			}
			m.WaitLeader(10 * time.Second)
		}
	}
	lost, unexpected, doubleLeases, doubleDone, badToken, missingWrite := 0, 0, 0, 0, 0, 0
	var lostKeys []string
	for key, id := range h.acked {
		ti, ok := final[id]
		var p taskPayload
		if ok {
			json.Unmarshal(ti.Payload, &p)
		}
		if !ok || p.Key != key {
			lost++
			lostKeys = append(lostKeys, key)
			continue
		}
		if !done(key) {
			missingWrite++
		}
	}
	for id, ti := range final {
		var p taskPayload
		json.Unmarshal(ti.Payload, &p)
		if !h.attempted[p.Key] {
			unexpected++
		} else if acked, ok := h.acked[p.Key]; ok && acked != id {
			unexpected++ // a second task for one key
		}
		tokens := append([]uint64(nil), h.claims[id]...)
		sort.Slice(tokens, func(i, j int) bool { return tokens[i] < tokens[j] })
		for i := range tokens {
			if i > 0 && tokens[i] == tokens[i-1] {
				doubleLeases++
			}
			if tokens[i] > ti.Token {
				badToken++
			}
		}
		switch done := h.completed[id]; {
		case len(done) > 1:
			doubleDone++
		case len(done) == 1 && done[0] != ti.Token:
			badToken++
		}
	}
	for id := range h.claims {
		if _, ok := final[id]; !ok {
			unexpected++ // delivered, yet not a completed task of the queue
		}
	}
	sort.Strings(lostKeys)
	t.Logf("%d events %v; %d enqueues attempted, %d acknowledged, %d tasks completed, %d claims, %d answers lost (outcome unknown), %d completions of unknown outcome",
		events, counts, len(h.attempted), len(h.acked), len(final), countAll(h.claims), h.unknown, len(h.maybe))
	t.Logf("lost %d, unexpected %d, leases sharing a token %d, tasks completed twice %d, tokens out of order %d, completions without their KV write %d",
		lost, unexpected, doubleLeases, doubleDone, badToken, missingWrite)
	if lost+unexpected+doubleLeases+doubleDone+badToken+missingWrite != 0 {
		t.Fatalf("the history breaks the queue's guarantees (lost keys %v)", lostKeys[:min(len(lostKeys), 10)])
	}
	if len(h.acked) == 0 || len(final) < len(h.acked) {
		t.Fatalf("%d acknowledged, %d completed", len(h.acked), len(final))
	}
	h.do(func() { checkDeadlineCalls(ctx, t, l.API(), deadlineCalls) })
}

func countAll(m map[uint64][]uint64) int {
	n := 0
	for _, v := range m {
		n += len(v)
	}
	return n
}

var _ = cluster.LANConfig
