package server

import (
	"bufio"
	"bytes"
	"context"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/session"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// TestSessionReplyEncoding: an answer's frame, encoded without building
// its Reply, holds the bytes of that Reply (id, then the response in its
// field), for ids of every size and id 0, for empty responses and ones
// of many bytes; an answer over MaxResponseBytes is refused as it was.
func TestSessionReplyEncoding(t *testing.T) {
	s, _ := newTestServer(t, nil, Options{})
	x := &sess{s: s, log: s.log}
	enq := s.routes[callDesc.Fields().ByName("enqueue").Number()]
	get := s.routes[callDesc.Fields().ByName("get").Number()]
	big := bytes.Repeat([]byte("x"), 300)
	cases := []struct {
		rt  *route
		res proto.Message
	}{
		{enq, &v1.EnqueueResponse{Enqueued: &v1.Enqueued{Id: 42, Deduplicated: true}}},
		{enq, &v1.EnqueueResponse{}},
		{get, &v1.GetResponse{Task: &v1.TaskInfo{Id: 7, Payload: big, Kind: "k"}}},
	}
	for _, id := range []uint64{0, 1, 127, 128, 1 << 40} {
		for i, c := range cases {
			want := &v1.Reply{Id: id}
			want.ProtoReflect().Set(c.rt.out, protoreflect.ValueOfMessage(c.res.ProtoReflect()))
			wantFrame, err := session.AppendFrame([]byte("prev"), want)
			if err != nil {
				t.Fatal(err)
			}
			got := x.appendReply([]byte("prev"), &sresult{id: id, rt: c.rt, res: c.res})
			if !bytes.Equal(got, wantFrame) {
				t.Fatalf("id %d, case %d: frame\n%x, want\n%x", id, i, got, wantFrame)
			}
		}
	}
	huge := &v1.GetResponse{Task: &v1.TaskInfo{Payload: make([]byte, MaxResponseBytes)}}
	r := &sresult{id: 3, rt: get, res: huge}
	b := x.appendReply(nil, r)
	f, err := session.ReadFrame(bufio.NewReader(bytes.NewReader(b)), len(b), nil)
	if err != nil {
		t.Fatal(err)
	}
	var rep v1.Reply
	if err := proto.Unmarshal(f, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.GetId() != 3 || rep.GetError() == nil || r.err == nil {
		t.Fatalf("an answer over the limit: %v, %v", &rep, r.err)
	}
}

// TestSessionEnqueueRequestsReused: the Enqueue requests a session's
// reader decodes into messages it reuses carry nothing of the calls
// before them, in one batch or the next: each task is the one sent, and
// one sent without a task is an empty task, as it was.
func TestSessionEnqueueRequestsReused(t *testing.T) {
	s, db := newTestServer(t, nil, Options{})
	addr, _ := serveSessions(t, s)
	ts, _ := dialSession(t, addr, "")
	ns := &v1.Namespace{Project: "p", Scope: "s"}
	full := &v1.Call{Id: 1, TimeoutMicros: 10_000_000, Call: &v1.Call_Enqueue{Enqueue: &v1.EnqueueRequest{Namespace: ns, Queue: "q",
		Task: &v1.Task{Payload: []byte(`"a"`), Kind: "k", Headers: map[string]string{"h": "1"}, IdempotencyKey: "key1", MaxAttempts: 3}}}}
	bare := func(id uint64) *v1.Call {
		return &v1.Call{Id: id, Call: &v1.Call_Enqueue{Enqueue: &v1.EnqueueRequest{Namespace: ns, Queue: "q", Task: &v1.Task{Payload: []byte(`"b"`)}}}}
	}
	none := &v1.Call{Id: 3, Call: &v1.Call_Enqueue{Enqueue: &v1.EnqueueRequest{Namespace: ns, Queue: "q"}}}
	counts := &v1.Call{Id: 4, Call: &v1.Call_Counts{Counts: &v1.CountsRequest{Namespace: ns, Queue: "q"}}}
	// Each batch reuses what the one before decoded into.
	got := map[uint64]*v1.Reply{}
	for _, c := range []*v1.Call{full, bare(2), none, counts} {
		ts.send(c)
		got[c.GetId()] = ts.mustRecv()
	}
	full.Id = 5
	full.GetEnqueue().GetTask().IdempotencyKey = "key5"
	ts.send(full, bare(6))
	for id, r := range ts.recvAll(2) {
		got[id] = r
	}
	ctx := context.Background()
	q := db.Queue(engine.NS("p", "s"), "q")
	for _, id := range []uint64{2, 6} {
		ti, err := q.Get(ctx, got[id].GetEnqueue().GetEnqueued().GetId())
		if err != nil || string(ti.Payload) != `"b"` || ti.Kind != "" || len(ti.Headers) != 0 || ti.IdempotencyKey != "" {
			t.Fatalf("call %d: %+v, %v", id, ti, err)
		}
	}
	ti, err := q.Get(ctx, got[1].GetEnqueue().GetEnqueued().GetId())
	if err != nil || string(ti.Payload) != `"a"` || ti.Kind != "k" || ti.Headers["h"] != "1" || ti.IdempotencyKey != "key1" || ti.MaxAttempts != 3 {
		t.Fatalf("call 1: %+v, %v", ti, err)
	}
	e := got[3].GetEnqueue().GetEnqueued()
	if got[3].GetError() != nil || e.GetId() == 0 {
		t.Fatalf("an Enqueue without a task: %v", got[3])
	}
	ti, err = q.Get(ctx, e.GetId())
	if err != nil || len(ti.Payload) != 0 || ti.Kind != "" {
		t.Fatalf("call 3: %+v, %v", ti, err)
	}
	if got[4].GetCounts().GetCounts().GetReady() != 3 {
		t.Fatalf("counts: %v", got[4])
	}
}
