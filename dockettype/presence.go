package dockettype

import (
	"net/url"
	"time"
)

// The keys of the presence records, in the system area of each namespace.
// A schedule's keys name its queue and its name, each path-escaped, so
// that no two schedules share a key.
const (
	// WorkerKeyPrefix + worker id: a worker process's presence.
	WorkerKeyPrefix = ReservedPrefix + "workers/"
	// ScheduleKeyPrefix + queue + "/" + name: a periodic schedule as its
	// runtime registered it.
	ScheduleKeyPrefix = ReservedPrefix + "schedules/"
	// SchedulePausedPrefix + queue + "/" + name: present while the
	// schedule is paused.
	SchedulePausedPrefix = ReservedPrefix + "schedule-paused/"
	// ScheduleRunPrefix + queue + "/" + name: a request to run the
	// schedule now, which its runtime consumes.
	ScheduleRunPrefix = ReservedPrefix + "schedule-run/"
)

// Bounds of the presence records.
const (
	// MaxPresenceBytes bounds one record (a worker or a schedule), encoded.
	MaxPresenceBytes = 64 << 10
	// MaxWorkers bounds the live workers of one namespace: a report from
	// one more is refused, and Workers lists at most this many.
	MaxWorkers = 1000
	// MaxSchedules bounds the live schedules of one namespace, as
	// MaxWorkers does workers.
	MaxSchedules = 1000
	// MinPresenceTTL and MaxPresenceTTL bound the time to live of a
	// report.
	MinPresenceTTL = time.Second
	MaxPresenceTTL = 24 * time.Hour
)

// WorkerPresence is one worker process, as it reported itself.
type WorkerPresence struct {
	// ID names the process's runtime (a worker's Owner); at most
	// MaxNameBytes.
	ID       string        `json:"id"`
	Host     string        `json:"host,omitempty"`
	PID      int           `json:"pid,omitempty"`
	Version  string        `json:"version,omitempty"`
	Started  time.Time     `json:"started,omitzero"`
	Queues   []WorkerQueue `json:"queues,omitempty"`
	Running  []RunningTask `json:"running,omitempty"`
	Draining bool          `json:"draining,omitempty"`
	// Heartbeat is when the engine took the last report, Expires when
	// the record stops being listed without another.
	Heartbeat time.Time `json:"heartbeat"`
	Expires   time.Time `json:"expires"`
}

// WorkerQueue is a queue a worker process works, and with how many
// handlers at once.
type WorkerQueue struct {
	Queue       string `json:"queue"`
	Concurrency int    `json:"concurrency"`
}

// RunningTask is a task whose handler was running at a worker's report.
type RunningTask struct {
	Queue   string    `json:"queue"`
	ID      uint64    `json:"id"`
	Kind    string    `json:"kind,omitempty"`
	Attempt int       `json:"attempt,omitempty"`
	Started time.Time `json:"started"`
}

// ScheduleInfo is a periodic schedule as its runtime registered it.
type ScheduleInfo struct {
	Queue string `json:"queue"`
	Name  string `json:"name"`
	Spec  string `json:"spec"`
	Kind  string `json:"kind,omitempty"`
	// Worker is the id of the runtime that reported it last.
	Worker string `json:"worker,omitempty"`
	// Next is the schedule's next tick; Last the last tick it enqueued
	// (zero if none yet), LastTask that task's id (0 if unknown).
	Next     time.Time `json:"next,omitzero"`
	Last     time.Time `json:"last,omitzero"`
	LastTask uint64    `json:"last_task,omitempty"`
	// Outcome is what became of the last enqueued task as its runtime
	// last saw it ("enqueued", "completed", "failed: ...", "skipped:
	// paused"), "" if nothing ran yet.
	Outcome string `json:"outcome,omitempty"`
	// Paused and RunRequested are kept by the engine, not the report.
	Paused       bool      `json:"-"`
	RunRequested bool      `json:"-"`
	Updated      time.Time `json:"updated"`
	Expires      time.Time `json:"expires"`
}

// ScheduleKey returns the key suffix of a schedule: its queue and name,
// path-escaped, joined by "/".
func ScheduleKey(queue, name string) string {
	return url.PathEscape(queue) + "/" + url.PathEscape(name)
}
