package engine

import (
	"log/slog"
	"time"

	"github.com/docketdb/docket/internal/vfs"
)

// Options configure a DB. The zero value is a durable DB with the defaults
// named on each field.
type Options struct {
	Durability Durability
	// SyncEvery is the fsync period of SyncInterval. Default 10 ms.
	SyncEvery time.Duration
	// Clock is the time source. Default: the system clock.
	Clock Clock
	// IdempotencyTTL is how long an idempotency key is remembered after its
	// task ends (completed or cancelled). Default 24 h; negative forgets it at
	// once.
	IdempotencyTTL time.Duration
	// RetainCompleted keeps completed tasks, with their result, for this long
	// after completion. Default 0: completed tasks are deleted at once.
	RetainCompleted time.Duration
	// MaxPayloadBytes bounds a payload, progress, result or KV value.
	// Default 1 MiB.
	MaxPayloadBytes int
	// SnapshotBytes is how much log is written before a snapshot is taken
	// in the background. Default 64 MiB; negative turns automatic snapshots
	// off (Checkpoint and Close still take one).
	SnapshotBytes int64
	// SegmentBytes is the size of a log segment. Default 16 MiB.
	SegmentBytes int
	// MaxInFlight bounds the EnqueueAsync calls whose outcome is not known
	// yet, across the DB: the next one waits for a slot. Default
	// DefaultMaxInFlight.
	MaxInFlight int
	// Secure refuses every call made without a caller (see DB.As).
	Secure bool
	// Authorizer decides what a caller may do. Default: deny everything.
	Authorizer Authorizer
	// Logger receives warnings (a failed background snapshot, a repaired log
	// tail). Default: slog.Default().
	Logger *slog.Logger
	// MaxMemory bounds the memory the state takes, in bytes: task records
	// with their payloads and fields, idempotency keys, KV entries and
	// dependencies (see ErrFull). Default 0: a quarter of the memory of
	// the machine or of the process's cgroup, whichever is smaller (no
	// bound where neither can be read); negative: no bound.
	MaxMemory int64
	// ValueThreshold is the size from which a payload, a result or a
	// progress record is kept on disk, in the value log under the data
	// directory, instead of in memory: the state holds a reference to it,
	// and Claim, Get, List and Search read it back. Default
	// DefaultValueThreshold (1 KiB); negative keeps every value in memory.
	// In memory, read-only and replicated DBs keep every value in memory.
	ValueThreshold int
	// Observer, if set, is told about commits, task outcomes, fsyncs and
	// snapshots. Its methods run on the committing goroutine after the
	// engine's lock is released (for EnqueueAsync, on the goroutine that
	// settles its round, once it is durable); they must be quick.
	Observer Observer

	// fs is the file system the DB's files are on; nil is the operating
	// system's. Only tests set it (internal/enginetest.FS), to run on a
	// memory file system that can crash or on one that fails chosen
	// operations.
	fs vfs.FS
	// failpoint, if set, is called at named points of the log and
	// snapshot code; a non-nil error is treated as an I/O error at that
	// point (see wal.Options.Failpoint and snapshot.Options.Failpoint).
	// Only tests set it (internal/enginetest.Failpoint).
	failpoint func(name string) error

	// valueFileSize is the value log's file size (vlog.Options.FileSize);
	// only tests set it.
	valueFileSize int64

	// tap, if set, receives every committed batch as the bytes the log
	// holds for it (also in memory, where nothing is logged), in sequence
	// order, right after it is applied: a replica that applies them reaches
	// the same state, byte for byte. It runs with core.mu held: it must be
	// quick, must not call the DB, and must copy data to keep it. Only
	// tests set it (internal/enginetest.Tap from outside engine).
	tap func(seq uint64, data []byte)
}

func (o Options) withDefaults() Options {
	if o.SyncEvery <= 0 {
		o.SyncEvery = 10 * time.Millisecond
	}
	if o.Clock == nil {
		o.Clock = SystemClock
	}
	if o.IdempotencyTTL == 0 {
		o.IdempotencyTTL = 24 * time.Hour
	}
	if o.MaxPayloadBytes <= 0 {
		o.MaxPayloadBytes = 1 << 20
	}
	if o.SnapshotBytes == 0 {
		o.SnapshotBytes = 64 << 20
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = 16 << 20
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ValueThreshold == 0 {
		o.ValueThreshold = DefaultValueThreshold
	}
	return o
}
