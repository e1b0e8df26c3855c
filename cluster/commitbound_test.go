package cluster

import (
	"fmt"
	"strings"
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
	tr, _ := boundCommits(a)
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
	np, _ := boundCommits(noPreVote{a})
	if _, ok := np.(raft.WithPreVote); ok {
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

// TestAcksRecorded: the transport records, per follower, the highest index
// a follower acknowledged: PrevLogEntry plus the entries of an accepted
// AppendEntries, alone or pipelined (before raft reads the answer from the
// pipeline), and the LastLogIndex of an accepted InstallSnapshot. A refusal
// or a failed RPC records nothing, nor does an older term; a newer term
// starts over. A wait for an index ends once the follower acknowledges it
// in that term or a later one, and one stopped is forgotten.
func TestAcksRecorded(t *testing.T) {
	_, a := raft.NewInmemTransport("a")
	_, b := raft.NewInmemTransport("b")
	a.Connect("b", b)
	b.Connect("a", a)
	// b refuses what names term 99 as its previous or last term.
	go func() {
		for rpc := range b.Consumer() {
			switch req := rpc.Command.(type) {
			case *raft.AppendEntriesRequest:
				rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, Success: req.PrevLogTerm != 99}, nil)
			case *raft.InstallSnapshotRequest:
				rpc.Respond(&raft.InstallSnapshotResponse{Term: req.Term, Success: req.LastLogTerm != 99}, nil)
			default:
				rpc.Respond(nil, fmt.Errorf("unexpected %T", req))
			}
		}
	}()
	tr, acks := boundCommits(a)
	pl, err := tr.AppendEntriesPipeline("b", "b")
	if err != nil {
		t.Fatal(err)
	}
	appendReq := func(term, prev, prevTerm uint64, entries int) *raft.AppendEntriesRequest {
		req := &raft.AppendEntriesRequest{Term: term, PrevLogEntry: prev, PrevLogTerm: prevTerm}
		for i := range entries {
			req.Entries = append(req.Entries, &raft.Log{Index: prev + 1 + uint64(i), Term: term, Type: raft.LogNoop})
		}
		return req
	}
	plain := func(req *raft.AppendEntriesRequest) {
		t.Helper()
		if err := tr.AppendEntries("b", "b", req, new(raft.AppendEntriesResponse)); err != nil {
			t.Fatal(err)
		}
	}
	piped := func(req *raft.AppendEntriesRequest) {
		t.Helper()
		if _, err := pl.AppendEntries(req, new(raft.AppendEntriesResponse)); err != nil {
			t.Fatal(err)
		}
		select {
		case f := <-pl.Consumer():
			if f.Request() != req {
				t.Fatal("the pipeline answered another request")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no answer from the pipeline")
		}
	}
	snapshot := func(term, last, lastTerm uint64) {
		t.Helper()
		req := &raft.InstallSnapshotRequest{Term: term, LastLogIndex: last, LastLogTerm: lastTerm}
		if err := tr.InstallSnapshot("b", "b", req, new(raft.InstallSnapshotResponse), strings.NewReader("")); err != nil {
			t.Fatal(err)
		}
	}
	want := func(what string, w ack) {
		t.Helper()
		if got := acks.get("b"); got != w {
			t.Fatalf("after %s: acknowledged %+v, want %+v", what, got, w)
		}
	}

	waitEarly, stopEarly := acks.until("b", 2, 8)
	waitLater, stopLater := acks.until("b", 3, 10)
	waitNever, stopNever := acks.until("b", 9, 1)
	plain(appendReq(2, 5, 2, 3))
	want("a plain append", ack{2, 8})
	select {
	case <-waitEarly:
	default:
		t.Fatal("the wait for index 8 in term 2 did not end when it was acknowledged")
	}
	plain(appendReq(2, 10, 99, 5))
	want("a refused plain append", ack{2, 8})
	plain(appendReq(2, 3, 2, 0))
	want("a plain append of an earlier point", ack{2, 8})
	if err := tr.AppendEntries("b", "nowhere", appendReq(2, 20, 2, 1), new(raft.AppendEntriesResponse)); err == nil {
		t.Fatal("an append to an unknown address succeeded")
	}
	want("a failed plain append", ack{2, 8})
	piped(appendReq(2, 8, 2, 4))
	want("a pipelined append", ack{2, 12})
	piped(appendReq(2, 12, 99, 4))
	want("a refused pipelined append", ack{2, 12})
	snapshot(3, 7, 2)
	want("a snapshot of a newer term", ack{3, 7})
	snapshot(3, 9, 99)
	want("a refused snapshot", ack{3, 7})
	plain(appendReq(2, 20, 2, 0))
	want("an append of an older term", ack{3, 7})
	select {
	case <-waitLater:
		t.Fatal("the wait for index 10 in term 3 ended at index 7")
	default:
	}
	piped(appendReq(3, 7, 3, 3))
	want("a pipelined append of the new term", ack{3, 10})
	select {
	case <-waitLater:
	default:
		t.Fatal("the wait for index 10 in term 3 did not end when it was acknowledged")
	}
	select {
	case <-waitNever:
		t.Fatal("a wait for term 9 ended")
	default:
	}
	stopEarly()
	stopLater()
	stopNever()
	acks.mu.Lock()
	left := len(acks.waiters)
	acks.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d waits left after they were stopped", left)
	}
	if ch, _ := acks.until("b", 3, 10); ch == nil {
		t.Fatal("no channel")
	} else {
		select {
		case <-ch:
		default:
			t.Fatal("a wait for what was acknowledged already did not end at once")
		}
	}
	if err := pl.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pl.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}

// BenchmarkAckRecord measures what the transport adds to each accepted
// response: recording its acknowledgement, with no Join waiting.
func BenchmarkAckRecord(b *testing.B) {
	a := newAcks()
	b.ReportAllocs()
	for i := range b.N {
		a.record("n2", 3, uint64(i))
	}
}

// BenchmarkPipelineRoundTrip measures a pipelined AppendEntries over raft's
// in-memory transport, answered at once, through the wrapper and without.
func BenchmarkPipelineRoundTrip(b *testing.B) {
	for _, wrapped := range []bool{false, true} {
		b.Run(map[bool]string{false: "raw", true: "wrapped"}[wrapped], func(b *testing.B) {
			_, x := raft.NewInmemTransport("a")
			_, y := raft.NewInmemTransport("b")
			x.Connect("b", y)
			go func() {
				for rpc := range y.Consumer() {
					rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
				}
			}()
			var tr raft.Transport = x
			if wrapped {
				tr, _ = boundCommits(x)
			}
			pl, err := tr.AppendEntriesPipeline("b", "b")
			if err != nil {
				b.Fatal(err)
			}
			defer pl.Close()
			b.ReportAllocs()
			for i := range b.N {
				req := &raft.AppendEntriesRequest{Term: 1, PrevLogEntry: uint64(i)}
				if _, err := pl.AppendEntries(req, new(raft.AppendEntriesResponse)); err != nil {
					b.Fatal(err)
				}
				<-pl.Consumer()
			}
		})
	}
}
