package clustertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/docketdb/docket/cluster"
	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/wal"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// MeshOptions configures a Mesh. The zero value gives three nodes on raft's
// in-memory transport with timeouts short enough for tests.
type MeshOptions struct {
	Nodes int    // default 3
	TCP   bool   // raft's TCP transport on 127.0.0.1 instead of the in-memory one
	Seed  uint64 // for the Network's random drops

	// Config, if set, adjusts each node's raft configuration after the
	// Mesh's test timeouts are filled in.
	Config func(*raft.Config)

	// Engine, if set, gives node i's engine options (a clock of its own,
	// say); default: the zero Options with a quiet logger.
	Engine func(i int) engine.Options

	// SegmentSize is the wal segment size of each node's log; small values
	// exercise segment rotation and truncation. Default the wal's.
	SegmentSize int

	// Logger receives raft's logs; default none.
	Logger hclog.Logger
}

// Node is one member of a Mesh.
type Node struct {
	ID   string
	Addr raft.ServerAddress
	Dir  string
	I    int // index in Mesh.Nodes

	// Node is nil while the node is down.
	*cluster.Node

	trans *Transport
	inmem *raft.InmemTransport
}

// Up reports whether the node is running.
func (n *Node) Up() bool { return n.Node != nil }

// Mesh is a docket cluster of Nodes in temporary directories, each a
// cluster.Node on a Transport of one Network. It is not safe for concurrent
// use; the nodes are.
type Mesh struct {
	// mu guards each Node's *cluster.Node, for goroutines other than the
	// test's that find nodes through Running and LeaderNode.
	mu     sync.Mutex
	t      testing.TB
	opts   MeshOptions
	Net    *Network
	Nodes  []*Node
	events chan raft.Observation
}

// NewMesh starts a cluster and closes it when the test ends: the first
// node bootstraps it, and the leader Joins the others one by one.
func NewMesh(t testing.TB, opts MeshOptions) *Mesh {
	t.Helper()
	if opts.Nodes <= 0 {
		opts.Nodes = 3
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	m := &Mesh{t: t, opts: opts, Net: NewNetwork(opts.Seed), events: make(chan raft.Observation, 1)}
	// The directory first: cleanups run last first, so the nodes stop
	// before it is removed.
	root := t.TempDir()
	t.Cleanup(m.Close)
	for i := range opts.Nodes {
		id := "n" + strconv.Itoa(i+1)
		n := &Node{ID: id, Dir: filepath.Join(root, id), I: i}
		if !opts.TCP {
			n.Addr = raft.ServerAddress(id)
		}
		m.Nodes = append(m.Nodes, n)
	}
	// Transports first: a TCP node learns its address from the listener.
	for _, n := range m.Nodes {
		if err := m.listen(n, "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.start(m.Nodes[0], true); err != nil {
		t.Fatal(err)
	}
	for _, n := range m.Nodes[1:] {
		if err := m.start(n, false); err != nil {
			t.Fatal(err)
		}
		if err := m.Join(n, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.waitMembers(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	return m
}

// waitMembers waits until every node's configuration holds every node. A
// join commits once the leader and a majority hold it, so a follower may
// not have it yet; cut off from the leader then, that follower refuses
// the votes of a member it does not know, and the other two cannot elect
// a leader (a test that isolates the leader at once saw no new leader).
// Raft signals no change of a follower's configuration: this looks every
// few milliseconds, until the deadline.
func (m *Mesh) waitMembers(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for _, n := range m.Nodes {
		for {
			f := n.Raft().GetConfiguration()
			if err := f.Error(); err != nil {
				return fmt.Errorf("clustertest: configuration of %s: %w", n.ID, err)
			}
			if len(f.Configuration().Servers) == len(m.Nodes) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("clustertest: %s knows %d members, not %d, at the deadline", n.ID, len(f.Configuration().Servers), len(m.Nodes))
			}
			<-tick.C
		}
	}
	return nil
}

// Join asks the leader to add n, retrying while leadership moves.
func (m *Mesh) Join(n *Node, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		l, err := m.WaitLeader(time.Until(deadlineOf(ctx)))
		if err != nil {
			return err
		}
		err = l.Join(ctx, n.ID, string(n.Addr))
		if err == nil {
			return nil
		}
		if !errors.Is(err, engine.ErrNotLeader) && !errors.Is(err, engine.ErrOutcomeUnknown) || ctx.Err() != nil {
			return fmt.Errorf("clustertest: join %s: %w", n.ID, err)
		}
	}
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// listen creates n's transport.
func (m *Mesh) listen(n *Node, bind string) error {
	if m.opts.TCP {
		tr, err := raft.NewTCPTransportWithLogger(bind, nil, 3, 2*time.Second, m.opts.Logger)
		if err != nil {
			return fmt.Errorf("clustertest: %s: %w", n.ID, err)
		}
		n.Addr = tr.LocalAddr()
		n.trans = m.Net.Wrap(tr)
		return nil
	}
	_, tr := raft.NewInmemTransport(n.Addr)
	n.inmem, n.trans = tr, m.Net.Wrap(tr)
	for _, o := range m.Nodes {
		if o != n && o.inmem != nil {
			o.inmem.Connect(n.Addr, tr)
			tr.Connect(o.Addr, o.inmem)
		}
	}
	return nil
}

// Config adjusts a node's raft configuration for tests: timeouts under
// LANConfig's, yet long enough that a loaded machine running the race
// detector does not lose its leader at every pause; then
// MeshOptions.Config.
func (m *Mesh) Config(c *raft.Config) {
	c.HeartbeatTimeout = 200 * time.Millisecond
	c.ElectionTimeout = 200 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	if m.opts.Config != nil {
		m.opts.Config(c)
	}
}

// start starts n from its directory, founding the cluster if bootstrap is
// set.
func (m *Mesh) start(n *Node, bootstrap bool) error {
	opts := engine.Options{}
	if m.opts.Engine != nil {
		opts = m.opts.Engine(n.I)
	}
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	node, err := cluster.Start(cluster.Config{
		ID: n.ID, Dir: n.Dir, Transport: n.trans, Bootstrap: bootstrap, Engine: opts,
		Raft: m.Config, Logger: m.opts.Logger.Named(n.ID), Log: wal.Options{SegmentSize: m.opts.SegmentSize},
	})
	if err != nil {
		return fmt.Errorf("clustertest: start %s: %w", n.ID, err)
	}
	node.Raft().RegisterObserver(raft.NewObserver(m.events, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.RaftState, raft.LeaderObservation:
			return true
		}
		return false
	}))
	m.mu.Lock()
	n.Node = node
	m.mu.Unlock()
	return nil
}

// Kill stops node i as a crash would (no leadership transfer) and
// disconnects it.
func (m *Mesh) Kill(i int) error { return m.down(i, false) }

// Stop closes node i cleanly: a leader hands over its leadership first.
func (m *Mesh) Stop(i int) error { return m.down(i, true) }

func (m *Mesh) down(i int, clean bool) error {
	n := m.Nodes[i]
	if !n.Up() {
		return fmt.Errorf("clustertest: %s is already down", n.ID)
	}
	var err error
	if clean {
		err = n.Close()
	} else {
		err = n.Kill()
	}
	m.mu.Lock()
	n.Node = nil
	m.mu.Unlock()
	if n.inmem != nil {
		for _, o := range m.Nodes {
			if o.inmem != nil && o != n {
				o.inmem.Disconnect(n.Addr)
			}
		}
	}
	return err
}

// Restart starts node i again from its directory, on the same address.
func (m *Mesh) Restart(i int) error {
	n := m.Nodes[i]
	if n.Up() {
		return fmt.Errorf("clustertest: %s is already up", n.ID)
	}
	if err := m.listen(n, string(n.Addr)); err != nil {
		return err
	}
	return m.start(n, false)
}

// Running returns the nodes running now; safe from any goroutine.
func (m *Mesh) Running() []*cluster.Node {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*cluster.Node
	for _, n := range m.Nodes {
		if n.Node != nil {
			out = append(out, n.Node)
		}
	}
	return out
}

// LeaderNode returns the running node that is leader with the highest
// term, or nil; safe from any goroutine.
func (m *Mesh) LeaderNode() *cluster.Node {
	var best *cluster.Node
	var bestTerm uint64
	for _, n := range m.Running() {
		if !n.IsLeader() {
			continue
		}
		if term := n.Raft().CurrentTerm(); best == nil || term > bestTerm {
			best, bestTerm = n, term
		}
	}
	return best
}

// Leader returns the running node that is leader with the highest term, or
// nil.
func (m *Mesh) Leader() *Node {
	var best *Node
	var bestTerm uint64
	for _, n := range m.Nodes {
		if !n.Up() || !n.IsLeader() {
			continue
		}
		if term := n.Raft().CurrentTerm(); best == nil || term > bestTerm {
			best, bestTerm = n, term
		}
	}
	return best
}

// WaitLeader waits for a leader, woken by raft's state and leader
// observations, until timeout.
func (m *Mesh) WaitLeader(timeout time.Duration) (*Node, error) { return m.WaitLeaderNot(nil, timeout) }

// WaitLeaderNot waits for a leader other than old (one cut off by a
// partition may still believe it leads, in an older term).
func (m *Mesh) WaitLeaderNot(old *Node, timeout time.Duration) (*Node, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		if l := m.Leader(); l != nil && l != old {
			return l, nil
		}
		select {
		case <-m.events:
		case <-timer.C:
			return nil, fmt.Errorf("clustertest: no new leader within %v", timeout)
		}
	}
}

// Converge waits until every running node has applied every command the
// leader has, then checks that their DBs hold the same state: equal state
// hashes and byte-identical snapshots. It needs a leader that reaches a
// majority, so heal the network first.
func (m *Mesh) Converge(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var target uint64
	for {
		l, err := m.WaitLeader(time.Until(deadline))
		if err != nil {
			return err
		}
		// A barrier commits an entry of the leader's term and waits until
		// its FSM has applied everything before it.
		err = l.Raft().Barrier(time.Until(deadline)).Error()
		if err == nil {
			target = l.DB().Stats().Seq
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("clustertest: barrier on %s: %w", l.ID, err)
		}
	}
	var want []byte
	var wantFrom string
	for _, n := range m.Nodes {
		if !n.Up() {
			continue
		}
		if err := WaitSeq(n.Node, target, deadline); err != nil {
			return fmt.Errorf("%s: %w", n.ID, err)
		}
		got, err := SnapshotBytes(n.FSM())
		if err != nil {
			return fmt.Errorf("%s: %w", n.ID, err)
		}
		if want == nil {
			want, wantFrom = got, n.ID
			continue
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("clustertest: the snapshot of %s differs from %s's (%d bytes against %d)",
				n.ID, wantFrom, len(got), len(want))
		}
	}
	var hash [32]byte
	first := true
	for _, n := range m.Nodes {
		if !n.Up() {
			continue
		}
		h, err := n.DB().StateHash()
		if err != nil {
			return fmt.Errorf("%s: %w", n.ID, err)
		}
		if !first && h != hash {
			return fmt.Errorf("clustertest: the state hash of %s differs from %s's", n.ID, wantFrom)
		}
		hash, first = h, false
	}
	return nil
}

// quiet discards the engine's log lines (every node logs each dead letter).
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// WaitSeq returns once n's DB has applied batch seq, or an error at the
// deadline.
func WaitSeq(n *cluster.Node, seq uint64, deadline time.Time) error {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		_, ch := n.FSM().Applied()
		at := n.DB().Stats().Seq
		if at >= seq {
			return nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return fmt.Errorf("clustertest: %s at batch %d, still short of %d at the deadline", n.ID(), at, seq)
		}
	}
}

// WaitApplied returns once f has applied the command entry at index, or an
// error at the deadline.
func WaitApplied(f *cluster.FSM, index uint64, deadline time.Time) error {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		at, ch := f.Applied()
		if at >= index {
			return nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return fmt.Errorf("clustertest: FSM at index %d, still short of %d at the deadline", at, index)
		}
	}
}

// SnapshotBytes returns the bytes f's snapshot persists, as raft would
// write them to its snapshot store.
func SnapshotBytes(f *cluster.FSM) ([]byte, error) {
	s, err := f.Snapshot()
	if err != nil {
		return nil, err
	}
	defer s.Release()
	sink := &memSink{}
	if err := s.Persist(sink); err != nil {
		return nil, err
	}
	if !sink.closed {
		return nil, errors.New("clustertest: Persist did not close its sink")
	}
	return sink.buf.Bytes(), nil
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct {
	buf    bytes.Buffer
	closed bool
}

func (s *memSink) Write(p []byte) (int, error) { return s.buf.Write(p) }
func (s *memSink) Close() error                { s.closed = true; return nil }
func (s *memSink) ID() string                  { return "mem" }
func (s *memSink) Cancel() error               { return nil }

// Close shuts down every running node. It runs when the test ends.
func (m *Mesh) Close() {
	for i, n := range m.Nodes {
		if n.Up() {
			if err := m.Kill(i); err != nil && !errors.Is(err, raft.ErrRaftShutdown) {
				m.t.Errorf("clustertest: close %s: %v", n.ID, err)
			}
		}
	}
}
