package server

import (
	"runtime"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// sessionPolls is how many waits of s's open sessions' readers asked for
// the next call in a loop (Options.BusyPoll).
func sessionPolls(s *Server) int64 {
	var n int64
	s.sessions.each(func(x *sess) { n += x.poll.Polls() })
	return n
}

// TestSessionReaderPollsBetweenLoneCalls: a session whose client sends a
// call at a time has its reader ask for the next in a loop before it
// waits (by default), never with BusyPoll negative; and not while a call
// of the session is in flight (a waiting claim).
func TestSessionReaderPollsBetweenLoneCalls(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("a reader polls only with two processors or more")
	}
	t.Parallel()
	for _, tc := range []struct {
		name string
		poll time.Duration
		want bool
	}{{"default", 0, true}, {"longer", time.Millisecond, true}, {"never", -1, false}} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newTestServer(t, nil, Options{BusyPoll: tc.poll})
			parked := make(chan struct{}, 1)
			s.onPark = func() { parked <- struct{}{} }
			addr, _ := serveSessions(t, s)
			ts, _ := dialSession(t, addr, "")
			lone := func(from uint64) {
				for id := from; id < from+20; id++ {
					ts.send(enqueueCall(id, "q"))
					if r := ts.mustRecv(); r.GetId() != id || r.GetEnqueue().GetEnqueued().GetId() == 0 {
						t.Fatalf("call %d: %v", id, r)
					}
				}
			}
			lone(1)
			polls := sessionPolls(s)
			if (polls > 0) != tc.want {
				t.Fatalf("20 lone calls: the reader polled %d times (BusyPoll %v)", polls, tc.poll)
			}

			// A claim waits on another queue: the session has a call in
			// flight, and its reader waits without polling.
			ts.send(&v1.Call{Id: 100, Call: &v1.Call_ClaimWait{ClaimWait: &v1.ClaimWaitRequest{
				Namespace: &v1.Namespace{Project: "p", Scope: "s"}, Queue: "idle", Owner: "w",
				Lease: durationpb.New(time.Minute), Max: 1, MaxWait: durationpb.New(time.Hour)}}})
			<-parked
			before := sessionPolls(s)
			lone(1000)
			if after := sessionPolls(s); after != before {
				t.Fatalf("with a claim waiting, the reader polled %d times", after-before)
			}
		})
	}
}
