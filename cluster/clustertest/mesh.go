package clustertest

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/docketdb/docket/cluster"
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
	// defaults are filled in.
	Config func(*raft.Config)

	// SegmentSize is the wal segment size of each node's log; small values
	// exercise segment rotation and truncation. Default the wal's.
	SegmentSize int

	// Logger receives raft's logs; default none.
	Logger hclog.Logger
}

// Node is one member of a Mesh.
type Node struct {
	ID   raft.ServerID
	Addr raft.ServerAddress
	Dir  string

	// Raft and FSM are nil while the node is down.
	Raft *raft.Raft
	FSM  *FSM

	logs   *cluster.LogStore
	stable *cluster.StableStore
	trans  *Transport
	inmem  *raft.InmemTransport
}

// Up reports whether the node is running.
func (n *Node) Up() bool { return n.Raft != nil }

// Mesh is a raft cluster of Nodes in temporary directories, each with docket's
// LogStore and StableStore, a file snapshot store and a Transport on one
// Network. It is not safe for concurrent use; the nodes are.
type Mesh struct {
	t      testing.TB
	opts   MeshOptions
	Net    *Network
	Nodes  []*Node
	events chan raft.Observation
}

// NewMesh starts a bootstrapped cluster and closes it when the test ends.
func NewMesh(t testing.TB, opts MeshOptions) *Mesh {
	t.Helper()
	if opts.Nodes <= 0 {
		opts.Nodes = 3
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	m := &Mesh{t: t, opts: opts, Net: NewNetwork(opts.Seed), events: make(chan raft.Observation, 1)}
	t.Cleanup(m.Close)
	root := t.TempDir()
	for i := range opts.Nodes {
		n := &Node{ID: raft.ServerID("n" + strconv.Itoa(i+1)), Dir: filepath.Join(root, "n"+strconv.Itoa(i+1))}
		if !opts.TCP {
			n.Addr = raft.ServerAddress(n.ID)
		}
		m.Nodes = append(m.Nodes, n)
	}
	// Transports first: a TCP node learns its address from the listener.
	for _, n := range m.Nodes {
		if err := m.listen(n, "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	var conf raft.Configuration
	for _, n := range m.Nodes {
		conf.Servers = append(conf.Servers, raft.Server{ID: n.ID, Address: n.Addr})
	}
	for _, n := range m.Nodes {
		if err := m.start(n, &conf); err != nil {
			t.Fatal(err)
		}
	}
	return m
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

// Config returns the raft configuration a node of m runs with.
func (m *Mesh) Config(id raft.ServerID) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = id
	c.HeartbeatTimeout = 100 * time.Millisecond
	c.ElectionTimeout = 100 * time.Millisecond
	c.LeaderLeaseTimeout = 50 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.Logger = m.opts.Logger.Named(string(id))
	if m.opts.Config != nil {
		m.opts.Config(c)
	}
	return c
}

// start opens n's stores and starts raft on them, bootstrapping with conf if
// it is not nil.
func (m *Mesh) start(n *Node, conf *raft.Configuration) error {
	var err error
	if n.logs, err = cluster.OpenLogStore(filepath.Join(n.Dir, "log"), wal.Options{SegmentSize: m.opts.SegmentSize}); err != nil {
		return err
	}
	if n.stable, err = cluster.OpenStableStore(filepath.Join(n.Dir, "stable"), cluster.StableOptions{}); err != nil {
		return err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(n.Dir, "snapshots"), 2, m.opts.Logger)
	if err != nil {
		return err
	}
	c := m.Config(n.ID)
	if conf != nil {
		if err := raft.BootstrapCluster(c, n.logs, n.stable, snaps, n.trans, *conf); err != nil {
			return fmt.Errorf("clustertest: bootstrap %s: %w", n.ID, err)
		}
	}
	fsm := NewFSM()
	r, err := raft.NewRaft(c, fsm, n.logs, n.stable, snaps, n.trans)
	if err != nil {
		return fmt.Errorf("clustertest: start %s: %w", n.ID, err)
	}
	r.RegisterObserver(raft.NewObserver(m.events, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.RaftState, raft.LeaderObservation:
			return true
		}
		return false
	}))
	n.Raft, n.FSM = r, fsm
	return nil
}

// Kill shuts node i down and closes its stores and transport, as a crash
// would leave them minus the unsynced data (the stores sync on every write).
func (m *Mesh) Kill(i int) error {
	n := m.Nodes[i]
	if !n.Up() {
		return fmt.Errorf("clustertest: %s is already down", n.ID)
	}
	err := n.Raft.Shutdown().Error()
	n.Raft, n.FSM = nil, nil
	err = errors.Join(err, n.trans.Close(), n.logs.Close())
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
	return m.start(n, nil)
}

// Leader returns the running node that is leader with the highest term, or
// nil.
func (m *Mesh) Leader() *Node {
	var best *Node
	var bestTerm uint64
	for _, n := range m.Nodes {
		if !n.Up() || n.Raft.State() != raft.Leader {
			continue
		}
		term, _ := strconv.ParseUint(n.Raft.Stats()["term"], 10, 64)
		if best == nil || term > bestTerm {
			best, bestTerm = n, term
		}
	}
	return best
}

// WaitLeader waits for a leader, woken by raft's state and leader
// observations, until timeout.
func (m *Mesh) WaitLeader(timeout time.Duration) (*Node, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		if l := m.Leader(); l != nil {
			return l, nil
		}
		select {
		case <-m.events:
		case <-timer.C:
			return nil, fmt.Errorf("clustertest: no leader within %v", timeout)
		}
	}
}

// Converge waits until every running node has applied everything the
// leader has, then checks that their FSMs are equal. It needs a leader that
// reaches a majority, so heal the network first.
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
		err = l.Raft.Barrier(time.Until(deadline)).Error()
		if err == nil {
			target = l.FSM.Index()
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("clustertest: barrier on %s: %w", l.ID, err)
		}
	}
	var want [][]byte
	var wantFrom raft.ServerID
	for _, n := range m.Nodes {
		if !n.Up() {
			continue
		}
		if err := n.FSM.WaitIndex(target, deadline); err != nil {
			return fmt.Errorf("%s: %w", n.ID, err)
		}
		got := n.FSM.Commands()
		if want == nil {
			want, wantFrom = got, n.ID
			continue
		}
		if err := sameCommands(got, want); err != nil {
			return fmt.Errorf("clustertest: FSM of %s differs from %s's: %w", n.ID, wantFrom, err)
		}
	}
	return nil
}

func sameCommands(a, b [][]byte) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d commands against %d", len(a), len(b))
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return fmt.Errorf("command %d is %q against %q", i, a[i], b[i])
		}
	}
	return nil
}

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
