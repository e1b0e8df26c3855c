package cluster

import "github.com/hashicorp/raft"

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
type commitBound struct{ raft.Transport }

// commitBoundPreVote is commitBound over a transport that supports
// pre-vote; raft looks for it by the transport's type.
type commitBoundPreVote struct{ *commitBound }

var (
	_ raft.WithClose   = (*commitBound)(nil)
	_ raft.WithPreVote = commitBoundPreVote{}
)

// boundCommits wraps t for raft.NewRaft.
func boundCommits(t raft.Transport) raft.Transport {
	b := &commitBound{t}
	if _, ok := t.(raft.WithPreVote); ok {
		return commitBoundPreVote{b}
	}
	return b
}

// boundCommit lowers req's commit index to the last index it lets the
// follower check.
func boundCommit(req *raft.AppendEntriesRequest) {
	req.LeaderCommitIndex = min(req.LeaderCommitIndex, req.PrevLogEntry+uint64(len(req.Entries)))
}

func (t *commitBound) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	boundCommit(args)
	return t.Transport.AppendEntries(id, target, args, resp)
}

func (t *commitBound) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.Transport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return boundPipeline{p}, nil
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

type boundPipeline struct{ raft.AppendPipeline }

func (p boundPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	boundCommit(args)
	return p.AppendPipeline.AppendEntries(args, resp)
}
