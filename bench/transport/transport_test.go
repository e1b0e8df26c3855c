package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/docketdb/docket/internal/proccpu"
	v1 "github.com/docketdb/docket/proto/docket/v1"
	"google.golang.org/protobuf/proto"
)

// payload is a task's JSON payload of 100 bytes.
var payload = []byte(`{"to":"someone@example.com","template":"welcome","locale":"en-GB","account":1234567,"n":42,"x":"ab"}`)

// outQueue is the capacity of every queue of messages waiting for a
// writer.
const outQueue = 1024

// window is the calls in flight on one connection or stream when
// pipelined.
const window = 1024

// newRequest returns the call with the given id: an enqueue of one task,
// the id in its priority.
func newRequest(id uint64) *v1.EnqueueRequest {
	return &v1.EnqueueRequest{
		Namespace: &v1.Namespace{Project: "acme", Scope: "prod"},
		Queue:     "emails",
		Task:      &v1.Task{Payload: payload, Kind: "email.send", Priority: int64(id)},
	}
}

// answer is the answer to req, which carries its id.
func answer(req *v1.EnqueueRequest) *v1.EnqueueResponse {
	return &v1.EnqueueResponse{Enqueued: &v1.Enqueued{Id: uint64(req.GetTask().GetPriority())}}
}

// answerBatch queues the answers to a batch in reverse order.
func answerBatch(batch []*v1.EnqueueRequest, out chan<- *v1.EnqueueResponse) {
	for i := len(batch) - 1; i >= 0; i-- {
		out <- answer(batch[i])
	}
}

// stats counts what a server received and how: the calls, the batches it
// handed on, and the Read and Write calls on each side's connections.
type stats struct {
	msgs, batches atomic.Int64
	srv, cli      *ioCount
}

type ioCount struct{ reads, writes atomic.Int64 }

func newStats() *stats { return &stats{srv: new(ioCount), cli: new(ioCount)} }

func (s *stats) batch() { s.batches.Add(1) }

type countListener struct {
	net.Listener
	n *ioCount
}

func (l countListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countConn{Conn: c, n: l.n}, nil
}

type countConn struct {
	net.Conn
	n *ioCount
}

func (c *countConn) Read(p []byte) (int, error) {
	c.n.reads.Add(1)
	return c.Conn.Read(p)
}

func (c *countConn) Write(p []byte) (int, error) {
	c.n.writes.Add(1)
	return c.Conn.Write(p)
}

func countDial(n *ioCount) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countConn{Conn: c, n: n}, nil
	}
}

// session is a client's side of one connection or stream: send is called
// from one goroutine and recv from one other.
type session interface {
	send(*v1.EnqueueRequest) error
	recv() (id uint64, err error) // the id the next answer carries
	close() error
}

// roundTrip sends the call id and waits for its answer.
func roundTrip(s session, id uint64) error {
	if err := s.send(newRequest(id)); err != nil {
		return err
	}
	got, err := s.recv()
	if err != nil {
		return err
	}
	if got != id {
		return fmt.Errorf("answer to call %d carries id %d", id, got)
	}
	return nil
}

// pipeline sends calls 0..n-1 with at most inFlight unanswered, and
// receives their answers in any order: each id exactly once.
func pipeline(s session, n, inFlight int) error {
	sem := make(chan struct{}, inFlight)
	errc := make(chan error, 1)
	go func() {
		seen := make([]bool, n)
		for range n {
			id, err := s.recv()
			if err != nil {
				errc <- err
				return
			}
			if id >= uint64(n) || seen[id] {
				errc <- fmt.Errorf("unexpected answer with id %d", id)
				return
			}
			seen[id] = true
			<-sem
		}
		errc <- nil
	}()
	for i := range n {
		select {
		case sem <- struct{}{}:
		case err := <-errc:
			if err == nil {
				err = errors.New("answers ended before the calls")
			}
			return err
		}
		if err := s.send(newRequest(uint64(i))); err != nil {
			return err
		}
	}
	return <-errc
}

// callers makes n calls of call from conc goroutines, call i with id i.
func callers(n, conc int, call func(id uint64) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				id := next.Add(1) - 1
				if id >= int64(n) {
					return
				}
				if err := call(uint64(id)); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

func unaryCall(c *connect.Client[v1.EnqueueRequest, v1.EnqueueResponse]) func(uint64) error {
	return func(id uint64) error {
		resp, err := c.CallUnary(context.Background(), connect.NewRequest(newRequest(id)))
		if err != nil {
			return err
		}
		if got := resp.Msg.GetEnqueued().GetId(); got != id {
			return fmt.Errorf("answer to call %d carries id %d", id, got)
		}
		return nil
	}
}

// TestEcho checks that each path answers a lone round trip and every
// call of a pipelined run with the id of its call.
func TestEcho(t *testing.T) {
	const n = 100
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			st := newStats()
			s := p.open(t, st)
			checkSession(t, s, st, n, p.batched)
		})
	}
	t.Run("unary", func(t *testing.T) {
		st := newStats()
		c, hc := unaryClient(startHTTP(t, false, st).url, 8, st)
		defer hc.CloseIdleConnections()
		if err := callers(n, 8, unaryCall(c)); err != nil {
			t.Fatal(err)
		}
		if got := st.msgs.Load(); got != n {
			t.Errorf("server received %d calls, want %d", got, n)
		}
	})
}

// paths are the sessions measured: a server of each kind and a client
// connected to it.
var paths = []struct {
	name    string
	batched bool // the server hands calls on in batches
	open    func(testing.TB, *stats) session
}{
	{"tcp", false, func(tb testing.TB, st *stats) session {
		return dialTCP(tb, startTCP(tb, false, false, st).addr(), viaWriter, st)
	}},
	{"tcp-batched", true, func(tb testing.TB, st *stats) session {
		return dialTCP(tb, startTCP(tb, true, false, st).addr(), viaWriter, st)
	}},
	// No writing goroutines: each side writes from the goroutine that has
	// the message, the client each call at once.
	{"tcp-inline", false, func(tb testing.TB, st *stats) session {
		return dialTCP(tb, startTCP(tb, false, true, st).addr(), inline, st)
	}},
	// The client writes a call itself when nothing else is in flight and
	// through its writing goroutine otherwise; the server as tcp-inline.
	{"tcp-hybrid", false, func(tb testing.TB, st *stats) session {
		return dialTCP(tb, startTCP(tb, false, true, st).addr(), hybrid, st)
	}},
	{"stream", false, func(tb testing.TB, st *stats) session { return dialStream(tb, startHTTP(tb, false, st).url, st) }},
	{"stream-batched", true, func(tb testing.TB, st *stats) session { return dialStream(tb, startHTTP(tb, true, st).url, st) }},
	{"stream-coalesced", true, func(tb testing.TB, st *stats) session { return dialBatches(tb, startHTTP(tb, false, st).url, st) }},
}

func checkSession(t *testing.T, s session, st *stats, n int, batched bool) {
	t.Helper()
	if err := roundTrip(s, 7); err != nil {
		t.Fatal(err)
	}
	if err := pipeline(s, n, 32); err != nil {
		t.Fatal(err)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	if got := st.msgs.Load(); got != int64(n+1) {
		t.Errorf("server received %d calls, want %d", got, n+1)
	}
	if b := st.batches.Load(); batched && (b < 1 || b > int64(n+1)) {
		t.Errorf("server handed on %d batches for %d calls", b, n+1)
	}
}

// TestReadFrame checks the framing's failure paths: a length over the
// bound is refused before anything is allocated for it, and the end of
// the connection is io.EOF between frames and io.ErrUnexpectedEOF within
// one.
func TestReadFrame(t *testing.T) {
	msg, err := proto.Marshal(newRequest(1))
	if err != nil {
		t.Fatal(err)
	}
	frame := binary.AppendUvarint(nil, uint64(len(msg)))
	frame = append(frame, msg...)
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, io.EOF},
		{"too large", binary.AppendUvarint(nil, maxFrame+1), errFrameTooLarge},
		{"cut in the length", frame[:0:0], io.EOF},
		{"cut in the message", frame[:len(frame)-1], io.ErrUnexpectedEOF},
		{"cut in a long length", []byte{0x80}, io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readFrame(bufio.NewReader(bytes.NewReader(tc.in)), nil)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	r := bufio.NewReader(bytes.NewReader(append(slices.Clone(frame), frame[:3]...)))
	if frameBuffered(r) {
		t.Fatal("a frame reported buffered before any read")
	}
	b, err := readFrame(r, nil)
	if err != nil || !bytes.Equal(b, msg) {
		t.Fatalf("first frame: %v", err)
	}
	if frameBuffered(r) {
		t.Fatal("a partial frame reported buffered")
	}
}

// BenchmarkTransport measures a call on each path: see the package
// comment. µs/msg is wall time per call, cpu-µs/msg the CPU of the whole
// process (both sides) per call, io/msg the Read and Write calls on the
// connections of both sides per call, srv-msgs/read the calls per Read
// on the server's connections, msgs/batch the calls per batch handed on.
func BenchmarkTransport(b *testing.B) {
	for _, p := range paths {
		if !p.batched || p.name == "stream-coalesced" {
			b.Run(p.name+"/lone", func(b *testing.B) {
				st := newStats()
				s := p.open(b, st)
				if err := roundTrip(s, 0); err != nil { // a stream opens on its first message
					b.Fatal(err)
				}
				lone(b, st, func(id uint64) error { return roundTrip(s, id) })
			})
		}
		windows := []int{window}
		if p.name == "tcp" || p.name == "stream-coalesced" {
			windows = []int{16, 128, window}
		}
		for _, w := range windows {
			b.Run(fmt.Sprintf("%s/pipelined-%d", p.name, w), func(b *testing.B) {
				st := newStats()
				s := p.open(b, st)
				if err := roundTrip(s, 0); err != nil {
					b.Fatal(err)
				}
				m := start(b, st)
				if err := pipeline(s, b.N, w); err != nil {
					b.Fatal(err)
				}
				m.report(b)
			})
		}
	}
	for _, conc := range []int{1, 16, window} {
		name := "unary-h1/lone"
		if conc > 1 {
			name = fmt.Sprintf("unary-h1/callers-%d", conc)
		}
		b.Run(name, func(b *testing.B) {
			st := newStats()
			c, hc := unaryClient(startHTTP(b, false, st).url, conc, st)
			b.Cleanup(hc.CloseIdleConnections)
			call := unaryCall(c)
			if err := callers(conc, conc, call); err != nil { // open the connections
				b.Fatal(err)
			}
			if conc == 1 {
				lone(b, st, call)
				return
			}
			m := start(b, st)
			if err := callers(b.N, conc, call); err != nil {
				b.Fatal(err)
			}
			m.report(b)
		})
	}
}

// lone makes b.N calls one after the other and reports their median and
// 99th percentile beside the means.
func lone(b *testing.B, st *stats, call func(id uint64) error) {
	lat := make([]time.Duration, b.N)
	m := start(b, st)
	for i := range b.N {
		t0 := time.Now()
		if err := call(uint64(i)); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	m.report(b)
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2])/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100])/1e3, "p99-µs")
}

// measure holds the counters at the start of a measured run.
type measure struct {
	st                           *stats
	cpu                          time.Duration
	msgs, batches, srvR, ioCalls int64
}

func (m *measure) io() int64 {
	return m.st.srv.reads.Load() + m.st.srv.writes.Load() + m.st.cli.reads.Load() + m.st.cli.writes.Load()
}

// start resets the timer and takes the counters.
func start(b *testing.B, st *stats) *measure {
	m := &measure{st: st}
	b.ReportAllocs()
	b.ResetTimer()
	m.cpu = proccpu.Used()
	m.msgs, m.batches, m.srvR, m.ioCalls = st.msgs.Load(), st.batches.Load(), st.srv.reads.Load(), m.io()
	return m
}

func (m *measure) report(b *testing.B) {
	b.StopTimer()
	n := float64(b.N)
	cpu := proccpu.Used() - m.cpu
	b.ReportMetric(n/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/n, "µs/msg")
	b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/msg")
	b.ReportMetric(float64(m.io()-m.ioCalls)/n, "io/msg")
	msgs := float64(m.st.msgs.Load() - m.msgs)
	if r := m.st.srv.reads.Load() - m.srvR; r > 0 {
		b.ReportMetric(msgs/float64(r), "srv-msgs/read")
	}
	if nb := m.st.batches.Load() - m.batches; nb > 0 {
		b.ReportMetric(msgs/float64(nb), "msgs/batch")
	}
}

// failingWriter fails every write.
type failingWriter struct{ writes int }

func (w *failingWriter) Write([]byte) (int, error) {
	w.writes++
	return 0, errors.New("broken pipe")
}

// TestWriteFramesError checks that a frame writer whose writes fail
// keeps taking messages, so that no sender blocks, writes no more, and
// returns the error once its queue is closed.
func TestWriteFramesError(t *testing.T) {
	out := make(chan *v1.EnqueueRequest) // unbuffered: each send waits for the writer
	w := &failingWriter{}
	done := make(chan error, 1)
	go func() { done <- writeFrames(w, out) }()
	for i := range 3 {
		select {
		case out <- newRequest(uint64(i)): // each flushes: the queue is empty behind it
		case err := <-done:
			t.Fatalf("the writer returned (%v) before its queue was closed: its senders would block", err)
		}
	}
	close(out)
	if err := <-done; err == nil {
		t.Fatal("no error from a writer whose writes fail")
	}
	if w.writes != 1 {
		t.Errorf("%d writes, want 1: none after the first failed", w.writes)
	}
}
