package cluster

import (
	"io"
	"slices"
	"sync"

	"github.com/hashicorp/raft"
)

// commitBound is the transport a Node's raft sends through: it bounds the
// commit index each AppendEntries carries by the last entry the request
// lets the follower check against the leader's log (PrevLogEntry plus the
// entries sent), as the raft paper has the follower do. hashicorp/raft's
// follower takes min(LeaderCommitIndex, its own last index), so a node
// that led alone for a while (cut off from the majority) and still holds
// entries of its old term past that point committed and applied them when
// the new leader's first request matched only an earlier prefix: its state
// held writes never acknowledged, and lacked the majority's
// (TestMinorityLeaderWritesNeverAcknowledged saw its snapshot differ).
//
// It also records, in acks, how far each follower has acknowledged the
// leader's log, which raft keeps to itself: Join waits on it until the new
// node holds the configuration that adds it.
type commitBound struct {
	raft.Transport
	acks *acks
}

// commitBoundPreVote is commitBound over a transport that supports
// pre-vote; raft looks for it by the transport's type.
type commitBoundPreVote struct{ *commitBound }

var (
	_ raft.WithClose   = (*commitBound)(nil)
	_ raft.WithPreVote = commitBoundPreVote{}
)

// boundCommits wraps t for raft.NewRaft, and returns the acknowledgements
// the wrapper records.
func boundCommits(t raft.Transport) (raft.Transport, *acks) {
	b := &commitBound{Transport: t, acks: newAcks()}
	if _, ok := t.(raft.WithPreVote); ok {
		return commitBoundPreVote{b}, b.acks
	}
	return b, b.acks
}

// boundCommit lowers req's commit index to the last index it lets the
// follower check.
func boundCommit(req *raft.AppendEntriesRequest) {
	req.LeaderCommitIndex = min(req.LeaderCommitIndex, lastChecked(req))
}

// lastChecked is the last index of the leader's log that a follower
// matches once it accepts req.
func lastChecked(req *raft.AppendEntriesRequest) uint64 {
	return req.PrevLogEntry + uint64(len(req.Entries))
}

func (t *commitBound) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	boundCommit(args)
	err := t.Transport.AppendEntries(id, target, args, resp)
	if err == nil && resp.Success {
		t.acks.record(id, args.Term, lastChecked(args))
	}
	return err
}

func (t *commitBound) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.Transport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	b := &boundPipeline{AppendPipeline: p, id: id, acks: t.acks,
		out: make(chan raft.AppendFuture, 16), stop: make(chan struct{}), done: make(chan struct{})}
	go b.forward()
	return b, nil
}

func (t *commitBound) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	err := t.Transport.InstallSnapshot(id, target, args, resp, data)
	if err == nil && resp.Success {
		t.acks.record(id, args.Term, args.LastLogIndex)
	}
	return err
}

// Close closes the wrapped transport if it can be closed (raft's shutdown
// closes its transport).
func (t *commitBound) Close() error {
	if c, ok := t.Transport.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

func (t commitBoundPreVote) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.Transport.(raft.WithPreVote).RequestPreVote(id, target, args, resp)
}

// boundPipeline bounds the commit index of what it sends, and records the
// acknowledgements of the answers on their way from the wrapped pipeline's
// Consumer to raft's.
type boundPipeline struct {
	raft.AppendPipeline
	id        raft.ServerID
	acks      *acks
	out       chan raft.AppendFuture
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func (p *boundPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	boundCommit(args)
	return p.AppendPipeline.AppendEntries(args, resp)
}

func (p *boundPipeline) Consumer() <-chan raft.AppendFuture { return p.out }

// forward passes the wrapped pipeline's answers on to Consumer, recording
// those that succeeded, until Close.
func (p *boundPipeline) forward() {
	defer close(p.done)
	in := p.AppendPipeline.Consumer()
	for {
		select {
		case f, ok := <-in:
			if !ok {
				close(p.out)
				return
			}
			// Raft reads the response alone, as here: a failed RPC
			// answers no success. (Not f.Error: a future caches it
			// unguarded, racing raft or anyone else who asks.)
			if f.Response().Success {
				req := f.Request()
				p.acks.record(p.id, req.Term, lastChecked(req))
			}
			select {
			case p.out <- f:
			case <-p.stop:
				return
			}
		case <-p.stop:
			return
		}
	}
}

func (p *boundPipeline) Close() error {
	p.closeOnce.Do(func() { close(p.stop) })
	err := p.AppendPipeline.Close()
	<-p.done
	return err
}

// acks records, per follower, the highest index of the leader's log the
// follower has acknowledged holding, in the latest term this node sent it
// anything in as leader. An index acknowledged in an earlier term may name
// entries a later leader replaced, so a newer term starts over.
type acks struct {
	mu      sync.Mutex
	last    map[raft.ServerID]ack
	waiters map[raft.ServerID][]*ackWaiter
}

type ack struct{ term, index uint64 }

// covers reports whether a follower that acknowledged a holds the entry
// index that a leader of the given term appended.
func (a ack) covers(term, index uint64) bool { return a.term >= term && a.index >= index }

type ackWaiter struct {
	term, index uint64
	ch          chan struct{}
}

func newAcks() *acks {
	return &acks{last: map[raft.ServerID]ack{}, waiters: map[raft.ServerID][]*ackWaiter{}}
}

// record notes that follower id accepted, from this node as leader in
// term, a request through index.
func (a *acks) record(id raft.ServerID, term, index uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := a.last[id]
	switch {
	case term > cur.term:
	case term == cur.term && index > cur.index:
	default:
		return
	}
	cur = ack{term, index}
	a.last[id] = cur
	ws := a.waiters[id]
	if len(ws) == 0 {
		return
	}
	kept := ws[:0]
	for _, w := range ws {
		if cur.covers(w.term, w.index) {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	clear(ws[len(kept):])
	if len(kept) == 0 {
		delete(a.waiters, id)
	} else {
		a.waiters[id] = kept
	}
}

// get returns what follower id last acknowledged.
func (a *acks) get(id raft.ServerID) ack {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last[id]
}

// until returns a channel closed once follower id acknowledges the entry
// index of a leader of the given term (at once if it has), and a function
// that stops the wait.
func (a *acks) until(id raft.ServerID, term, index uint64) (<-chan struct{}, func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := &ackWaiter{term: term, index: index, ch: make(chan struct{})}
	if a.last[id].covers(term, index) {
		close(w.ch)
		return w.ch, func() {}
	}
	a.waiters[id] = append(a.waiters[id], w)
	return w.ch, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		ws := a.waiters[id]
		if i := slices.Index(ws, w); i >= 0 {
			ws = slices.Delete(ws, i, i+1)
		}
		if len(ws) == 0 {
			delete(a.waiters, id)
		} else {
			a.waiters[id] = ws
		}
	}
}
