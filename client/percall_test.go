package client

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/docketdb/docket/engine"
	"github.com/docketdb/docket/internal/session"
	v1 "github.com/docketdb/docket/proto/docket/v1"
)

// serveLean answers every call read from br as an Enqueue of task 7, with
// buffers reused: a session server that allocates nothing per call.
func serveLean(nc net.Conn, br *bufio.Reader) {
	tmpl, err := proto.Marshal(enqueued(0, 7, false))
	if err != nil {
		panic(err)
	}
	var buf, out []byte
	for {
		f, err := session.ReadFrame(br, 1<<20, buf)
		if err != nil {
			return
		}
		buf = f
		id, ok := callID(f)
		if !ok {
			return
		}
		n := protowire.SizeTag(1) + protowire.SizeVarint(id) + len(tmpl)
		out = binary.AppendUvarint(out[:0], uint64(n))
		out = protowire.AppendTag(out, 1, protowire.VarintType)
		out = protowire.AppendVarint(out, id)
		out = append(out, tmpl...)
		if _, err := nc.Write(out); err != nil {
			return
		}
	}
}

// callID is the id (field 1) of a Call's bytes.
func callID(b []byte) (uint64, bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, false
		}
		b = b[n:]
		if num == 1 && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			return v, n > 0
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return 0, false
		}
		b = b[n:]
	}
	return 0, false
}

// TestEnqueueAsyncAllocations: an EnqueueAsync on a session, answered,
// allocates its own state once (the request, the call, its place among
// the pending calls, its bound and the Reply its answer is decoded into,
// in one), with no timer or closures of its own: at most 6 allocations
// with its answer, of which the engine's Pending takes 4 (it took 21).
func TestEnqueueAsyncAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	f := newFakeSession(t, nil)
	f.lean = true
	c := dial(t, f.url, Options{})
	q := c.Queue(engine.NS("acme", "prod"), "q")
	ctx := context.Background()
	task := engine.Task{Payload: []byte(`{"to":"a@b"}`)}
	call := func() {
		e, err := q.EnqueueAsync(ctx, task).Wait(ctx)
		if err != nil || e.ID != 7 {
			t.Fatalf("%+v, %v", e, err)
		}
	}
	call() // the session opened
	if n := testing.AllocsPerRun(500, call); n > 6 {
		t.Errorf("an answered EnqueueAsync allocates %.1f times, want at most 6", n)
	}
}

// TestEnqueueAsyncOddReplies: the Reply an EnqueueAsync's answer is
// decoded into does not make an answer of it that is none: a Reply of
// another kind, or of none, fails the call as it did; an error is the
// server's error; a proper answer after them is read whole.
func TestEnqueueAsyncOddReplies(t *testing.T) {
	f := newFakeSession(t, func(sc *fakeConn, c *v1.Call) {
		switch c.GetEnqueue().GetTask().GetKind() {
		case "none":
			sc.reply(&v1.Reply{Id: c.GetId()})
		case "other":
			sc.reply(&v1.Reply{Id: c.GetId(), Reply: &v1.Reply_Claim{Claim: &v1.ClaimResponse{}}})
		case "error":
			sc.reply(&v1.Reply{Id: c.GetId(), Reply: &v1.Reply_Error{Error: &v1.ItemError{Code: "not_found", Message: "no such queue"}}})
		case "dedup":
			sc.reply(enqueued(c.GetId(), 5, true))
		default:
			sc.reply(enqueued(c.GetId(), 6, false))
		}
	})
	c := dial(t, f.url, Options{MaxRetries: 1})
	q := c.Queue(engine.NS("acme", "prod"), "q")
	ctx := context.Background()
	for _, kind := range []string{"none", "other"} {
		if e, err := q.EnqueueAsync(ctx, engine.Task{Kind: kind}).Wait(ctx); err == nil || !strings.Contains(err.Error(), "answered call") {
			t.Fatalf("a Reply of kind %q: %+v, %v", kind, e, err)
		}
	}
	if _, err := q.EnqueueAsync(ctx, engine.Task{Kind: "error"}).Wait(ctx); err == nil || !strings.Contains(err.Error(), "no such queue") {
		t.Fatalf("an error Reply: %v", err)
	}
	if e, err := q.EnqueueAsync(ctx, engine.Task{Kind: "dedup"}).Wait(ctx); err != nil || e.ID != 5 || !e.Deduplicated {
		t.Fatalf("a deduplicated answer: %+v, %v", e, err)
	}
	if e, err := q.EnqueueAsync(ctx, engine.Task{}).Wait(ctx); err != nil || e.ID != 6 || e.Deduplicated {
		t.Fatalf("an answer: %+v, %v", e, err)
	}
}

// TestEnqueueAsyncCallTimeout: an EnqueueAsync whose server takes the
// call and never answers is cut by CallTimeout (the connection's timer):
// an unkeyed one fails as ErrOutcomeUnknown, and nothing of it is left
// pending on the connection.
func TestEnqueueAsyncCallTimeout(t *testing.T) {
	f := newFakeSession(t, func(sc *fakeConn, c *v1.Call) {})
	c := dial(t, f.url, Options{CallTimeout: 50 * time.Millisecond, MaxRetries: 1})
	q := c.Queue(engine.NS("acme", "prod"), "q")
	ctx := context.Background()
	ps := make([]*engine.Pending, 3)
	for i := range ps {
		ps[i] = q.EnqueueAsync(ctx, engine.Task{})
	}
	for i, p := range ps {
		_, err := p.Wait(ctx)
		wantErr(t, "an unanswered async enqueue "+string(rune('0'+i)), err, ErrOutcomeUnknown)
	}
	h := c.sessionHost(f.url)
	h.mu.Lock()
	conn := h.conn
	h.mu.Unlock()
	if conn != nil {
		conn.mu.Lock()
		n, d := len(conn.pending), conn.deadlines.len()
		conn.mu.Unlock()
		if n != 0 || d != 0 {
			t.Fatalf("%d calls pending, %d bounds kept after every call ended", n, d)
		}
	}
}

// TestSessionBoundsOfAnsweredAndUnansweredCalls: calls in flight together,
// some answered and some not: each answered one gets its answer, each
// unanswered one errNoAnswer once its bound passes, though the timer was
// set for a call answered long before.
func TestSessionBoundsOfAnsweredAndUnansweredCalls(t *testing.T) {
	f := newFakeSession(t, func(sc *fakeConn, c *v1.Call) {
		if c.GetId()%2 == 0 {
			sc.reply(enqueued(c.GetId(), c.GetId(), false))
		}
	})
	c := dial(t, f.url, Options{})
	h := c.sessionHost(f.url)
	conn, err := h.get(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	chs := make([]chanReply, n)
	for i := range chs {
		chs[i] = make(chanReply, 1)
		call := &v1.Call{Call: &v1.Call_Enqueue{Enqueue: &v1.EnqueueRequest{Queue: "q"}}}
		// The answered calls have the soonest bounds: the timer is set
		// for one of them, and fires after its answer.
		bound := 30 * time.Millisecond
		if i%2 == 0 {
			bound = 20 * time.Millisecond
		}
		if _, _, err := conn.send(call, &pendingCall{to: chs[i]}, bound, false); err != nil {
			t.Fatal(err)
		}
	}
	for i, ch := range chs {
		r := <-ch
		id := uint64(i + 1)
		if id%2 == 0 {
			if r.err != nil || r.r.GetEnqueue().GetEnqueued().GetId() != id {
				t.Fatalf("call %d: %v, %v", id, r.r, r.err)
			}
			continue
		}
		if !errors.Is(r.err, errNoAnswer) {
			t.Fatalf("unanswered call %d: %v, %v", id, r.r, r.err)
		}
	}
	conn.mu.Lock()
	defer conn.mu.Unlock()
	if len(conn.pending) != 0 || conn.deadlines.len() != 0 {
		t.Fatalf("%d calls pending, %d bounds kept", len(conn.pending), conn.deadlines.len())
	}
}

// TestBoundLists: whatever the mix of bounds, of calls added and taken
// out, each bound's list holds its calls in the order they were added,
// linked both ways; soonest is the soonest of their bounds; a list that
// empties goes unless it is one of at most keepLists kept.
func TestBoundLists(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var ls boundLists
	var in []*pendingCall
	var clock int64
	for range 5000 {
		if len(in) > 0 && r.IntN(3) == 0 {
			i := r.IntN(len(in))
			p := in[i]
			ls.remove(p)
			if p.list != nil || p.prev != nil || p.next != nil {
				t.Fatal("a call taken out keeps its links")
			}
			in = append(in[:i], in[i+1:]...)
		} else {
			clock += r.Int64N(3)
			bound := time.Duration(1+r.IntN(8)) * time.Second
			p := &pendingCall{at: clock + int64(bound), bound: bound}
			ls.add(p)
			in = append(in, p)
		}
		var soonest int64
		n, empty := 0, 0
		for b, l := range ls {
			var prev *pendingCall
			for p := l.head; p != nil; p = p.next {
				if p.list != l || p.prev != prev || p.bound != b || (prev != nil && prev.at > p.at) {
					t.Fatalf("bound %v: a call out of place", b)
				}
				if soonest == 0 || p.at < soonest {
					soonest = p.at
				}
				prev, n = p, n+1
			}
			if l.tail != prev {
				t.Fatalf("bound %v: the tail is not the last call", b)
			}
			if l.head == nil {
				empty++
			}
		}
		if empty > keepLists {
			t.Fatalf("%d empty lists kept, want at most %d", empty, keepLists)
		}
		if n != len(in) || ls.len() != n || ls.soonest() != soonest {
			t.Fatalf("%d calls in the lists (len %d), %d added; soonest %d, want %d", n, ls.len(), len(in), ls.soonest(), soonest)
		}
	}
}
