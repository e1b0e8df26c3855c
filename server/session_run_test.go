package server

import (
	"context"
	"log/slog"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/docketdb/docket/engine"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// diskServer serves a DB with a directory (each commit synced), whose
// enqueues are the ones that share steps.
func diskServer(t *testing.T) (*engine.DB, string) {
	t.Helper()
	db, err := engine.Open(t.TempDir(), engine.Options{Durability: engine.SyncAlways, SnapshotBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	addr, _ := serveSessions(t, New(db, Options{Logger: slog.New(slog.DiscardHandler)}))
	return db, addr
}

// TestSessionEnqueuesCommitInOneStep: the Enqueue calls in a row of one
// read of a session are one engine step (one commit), each with its own
// answer: an invalid one fails alone, a repeated key is deduplicated into
// the task the call before it enqueued, and a call between two runs sees
// the first run done.
func TestSessionEnqueuesCommitInOneStep(t *testing.T) {
	t.Parallel()
	db, addr := diskServer(t)
	ts, _ := dialSession(t, addr, "")
	pns := &v1.Namespace{Project: "p", Scope: "s"}
	var calls []proto.Message
	for i := range 5 {
		calls = append(calls, enqueueCall(uint64(i+1), "q"))
	}
	calls[3].(*v1.Call).GetEnqueue().Task.IdempotencyKey = "k"
	calls = append(calls, &v1.Call{Id: 6, Call: &v1.Call_Counts{Counts: &v1.CountsRequest{Namespace: pns, Queue: "q"}}})
	for i := 7; i <= 11; i++ {
		calls = append(calls, enqueueCall(uint64(i), "q"))
	}
	calls[7].(*v1.Call).GetEnqueue().Task.IdempotencyKey = "k"  // call 8
	calls[8].(*v1.Call).GetEnqueue().Task.Payload = []byte(`{`) // call 9
	before := db.Stats().Commits
	ts.send(calls...)
	got := ts.recvAll(len(calls))
	if n := db.Stats().Commits - before; n != 2 {
		t.Fatalf("%d commits for two runs of enqueues", n)
	}
	if c := got[6].GetCounts().GetCounts(); c.GetReady() != 5 {
		t.Fatalf("counts between the runs: %v", got[6])
	}
	if e := got[8].GetEnqueue().GetEnqueued(); !e.GetDeduplicated() || e.GetId() != got[4].GetEnqueue().GetEnqueued().GetId() {
		t.Fatalf("call 8: %v, want deduplicated into call 4's %v", got[8], got[4])
	}
	if e := got[9].GetError(); e == nil || e.GetCode() != connect.CodeInvalidArgument.String() {
		t.Fatalf("call 9: %v, want invalid", got[9])
	}
	for _, id := range []uint64{1, 2, 3, 5, 7, 10, 11} {
		if e := got[id].GetEnqueue().GetEnqueued(); e.GetId() == 0 || e.GetDeduplicated() {
			t.Fatalf("call %d: %v", id, got[id])
		}
	}
	c, err := db.Queue(engine.NS("p", "s"), "q").Counts(context.Background())
	if err != nil || c.Ready != 8 {
		t.Fatalf("counts %+v %v, want 8 ready", c, err)
	}
}

// TestEnqueueEachCommitsInOneStep: an EnqueueEach request's items are one
// engine step, each with its own answer.
func TestEnqueueEachCommitsInOneStep(t *testing.T) {
	t.Parallel()
	db, addr := diskServer(t)
	pns := &v1.Namespace{Project: "p", Scope: "s"}
	var items []*v1.EnqueueRequest
	for range 40 {
		items = append(items, &v1.EnqueueRequest{Namespace: pns, Queue: "q", Task: &v1.Task{Payload: []byte(`1`)}})
	}
	items[10].Task.IdempotencyKey, items[20].Task.IdempotencyKey = "k", "k"
	items[30].Queue = ""
	before := db.Stats().Commits
	res, err := pipelineStub("http://"+addr, "").EnqueueEach(context.Background(), connect.NewRequest(&v1.EnqueueEachRequest{Items: items}))
	if err != nil {
		t.Fatal(err)
	}
	if n := db.Stats().Commits - before; n != 1 {
		t.Fatalf("%d commits for one request", n)
	}
	rs := res.Msg.GetResults()
	if e := rs[20].GetEnqueued(); !e.GetDeduplicated() || e.GetId() != rs[10].GetEnqueued().GetId() {
		t.Fatalf("item 20: %v, want deduplicated into item 10's %v", rs[20], rs[10])
	}
	if rs[30].GetError().GetCode() != connect.CodeInvalidArgument.String() {
		t.Fatalf("item 30: %v", rs[30])
	}
	c, err := db.Queue(engine.NS("p", "s"), "q").Counts(context.Background())
	if err != nil || c.Ready != 38 {
		t.Fatalf("counts %+v %v, want 38 ready", c, err)
	}
}
