package session

import (
	"net"
	"runtime"
	"sync/atomic"
	"time"
)

// DefaultBusyPoll is how long a side of a session that waits for the
// other's next frame asks its socket in a loop, without blocking, before
// its read parks the goroutine.
//
// Why: a read that finds nothing parks its goroutine, and once no
// goroutine of the process has work, its thread sleeps and its processor
// may halt. The frame that arrives then has to wake a halted processor,
// which on a virtual machine costs tens of microseconds each way: on a
// two-core VM a lone call between two processes on different processors
// took 70 µs where the same bytes between two processes on one processor
// took 20 µs. A side that asks in a loop for a while keeps its processor
// awake, and the frame is found as it lands: 8 µs with both sides asking.
const DefaultBusyPoll = 50 * time.Microsecond

// LoneStreak is how many lone calls in a row (Streak) say that a client
// calls one at a time, waiting for each answer: a Poller polls only then.
// A client with several callers has moments with one call in flight, and
// polling then takes a processor from the others' work, where a client
// that calls one at a time has nothing else to run.
const LoneStreak = 8

// Streak counts the calls in a row that were alone on a connection (no
// other call in flight, none read with it), up to LoneStreak. Its methods
// may be called by several goroutines.
type Streak struct{ n atomic.Int32 }

// Record records whether the call just sent or read was alone.
func (s *Streak) Record(lone bool) {
	if !lone {
		s.n.Store(0)
	} else if s.n.Load() < LoneStreak {
		s.n.Add(1)
	}
}

// Steady reports whether the last LoneStreak calls were each alone: the
// client calls one at a time.
func (s *Streak) Steady() bool { return s.n.Load() >= LoneStreak }

// pollWindow is how long, as a multiple of a Poller's budget, the last
// wait may have taken for the next to be polled: a wait that took longer
// says the peer is not answering at once, and polling would mostly
// spend a processor for nothing. A wait not polled that a halted
// processor slowed (tens of microseconds more) still falls within it.
const pollWindow = 3

// Poller waits a little for a connection to become readable, asking its
// socket in a loop without blocking, before a read that would park the
// goroutine: see DefaultBusyPoll. It polls only once the connection's
// calls have come one at a time for a while (its Streak is steady), when
// the wait before the last read was short (the peer answers at once), and
// only while the Gate it shares with other Pollers has room. One goroutine
// at a time uses it (the connection's reader).
type Poller struct {
	peek   func() bool // reports whether a read would return at once
	budget time.Duration
	gate   *Gate
	lones  *Streak       // the connection's lone calls
	start  time.Time     // when the wait under way began (Poll)
	last   time.Duration // the last wait (Waited)
	polls  atomic.Int64  // Polls that asked the socket (tests)
}

// NewPoller returns a Poller of nc that asks for at most budget, within
// gate's room, once lones (the connection's, which its owner records) is
// steady; nil (whose methods do nothing) if budget is not positive,
// nc is not a socket, or the process has one processor (a loop would
// only hold off the goroutines the network wakes). Under TLS it asks the
// socket beneath: bytes the TLS layer has read and not yet decrypted are
// not seen, and then cost a wait of at most the budget before the read
// that finds them.
func NewPoller(nc net.Conn, budget time.Duration, gate *Gate, lones *Streak) *Poller {
	if budget <= 0 || runtime.GOMAXPROCS(0) < 2 {
		return nil
	}
	pk := NewPeek(nc)
	if pk == nil {
		return nil
	}
	peek := func() bool {
		ready, _ := pk.Ask()
		return ready
	}
	return &Poller{peek: peek, budget: budget, gate: gate, lones: lones}
}

// Poll is called before a read that finds nothing buffered; Waited once
// that read returned. Poll asks the socket until it is readable or the
// budget has passed, if the calls have come one at a time (its Streak),
// the last wait was short and the gate has room.
func (p *Poller) Poll() {
	if p == nil {
		return
	}
	p.start = time.Now()
	if !p.lones.Steady() || p.last > pollWindow*p.budget || !p.gate.enter() {
		return
	}
	defer p.gate.leave()
	p.polls.Add(1)
	deadline := p.start.Add(p.budget)
	for !p.peek() && time.Now().Before(deadline) {
	}
}

// Waited records that the read after Poll returned: how long the wait
// took decides whether the next is polled.
func (p *Poller) Waited() {
	if p != nil {
		p.last = time.Since(p.start)
	}
}

// Budget is the longest one Poll asks (0 for a nil Poller).
func (p *Poller) Budget() time.Duration {
	if p == nil {
		return 0
	}
	return p.budget
}

// Polls is how many of p's waits asked the socket in a loop.
func (p *Poller) Polls() int64 {
	if p == nil {
		return 0
	}
	return p.polls.Load()
}

// Gate bounds how many Pollers ask their sockets at once (a server's
// sessions, a client's connections), so that polling spends at most the
// processors the process would otherwise leave idle, not all of them. A
// nil Gate has no bound.
type Gate struct {
	max int32
	n   atomic.Int32
}

// NewGate returns a Gate that lets n Pollers ask at once: GOMAXPROCS-1
// (at least 1) if n is not positive.
func NewGate(n int) *Gate {
	if n <= 0 {
		n = max(runtime.GOMAXPROCS(0)-1, 1)
	}
	return &Gate{max: int32(n)}
}

func (g *Gate) enter() bool {
	if g == nil {
		return true
	}
	if g.n.Add(1) > g.max {
		g.n.Add(-1)
		return false
	}
	return true
}

func (g *Gate) leave() {
	if g != nil {
		g.n.Add(-1)
	}
}
