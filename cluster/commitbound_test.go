package cluster

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestAppendEntriesCommitBounded: an AppendEntries sent through a Node's
// transport, alone or pipelined, carries a commit index no higher than the
// last entry it lets the follower check (PrevLogEntry plus the entries
// sent), so a follower holding entries of an old term past that point does
// not commit them; a request covering the commit index keeps it. Pre-vote
// and Close reach the wrapped transport.
func TestAppendEntriesCommitBounded(t *testing.T) {
	_, a := raft.NewInmemTransport("a")
	_, b := raft.NewInmemTransport("b")
	a.Connect("b", b)
	b.Connect("a", a)
	got := make(chan uint64, 1)
	go func() {
		for rpc := range b.Consumer() {
			if req, ok := rpc.Command.(*raft.AppendEntriesRequest); ok {
				got <- req.LeaderCommitIndex
				rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
				continue
			}
			rpc.Respond(&raft.RequestPreVoteResponse{Granted: true}, nil)
		}
	}()
	tr := boundCommits(a)
	pl, err := tr.AppendEntriesPipeline("b", "b")
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	for _, c := range []struct {
		prev    uint64
		entries int
		commit  uint64
		want    uint64
	}{
		{prev: 6, entries: 0, commit: 8, want: 6},
		{prev: 6, entries: 1, commit: 8, want: 7},
		{prev: 6, entries: 4, commit: 8, want: 8},
		{prev: 0, entries: 0, commit: 0, want: 0}, // a heartbeat
	} {
		for _, piped := range []bool{false, true} {
			req := &raft.AppendEntriesRequest{Term: 3, PrevLogEntry: c.prev, PrevLogTerm: 2, LeaderCommitIndex: c.commit}
			for i := range c.entries {
				req.Entries = append(req.Entries, &raft.Log{Index: c.prev + 1 + uint64(i), Term: 3, Type: raft.LogNoop})
			}
			var resp raft.AppendEntriesResponse
			if piped {
				f, err := pl.AppendEntries(req, &resp)
				if err != nil {
					t.Fatal(err)
				}
				if err := f.Error(); err != nil {
					t.Fatal(err)
				}
			} else if err := tr.AppendEntries("b", "b", req, &resp); err != nil {
				t.Fatal(err)
			}
			select {
			case n := <-got:
				if n != c.want {
					t.Fatalf("piped=%v prev %d, %d entries, commit %d: the follower got commit %d, want %d",
						piped, c.prev, c.entries, c.commit, n, c.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the request did not arrive")
			}
		}
	}
	pv, ok := tr.(raft.WithPreVote)
	if !ok {
		t.Fatal("the transport of one with pre-vote has none")
	}
	var pvr raft.RequestPreVoteResponse
	if err := pv.RequestPreVote("b", "b", &raft.RequestPreVoteRequest{Term: 3}, &pvr); err != nil || !pvr.Granted {
		t.Fatalf("pre-vote: %+v %v", pvr, err)
	}
	if _, ok := boundCommits(noPreVote{a}).(raft.WithPreVote); ok {
		t.Fatal("a transport without pre-vote gained it")
	}
	if err := tr.(raft.WithClose).Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.AppendEntries("b", "b", &raft.AppendEntriesRequest{}, new(raft.AppendEntriesResponse)); err == nil {
		t.Fatal("the wrapped transport is still open after Close")
	}
}

// noPreVote hides a transport's pre-vote.
type noPreVote struct{ raft.Transport }
