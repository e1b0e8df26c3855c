package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/flock"
	"github.com/docketdb/docket/internal/fsync"
	"github.com/docketdb/docket/wal"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Config configures a Node.
type Config struct {
	// ID names the node in the cluster: unique, and the same for the
	// node's whole life (a host name, "n1"). Required.
	ID string
	// Dir is the node's data directory, created if missing: the raft log
	// (on docket's wal), raft's stable store and the snapshots. One Node
	// at a time per directory.
	Dir string
	// Bind is the TCP address raft listens on for its peers (host:port);
	// required unless Transport is set.
	Bind string
	// Advertise is the address peers reach Bind at, when it is not Bind
	// itself (Bind on 0.0.0.0). Default: Bind.
	Advertise string
	// Bootstrap makes a node that has no state yet the only member of a new
	// cluster, so that it elects itself and the others Join it. A node
	// with state ignores it.
	Bootstrap bool

	// Engine holds the options of the node's DB. Its Clock stamps the
	// commands the node submits; the options that shape a plan travel with
	// each command, so the leader's apply on every node.
	Engine engine.Options
	// Raft, if set, adjusts the raft configuration after LANConfig's
	// defaults (timeouts for a WAN, snapshot thresholds).
	Raft func(*raft.Config)
	// Transport, if set, replaces the TCP transport (tests use raft's
	// in-memory transport or a fault-injecting one). The Node owns it:
	// Close closes it if it implements raft.WithClose, and so may a Start
	// that fails.
	Transport raft.Transport
	// Logger receives raft's logs. Default: warnings and errors on stderr.
	Logger hclog.Logger
	// SnapshotsKept is how many snapshots stay on disk. Default 2.
	SnapshotsKept int
	// Log holds the options of the wal under the raft log (segment size,
	// failpoints for fault injection).
	Log wal.Options
	// JoinWait bounds how long Join waits, when its context has no
	// deadline, for the new member to acknowledge the configuration that
	// adds it. Default 1 minute.
	JoinWait time.Duration
}

// Node is one member of a replicated docket: a raft server whose state
// machine is a docket DB. Its API is the same engine.API as a standalone
// DB: writes go through the raft log and are acknowledged once committed on
// a majority and applied; reads are linearizable (served by the leader once
// a quorum confirms it) unless their context carries engine.WithStaleReads.
// A Node that is not the leader answers writes and linearizable reads with
// an error matching engine.ErrNotLeader (a *NotLeaderError naming the
// leader).
type Node struct {
	cfg    Config
	id     raft.ServerID
	lock   *os.File
	logs   *LogStore
	stable *StableStore
	snaps  *raft.FileSnapshotStore
	trans  raft.Transport
	db     *engine.DB
	fsm    *FSM
	raft   *raft.Raft
	acks   *acks // what each follower acknowledged of this leader's log

	// ready is the term in which this node, as leader, has applied every
	// entry committed before it: set by a barrier committed in that term.
	ready atomic.Uint64
	// leaderChanges counts the leader changes this node has seen.
	leaderChanges atomic.Uint64

	obs      chan raft.Observation
	observer *raft.Observer
	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on a leadership change
	stop     chan struct{}
	done     chan struct{}
	closed   sync.Once
	closeErr error
}

var _ engine.Replicator = (*Node)(nil)

// Start opens (creating if needed) the node's directory, starts raft on it
// and returns the node. With cfg.Bootstrap and no state it founds a cluster
// of one; otherwise it rejoins the cluster its state names, or waits to be
// added by the leader's Join. Its state is rebuilt from the newest snapshot
// and the log as raft replays it.
func Start(cfg Config) (*Node, error) {
	if err := checkID(cfg.ID); err != nil {
		return nil, err
	}
	if cfg.Dir == "" {
		return nil, fmt.Errorf("%w: cluster: empty data directory", engine.ErrInvalid)
	}
	if cfg.Transport == nil && cfg.Bind == "" {
		return nil, fmt.Errorf("%w: cluster: no raft address to bind", engine.ErrInvalid)
	}
	if cfg.SnapshotsKept <= 0 {
		cfg.SnapshotsKept = 2
	}
	if cfg.JoinWait <= 0 {
		cfg.JoinWait = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: os.Stderr})
	}
	rc := LANConfig(raft.ServerID(cfg.ID))
	rc.Logger = cfg.Logger
	if cfg.Raft != nil {
		cfg.Raft(rc)
		rc.LocalID = raft.ServerID(cfg.ID)
	}
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("%w: cluster: raft configuration: %w", engine.ErrInvalid, err)
	}

	n := &Node{cfg: cfg, id: raft.ServerID(cfg.ID), changed: make(chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{})}
	if err := n.start(rc); err != nil {
		n.release()
		return nil, err
	}
	return n, nil
}

// start does Start's work on n; on error the caller releases what it
// opened.
func (n *Node) start(rc *raft.Config) (err error) {
	cfg := n.cfg
	if err := fsync.MkdirAll(filepath.Join(cfg.Dir, "raft")); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(cfg.Dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	if err := flock.Exclusive(lock); err != nil {
		lock.Close()
		if errors.Is(err, flock.ErrHeld) {
			return fmt.Errorf("%w: %s", engine.ErrLocked, cfg.Dir)
		}
		return err
	}
	n.lock = lock
	if n.logs, err = OpenLogStore(filepath.Join(cfg.Dir, "raft", "log"), cfg.Log); err != nil {
		return err
	}
	if n.stable, err = OpenStableStore(filepath.Join(cfg.Dir, "raft", "stable"), StableOptions{}); err != nil {
		return err
	}
	if n.snaps, err = raft.NewFileSnapshotStoreWithLogger(filepath.Join(cfg.Dir, "raft"), cfg.SnapshotsKept, cfg.Logger); err != nil {
		return err
	}
	if n.trans = cfg.Transport; n.trans == nil {
		if n.trans, err = tcpTransport(cfg); err != nil {
			return err
		}
	}
	if n.db, err = engine.OpenReplicated(cfg.Engine, n); err != nil {
		return err
	}
	if n.fsm, err = NewFSM(n.db); err != nil {
		return err
	}
	logs, err := raft.NewLogCache(512, n.logs)
	if err != nil {
		return err
	}
	if cfg.Bootstrap {
		has, err := raft.HasExistingState(logs, n.stable, n.snaps)
		if err != nil {
			return err
		}
		if !has {
			conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: n.id, Address: n.trans.LocalAddr()}}}
			if err := raft.BootstrapCluster(rc, logs, n.stable, n.snaps, n.trans, conf); err != nil {
				return fmt.Errorf("cluster: bootstrap: %w", err)
			}
		}
	}
	trans, acks := boundCommits(n.trans)
	n.acks = acks
	if n.raft, err = raft.NewRaft(rc, n.fsm, logs, n.stable, n.snaps, trans); err != nil {
		return fmt.Errorf("cluster: start raft: %w", err)
	}
	n.obs = make(chan raft.Observation, 16)
	n.observer = raft.NewObserver(n.obs, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.RaftState:
			return true
		}
		return false
	})
	n.raft.RegisterObserver(n.observer)
	go n.monitor()
	return nil
}

// checkID accepts a node id of 1..255 bytes of UTF-8 without control
// characters or commas.
func checkID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: cluster: empty node id", engine.ErrInvalid)
	case len(id) > 255:
		return fmt.Errorf("%w: cluster: node id of %d bytes, over 255", engine.ErrInvalid, len(id))
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: cluster: node id is not valid UTF-8", engine.ErrInvalid)
	case strings.IndexFunc(id, func(r rune) bool { return unicode.IsControl(r) || r == ',' }) >= 0:
		return fmt.Errorf("%w: cluster: node id %q holds a control character or a comma", engine.ErrInvalid, id)
	}
	return nil
}

func tcpTransport(cfg Config) (raft.Transport, error) {
	var adv net.Addr
	if cfg.Advertise != "" {
		a, err := net.ResolveTCPAddr("tcp", cfg.Advertise)
		if err != nil {
			return nil, fmt.Errorf("%w: cluster: advertise address %q: %w", engine.ErrInvalid, cfg.Advertise, err)
		}
		if a.IP == nil || a.IP.IsUnspecified() {
			return nil, fmt.Errorf("%w: cluster: advertise address %q is not one peers can reach", engine.ErrInvalid, cfg.Advertise)
		}
		adv = a
	}
	t, err := raft.NewTCPTransportWithLogger(cfg.Bind, adv, 3, 10*time.Second, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("cluster: raft transport on %s: %w", cfg.Bind, err)
	}
	return t, nil
}

// LANConfig is the raft configuration a Node runs with, for id: raft's
// defaults with timeouts for peers on one LAN, where a round trip takes well
// under a millisecond. Raft's own defaults allow for a WAN.
//
//   - HeartbeatTimeout and ElectionTimeout 500 ms (raft: 1 s): a follower
//     that hears nothing from the leader for 0.5 to 1 s (randomised) calls
//     an election, so a dead leader is replaced in about a second.
//   - LeaderLeaseTimeout 250 ms (raft: 500 ms): a leader that reaches no
//     quorum for that long steps down, failing its pending writes with
//     ErrOutcomeUnknown instead of holding them.
//   - CommitTimeout 10 ms (raft: 50 ms): how long an idle leader waits
//     before telling followers the commit index, which bounds how stale a
//     follower's stale reads are when writes stop.
//   - MaxAppendEntries 256 (raft: 64) and BatchApplyCh: concurrent writes
//     are batched into one log append (one fsync) and one replication RPC,
//     raft's group commit.
//
// Snapshots keep raft's defaults: one is taken once 8192 entries were
// applied since the last (checked every 2 to 4 minutes), and 10240 entries
// stay in the log behind it so a follower a little behind catches up from
// the log instead of a snapshot.
func LANConfig(id raft.ServerID) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = id
	c.HeartbeatTimeout = 500 * time.Millisecond
	c.ElectionTimeout = 500 * time.Millisecond
	c.LeaderLeaseTimeout = 250 * time.Millisecond
	c.CommitTimeout = 10 * time.Millisecond
	c.MaxAppendEntries = 256
	c.BatchApplyCh = true
	c.LogLevel = "WARN"
	return c
}

// monitor makes a node that becomes leader ready for linearizable reads
// (a barrier in its term) and wakes WaitLeader on every leadership change.
func (n *Node) monitor() {
	defer close(n.done)
	for {
		select {
		case <-n.stop:
			return
		case leader := <-n.raft.LeaderCh():
			n.bump()
			if leader {
				n.establish()
			}
		case o := <-n.obs:
			if _, ok := o.Data.(raft.LeaderObservation); ok {
				n.leaderChanges.Add(1)
			}
			n.bump()
		}
	}
}

func (n *Node) bump() {
	n.mu.Lock()
	defer n.mu.Unlock()
	close(n.changed)
	n.changed = make(chan struct{})
}

// establish commits a barrier in this node's term and, once everything
// before it is applied, marks the term ready for reads.
func (n *Node) establish() {
	term := n.raft.CurrentTerm()
	if n.await(context.Background(), n.raft.Barrier(0)) == nil {
		n.markReady(term)
	}
}

// errStopped is what await returns when the node stops first.
var errStopped = fmt.Errorf("%w: the node stopped", engine.ErrClosed)

// await returns f's error, or errStopped if the node stops first, or ctx's
// error if it ends first: raft answers no future that is still queued or
// not yet applied when it shuts down.
func (n *Node) await(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-n.stop:
		return errStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (n *Node) markReady(term uint64) {
	if n.raft.CurrentTerm() != term || n.raft.State() != raft.Leader {
		return
	}
	for {
		old := n.ready.Load()
		if old >= term || n.ready.CompareAndSwap(old, term) {
			return
		}
	}
}

// Submit implements engine.Replicator: it appends cmd to the raft log and
// returns the answer this node's FSM gave once the entry committed and
// applied. Raft batches concurrent entries into one append and one
// replication round. A raft Apply cannot be withdrawn, so once submitted
// the call waits for the entry's fate whatever ctx does: committed, or
// leadership lost (at most LeaderLeaseTimeout without a quorum), or the
// node stopped (ErrOutcomeUnknown and ErrClosed).
func (n *Node) Submit(ctx context.Context, cmd []byte) (*engine.Applied, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f := n.raft.Apply(cmd, 0)
	// Not ctx: an entry handed to raft cannot be withdrawn, and the caller
	// is owed its fate.
	if err := n.await(context.Background(), f); err != nil {
		if err == errStopped {
			return nil, fmt.Errorf("%w: %w", engine.ErrOutcomeUnknown, err)
		}
		return nil, n.mapErr(err, true)
	}
	a, ok := f.Response().(*engine.Applied)
	if !ok {
		return nil, fmt.Errorf("%w: cluster: entry %d applied as %T", engine.ErrOutcomeUnknown, f.Index(), f.Response())
	}
	return a, nil
}

// ReadBarrier implements engine.Replicator: it returns once this node is
// the leader, has applied every entry committed in earlier terms (a
// barrier of its own term), and a quorum has confirmed its leadership
// since the call began, so a read that follows sees every write
// acknowledged before it.
func (n *Node) ReadBarrier(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if n.raft.State() != raft.Leader {
			return n.notLeader()
		}
		term := n.raft.CurrentTerm()
		if n.ready.Load() != term {
			if err := n.await(ctx, n.raft.Barrier(0)); err != nil {
				return n.readErr(err)
			}
			n.markReady(term)
			continue
		}
		if err := n.await(ctx, n.raft.VerifyLeader()); err != nil {
			return n.readErr(err)
		}
		if n.raft.CurrentTerm() == term {
			return nil
		}
	}
}

// readErr is mapErr for a read's barrier: it changed nothing.
func (n *Node) readErr(err error) error {
	if err == errStopped || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return n.mapErr(err, false)
}

// NotLeaderError is the error of a call a node could not take because it
// is not the leader. It names the leader when the node knows one, and
// matches engine.ErrNotLeader.
type NotLeaderError struct {
	LeaderID   string // "" when no leader is known
	LeaderAddr string // the leader's raft address
}

func (e *NotLeaderError) Error() string {
	if e.LeaderID == "" {
		return engine.ErrNotLeader.Error() + " (no leader known)"
	}
	return fmt.Sprintf("%v: the leader is %s at %s", engine.ErrNotLeader, e.LeaderID, e.LeaderAddr)
}

func (e *NotLeaderError) Unwrap() error { return engine.ErrNotLeader }

func (n *Node) notLeader() error {
	addr, id := n.raft.LeaderWithID()
	return &NotLeaderError{LeaderID: string(id), LeaderAddr: string(addr)}
}

// mapErr turns a raft error into the engine's: submitted says a write was
// handed to raft, so that a leadership lost after it is an unknown outcome.
func (n *Node) mapErr(err error, submitted bool) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return n.notLeader()
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrAbortedByRestore):
		if submitted {
			return fmt.Errorf("%w: %w", engine.ErrOutcomeUnknown, err)
		}
		return n.notLeader()
	case errors.Is(err, raft.ErrRaftShutdown):
		if submitted {
			// The entry may be on a majority already and commit without us.
			return fmt.Errorf("%w: %w: %w", engine.ErrOutcomeUnknown, engine.ErrClosed, err)
		}
		return fmt.Errorf("%w: %w", engine.ErrClosed, err)
	}
	return fmt.Errorf("cluster: %w", err)
}

// ID returns the node's id.
func (n *Node) ID() string { return n.cfg.ID }

// Addr returns the raft address peers reach the node at.
func (n *Node) Addr() string { return string(n.trans.LocalAddr()) }

// API returns the node's docket API: the same interface a standalone DB
// and the network client offer, backed by the raft log. Its Close closes
// the Node (the DB must not close under a running raft, which would go on
// committing entries this node no longer applies). It is also an
// engine.LeaseWatcher, as the DB is.
func (n *Node) API() engine.API { return nodeAPI{n.db, n} }

// nodeAPI is the DB with Close closing the node.
type nodeAPI struct {
	*engine.DB
	n *Node
}

func (a nodeAPI) Close() error { return a.n.Close() }

// DB returns the node's DB, for what engine.API does not cover (caller
// views with As, Stats, StateHash). Close the Node, not the DB.
func (n *Node) DB() *engine.DB { return n.db }

// Raft returns the node's raft server, for figures and tests.
func (n *Node) Raft() *raft.Raft { return n.raft }

// FSM returns the node's state machine.
func (n *Node) FSM() *FSM { return n.fsm }

// Leader returns the id and raft address of the leader this node knows
// of, "" when it knows none.
func (n *Node) Leader() (id, addr string) {
	a, i := n.raft.LeaderWithID()
	return string(i), string(a)
}

// IsLeader reports whether this node is the leader.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// WaitLeader waits until this node knows a leader, and returns it.
func (n *Node) WaitLeader(ctx context.Context) (id, addr string, err error) {
	for {
		n.mu.Lock()
		ch := n.changed
		n.mu.Unlock()
		if id, addr := n.Leader(); id != "" {
			return id, addr, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return "", "", ctx.Err()
		case <-n.done:
			return "", "", engine.ErrClosed
		}
	}
}

// Member is one server of the cluster's configuration.
type Member struct {
	ID     string
	Addr   string
	Voter  bool
	Leader bool
}

// Members returns the cluster's members as this node's latest
// configuration has them.
func (n *Node) Members() ([]Member, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, n.mapErr(err, false)
	}
	leader, _ := n.Leader()
	var out []Member
	for _, s := range f.Configuration().Servers {
		out = append(out, Member{ID: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter,
			Leader: string(s.ID) == leader})
	}
	return out, nil
}

// ErrNotCaughtUp is the error of a Join whose configuration change
// committed, so that the node is a member, but that ended before the node
// acknowledged holding that configuration. A Join of the member again
// waits for it anew. It is engine.ErrNotCaughtUp, which a client's Join
// over the network matches too.
var ErrNotCaughtUp = engine.ErrNotCaughtUp

// Join adds the node id, reachable for raft at addr, to the cluster as a
// voter, or updates the address of a member id. It runs on the leader
// (elsewhere it returns a *NotLeaderError) and returns once the new
// configuration is committed and the node has acknowledged holding it,
// which needs the new node running: until it holds it, the node cannot
// vote for a candidate, so a leader lost before that would leave the
// others of a three-node cluster unable to elect a new one. A Join of a
// member returns once the member holds everything this leader had when the
// call began.
//
// If ctx ends (or, without a deadline, Config.JoinWait passes), or this
// node loses its leadership, after the change committed but before the
// node caught up, Join returns an error matching ErrNotCaughtUp and the
// cause (ctx's error, or engine.ErrNotLeader): the node is a member. A
// member with another id at addr is refused with ErrInvalid: Remove it
// first.
func (n *Node) Join(ctx context.Context, id, addr string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if addr == "" {
		return fmt.Errorf("%w: cluster: join %s without an address", engine.ErrInvalid, id)
	}
	if !n.IsLeader() {
		return n.notLeader()
	}
	members, err := n.Members()
	if err != nil {
		return err
	}
	for _, m := range members {
		switch {
		case m.ID == id && m.Addr == addr && m.Voter:
			return n.awaitCaughtUp(ctx, id, n.raft.LastIndex())
		case m.ID != id && m.Addr == addr:
			return fmt.Errorf("%w: cluster: %s is the address of member %s", engine.ErrInvalid, addr, m.ID)
		}
	}
	f := n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, enqueueTimeout(ctx))
	if err := n.configure(ctx, f); err != nil {
		return err
	}
	return n.awaitCaughtUp(ctx, id, f.Index())
}

// awaitCaughtUp waits until member id has acknowledged index of this
// leader's log, an index at or past the configuration that has it a
// member.
func (n *Node) awaitCaughtUp(ctx context.Context, id string, index uint64) error {
	if raft.ServerID(id) == n.id {
		return nil
	}
	// Not earlier than the term that appended index: an acknowledgement
	// in that term or a later one of this node's covers the entry.
	term := n.raft.CurrentTerm()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, n.cfg.JoinWait)
		defer cancel()
	}
	caught, stop := n.acks.until(raft.ServerID(id), term, index)
	defer stop()
	notYet := func(cause error) error {
		return fmt.Errorf("%w: %s is a member but has not acknowledged entry %d of the leader's log: %w",
			ErrNotCaughtUp, id, index, cause)
	}
	for {
		n.mu.Lock()
		changed := n.changed
		n.mu.Unlock()
		select {
		case <-caught:
			return nil
		case <-n.stop:
			return notYet(errStopped)
		default:
		}
		// Another leader's followers answer it, not this node.
		if n.raft.State() != raft.Leader || n.raft.CurrentTerm() != term {
			return notYet(n.notLeader())
		}
		select {
		case <-caught:
			return nil
		case <-changed:
		case <-ctx.Done():
			return notYet(ctx.Err())
		case <-n.stop:
			return notYet(errStopped)
		}
	}
}

// Remove removes the node id from the cluster. It runs on the leader; a
// leader that removes itself steps down once the change commits. Removing
// an id that is not a member does nothing.
func (n *Node) Remove(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if !n.IsLeader() {
		return n.notLeader()
	}
	return n.configure(ctx, n.raft.RemoveServer(raft.ServerID(id), 0, enqueueTimeout(ctx)))
}

func (n *Node) configure(ctx context.Context, f raft.IndexFuture) error {
	if err := n.await(ctx, f); err != nil {
		switch {
		case errors.Is(err, raft.ErrEnqueueTimeout):
			return ctx.Err()
		case err == errStopped, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			// Handed to raft: the change may still commit.
			return fmt.Errorf("%w: %w", engine.ErrOutcomeUnknown, err)
		}
		return n.mapErr(err, true)
	}
	return nil
}

func enqueueTimeout(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d), time.Millisecond)
	}
	return 0
}

// Snapshot takes a raft snapshot now (the log behind it is compacted as
// configured). ErrNothingNewToSnapshot's error when nothing was applied
// since the last one.
func (n *Node) Snapshot() error {
	if err := n.raft.Snapshot().Error(); err != nil {
		return fmt.Errorf("cluster: snapshot: %w", err)
	}
	return nil
}

// Stats are a node's raft figures.
type Stats struct {
	ID           string
	State        string // Leader, Follower, Candidate, Shutdown
	Term         uint64
	LastIndex    uint64 // last entry in the log
	CommitIndex  uint64 // last entry known committed
	AppliedIndex uint64 // last entry handed to the FSM
	// Seq is the last batch the DB applied: equal on nodes that applied
	// the same entries.
	Seq        uint64
	LeaderID   string
	LeaderAddr string
	// LastContact is when a follower last heard from the leader (zero on
	// the leader).
	LastContact time.Time
	// LeaderChanges counts the changes of leader this node has seen since
	// it started (losing a leader counts too).
	LeaderChanges uint64
	Members       []Member
}

// Stats returns the node's raft figures.
func (n *Node) Stats() Stats {
	s := Stats{ID: n.cfg.ID, State: n.raft.State().String(), Term: n.raft.CurrentTerm(),
		LastIndex: n.raft.LastIndex(), CommitIndex: n.raft.CommitIndex(), AppliedIndex: n.raft.AppliedIndex()}
	s.Seq = n.db.Stats().Seq
	s.LeaderID, s.LeaderAddr = n.Leader()
	if s.State != raft.Leader.String() {
		s.LastContact = n.raft.LastContact()
	}
	s.LeaderChanges = n.leaderChanges.Load()
	s.Members, _ = n.Members()
	return s
}

// Kill stops the node as a crash would, as far as a process can: no
// leadership transfer, raft stops where it is, and the stores close (they
// sync every write, so nothing acknowledged is lost). For fault tests;
// Close is the clean way out.
func (n *Node) Kill() error { return n.close(false) }

// Close leaves the cluster running without this node: a leader first hands
// its leadership to an up-to-date follower (bounded by ElectionTimeout),
// so that writes resume at once instead of after an election. Then raft
// stops and the DB, stores and transport close. The node stays a member:
// Start on the same directory brings it back.
func (n *Node) Close() error { return n.close(true) }

// close stops the node, handing over its leadership first if transfer is
// set (a crash, in tests, does not).
func (n *Node) close(transfer bool) error {
	n.closed.Do(func() {
		var errs []error
		if transfer && n.raft.State() == raft.Leader && n.voters() > 1 {
			// Raft gives up after ElectionTimeout; the bound is for a raft
			// that never answers.
			ctx, cancel := context.WithTimeout(context.Background(), 4*n.raft.ReloadableConfig().ElectionTimeout)
			err := n.await(ctx, n.raft.LeadershipTransfer())
			cancel()
			if err != nil {
				n.cfg.Logger.Warn("leadership transfer on close failed", "error", err)
			}
		}
		close(n.stop)
		n.raft.DeregisterObserver(n.observer)
		errs = append(errs, n.raft.Shutdown().Error())
		<-n.done
		n.closeErr = errors.Join(append(errs, n.release())...)
	})
	return n.closeErr
}

func (n *Node) voters() int {
	members, _ := n.Members()
	v := 0
	for _, m := range members {
		if m.Voter {
			v++
		}
	}
	return v
}

// release closes what Start opened, in reverse.
func (n *Node) release() error {
	var errs []error
	if n.db != nil {
		if err := n.db.Close(); err != nil && !errors.Is(err, engine.ErrClosed) {
			errs = append(errs, err)
		}
	}
	if c, ok := n.trans.(raft.WithClose); ok && n.trans != nil {
		errs = append(errs, c.Close())
	}
	if n.logs != nil {
		errs = append(errs, n.logs.Close())
	}
	if n.lock != nil {
		errs = append(errs, unlock(n.lock))
	}
	return errors.Join(errs...)
}
