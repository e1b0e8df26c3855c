package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/session"
	"github.com/docketdb/docket/internal/wire"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"github.com/docketdb/docket/proto/docket/v1/docketv1connect"
)

var sessNS = &v1.Namespace{Project: "p", Scope: "s"}

func newBufReader(c net.Conn) *bufio.Reader { return bufio.NewReaderSize(c, session.BufSize) }

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TestSessionOverTLS: under TLS a client asking for the docket/1 ALPN
// protocol gets a session (no preface), and HTTPS clients are served on
// the same port as before.
func TestSessionOverTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, caKey, _, _ := writeCert(t, dir, "ca", nil, nil)
	_, _, certFile, keyFile := writeCert(t, dir, "server", ca, caKey)
	files := &TLSFiles{CertFile: certFile, KeyFile: keyFile}
	if err := files.Load(); err != nil {
		t.Fatal(err)
	}
	s, _ := newTestServer(t, nil, Options{BusyPoll: 5 * time.Millisecond}) // a budget the race detector fits
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := NewHTTPServer(s.Mux(), files.Config())
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, s, hs, ln, 10*time.Second) }()
	pool := x509.NewCertPool()
	pool.AddCert(ca)

	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, NextProtos: []string{session.ALPN}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p := c.ConnectionState().NegotiatedProtocol; p != session.ALPN {
		t.Fatalf("negotiated %q", p)
	}
	ts := &testSession{t: t, conn: c, br: newBufReader(c)}
	ts.send(&v1.Hello{Version: session.Version})
	var w v1.Welcome
	if err := session.ReadMessage(ts.br, session.MaxHelloBytes, &w); err != nil || w.GetSession() == "" {
		t.Fatalf("welcome %v %v", &w, err)
	}
	ts.send(enqueueCall(7, "tls"))
	if r := ts.mustRecv(); r.GetId() != 7 || r.GetEnqueue() == nil {
		t.Fatalf("reply %v", r)
	}
	// The reader polls for lone calls under TLS too (the socket beneath).
	for id := uint64(8); id < 28; id++ {
		ts.send(enqueueCall(id, "lone"))
		if r := ts.mustRecv(); r.GetId() != id || r.GetEnqueue() == nil {
			t.Fatalf("reply %v", r)
		}
	}
	if polls := sessionPolls(s); runtime.GOMAXPROCS(0) > 1 && polls == 0 {
		t.Fatal("20 lone calls under TLS: the reader never polled")
	}

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	q := docketv1connect.NewQueuesClient(hc, "https://"+ln.Addr().String())
	res, err := q.Counts(context.Background(), connect.NewRequest(&v1.CountsRequest{Namespace: sessNS, Queue: "tls"}))
	if err != nil || res.Msg.GetCounts().GetReady() != 1 {
		t.Fatalf("HTTPS beside sessions: %v %v", res, err)
	}
	resp, err := hc.Get("https://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("HTTPS clients get %s, not HTTP/2, beside sessions", resp.Proto)
	}
	// Closing the idle HTTP/2 connection here spares Shutdown the second
	// the server gives a client to close it after GOAWAY.
	hc.CloseIdleConnections()
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if _, err := ts.recv(); err == nil {
		t.Fatal("the session outlived Serve")
	}
}

// TestSessionSniffingDelaysNoOtherClient: a client that connects and
// sends nothing does not hold up the HTTP clients that come after it.
func TestSessionSniffingDelaysNoOtherClient(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, nil, Options{BodyTimeout: time.Hour})
	addr, _ := serveSessions(t, s)
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	half, err := net.Dial("tcp", addr) // two bytes of the preface, then nothing
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()
	half.Write([]byte(session.Preface[:2]))
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
}

// TestSessionHandshake: a Hello with a bad token or version is answered
// with an error of call id 0 and the connection closed; a Hello that does
// not come within BodyTimeout, or is too large, closes it; a good token
// gets the caller's limits.
func TestSessionHandshake(t *testing.T) {
	t.Parallel()
	tokens, tok := tokensFor(t, map[string]string{"app": "p/s:all"})
	s, _ := newTestServer(t, tokens, Options{MaxCalls: 7, MaxParked: 9, BodyTimeout: 200 * time.Millisecond, MaxRequestBytes: 1 << 20})
	addr, _ := serveSessions(t, s)

	refused := func(what string, hello *v1.Hello, code connect.Code) {
		t.Helper()
		ts := dialRaw(t, addr)
		ts.send(hello)
		r := ts.mustRecv()
		if r.GetId() != 0 || wire.ItemError(r.GetError()).Code() != code {
			t.Fatalf("%s: %v, want %v", what, r, code)
		}
		if err := ts.closed(); err == nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	refused("no token", &v1.Hello{Version: session.Version}, connect.CodeUnauthenticated)
	refused("bad token", &v1.Hello{Version: session.Version, Token: tok["app"] + "x"}, connect.CodeUnauthenticated)
	refused("version 2", &v1.Hello{Version: 2, Token: tok["app"]}, connect.CodeUnimplemented)
	r := ts0(t, addr)
	if r.GetError().GetMessage() != ErrUnauthenticated.Error() {
		t.Fatalf("refusal says %q", r.GetError().GetMessage())
	}

	// No Hello at all: closed after BodyTimeout.
	ts := dialRaw(t, addr)
	if _, err := ts.recv(); err == nil {
		t.Fatal("a session without a hello stays open")
	}
	// A Hello over MaxHelloBytes is not read.
	ts = dialRaw(t, addr)
	var big []byte
	big = binary.AppendUvarint(big, session.MaxHelloBytes+1)
	ts.conn.Write(big)
	if _, err := ts.recv(); err == nil {
		t.Fatal("a session with a huge hello stays open")
	}

	ts, w := dialSession(t, addr, tok["app"])
	if w.GetMaxCalls() != 7 || w.GetMaxParked() != 9 || w.GetMaxFrameBytes() != 1<<20 {
		t.Fatalf("welcome %v", w)
	}
	ts.send(enqueueCall(1, "q"))
	if r := ts.mustRecv(); r.GetEnqueue() == nil {
		t.Fatalf("%v", r)
	}
}

// ts0 opens a session with no token on a server that wants one and
// returns the refusal.
func ts0(t *testing.T, addr string) *v1.Reply {
	ts := dialRaw(t, addr)
	ts.send(&v1.Hello{Version: session.Version})
	return ts.mustRecv()
}

// TestSessionErrorsAreTheUnaryOnes: a refused call's ItemError is the
// unary call's answer: code, message, detail; forbidden and invalid calls
// alike, and the session goes on.
func TestSessionErrorsAreTheUnaryOnes(t *testing.T) {
	t.Parallel()
	tokens, tok := tokensFor(t, map[string]string{"app": "p/s:enqueue+read", "other": "x/y:all"})
	s, _ := newTestServer(t, tokens, Options{})
	addr, _ := serveSessions(t, s)
	url := "http://" + addr
	ts, _ := dialSession(t, addr, tok["app"])
	st := newStubs(url, tok["app"])
	ctx := context.Background()

	_, getErr := st.q.Get(ctx, connect.NewRequest(&v1.GetRequest{Namespace: sessNS, Queue: "q", Id: 12345}))
	_, pauseErr := newStubs(url, tok["app"]).q.Counts(ctx, connect.NewRequest(&v1.CountsRequest{Namespace: &v1.Namespace{Project: "x", Scope: "y"}, Queue: "q"}))
	_, badErr := st.q.Enqueue(ctx, connect.NewRequest(&v1.EnqueueRequest{Namespace: sessNS, Queue: "q", Task: &v1.Task{Payload: []byte("{")}}))
	longKey := &v1.KVGetRequest{Namespace: sessNS, Key: strings.Repeat("k", wire.MaxStringBytes+1)}
	_, longErr := st.kv.Get(ctx, connect.NewRequest(longKey))
	bigValue := &v1.EnqueueRequest{Namespace: sessNS, Queue: "q", Task: &v1.Task{Payload: []byte(`"` + strings.Repeat("v", 1<<20) + `"`)}}
	_, bigErr := st.q.Enqueue(ctx, connect.NewRequest(bigValue))
	ts.send(
		&v1.Call{Id: 1, Call: &v1.Call_Get{Get: &v1.GetRequest{Namespace: sessNS, Queue: "q", Id: 12345}}},
		&v1.Call{Id: 2, Call: &v1.Call_Counts{Counts: &v1.CountsRequest{Namespace: &v1.Namespace{Project: "x", Scope: "y"}, Queue: "q"}}},
		&v1.Call{Id: 3, Call: &v1.Call_Enqueue{Enqueue: &v1.EnqueueRequest{Namespace: sessNS, Queue: "q", Task: &v1.Task{Payload: []byte("{")}}}},
		&v1.Call{Id: 4}, // no call at all
		enqueueCall(5, "q"),
		&v1.Call{Id: 6, Call: &v1.Call_KvGet{KvGet: longKey}},
		&v1.Call{Id: 7, Call: &v1.Call_Enqueue{Enqueue: bigValue}},
	)
	got := ts.recvAll(7)
	sameAnswer(t, "get of a missing task", got[1].GetError(), getErr)
	sameAnswer(t, "a namespace not granted", got[2].GetError(), pauseErr)
	sameAnswer(t, "an invalid payload", got[3].GetError(), badErr)
	if e := got[4].GetError(); wire.ItemError(e).Code() != connect.CodeUnimplemented {
		t.Fatalf("an empty call: %v", got[4])
	}
	if got[5].GetEnqueue() == nil {
		t.Fatalf("the session goes on: %v", got[5])
	}
	sameAnswer(t, "a string over the limit", got[6].GetError(), longErr)
	sameAnswer(t, "a payload over the engine's limit", got[7].GetError(), bigErr)
	if !strings.Contains(bigErr.Error(), "docket.v1.Task.payload is 1048578 bytes, over the limit of 1048576 (the payload limit)") {
		t.Fatalf("a payload over the engine's limit is refused before it is decoded: %v", bigErr)
	}
}

// TestSessionCallLimit: a session's calls hold the caller's call slots;
// a call past MaxCalls is answered ResourceExhausted and the session goes
// on.
func TestSessionCallLimit(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, nil, Options{MaxCalls: 2})
	addr, _ := serveSessions(t, s)
	ts, _ := dialSession(t, addr, "")
	r1, _ := s.lim.acquire("")
	r2, _ := s.lim.acquire("")
	ts.send(enqueueCall(1, "q"))
	r := ts.mustRecv()
	if e := r.GetError(); wire.ItemError(e).Code() != connect.CodeResourceExhausted || !strings.Contains(e.GetMessage(), "max-calls") {
		t.Fatalf("a call past the limit: %v", r)
	}
	r1()
	ts.send(enqueueCall(2, "q"))
	if r := ts.mustRecv(); r.GetEnqueue() == nil {
		t.Fatalf("a call within the limit: %v", r)
	}
	r2()
	if n := s.lim.callers(); n != 0 {
		t.Fatalf("%d callers hold slots after the calls", n)
	}
}

// TestSessionClaimWait: a ClaimWait waits on its own while the session's
// other calls are answered; an enqueue wakes it; Abandon ends another's
// wait, answered with no leases.
func TestSessionClaimWait(t *testing.T) {
	t.Parallel()
	s, _ := newTestServer(t, nil, Options{MaxWait: time.Hour})
	parked := make(chan struct{}, 4)
	s.onPark = func() { parked <- struct{}{} }
	addr, _ := serveSessions(t, s)
	ts, _ := dialSession(t, addr, "")
	wait := func(id uint64, queue string) *v1.Call {
		return &v1.Call{Id: id, Call: &v1.Call_ClaimWait{ClaimWait: &v1.ClaimWaitRequest{
			Namespace: sessNS, Queue: queue, Owner: "w", Lease: durationpb.New(time.Minute), Max: 1,
			MaxWait: durationpb.New(time.Hour)}}}
	}
	ts.send(wait(1, "a"), wait(2, "b"))
	<-parked
	<-parked
	ts.send(enqueueCall(3, "a"))
	got := ts.recvAll(2)
	if got[3].GetEnqueue() == nil || len(got[1].GetClaimWait().GetLeases()) != 1 {
		t.Fatalf("enqueue and the claim it woke: %v", got)
	}
	ts.send(&v1.Call{Id: 2, Call: &v1.Call_Abandon{Abandon: &v1.Abandon{}}})
	r := ts.mustRecv()
	if r.GetId() != 2 || r.GetClaimWait() == nil || len(r.GetClaimWait().GetLeases()) != 0 {
		t.Fatalf("the abandoned claim: %v", r)
	}
	ts.send(&v1.Call{Id: 99, Call: &v1.Call_Abandon{Abandon: &v1.Abandon{}}}, enqueueCall(4, "a"))
	if r := ts.mustRecv(); r.GetId() != 4 {
		t.Fatalf("abandoning no call answers nothing: %v", r)
	}
	// An Abandon read with its ClaimWait, in one batch, ends it.
	ts = dialWithCalls(t, addr, wait(5, "b"), &v1.Call{Id: 5, Call: &v1.Call_Abandon{Abandon: &v1.Abandon{}}})
	if r := ts.mustRecv(); r.GetId() != 5 || r.GetClaimWait() == nil {
		t.Fatalf("a claim abandoned at once: %v", r)
	}
}

// TestSessionClaimWaitsOverTheLimit: a session's ClaimWaits past the
// caller's parked limit are refused by the reader, with no goroutine each,
// and their refusals are logged at most once a second, with the number
// left unlogged; the claims within the limit wait and are answered.
func TestSessionClaimWaitsOverTheLimit(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	s, _ := newTestServer(t, nil, Options{MaxParked: 2, MaxWait: time.Hour, Logger: logs.logger()})
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	s.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	var started atomic.Int64
	s.onWaitGoroutine = func() { started.Add(1) }
	parked := make(chan struct{}, 2)
	s.onPark = func() { parked <- struct{}{} }
	addr, _ := serveSessions(t, s)
	ts, _ := dialSession(t, addr, "")
	var calls []proto.Message
	for i := range 10 {
		calls = append(calls, &v1.Call{Id: uint64(i + 1), Call: &v1.Call_ClaimWait{ClaimWait: &v1.ClaimWaitRequest{
			Namespace: sessNS, Queue: "q", Owner: "w", Lease: durationpb.New(time.Minute), Max: 1,
			MaxWait: durationpb.New(time.Hour)}}})
	}
	ts.send(calls...)
	got := ts.recvAll(8)
	for id, r := range got {
		if id <= 2 || r.GetError() == nil || r.GetError().GetCode() != connect.CodeResourceExhausted.String() ||
			!strings.Contains(r.GetError().GetMessage(), "max-parked") {
			t.Fatalf("claim %d over the limit: %v", id, r)
		}
	}
	<-parked
	<-parked
	if n := started.Load(); n != 2 {
		t.Fatalf("%d ClaimWait goroutines started for 2 claims within the limit", n)
	}
	refusals := func() (lines []map[string]any) {
		for _, l := range logs.lines(t) {
			if l["msg"] == "docket: call failed" && l["code"] == "resource_exhausted" {
				lines = append(lines, l)
			}
		}
		return lines
	}
	if l := refusals(); len(l) != 1 || l[0]["unlogged"] != nil {
		t.Fatalf("8 refusals within a second logged as %v, want one line", l)
	}
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	ts.send(calls[9])
	if r := ts.mustRecv(); r.GetId() != 10 || r.GetError() == nil {
		t.Fatalf("a claim over the limit a second later: %v", r)
	}
	if l := refusals(); len(l) != 2 || l[1]["unlogged"] != float64(7) {
		t.Fatalf("a refusal a second later logged as %v, want a second line with unlogged=7", l)
	}
	ts.send(&v1.Call{Id: 1, Call: &v1.Call_Abandon{Abandon: &v1.Abandon{}}}, &v1.Call{Id: 2, Call: &v1.Call_Abandon{Abandon: &v1.Abandon{}}})
	if got := ts.recvAll(2); got[1].GetClaimWait() == nil || got[2].GetClaimWait() == nil {
		t.Fatalf("the claims within the limit, abandoned: %v", got)
	}
}

// TestSessionFrameRefusals: a frame over the request limit, a length of
// 11 bytes, garbage, and a frame that does not arrive within BodyTimeout
// end the session, each logged once; a call over the engine's element
// limits fails alone.
func TestSessionFrameRefusals(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	s, _ := newTestServer(t, nil, Options{MaxRequestBytes: 1 << 16, BodyTimeout: 300 * time.Millisecond, Logger: logs.logger()})
	addr, _ := serveSessions(t, s)
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"oversized", binary.AppendUvarint(nil, 1<<16+1), "too large"},
		{"11-byte length", bytes.Repeat([]byte{0xff}, 11), "malformed"},
		{"garbage", append(binary.AppendUvarint(nil, 8), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), "malformed"},
		{"slow", append(binary.AppendUvarint(nil, 100), 1), "did not arrive"},
	} {
		ts, w := dialSession(t, addr, "")
		ts.conn.Write(c.b)
		if _, err := ts.recv(); err == nil {
			t.Fatalf("%s: the session goes on", c.name)
		}
		n := 0
		for _, l := range logs.lines(t) {
			if l["req"] == w.GetSession() && l["msg"] == "docket: session ended" {
				n++
				if !strings.Contains(l["err"].(string), c.want) {
					t.Fatalf("%s: logged %v", c.name, l)
				}
			}
		}
		if n != 1 {
			t.Fatalf("%s: logged %d times", c.name, n)
		}
	}
	ts, _ := dialSession(t, addr, "")
	ts.send(&v1.Call{Id: 1, Call: &v1.Call_CompleteBatch{CompleteBatch: &v1.CompleteBatchRequest{}}})
	// 2,000 leases: over the engine's batch limit, refused before decoding.
	call := packedCompleteBatch(2, engine.MaxBatch+1)
	framed := binary.AppendUvarint(nil, uint64(len(call)))
	ts.conn.Write(append(framed, call...))
	got := ts.recvAll(2)
	if e := got[2].GetError(); wire.ItemError(e).Code() != connect.CodeInvalidArgument {
		t.Fatalf("a call over the element limits: %v", got[2])
	}
	ts.send(enqueueCall(3, "q"))
	if r := ts.mustRecv(); r.GetEnqueue() == nil {
		t.Fatalf("the session goes on: %v", r)
	}
}

// packedCompleteBatch is a Call of id id whose CompleteBatch names n
// leases, two bytes each.
func packedCompleteBatch(id uint64, n int) []byte {
	var inner []byte
	for range n {
		inner = append(inner, 0x1a, 0) // leases (field 3), empty
	}
	m, _ := proto.Marshal(&v1.Call{Id: id})
	m = append(m, 0x7a) // field 15, bytes
	m = binary.AppendUvarint(m, uint64(len(inner)))
	return append(m, inner...)
}

// TestSessionLargeFramesTakeTheLargeSlot: a frame past its first MiB is
// read only with the server's large body slot, as an HTTP body is; one
// that cannot get it within BodyTimeout ends its session. The wait's timer
// is the test's (largeTimer), and BodyTimeout generous: the 2 MiB frame
// read once the slot is free is not raced against a short real deadline,
// which a loaded machine missed (the server reset the connection).
func TestSessionLargeFramesTakeTheLargeSlot(t *testing.T) {
	t.Parallel()
	const bodyTimeout = time.Minute
	s, _ := newTestServer(t, nil, Options{BodyTimeout: bodyTimeout})
	waits := make(chan time.Duration, 1)
	expire := make(chan time.Time, 1)
	s.largeTimer = func(d time.Duration) <-chan time.Time {
		waits <- d
		return expire
	}
	addr, _ := serveSessions(t, s)
	ts, _ := dialSession(t, addr, "")
	big := &v1.Call{Id: 1, Call: &v1.Call_KvGet{KvGet: &v1.KVGetRequest{Namespace: sessNS, Key: strings.Repeat("k", 2<<20)}}}
	frame, err := session.AppendFrame(nil, big)
	if err != nil {
		t.Fatal(err)
	}
	s.large <- struct{}{} // another large body is being read
	written := make(chan struct{})
	go func() {
		defer close(written)
		ts.conn.Write(frame) // may fail: the server ends the session with the frame unread
	}()
	select {
	case d := <-waits:
		if d != bodyTimeout {
			t.Fatalf("the large frame waits %v for the slot, not BodyTimeout", d)
		}
	case <-time.After(time.Minute):
		t.Fatal("the large frame did not wait for the slot")
	}
	expire <- time.Now()
	if _, err := ts.recv(); err == nil {
		t.Fatal("a large frame was read without the slot")
	}
	ts.conn.Close()
	<-written
	<-s.large
	ts, _ = dialSession(t, addr, "")
	ts.send(big)
	r := ts.mustRecv()
	if r.GetError() == nil && r.GetKvGet() == nil {
		t.Fatalf("%v", r)
	}
	if len(s.large) != 0 {
		t.Fatal("the large slot is still held")
	}
}

// TestSessionLargeRequestDroppedBeforeItsSlot: a session's reader gives
// back the large body slot only once the request of the large frame it
// read is dropped, so that the next large frame (of this session or
// another) is not read while that request, a copy of the frame's two
// values (of a MiB each, with keys the engine refuses when the call runs),
// is still held. The batch is answered by the reader itself (no fsync to
// wait for), after the slot is given back.
func TestSessionLargeRequestDroppedBeforeItsSlot(t *testing.T) {
	s, _ := newTestServer(t, nil, Options{})
	num := callDesc.Fields().ByName("kv_commit").Number()
	rt := *s.routes[num]
	run := rt.run
	var seen weak.Pointer[v1.KVCommitRequest] // the reader's goroutine only
	ran := 0
	rt.run = func(ctx context.Context, m proto.Message) (proto.Message, error) {
		seen = weak.Make(m.(*v1.KVCommitRequest))
		ran++
		return run(ctx, m)
	}
	s.routes[num] = &rt
	held := make(chan bool, 4)
	s.onLargeReleased = func() {
		runtime.GC()
		held <- seen.Value() != nil
	}
	addr, _ := serveSessions(t, s)
	ts, _ := dialSession(t, addr, "")
	for id := uint64(1); id <= 2; id++ {
		set := &v1.Op{Op: &v1.Op_Set{Set: &v1.SetOp{Key: "", Value: bytes.Repeat([]byte{'v'}, 1<<20)}}}
		ts.send(&v1.Call{Id: id, Call: &v1.Call_KvCommit{KvCommit: &v1.KVCommitRequest{Namespace: sessNS, Ops: []*v1.Op{set, set}}}})
		r := ts.mustRecv()
		if r.GetId() != id || r.GetError().GetCode() != connect.CodeInvalidArgument.String() || ran != int(id) {
			t.Fatalf("call %d (%d run): %v", id, ran, r)
		}
		if <-held {
			t.Fatalf("call %d: the large body slot was given back while the large frame's request was held", id)
		}
	}
	if len(s.large) != 0 {
		t.Fatal("the large slot is still held")
	}
}

// TestSessionRevokedToken: a reload of the tokens that revokes a session's
// token ends its waiting claims and closes it; another caller's session
// goes on.
func TestSessionRevokedToken(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tokens")
	tokA, lineA, _ := NewToken("a", "p/s:all")
	tokB, lineB, _ := NewToken("b", "p/s:all")
	os.WriteFile(file, []byte(lineA+"\n"+lineB+"\n"), 0o600)
	tokens, err := LoadTokens(file)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := newTestServer(t, tokens, Options{MaxWait: time.Hour})
	parked := make(chan struct{}, 1)
	s.onPark = func() { parked <- struct{}{} }
	addr, _ := serveSessions(t, s)
	a, _ := dialSession(t, addr, tokA)
	b, _ := dialSession(t, addr, tokB)
	a.send(&v1.Call{Id: 1, Call: &v1.Call_ClaimWait{ClaimWait: &v1.ClaimWaitRequest{
		Namespace: sessNS, Queue: "q", Owner: "w", Lease: durationpb.New(time.Minute), Max: 1, MaxWait: durationpb.New(time.Hour)}}})
	<-parked
	_, lineA2, _ := NewToken("a", "p/s:all")
	os.WriteFile(file, []byte(lineA2+"\n"+lineB+"\n"), 0o600)
	if err := tokens.Reload(); err != nil {
		t.Fatal(err)
	}
	r, err := a.recv()
	if err == nil {
		if e := r.GetError(); wire.ItemError(e).Code() != connect.CodeUnauthenticated || !strings.Contains(e.GetMessage(), "revoked") {
			t.Fatalf("the waiting claim of a revoked token: %v", r)
		}
		_, err = a.recv()
	}
	if !errors.Is(err, io.EOF) {
		t.Fatalf("the session of a revoked token: %v, want EOF", err)
	}
	b.send(enqueueCall(1, "q"))
	if r := b.mustRecv(); r.GetEnqueue() == nil {
		t.Fatalf("another caller's session: %v", r)
	}
}

// TestSessionLogsCallsAsUnary: a failed call of a session is logged once,
// as the unary call's failure is, with the request id session-call.
func TestSessionLogsCallsAsUnary(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	s, _ := newTestServer(t, nil, Options{Logger: logs.logger()})
	addr, _ := serveSessions(t, s)
	ts, w := dialSession(t, addr, "")
	ts.send(&v1.Call{Id: 41, Call: &v1.Call_Get{Get: &v1.GetRequest{Namespace: sessNS, Queue: "q", Id: 999}}})
	if r := ts.mustRecv(); wire.ItemError(r.GetError()).Code() != connect.CodeNotFound {
		t.Fatalf("%v", r)
	}
	n := 0
	for _, l := range logs.lines(t) {
		if l["msg"] == "docket: call failed" {
			n++
			if l["req"] != w.GetSession()+"-41" || l["procedure"] != docketv1connect.QueuesGetProcedure || l["code"] != "not_found" {
				t.Fatalf("logged %v", l)
			}
		}
	}
	if n != 1 {
		t.Fatalf("the failure was logged %d times", n)
	}
}

// TestSessionCallDeadline: a call's timeout_micros bounds it as the unary
// call's Connect-Timeout-Ms does: a ClaimWait that would wait an hour
// ends within its deadline; a call whose time ran out before it ran is
// answered DeadlineExceeded and changes nothing.
func TestSessionCallDeadline(t *testing.T) {
	t.Parallel()
	s, db := newTestServer(t, nil, Options{MaxWait: time.Hour})
	// Once hold is set, the next call holds the reader until a
	// millisecond has passed.
	var hold atomic.Bool
	s.onCall = func() {
		if hold.Swap(false) {
			for t0 := time.Now(); time.Since(t0) < time.Millisecond; {
				runtime.Gosched()
			}
		}
	}
	addr, _ := serveSessions(t, s)
	ts, _ := dialSession(t, addr, "")
	ts.conn.SetDeadline(time.Now().Add(20 * time.Second)) // not the hour: the test fails, not hangs
	ts.send(&v1.Call{Id: 1, TimeoutMicros: uint64(50 * time.Millisecond / time.Microsecond),
		Call: &v1.Call_ClaimWait{ClaimWait: &v1.ClaimWaitRequest{
			Namespace: sessNS, Queue: "a", Owner: "w", Lease: durationpb.New(time.Minute), Max: 1,
			MaxWait: durationpb.New(time.Hour)}}})
	r := ts.mustRecv()
	if r.GetId() != 1 || len(r.GetClaimWait().GetLeases()) != 0 && r.GetError() == nil {
		t.Fatalf("a ClaimWait past its deadline: %v", r)
	}

	// The first call of the batch holds the reader until the second's
	// microsecond has passed.
	hold.Store(true)
	late := enqueueCall(3, "late")
	late.TimeoutMicros = 1
	ts.send(enqueueCall(2, "q"), late)
	got := ts.recvAll(2)
	if got[2].GetEnqueue() == nil {
		t.Fatalf("the call without a deadline: %v", got[2])
	}
	if e := got[3].GetError(); e == nil || wire.ItemError(e).Code() != connect.CodeDeadlineExceeded {
		t.Fatalf("a call whose deadline passed before it ran: %v", got[3])
	}
	n, err := db.Queue(engine.NS("p", "s"), "late").Counts(context.Background())
	if err != nil || n.Ready != 0 {
		t.Fatalf("the late call ran: %+v, %v", n, err)
	}
}

// TestSessionLargeFramesShareABuffer: the reader holding the large body
// slot reads large frames into the slot's buffer, so a large frame after
// the first, in the same session or another, allocates no buffer of its
// size (each frame used to leave a buffer of its size for the collector,
// and the heap of a server fed large frames grew by several); and a frame
// whose string is over the string limit is refused before it is decoded,
// so it allocates no copy of its string either. Not parallel: it reads the
// process's allocation counter.
func TestSessionLargeFramesShareABuffer(t *testing.T) {
	s, _ := newTestServer(t, nil, Options{})
	addr, _ := serveSessions(t, s)
	const size = 4 << 20
	key := strings.Repeat("k", size) // over the string limit: refused once the frame is read, before it is decoded
	frames := map[uint64][]byte{}    // made before the counting: the client's bytes are not the server's
	for id := uint64(1); id <= 4; id++ {
		f, err := session.AppendFrame(nil, &v1.Call{Id: id, Call: &v1.Call_KvGet{KvGet: &v1.KVGetRequest{Namespace: sessNS, Key: key}}})
		if err != nil {
			t.Fatal(err)
		}
		frames[id] = f
	}
	call := func(ts *testSession, id uint64) {
		t.Helper()
		if _, err := ts.conn.Write(frames[id]); err != nil {
			t.Fatal(err)
		}
		if r := ts.mustRecv(); r.GetId() != id || r.GetError().GetCode() != connect.CodeInvalidArgument.String() {
			t.Fatalf("call %d: %v", id, r)
		}
	}
	a, _ := dialSession(t, addr, "")
	b, _ := dialSession(t, addr, "")
	call(a, 1) // the slot's buffer grows to the frame
	for i, ts := range []*testSession{a, b, a} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		call(ts, uint64(i+2))
		runtime.ReadMemStats(&after)
		if got := after.TotalAlloc - before.TotalAlloc; got > size/4 {
			t.Fatalf("large frame %d allocated %d bytes for a frame of %d: a buffer or a decoded copy of its own", i+2, got, size)
		}
	}
}
