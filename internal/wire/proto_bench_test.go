package wire

import (
	"testing"

	"google.golang.org/protobuf/proto"

	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// enqueueCall is a session's Enqueue call as a client sends it: a task
// of 100 bytes of payload with two headers.
func enqueueCall(tb testing.TB) []byte {
	tb.Helper()
	c := &v1.Call{Id: 12345, Call: &v1.Call_Enqueue{Enqueue: &v1.EnqueueRequest{
		Queue: "bench",
		Task:  &v1.Task{Payload: make([]byte, 100), Headers: map[string]string{"a": "1", "b": "2"}, Priority: 3},
	}}}
	b, err := proto.Marshal(c)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func BenchmarkCheckProto(b *testing.B) {
	frame := enqueueCall(b)
	md := (&v1.Call{}).ProtoReflect().Descriptor()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		if err := CheckProto(frame, md); err != nil {
			b.Fatal(err)
		}
	}
}
