package engine

import (
	"log/slog"

	"github.com/docketdb/docket/engine/internal/deadlog"
)

// deadLog writes the log lines about dead-lettered tasks, one per queue
// and interval (package deadlog): an operator must hear of them even with
// no Observer.
type deadLog struct{ *deadlog.Log }

const (
	deadLogEvery = deadlog.Every
	deadLogSweep = deadlog.Sweep
)

func newDeadLog(log *slog.Logger, clock Clock, stop <-chan struct{}) *deadLog {
	return &deadLog{deadlog.New(log, clock, stop)}
}

// add logs (or counts) the tasks a commit moved to the dead-letter queue.
func (l *deadLog) add(dead []deadTask) {
	if len(dead) == 0 {
		return
	}
	ts := make([]deadlog.Task, len(dead))
	for i, d := range dead {
		ts[i] = deadlog.Task{ID: d.id, NS: d.ns, Queue: d.queue, Attempts: d.attempts, LastErr: d.lastErr}
	}
	l.Add(ts)
}

func (l *deadLog) close() { l.Close() }
