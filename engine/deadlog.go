package engine

import (
	"log/slog"
	"sync"
	"time"
)

// deadLogEvery is the interval over which the log lines about dead-lettered
// tasks of one queue are gathered into one.
const deadLogEvery = 10 * time.Second

// deadLog writes the log lines about dead-lettered tasks without writing
// one per task: an operator must hear of them even with no Observer, but a
// queue whose tasks all fail would otherwise write thousands of lines. Per
// queue, the first task of an interval is logged at once; the others of the
// interval are counted and logged in one line, with the count and the last
// of them as a sample, when the interval ends (a timer on the engine's
// clock) or the DB closes.
type deadLog struct {
	log   *slog.Logger
	clock Clock
	stop  <-chan struct{} // closed by Close

	mu      sync.Mutex
	queues  map[deadQueue]*deadCount // queues logged in the current interval
	flusher bool                     // a goroutine waits for the interval's end
	closed  bool
	wg      sync.WaitGroup
}

type deadQueue struct {
	ns    Namespace
	queue string
}

type deadCount struct {
	until time.Time // the end of the queue's interval
	more  int       // tasks of the interval not logged yet
	last  deadTask  // the latest of them
}

// deadLogSweep is how many queues the log remembers before it forgets those
// whose interval ended with nothing counted.
const deadLogSweep = 1024

func newDeadLog(log *slog.Logger, clock Clock, stop <-chan struct{}) *deadLog {
	return &deadLog{log: log, clock: clock, stop: stop, queues: map[deadQueue]*deadCount{}}
}

// add logs (or counts) the tasks a commit moved to the dead-letter queue.
func (l *deadLog) add(dead []deadTask) {
	if len(dead) == 0 {
		return
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range dead {
		k := deadQueue{d.ns, d.queue}
		n := l.queues[k]
		if n != nil && now.Before(n.until) && !l.closed {
			n.more++
			n.last = d
			l.startFlusher()
			continue
		}
		if n != nil {
			l.summary(k, n) // its flusher has not run yet
		} else if len(l.queues) >= deadLogSweep {
			l.sweep(now)
		}
		l.queues[k] = &deadCount{until: now.Add(deadLogEvery)}
		l.log.Warn("docket: task moved to the dead-letter queue",
			"id", d.id, "namespace", d.ns.String(), "queue", d.queue, "attempts", d.attempts, "error", d.lastErr)
	}
}

// sweep forgets the queues whose interval ended with nothing counted. Call
// with mu held.
func (l *deadLog) sweep(now time.Time) {
	for k, n := range l.queues {
		if n.more == 0 && !now.Before(n.until) {
			delete(l.queues, k)
		}
	}
}

// summary logs the tasks of k's interval not logged yet. Call with mu held.
func (l *deadLog) summary(k deadQueue, n *deadCount) {
	if n.more == 0 {
		return
	}
	d := n.last
	l.log.Warn("docket: tasks moved to the dead-letter queue",
		"count", n.more, "namespace", k.ns.String(), "queue", k.queue, "interval", deadLogEvery,
		"last_id", d.id, "last_attempts", d.attempts, "last_error", d.lastErr)
	n.more = 0
}

// startFlusher starts the goroutine that ends the interval. Call with mu held.
func (l *deadLog) startFlusher() {
	if l.flusher || l.closed {
		return
	}
	l.flusher = true
	t := l.clock.NewTimer(deadLogEvery)
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
func (l *deadLog) flush() {
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

// close logs what is counted and not logged yet; later tasks are logged
// one by one (there are none but a closing DB's last commits).
func (l *deadLog) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.wg.Wait()
	l.flush()
}
