package session

import (
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"
)

// loopback returns the two ends of a TCP connection on 127.0.0.1.
func loopback(t *testing.T) (a, b net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	a, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b = <-got
	if b == nil {
		t.FailNow()
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// waitFor asks peek until it says readable (what was sent crosses
// loopback), for at most ten seconds.
func waitFor(t *testing.T, peek func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !peek() {
		if time.Now().After(deadline) {
			t.Fatalf("%s never seen", what)
		}
		runtime.Gosched()
	}
}

func needProcs(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("a Poller polls only with two processors or more")
	}
}

// TestPeekSeesWhatAReadWould: a Peek says ready exactly when a read would
// not wait (bytes there, the peer gone, the connection closed), leaves
// the bytes for the read, and names the end: io.EOF once the peer closed,
// an error once the connection is closed here.
func TestPeekSeesWhatAReadWould(t *testing.T) {
	t.Parallel()
	a, b := loopback(t)
	pk := NewPeek(b)
	if pk == nil {
		t.Skip("no peek on this platform")
	}
	peek := func() bool { ready, _ := pk.Ask(); return ready }
	if ready, err := pk.Ask(); ready || err != nil {
		t.Fatalf("nothing sent: ready %v, %v", ready, err)
	}
	if _, err := a.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, peek, "the bytes sent")
	if _, err := pk.Ask(); err != nil {
		t.Fatalf("bytes there: %v", err)
	}
	buf := make([]byte, 2)
	if n, err := b.Read(buf); err != nil || string(buf[:n]) != "hi" {
		t.Fatalf("read after the peek: %q %v", buf[:n], err)
	}
	if peek() {
		t.Fatal("ready once the bytes were read")
	}
	a.Close()
	waitFor(t, peek, "the peer's end")
	if _, err := pk.Ask(); !errors.Is(err, io.EOF) {
		t.Fatalf("the peer closed: %v, want io.EOF", err)
	}
	b.Close()
	if ready, err := pk.Ask(); !ready || err == nil {
		t.Fatalf("closed here: ready %v, %v; want ready and an error", ready, err)
	}
	pa, pb := net.Pipe()
	defer pa.Close()
	defer pb.Close()
	if NewPeek(pa) != nil {
		t.Fatal("a Peek of a pipe")
	}
}

// TestNewPollerRefuses: no Poller without a budget, on what is not a
// socket, or with one processor.
func TestNewPollerRefuses(t *testing.T) {
	a, _ := loopback(t)
	if p := NewPoller(a, 0, nil, new(Streak)); p != nil {
		t.Error("a Poller with no budget")
	}
	if p := NewPoller(a, -time.Microsecond, nil, new(Streak)); p != nil {
		t.Error("a Poller with a negative budget")
	}
	pa, pb := net.Pipe()
	defer pa.Close()
	defer pb.Close()
	if p := NewPoller(pa, time.Millisecond, nil, new(Streak)); p != nil {
		t.Error("a Poller of a pipe")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	if p := NewPoller(a, time.Millisecond, nil, new(Streak)); p != nil {
		t.Error("a Poller with one processor")
	}
	var nilPoller *Poller
	nilPoller.Poll()
	nilPoller.Waited()
	if nilPoller.Polls() != 0 {
		t.Error("a nil Poller polled")
	}
}

// TestPollWaitsForBytesWithinItsBudget: Poll returns once bytes are
// there, or once its budget has passed without them.
func TestPollWaitsForBytesWithinItsBudget(t *testing.T) {
	needProcs(t)
	t.Parallel()
	a, b := loopback(t)
	p := NewPoller(b, 2*time.Millisecond, nil, new(Streak))
	if p == nil {
		t.Skip("no peek on this platform")
	}
	lone(p)
	p.Poll()
	if waited := time.Since(p.start); waited < 2*time.Millisecond {
		t.Fatalf("Poll returned after %v with nothing sent, before its budget", waited)
	}
	if p.Polls() != 1 {
		t.Fatalf("%d polls, want 1", p.Polls())
	}
	p.Waited() // a short wait (within three budgets): the next polls

	p.budget = time.Minute
	if _, err := a.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	p.Poll() // returns as the byte lands, long before its budget
	if !p.peek() {
		t.Fatal("Poll returned before the byte was readable")
	}
	if p.Polls() != 2 {
		t.Fatalf("%d polls, want 2", p.Polls())
	}
	p.Waited()
}

// lone tells p that LoneStreak calls came one at a time.
func lone(p *Poller) {
	for range LoneStreak {
		p.lones.Record(true)
	}
}

// TestPollOnlyForLoneCalls: a Poller polls once LoneStreak calls in a row
// came alone, and a call that was not alone starts the count again.
func TestPollOnlyForLoneCalls(t *testing.T) {
	needProcs(t)
	t.Parallel()
	p := &Poller{peek: func() bool { return true }, budget: time.Millisecond, lones: new(Streak)}
	for i := range LoneStreak {
		p.Poll()
		if p.Polls() != 0 || p.lones.Steady() {
			t.Fatalf("polled (or steady) after %d lone calls, before %d", i, LoneStreak)
		}
		p.lones.Record(true)
	}
	p.Poll()
	if p.Polls() != 1 {
		t.Fatalf("after %d lone calls: %d polls, want 1", LoneStreak, p.Polls())
	}
	p.lones.Record(true) // more lone calls keep it polling
	p.Poll()
	if p.Polls() != 2 {
		t.Fatalf("%d polls, want 2", p.Polls())
	}
	p.lones.Record(false)
	p.Poll()
	if p.Polls() != 2 {
		t.Fatal("polled right after a call that was not alone")
	}
	lone(p)
	p.Poll()
	if p.Polls() != 3 {
		t.Fatalf("%d polls after another streak, want 3", p.Polls())
	}
}

// TestPollOnlyAfterShortWaits: after a wait longer than pollWindow
// budgets the next is not polled; after a short one it is. And no more
// Pollers poll at once than their Gate lets.
func TestPollOnlyAfterShortWaits(t *testing.T) {
	needProcs(t)
	t.Parallel()
	var peeks int
	p := &Poller{peek: func() bool { peeks++; return true }, budget: time.Millisecond, lones: new(Streak)}
	lone(p)
	p.start = time.Now().Add(-time.Second) // a wait of a second
	p.Waited()
	p.Poll()
	if peeks != 0 || p.Polls() != 0 {
		t.Fatalf("polled after a wait of a second: %d peeks", peeks)
	}
	p.start = time.Now() // a short wait
	p.Waited()
	p.Poll()
	if peeks != 1 || p.Polls() != 1 {
		t.Fatalf("after a short wait: %d peeks, %d polls; want 1, 1", peeks, p.Polls())
	}
	p.last = pollWindow * p.budget // at the window's edge: still polled
	p.Poll()
	if p.Polls() != 2 {
		t.Fatalf("at the window's edge: %d polls, want 2", p.Polls())
	}

	g := NewGate(1)
	p.gate = g
	if !g.enter() { // another Poller polls
		t.Fatal("an empty gate refused")
	}
	p.Poll()
	if p.Polls() != 2 {
		t.Fatal("polled while the gate was full")
	}
	g.leave()
	p.Poll()
	if p.Polls() != 3 {
		t.Fatal("did not poll once the gate had room")
	}
	if g.n.Load() != 0 {
		t.Fatalf("the gate holds %d after the polls ended", g.n.Load())
	}
	if got, want := NewGate(0).max, int32(max(runtime.GOMAXPROCS(0)-1, 1)); got != want {
		t.Fatalf("NewGate(0) lets %d poll, want %d", got, want)
	}
}
