package server

import (
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/session"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// FuzzSession feeds arbitrary bytes, after the preface and a Hello, to a
// session on a real DB: it must not panic, must end when the client does,
// and must leave nothing held (call and parked slots, the large-body slot,
// the session itself).
func FuzzSession(f *testing.F) {
	// A Call of each kind, empty, and a few real ones.
	fields := callOneof.Fields()
	var all []byte
	for i := range fields.Len() {
		fd := fields.Get(i)
		c := &v1.Call{Id: uint64(i + 1)}
		m := c.ProtoReflect()
		m.Set(fd, protoreflect.ValueOfMessage(m.NewField(fd).Message()))
		b, _ := session.AppendFrame(nil, c)
		f.Add(b)
		all = append(all, b...)
	}
	f.Add(all)
	real, _ := session.AppendFrame(nil, enqueueCall(1, "q"))
	wait, _ := session.AppendFrame(nil, &v1.Call{Id: 2, Call: &v1.Call_ClaimWait{ClaimWait: &v1.ClaimWaitRequest{
		Namespace: sessNS, Queue: "q", Owner: "w", Lease: durationpb.New(time.Minute), Max: 1, MaxWait: durationpb.New(time.Hour)}}})
	abandon, _ := session.AppendFrame(nil, &v1.Call{Id: 2, Call: &v1.Call_Abandon{Abandon: &v1.Abandon{}}})
	f.Add(append(append(append([]byte{}, real...), wait...), abandon...))
	f.Add(bytes.Repeat([]byte{0xff}, 11))
	f.Add(binary.AppendUvarint(nil, 1<<40))
	f.Add(append(binary.AppendUvarint(nil, 4), 0xff, 0xff, 0xff, 0xff))
	f.Add(packedCompleteBatch(3, engine.MaxBatch+1))

	db, err := engine.OpenInMemory(engine.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	s := New(db, Options{Logger: slog.New(slog.DiscardHandler), MaxRequestBytes: 64 << 10, MaxWait: 50 * time.Millisecond,
		BodyTimeout: 200 * time.Millisecond, MaxCalls: 8, MaxParked: 8})
	hello, _ := session.AppendFrame(nil, &v1.Hello{Version: session.Version})
	f.Fuzz(func(t *testing.T, data []byte) {
		srv, cli := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.ServeSession(srv)
		}()
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			io.Copy(io.Discard, cli)
		}()
		cli.Write(append(append([]byte{}, hello...), data...))
		cli.Close()
		<-done
		<-drained
		if n := s.lim.callers(); n != 0 {
			t.Fatalf("%d callers hold slots after the session", n)
		}
		if len(s.large) != 0 {
			t.Fatal("the large-body slot is held after the session")
		}
		s.sessions.mu.Lock()
		n := len(s.sessions.all)
		s.sessions.mu.Unlock()
		if n != 0 {
			t.Fatalf("%d sessions after the session", n)
		}
	})
}

// TestSessionHostileInputs: thousands of waiting claims on one session
// (past the caller's parked limit: refused, the session goes on), a frame
// that arrives a byte at a time (cut after BodyTimeout from its first
// byte, however steadily its bytes come), a huge packed list (refused
// before it is decoded).
func TestSessionHostileInputs(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, nil, Options{MaxWait: time.Hour, BodyTimeout: 300 * time.Millisecond})
	parked := make(chan struct{}, DefaultMaxParked)
	s.onPark = func() { parked <- struct{}{} }
	addr, stop := serveSessions(t, s)

	t.Run("parked", func(t *testing.T) {
		ts, _ := dialSession(t, addr, "")
		const n = 3000
		var b []byte
		for i := range n {
			b, _ = session.AppendFrame(b, &v1.Call{Id: uint64(i + 1), Call: &v1.Call_ClaimWait{ClaimWait: &v1.ClaimWaitRequest{
				Namespace: sessNS, Queue: "empty", Owner: "w", Lease: durationpb.New(time.Minute), Max: 1, MaxWait: durationpb.New(time.Hour)}}})
		}
		ts.conn.Write(b)
		got := ts.recvAll(n - DefaultMaxParked)
		for id, r := range got {
			if e := r.GetError(); wire.ItemError(e).Code() != connect.CodeResourceExhausted || !strings.Contains(e.GetMessage(), "max-parked") {
				t.Fatalf("claim %d past the parked limit: %v", id, r)
			}
		}
		ts.send(enqueueCall(n+1, "other"))
		if r := ts.mustRecv(); r.GetId() != n+1 || r.GetEnqueue() == nil {
			t.Fatalf("the session goes on: %v", r)
		}
		// A stop answers the parked ones. The session runs its calls side
		// by side: the enqueue's answer does not mean every claim before
		// it has parked (one that has not yet is answered "draining").
		for range DefaultMaxParked {
			<-parked
		}
		stop()
		got = ts.recvAll(DefaultMaxParked)
		for id, r := range got {
			if r.GetClaimWait() == nil {
				t.Fatalf("parked claim %d at the stop: %v", id, r)
			}
		}
	})
}

// TestSessionSlowFrame: a frame whose bytes come one at a time is cut
// BodyTimeout after its first byte, however steadily they come.
func TestSessionSlowFrame(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, nil, Options{BodyTimeout: 300 * time.Millisecond})
	addr, _ := serveSessions(t, s)
	ts, _ := dialSession(t, addr, "")
	frame, _ := session.AppendFrame(nil, &v1.Call{Id: 1, Call: &v1.Call_Counts{Counts: &v1.CountsRequest{Namespace: sessNS, Queue: strings.Repeat("q", 60)}}})
	go func() {
		for _, c := range frame {
			if _, err := ts.conn.Write([]byte{c}); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond) // the attack's pace, not a synchronisation
		}
	}()
	if r, err := ts.recv(); err == nil {
		t.Fatalf("a frame sent a byte at a time for %v was read: %v", time.Duration(len(frame))*20*time.Millisecond, r)
	}
}
