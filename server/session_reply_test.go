package server

import (
	"bufio"
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

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
