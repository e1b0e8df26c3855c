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
// waits, never with BusyPoll negative; not while a call of the session is
// in flight (a waiting claim); and not for calls that come two at a time.
// (A budget of 5 ms: under the race detector the test's next call can
// take longer than three of the default's 50 µs, and then is rightly not
// polled for; TestSessionPollerDefault checks the default.)
func TestSessionReaderPollsBetweenLoneCalls(t *testing.T) {
	needPolling(t)
	t.Parallel()
	for _, tc := range []struct {
		name string
		poll time.Duration
		want bool
	}{{"longer", 5 * time.Millisecond, true}, {"never", -1, false}} {
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

			// Another session whose calls come two at a time.
			ts2, _ := dialSession(t, addr, "")
			before = sessionPolls(s)
			for id := uint64(1); id < 40; id += 2 {
				ts2.send(enqueueCall(id, "q"), enqueueCall(id+1, "q"))
				ts2.recvAll(2)
			}
			if after := sessionPolls(s); after != before {
				t.Fatalf("calls two at a time: the reader polled %d times", after-before)
			}
		})
	}
}

// TestSessionPollerDefault: a session's reader polls for up to
// DefaultBusyPoll unless BusyPoll says otherwise.
func TestSessionPollerDefault(t *testing.T) {
	needPolling(t)
	t.Parallel()
	for _, tc := range []struct{ opt, want time.Duration }{{0, DefaultBusyPoll}, {time.Millisecond, time.Millisecond}, {-1, 0}} {
		s, _ := newTestServer(t, nil, Options{BusyPoll: tc.opt})
		addr, _ := serveSessions(t, s)
		ts, _ := dialSession(t, addr, "")
		ts.send(enqueueCall(1, "q"))
		ts.mustRecv()
		var got time.Duration
		s.sessions.each(func(x *sess) { got = x.poll.Budget() })
		if got != tc.want {
			t.Errorf("BusyPoll %v: the reader polls for up to %v, want %v", tc.opt, got, tc.want)
		}
	}
}

// needPolling skips a test of polling where a Poller never polls (one
// processor).
func needPolling(t *testing.T) {
	t.Helper()
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("a reader polls only with two processors or more")
	}
}
