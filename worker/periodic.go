package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/docketdb/docket/engine"
)

// PeriodicKeyPrefix starts the key under which each periodic schedule
// keeps the last tick it enqueued: PeriodicKeyPrefix + queue + "/" + name,
// in the system area of the schedule's namespace (engine.SystemAPI), which
// the namespace's KV handle cannot read or write. Running a schedule as a
// caller therefore needs engine.PermSystem (and engine.PermEnqueue).
const PeriodicKeyPrefix = engine.ReservedPrefix + "periodic/"

// PeriodicTickHeader is the header that carries, in each task a schedule
// enqueues, the tick it was enqueued for (Unix seconds).
const PeriodicTickHeader = "docket-periodic-tick"

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// periodic is one cron schedule.
type periodic struct {
	w     *Worker
	kv    engine.KV
	ns    engine.Namespace
	queue string
	name  string
	spec  string
	sched cron.Schedule
	every int64 // seconds, for "@every": ticks are multiples since the Unix epoch
	task  engine.Task
	key   string
}

// Periodic enqueues task on queue at every tick of the cron schedule spec:
// five fields (minute hour day-of-month month day-of-week) or a descriptor
// such as "@hourly" or "@every 10m", evaluated in UTC unless the spec starts
// with "CRON_TZ=<zone> ". "@every" ticks are aligned on the Unix epoch, so
// that every runtime sees the same ticks.
//
// Each tick is enqueued exactly once, however many Workers sharing the
// engine run the schedule (in one process: the directory lock lets one
// process open a directory): the tick is committed
// together with the schedule's last tick, kept in the namespace's system
// area under PeriodicKeyPrefix, and that commit asserts the value it read, so only one
// runtime wins it; the task also carries the idempotency key
// "periodic:<name>:<tick unix seconds>". After downtime, only the most
// recent missed tick is enqueued (once), when a Worker starts. The first
// time a schedule runs, it starts from the current time: no past tick is
// enqueued.
//
// The schedule's name is task.IdempotencyKey if set, else task.Kind, else
// spec; names must differ between schedules of one queue. Tasks carry their
// tick in the PeriodicTickHeader header. It returns an error for an invalid
// spec, a duplicate name, or an API without a system area (one that does
// not implement engine.SystemAPI); it panics after Start.
func (w *Worker) Periodic(ns engine.Namespace, queue, spec string, task engine.Task) error {
	tz := strings.HasPrefix(spec, "CRON_TZ=") || strings.HasPrefix(spec, "TZ=")
	parse := spec
	if !tz {
		parse = "CRON_TZ=UTC " + spec
	}
	sched, err := cronParser.Parse(parse)
	if err != nil {
		return fmt.Errorf("worker: periodic spec %q: %w", spec, err)
	}
	name := task.IdempotencyKey
	if name == "" {
		name = task.Kind
	}
	if name == "" {
		name = spec
	}
	sys, ok := w.db.(engine.SystemAPI)
	if !ok {
		return fmt.Errorf("worker: periodic schedules keep their state in the namespace's system area, which this API does not offer (engine.SystemAPI)")
	}
	p := &periodic{w: w, kv: sys.SystemKV(ns), ns: ns, queue: queue, name: name, spec: spec, sched: sched, task: task,
		key: PeriodicKeyPrefix + queue + "/" + name}
	if cd, ok := sched.(cron.ConstantDelaySchedule); ok {
		p.every = max(int64(cd.Delay/time.Second), 1)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != stateNew {
		panic("worker: Periodic after Start")
	}
	for _, o := range w.periodics {
		if o.ns == ns && o.key == p.key {
			return fmt.Errorf("worker: queue %s/%s already has a periodic schedule named %q", ns, queue, name)
		}
	}
	p.task.IdempotencyKey = ""
	w.periodics = append(w.periodics, p)
	return nil
}

// prev returns the latest tick at or before now.
func (p *periodic) prev(now time.Time) (time.Time, bool) {
	now = now.UTC()
	if p.every > 0 {
		s := now.Unix()
		return time.Unix(s-s%p.every, 0).UTC(), true
	}
	// Look back over growing windows: the first that holds a tick holds few.
	for w := time.Minute; w <= 20*365*24*time.Hour; w *= 4 {
		t := p.sched.Next(now.Add(-w))
		if t.IsZero() || t.After(now) {
			continue
		}
		for range 1 << 20 {
			n := p.sched.Next(t)
			if n.IsZero() || n.After(now) {
				break
			}
			t = n
		}
		return t, true
	}
	return time.Time{}, false
}

// next returns the first tick after now (zero if there is none).
func (p *periodic) next(now time.Time) time.Time {
	if p.every > 0 {
		prev, _ := p.prev(now)
		return prev.Add(time.Duration(p.every) * time.Second)
	}
	return p.sched.Next(now.UTC())
}

// step enqueues the latest tick at or before now if it is later than the
// last tick enqueued, or, the first time the schedule runs, records it
// without enqueueing (unless now is exactly that tick). It returns the
// clock reading it went by: ticks after it are the loop's to enqueue.
func (p *periodic) step(ctx context.Context) (time.Time, error) {
	for range 100 {
		now := p.w.clock.Now()
		e, err := p.kv.Get(ctx, p.key)
		absent := errors.Is(err, engine.ErrNotFound)
		if err != nil && !absent {
			return now, err
		}
		var last int64
		if !absent {
			if last, err = strconv.ParseInt(string(e.Value), 10, 64); err != nil {
				p.w.log.Warn("docket: unreadable last tick of a periodic schedule; starting afresh",
					"key", p.key, "value", string(e.Value))
				last = 0
			}
		}
		prev, ok := p.prev(now)
		if !ok || (!absent && prev.Unix() <= last) {
			return now, nil
		}
		tick := prev.Unix()
		enqueue := !absent || prev.Equal(now)
		ops := make([]engine.Op, 0, 4)
		if absent {
			ops = append(ops, engine.IfAbsent(p.key))
		} else {
			ops = append(ops, engine.IfVersion(p.key, e.Version))
		}
		// A paused schedule (engine.Presence.PauseSchedule) moves on to
		// the tick without enqueueing it; the commit asserts the pause
		// state it read.
		paused := false
		if enqueue {
			pauseKey := engine.SchedulePausedPrefix + engine.ScheduleKey(p.queue, p.name)
			_, perr := p.kv.Get(ctx, pauseKey)
			switch {
			case perr == nil:
				paused, enqueue = true, false
				ops = append(ops, engine.IfExists(pauseKey))
			case errors.Is(perr, engine.ErrNotFound):
				ops = append(ops, engine.IfAbsent(pauseKey))
			default:
				return now, perr
			}
		}
		ops = append(ops, engine.Set(p.key, []byte(strconv.FormatInt(tick, 10))))
		if enqueue {
			ops = append(ops, engine.Enqueue(p.queue, p.tickTask(tick)))
		}
		res, err := p.kv.Commit(ctx, ops...)
		if errors.Is(err, engine.ErrConflict) {
			continue // another runtime moved the schedule on: look again
		}
		if err == nil && enqueue {
			p.w.presence.enqueued(p, prev, res.Enqueued[0].ID, "")
		}
		if err == nil && paused {
			p.w.presence.enqueued(p, prev, 0, "skipped: paused")
		}
		if err == nil && enqueue && p.w.log.Enabled(ctx, slog.LevelDebug) {
			p.w.log.Debug("docket: periodic task enqueued", logQueue, p.queue, "schedule", p.name,
				"tick", prev, logTask, res.Enqueued[0].ID)
		}
		return now, err
	}
	return time.Time{}, fmt.Errorf("worker: periodic %q: the last tick keeps changing under us", p.name)
}

func (p *periodic) tickTask(tick int64) engine.Task {
	t := p.task
	t.IdempotencyKey = "periodic:" + p.name + ":" + strconv.FormatInt(tick, 10)
	t.Headers = maps.Clone(t.Headers)
	if t.Headers == nil {
		t.Headers = make(map[string]string, 1)
	}
	t.Headers[PeriodicTickHeader] = strconv.FormatInt(tick, 10)
	return t
}

// loop enqueues each tick after from as it comes, until ctx ends. Each
// wait is computed from the clock reading of the step before it, not from
// the time after the step, so a tick that passes during a step is not
// skipped.
func (p *periodic) loop(ctx context.Context, from time.Time) {
	w := p.w
	defer w.wg.Done()
	for {
		next := p.next(from)
		if next.IsZero() {
			return // the schedule never fires again
		}
		if !w.sleepUntil(ctx, next) {
			return
		}
		var b backoff
		for {
			now, err := p.step(ctx)
			if err == nil {
				from = now
				break
			}
			if ctx.Err() != nil {
				return
			}
			if isFatal(err) {
				w.fail(fmt.Errorf("worker: periodic %q on queue %s/%s: %w", p.name, p.ns, p.queue, err))
				return
			}
			d := b.next()
			w.log.Warn("docket: periodic schedule failed; retrying", logQueue, p.queue, "schedule", p.name, "err", err, "retry_in", d)
			if !w.sleep(ctx, d) {
				return
			}
		}
	}
}
