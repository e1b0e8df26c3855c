package session

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/proto"

	v1 "github.com/docketdb/docket/proto/docket/v1"
)

func call(id uint64, queue string) *v1.Call {
	return &v1.Call{Id: id, Call: &v1.Call_Enqueue{Enqueue: &v1.EnqueueRequest{Queue: queue}}}
}

func TestFramesRoundTrip(t *testing.T) {
	var b []byte
	var err error
	for i := range 100 {
		if b, err = AppendFrame(b, call(uint64(i), string(bytes.Repeat([]byte("q"), i*3)))); err != nil {
			t.Fatal(err)
		}
	}
	r := bufio.NewReaderSize(bytes.NewReader(b), BufSize) // every frame fits: the first read buffers them all
	var buf []byte
	for i := range 100 {
		if i > 0 && !FrameBuffered(r) {
			t.Fatalf("frame %d: not reported buffered", i)
		}
		f, err := ReadFrame(r, 1<<10, buf)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		buf = f
		var c v1.Call
		if err := proto.Unmarshal(f, &c); err != nil {
			t.Fatal(err)
		}
		if c.GetId() != uint64(i) || len(c.GetEnqueue().GetQueue()) != i*3 {
			t.Fatalf("frame %d: got id %d, queue of %d bytes", i, c.GetId(), len(c.GetEnqueue().GetQueue()))
		}
	}
	if FrameBuffered(r) {
		t.Fatal("a frame reported buffered after the last")
	}
	if _, err := ReadFrame(r, 1<<10, buf); err != io.EOF {
		t.Fatalf("at the end: %v, want io.EOF", err)
	}
}

// TestReadFrameRefuses checks that each malformed or oversized input is
// refused with its error, and that an oversized length is refused before
// its bytes are read or allocated.
func TestReadFrameRefuses(t *testing.T) {
	big := binary.AppendUvarint(nil, 1<<40)
	for _, c := range []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, io.EOF},
		{"cut length", []byte{0x80}, io.ErrUnexpectedEOF},
		{"cut body", append(binary.AppendUvarint(nil, 10), 1, 2, 3), io.ErrUnexpectedEOF},
		{"over the bound", append(binary.AppendUvarint(nil, 1025), make([]byte, 1025)...), ErrFrameTooLarge},
		{"a huge length, nothing after", big, ErrFrameTooLarge},
		{"an eleven-byte uvarint", bytes.Repeat([]byte{0xff}, 11), ErrBadFrame},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := &countingReader{r: bytes.NewReader(c.in)}
			_, err := ReadFrame(bufio.NewReaderSize(src, 16), 1024, nil)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if c.want == ErrFrameTooLarge && src.n > 16 {
				t.Fatalf("read %d bytes of a frame over the bound", src.n)
			}
		})
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestReadMessageRefusesGarbage(t *testing.T) {
	b := binary.AppendUvarint(nil, 3)
	b = append(b, 0xff, 0xff, 0xff) // not a protobuf message
	err := ReadMessage(bufio.NewReader(bytes.NewReader(b)), 100, &v1.Hello{})
	if !errors.Is(err, ErrBadFrame) {
		t.Fatalf("got %v, want ErrBadFrame", err)
	}
}

func TestIsPreface(t *testing.T) {
	for in, want := range map[string]bool{
		Preface:                  true,
		Preface + "rest":         true,
		"DKT":                    false,
		"DKT\x02":                false,
		"POST":                   false,
		"PRI * HTTP/2.0":         false,
		"\x16\x03\x01\x00":       false,
		"GET / HTTP/1.1\r\n\r\n": false,
	} {
		if got := IsPreface([]byte(in)); got != want {
			t.Errorf("IsPreface(%q) = %v, want %v", in, got, want)
		}
	}
}

// TestWriterCoalesces: while one sender's write is under way (held until
// the others are done), the frames of seven other senders queue behind it
// and leave in the writes that follow; every frame arrives whole, once.
func TestWriterCoalesces(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	gate, entered := make(chan struct{}), make(chan struct{})
	writes := &countingWriter{w: a, gate: gate, entered: entered}
	w := NewWriter(writes)
	const senders, each = 8, 200
	got := make(chan map[uint64]int, 1)
	go func() {
		seen := map[uint64]int{}
		r := bufio.NewReader(b)
		for range senders * each {
			var c v1.Call
			if err := ReadMessage(r, 1<<10, &c); err != nil {
				t.Error(err)
				break
			}
			seen[c.GetId()]++
		}
		got <- seen
	}()
	first := make(chan error, 1)
	go func() { first <- w.Send(call(0, "q")) }()
	<-entered // the first write is under way, held
	var wg sync.WaitGroup
	for s := 1; s < senders; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := w.Send(call(uint64(s*each+i), "q")); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait() // every frame of theirs handed to the writing sender
	close(gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	queued := writes.count()
	for i := 1; i < each; i++ {
		if err := w.Send(call(uint64(i), "q")); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Wait(); err != nil {
		t.Fatal(err)
	}
	seen := <-got
	if len(seen) != senders*each {
		t.Fatalf("%d distinct frames arrived, want %d", len(seen), senders*each)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("frame %d arrived %d times", id, n)
		}
	}
	if queued > 2 {
		t.Fatalf("%d writes carried the first frame and the %d queued behind it", queued, (senders-1)*each)
	}
}

type countingWriter struct {
	w       io.Writer
	gate    chan struct{} // if set, the first write waits for it to close
	entered chan struct{} // if set, closed as the first write starts
	mu      sync.Mutex
	n       int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.n++
	first := c.n == 1
	c.mu.Unlock()
	if first && c.entered != nil {
		close(c.entered)
	}
	if first && c.gate != nil {
		<-c.gate
	}
	return c.w.Write(p)
}

func (c *countingWriter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

type failingWriter struct{ err error }

func (f failingWriter) Write(p []byte) (int, error) { return 0, f.err }

func TestWriterKeepsTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	w := NewWriter(failingWriter{boom})
	if err := w.Send(call(1, "q")); !errors.Is(err, boom) {
		t.Fatalf("first send: %v, want boom", err)
	}
	if err := w.Send(call(2, "q")); !errors.Is(err, boom) {
		t.Fatalf("second send: %v, want boom", err)
	}
	if err := w.Err(); !errors.Is(err, boom) {
		t.Fatalf("Err: %v", err)
	}
}

func TestWriterRefusesAMessageItCannotEncode(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out)
	bad := &v1.Call{Id: 1, Call: &v1.Call_Enqueue{Enqueue: &v1.EnqueueRequest{Queue: "\xff"}}} // not UTF-8
	if err := w.Send(bad); err == nil {
		t.Fatal("a message with invalid UTF-8 was encoded")
	}
	if err := w.Send(call(2, "q")); err != nil {
		t.Fatalf("the next send: %v", err)
	}
	var c v1.Call
	if err := ReadMessage(bufio.NewReader(&out), 100, &c); err != nil || c.GetId() != 2 {
		t.Fatalf("read %v, %v: want call 2 alone", c.GetId(), err)
	}
}

func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{})
	f.Add(binary.AppendUvarint(nil, 5))
	b, _ := AppendFrame(nil, call(7, "queue"))
	f.Add(b)
	f.Add(bytes.Repeat([]byte{0xff}, 12))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bufio.NewReaderSize(bytes.NewReader(in), 16)
		var buf []byte
		read := 0
		for {
			buffered := FrameBuffered(r)
			f, err := ReadFrame(r, 64, buf)
			if err != nil {
				if buffered {
					t.Fatalf("a frame reported buffered failed to read: %v", err)
				}
				return
			}
			if len(f) > 64 {
				t.Fatalf("a frame of %d bytes passed a bound of 64", len(f))
			}
			read += len(f)
			if read > len(in) {
				t.Fatalf("read %d bytes of frames from %d bytes", read, len(in))
			}
			buf = f
		}
	})
}

// gateWriter blocks its first Write until release is closed.
type gateWriter struct {
	release  chan struct{}
	mu       sync.Mutex
	first    bool
	returned bool // the first Write returned
	n        int
}

func (g *gateWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	first := !g.first
	g.first = true
	g.mu.Unlock()
	if first {
		<-g.release
	}
	g.mu.Lock()
	g.returned = true
	g.n += len(p)
	g.mu.Unlock()
	return len(p), nil
}

// TestWriterBoundsWhatQueues checks that a sender finding maxPending bytes
// queued behind a write waits for that write instead of queueing more, and
// that SendFrames writes frames encoded beforehand, in order.
func TestWriterBoundsWhatQueues(t *testing.T) {
	g := &gateWriter{release: make(chan struct{})}
	w := NewWriter(g)
	first := make(chan error, 1)
	go func() { first <- w.Send(call(1, "q")) }()
	// Once the first sender writes, frames queue behind it.
	for {
		w.mu.Lock()
		writing := w.writing
		w.mu.Unlock()
		if writing {
			break
		}
		runtime.Gosched()
	}
	var big []byte
	for len(big) < maxPending {
		var err error
		if big, err = AppendFrame(big, call(2, string(bytes.Repeat([]byte("q"), 60000)))); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.SendFrames(big); err != nil { // queued at once: under the bound when it came
		t.Fatal(err)
	}
	third := make(chan bool, 1)
	var thirdDone atomic.Bool
	go func() {
		w.Send(call(3, "q"))
		thirdDone.Store(true)
		g.mu.Lock()
		third <- g.returned
		g.mu.Unlock()
	}()
	for !thirdDone.Load() { // the third sender returns, or waits for room
		w.mu.Lock()
		waiting := w.waiting
		w.mu.Unlock()
		if waiting > 0 {
			break
		}
		runtime.Gosched()
	}
	close(g.release)
	if !<-third {
		t.Fatal("a sender past the bound queued its frame before the write under way ended")
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	w.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	one, _ := AppendFrame(nil, call(1, "q"))
	three, _ := AppendFrame(nil, call(3, "q"))
	if g.n != len(one)+len(big)+len(three) {
		t.Fatalf("wrote %d bytes, want %d", g.n, len(one)+len(big)+len(three))
	}
}

// TestReadBodyHoldsWhatArrived: a frame that announces more bytes than
// arrive makes the reader allocate about what arrived, not the length it
// announced.
func TestReadBodyHoldsWhatArrived(t *testing.T) {
	src := append(binary.AppendUvarint(nil, 8<<20), bytes.Repeat([]byte{1}, 1000)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := bufio.NewReaderSize(bytes.NewReader(src), BufSize)
	_, err := ReadFrame(r, 16<<20, nil)
	runtime.ReadMemStats(&after)
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("a frame cut short: %v", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Fatalf("%d bytes allocated for a frame of which 1,000 bytes came", got)
	}
	// A whole large frame still reads.
	big := bytes.Repeat([]byte{7}, 3<<20+5)
	src = append(binary.AppendUvarint(nil, uint64(len(big))), big...)
	b, err := ReadFrame(bufio.NewReaderSize(bytes.NewReader(src), BufSize), 16<<20, nil)
	if err != nil || !bytes.Equal(b, big) {
		t.Fatalf("a large frame: %d bytes, %v", len(b), err)
	}
}

// TestSendLaterCoalescesAPipelinedSender: one goroutine sending call
// after call with SendLater has them written in fewer writes than calls,
// whole and in order; Wait returns once they are written; a failed write
// left to the Writer's goroutine is told to OnFail.
func TestSendLaterCoalescesAPipelinedSender(t *testing.T) {
	for _, send := range laterSends {
		t.Run(send.name, func(t *testing.T) { coalescesAPipelinedSender(t, send.f) })
	}
}

func coalescesAPipelinedSender(t *testing.T, send func(*Writer, proto.Message) error) {
	a, b := net.Pipe()
	defer a.Close()
	writes := &countingWriter{w: a}
	w := NewWriter(writes)
	const n = 2000
	got := make(chan error, 1)
	go func() {
		r := bufio.NewReader(b)
		for i := range n {
			var c v1.Call
			if err := ReadMessage(r, 1<<10, &c); err != nil {
				got <- err
				return
			}
			if c.GetId() != uint64(i) {
				got <- fmt.Errorf("frame %d has id %d", i, c.GetId())
				return
			}
		}
		got <- nil
	}()
	for i := range n {
		if err := send(w, call(uint64(i), "q")); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if k := writes.count(); k >= n {
		t.Fatalf("%d writes for %d frames sent one after another: none coalesced", k, n)
	}

	boom := errors.New("boom")
	f := NewWriter(failingWriter{boom})
	failed := make(chan error, 1)
	f.OnFail(func(err error) { failed <- err })
	if err := send(f, call(1, "q")); err != nil {
		t.Fatalf("the send returned the write's error itself: %v", err)
	}
	if err := <-failed; !errors.Is(err, boom) {
		t.Fatalf("OnFail got %v", err)
	}
	if err := send(f, call(2, "q")); !errors.Is(err, boom) {
		t.Fatalf("a send after the failure: %v", err)
	}
}

// TestSendLaterCoalescesSendersWokenTogether: senders made runnable
// together (callers whose answers one read delivered, each sending its
// next call) share a write, rather than the Writer's goroutine, run next
// after the first of them, writing that one's frame alone. One P makes the
// order of the goroutines the scheduler's own, not the machine's.
// SendFramesLater does the same for frames encoded already (a server's
// replies to calls a replicated log answered together).
func TestSendLaterCoalescesSendersWokenTogether(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, send := range laterSends {
		t.Run(send.name, func(t *testing.T) { coalescesSendersWokenTogether(t, send.f) })
	}
}

// laterSends are the Writer's two ways of leaving a frame to its goroutine.
var laterSends = []struct {
	name string
	f    func(*Writer, proto.Message) error
}{
	{"SendLater", (*Writer).SendLater},
	{"SendFramesLater", func(w *Writer, m proto.Message) error {
		b, err := AppendFrame(nil, m)
		if err != nil {
			return err
		}
		return w.SendFramesLater(b)
	}},
}

func coalescesSendersWokenTogether(t *testing.T, send func(*Writer, proto.Message) error) {
	const senders = 16
	for round := range 5 {
		writes := &countingWriter{w: io.Discard}
		w := NewWriter(writes)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for s := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if err := send(w, call(uint64(s), "q")); err != nil {
					t.Error(err)
				}
			}()
		}
		runtime.Gosched() // every sender waits on start
		close(start)
		wg.Wait()
		if err := w.Wait(); err != nil {
			t.Fatal(err)
		}
		if k := writes.count(); k > senders/4 {
			t.Fatalf("round %d: %d writes for the frames of %d senders woken together", round, k, senders)
		}
	}
}
