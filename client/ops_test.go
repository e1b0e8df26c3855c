package client

import (
	"testing"

	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// TestSopOf: a session op found by its message types wraps the request in
// the Call field that carries it and reads the answer from the Reply field
// of the same number, nothing from another; a pair the schema does not
// carry panics when the op is made.
func TestSopOf(t *testing.T) {
	t.Parallel()
	op := sopOf[v1.RescheduleRequest, v1.RescheduleResponse]()
	m := &v1.RescheduleRequest{Queue: "q", Id: 7}
	if c := op.wrap(m); c.GetReschedule() != m {
		t.Fatalf("wrapped as %v", c)
	}
	res := &v1.RescheduleResponse{}
	if got := op.unwrap(&v1.Reply{Reply: &v1.Reply_Reschedule{Reschedule: res}}); got != res {
		t.Fatalf("unwrapped %v", got)
	}
	if got := op.unwrap(&v1.Reply{Reply: &v1.Reply_RunNow{RunNow: &v1.RunNowResponse{}}}); got != nil {
		t.Fatalf("another call's answer read as %v", got)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a request answered with another call's response made an op")
		}
	}()
	sopOf[v1.RescheduleRequest, v1.RunNowResponse]()
}
