package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/docketdb/docket/engine/internal/machine"
	"github.com/docketdb/docket/engine/internal/presence"
	"github.com/docketdb/docket/engine/internal/validate"
	"github.com/docketdb/docket/internal/index"
)

// Presence is implemented by an API that keeps which worker processes are
// connected and the periodic schedules they run: the dashboard's Workers
// and Periodic pages and the CLI's `docket workers` and `docket schedules`
// read it. *DB implements it in process; the client package over the
// network. Each record lives in the system area of its namespace, so it
// is durable, and it lives until its time to live (TTL) after its last
// report: a process that dies without saying so disappears then. An
// expired record is never listed, and is deleted by the next report in
// its namespace.
//
// Reporting (ReportWorker, RemoveWorker, ReportSchedule) needs PermWork on
// the namespace; listing needs PermRead; pausing, resuming and running a
// schedule now need PermAdmin.
type Presence interface {
	// ReportWorker records the presence of a worker process in namespace
	// ns until the clock's now + ttl, replacing its last report. The engine
	// sets p.Heartbeat and p.Expires.
	ReportWorker(ctx context.Context, ns Namespace, p WorkerPresence, ttl time.Duration) error
	// RemoveWorker deletes a worker's presence at once (a clean stop). A
	// worker with no presence is not an error.
	RemoveWorker(ctx context.Context, ns Namespace, id string) error
	// Workers lists the live workers of ns, by id.
	Workers(ctx context.Context, ns Namespace) ([]WorkerPresence, error)

	// ReportSchedule records a periodic schedule as its runtime runs it,
	// until now + ttl. The engine sets Updated and Expires, and ignores
	// Paused and RunRequested (see PauseSchedule and RunSchedule).
	ReportSchedule(ctx context.Context, ns Namespace, s ScheduleInfo, ttl time.Duration) error
	// Schedules lists the live schedules of ns, by queue and name, each
	// with its pause state and any run-now request waiting.
	Schedules(ctx context.Context, ns Namespace) ([]ScheduleInfo, error)
	// PauseSchedule stops the schedule's ticks from enqueueing (they are
	// skipped, not kept for later) until ResumeSchedule; ResumeSchedule
	// ends the pause. Both are idempotent. ErrNotFound if no live schedule
	// has the queue and name.
	PauseSchedule(ctx context.Context, ns Namespace, queue, name string) error
	ResumeSchedule(ctx context.Context, ns Namespace, queue, name string) error
	// RunSchedule asks the schedule's runtime to enqueue its task now, once,
	// whether or not it is paused; the runtime takes the request at its
	// next report. A second request before then is the same request.
	// ErrNotFound if no live schedule has the queue and name.
	RunSchedule(ctx context.Context, ns Namespace, queue, name string) error
}

var _ Presence = (*DB)(nil)

// sysEntries returns up to limit entries of ns's system area under prefix.
func (d *DB) sysEntries(ctx context.Context, ns Namespace, prefix string, limit int) ([]index.KV, error) {
	var out []index.KV
	err := d.c.read(ctx, func() { out = presence.Entries(d.c.store, idxNS(ns), prefix, limit) })
	return out, err
}

// sysCommit commits ops on ns's system area, for a call authorized on its
// own terms.
func (d *DB) sysCommit(ctx context.Context, ns Namespace, ops ...Op) error {
	vops, _, _, err := validate.SystemSpace.Ops(ops, d.c.opts.MaxPayloadBytes, nil)
	if err != nil {
		return err
	}
	cmd := command{NS: ns, Args: &machine.Commit{Ops: vops}}
	var res cmdResult
	return d.c.exec(ctx, &cmd, &res)
}

// report writes the record at key and deletes the expired records under
// prefix, refusing a new record past limit live ones.
func (d *DB) report(ctx context.Context, ns Namespace, prefix, key string, value []byte, limit int, what string) error {
	if len(value) > MaxPresenceBytes {
		return invalid("%s record is %d bytes, over the limit of %d", what, len(value), MaxPresenceBytes)
	}
	for range 8 {
		now := d.Clock().Now()
		es, err := d.sysEntries(ctx, ns, prefix, 0)
		if err != nil {
			return err
		}
		ops, err := presence.Report(ns, es, key, value, now, limit, what)
		if err != nil {
			return err
		}
		err = d.sysCommit(ctx, ns, ops...)
		if errors.Is(err, ErrConflict) {
			continue // an expired record was reported again: look again
		}
		return err
	}
	return fmt.Errorf("%w: the %ss of %s keep changing", ErrConflict, what, ns)
}

// ReportWorker implements Presence.
func (d *DB) ReportWorker(ctx context.Context, ns Namespace, p WorkerPresence, ttl time.Duration) error {
	if err := checkNS(ns); err != nil {
		return err
	}
	if err := validate.PresenceTTL(ttl); err != nil {
		return err
	}
	if err := validate.Worker(&p); err != nil {
		return err
	}
	if err := d.authorize(ns, PermWork); err != nil {
		return err
	}
	now := d.Clock().Now().UTC()
	p.Heartbeat, p.Expires = now, now.Add(ttl)
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return d.report(ctx, ns, WorkerKeyPrefix, WorkerKeyPrefix+p.ID, b, MaxWorkers, "worker")
}

// RemoveWorker implements Presence.
func (d *DB) RemoveWorker(ctx context.Context, ns Namespace, id string) error {
	if err := checkNS(ns); err != nil {
		return err
	}
	if err := validate.Name("worker id", id); err != nil {
		return err
	}
	if err := d.authorize(ns, PermWork); err != nil {
		return err
	}
	return d.sysCommit(ctx, ns, Delete(WorkerKeyPrefix+id))
}

// Workers implements Presence.
func (d *DB) Workers(ctx context.Context, ns Namespace) ([]WorkerPresence, error) {
	if err := checkNS(ns); err != nil {
		return nil, err
	}
	if err := d.authorize(ns, PermRead); err != nil {
		return nil, err
	}
	now := d.Clock().Now()
	es, err := d.sysEntries(ctx, ns, WorkerKeyPrefix, 0)
	if err != nil {
		return nil, err
	}
	return presence.Workers(es, now), nil
}

// ReportSchedule implements Presence.
func (d *DB) ReportSchedule(ctx context.Context, ns Namespace, s ScheduleInfo, ttl time.Duration) error {
	if err := checkNS(ns); err != nil {
		return err
	}
	if err := validate.PresenceTTL(ttl); err != nil {
		return err
	}
	if err := validate.Schedule(&s); err != nil {
		return err
	}
	if err := d.authorize(ns, PermWork); err != nil {
		return err
	}
	now := d.Clock().Now().UTC()
	s.Updated, s.Expires = now, now.Add(ttl)
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return d.report(ctx, ns, ScheduleKeyPrefix, ScheduleKeyPrefix+ScheduleKey(s.Queue, s.Name), b, MaxSchedules, "schedule")
}

// Schedules implements Presence.
func (d *DB) Schedules(ctx context.Context, ns Namespace) ([]ScheduleInfo, error) {
	if err := checkNS(ns); err != nil {
		return nil, err
	}
	if err := d.authorize(ns, PermRead); err != nil {
		return nil, err
	}
	now := d.Clock().Now()
	var es, paused, runs []index.KV
	err := d.c.read(ctx, func() {
		st, n := d.c.store, idxNS(ns)
		es, paused, runs = presence.Entries(st, n, ScheduleKeyPrefix, 0), presence.Entries(st, n, SchedulePausedPrefix, 0),
			presence.Entries(st, n, ScheduleRunPrefix, 0)
	})
	if err != nil {
		return nil, err
	}
	return presence.Schedules(es, paused, runs, now), nil
}

// scheduleControl checks a control call on a live schedule and commits
// ops.
func (d *DB) scheduleControl(ctx context.Context, ns Namespace, queue, name string, ops func(key string) []Op) error {
	if err := checkNS(ns); err != nil {
		return err
	}
	if err := validate.Name("schedule queue", queue); err != nil {
		return err
	}
	if err := validate.Name("schedule name", name); err != nil {
		return err
	}
	if err := d.authorize(ns, PermAdmin); err != nil {
		return err
	}
	k := ScheduleKey(queue, name)
	var e index.KV
	var ok bool
	if err := d.c.read(ctx, func() { e, ok = d.c.store.KV(idxNS(ns), ScheduleKeyPrefix+k) }); err != nil {
		return err
	}
	if !ok || !presence.Expires(e.Value).After(d.Clock().Now()) {
		return fmt.Errorf("%w: no live periodic schedule %q on queue %s/%s", ErrNotFound, name, ns, queue)
	}
	return d.sysCommit(ctx, ns, ops(k)...)
}

// PauseSchedule implements Presence.
func (d *DB) PauseSchedule(ctx context.Context, ns Namespace, queue, name string) error {
	return d.scheduleControl(ctx, ns, queue, name, func(k string) []Op {
		return []Op{Set(SchedulePausedPrefix+k, []byte("1"))}
	})
}

// ResumeSchedule implements Presence.
func (d *DB) ResumeSchedule(ctx context.Context, ns Namespace, queue, name string) error {
	return d.scheduleControl(ctx, ns, queue, name, func(k string) []Op {
		return []Op{Delete(SchedulePausedPrefix + k)}
	})
}

// RunSchedule implements Presence.
func (d *DB) RunSchedule(ctx context.Context, ns Namespace, queue, name string) error {
	return d.scheduleControl(ctx, ns, queue, name, func(k string) []Op {
		return []Op{Set(ScheduleRunPrefix+k, []byte(d.Clock().Now().UTC().Format(time.RFC3339Nano)))}
	})
}
