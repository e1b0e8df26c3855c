package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/docketdb/docket/engine"
)

// failLogEvery is the interval over which the failed attempts of one queue
// share a log line.
const failLogEvery = 10 * time.Second

// failLog writes the "task failed" lines of one queue. Per level (a
// warning for an attempt that failed, an error for one that panicked or
// failed permanently), the first failure of an interval of failLogEvery
// on the Worker's clock is logged at once, with the task's attributes;
// the others of the interval are counted, and logged in one line when it
// ends (or the Worker stops), with their count, how many of each outcome,
// and the first one's task and error. A queue whose tasks all fail,
// thousands a minute, costs at most four lines per interval instead of one
// per attempt.
type failLog struct {
	w   *Worker
	log *slog.Logger // the runner's

	mu     sync.Mutex
	levels [2]failLevel // warnings, errors
}

// failLevel is the open interval of one level.
type failLevel struct {
	until   time.Time // end of the open interval; zero when none is open
	count   int       // failures of the interval not yet logged
	by      map[string]int
	sample  error
	task    uint64
	attempt int
}

// failed logs, or counts, the failed attempt of t with outcome o and
// error err at level lvl.
func (f *failLog) failed(t *Task, lvl slog.Level, o Outcome, err error) {
	w := f.w
	if w.draining {
		// Drain runs in the test's goroutine, with nothing to end an
		// interval later: every line is logged.
		t.Logger().Log(context.Background(), lvl, "docket: task failed", "outcome", o.String(), "err", err)
		return
	}
	now := w.clock.Now()
	f.mu.Lock()
	i := 0
	if lvl >= slog.LevelError {
		i = 1
	}
	l := &f.levels[i]
	if l.until.IsZero() || !now.Before(l.until) {
		// No interval open (or its timer has yet to end it): this
		// failure opens one and is logged at once.
		f.flushLocked(i)
		l.until = now.Add(failLogEvery)
		until := l.until
		f.mu.Unlock()
		t.Logger().Log(context.Background(), lvl, "docket: task failed", "outcome", o.String(), "err", err)
		go f.wait(i, until, w.timerAt(until))
		return
	}
	if l.count == 0 {
		l.sample, l.task, l.attempt = err, t.ID, t.Attempt
		l.by = map[string]int{}
	}
	l.count++
	l.by[o.String()]++
	f.mu.Unlock()
}

// wait ends the interval of level i that ends at until when its timer
// fires, or when every goroutine of the Worker has returned (it stopped).
func (f *failLog) wait(i int, until time.Time, t engine.Timer) {
	select {
	case <-t.C():
	case <-f.w.finished:
		t.Stop()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.levels[i].until.Equal(until) {
		f.flushLocked(i)
		f.levels[i].until = time.Time{}
	}
}

// flush logs the failures counted in the open intervals.
func (f *failLog) flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.levels {
		f.flushLocked(i)
	}
}

// flushLocked logs the failures counted in level i's open interval, in one
// line. Call with mu held.
func (f *failLog) flushLocked(i int) {
	l := &f.levels[i]
	n, by := l.count, l.by
	if n == 0 {
		return
	}
	attrs := []any{"count", n, "interval", failLogEvery.String()}
	for _, o := range [...]Outcome{OutcomeFailed, OutcomeRetryAfter, OutcomeTimedOut, OutcomePanicked, OutcomePermanent} {
		if c := by[o.String()]; c > 0 {
			attrs = append(attrs, "outcome_"+o.String(), c)
		}
	}
	attrs = append(attrs, "sample_"+logTask, l.task, "sample_"+logAttempt, l.attempt, "sample_err", l.sample)
	l.count, l.by, l.sample = 0, nil, nil
	lvl := slog.LevelWarn
	if i == 1 {
		lvl = slog.LevelError
	}
	f.log.Log(context.Background(), lvl, "docket: task failed (aggregated: count more attempts of the queue's tasks failed since the line before)", attrs...)
}
