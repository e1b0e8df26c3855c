// Package deadlog writes the log lines about dead-lettered tasks without
// writing one per task: per queue, the first task of an interval at once,
// the others of the interval in one line when it ends. The engine hands it
// the tasks each commit dead-lettered.
package deadlog

import (
	"log/slog"
	"sync"
	"time"

	"github.com/docketdb/docket/dockettype"
)

// Task is a task a commit moved to the dead-letter queue.
type Task struct {
	ID       uint64
	NS       dockettype.Namespace
	Queue    string
	Attempts uint32
	LastErr  string
}

// Every is the interval over which the log lines about dead-lettered
// tasks of one queue are gathered into one.
const Every = 10 * time.Second

// Log writes the log lines about dead-lettered tasks without writing
// one per task: an operator must hear of them even with no Observer, but a
// queue whose tasks all fail would otherwise write thousands of lines. Per
// queue, the first task of an interval is logged at once; the others of the
// interval are counted and logged in one line, with the count and the last
// of them as a sample, when the interval ends (a timer on the engine's
// clock) or the DB closes.
type Log struct {
	log   *slog.Logger
	clock dockettype.Clock
	stop  <-chan struct{} // closed by Close

	mu      sync.Mutex
	queues  map[deadQueue]*deadCount // queues logged in the current interval
	flusher bool                     // a goroutine waits for the interval's end
	closed  bool
	wg      sync.WaitGroup
}

type deadQueue struct {
	ns    dockettype.Namespace
	queue string
}

type deadCount struct {
	until time.Time // the end of the queue's interval
	more  int       // tasks of the interval not logged yet
	last  Task      // the latest of them
}

// Sweep is how many queues the log remembers before it forgets those
// whose interval ended with nothing counted.
const Sweep = 1024

// New returns a Log writing to log, timed by clock; closing stop ends the
// interval's wait (Close then logs what is counted).
func New(log *slog.Logger, clock dockettype.Clock, stop <-chan struct{}) *Log {
	return &Log{log: log, clock: clock, stop: stop, queues: map[deadQueue]*deadCount{}}
}

// Add logs (or counts) the tasks a commit moved to the dead-letter queue.
func (l *Log) Add(dead []Task) {
	if len(dead) == 0 {
		return
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range dead {
		k := deadQueue{d.NS, d.Queue}
		n := l.queues[k]
		if n != nil && now.Before(n.until) && !l.closed {
			n.more++
			n.last = d
			l.startFlusher()
			continue
		}
		if n != nil {
			l.summary(k, n) // its flusher has not run yet
		} else if len(l.queues) >= Sweep {
			l.sweep(now)
		}
		l.queues[k] = &deadCount{until: now.Add(Every)}
		l.log.Warn("docket: task moved to the dead-letter queue",
			"id", d.ID, "namespace", d.NS.String(), "queue", d.Queue, "attempts", d.Attempts, "error", d.LastErr)
	}
}

// sweep forgets the queues whose interval ended with nothing counted. Call
// with mu held.
func (l *Log) sweep(now time.Time) {
	for k, n := range l.queues {
		if n.more == 0 && !now.Before(n.until) {
			delete(l.queues, k)
		}
	}
}

// summary logs the tasks of k's interval not logged yet. Call with mu held.
func (l *Log) summary(k deadQueue, n *deadCount) {
	if n.more == 0 {
		return
	}
	d := n.last
	l.log.Warn("docket: tasks moved to the dead-letter queue",
		"count", n.more, "namespace", k.ns.String(), "queue", k.queue, "interval", Every,
		"last_id", d.ID, "last_attempts", d.Attempts, "last_error", d.LastErr)
	n.more = 0
}

// startFlusher starts the goroutine that ends the interval. Call with mu held.
func (l *Log) startFlusher() {
	if l.flusher || l.closed {
		return
	}
	l.flusher = true
	t := l.clock.NewTimer(Every)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		select {
		case <-t.C():
		case <-l.stop:
			t.Stop()
		}
		l.flush()
	}()
}

// flush ends the intervals of the queues with tasks counted: one line for
// each, and the next task of such a queue is logged at once again.
func (l *Log) flush() {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, n := range l.queues {
		if n.more > 0 {
			l.summary(k, n)
			delete(l.queues, k)
		}
	}
	l.sweep(now)
	l.flusher = false
}

// Close logs what is counted and not logged yet; later tasks are logged
// one by one (there are none but a closing DB's last commits).
func (l *Log) Close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.wg.Wait()
	l.flush()
}

// Remembered is how many queues the log remembers.
func (l *Log) Remembered() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queues)
}
