package engine

import (
	"context"
	"errors"
	"time"

	"github.com/docketdb/docket/engine/internal/recovery"
	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/internal/snapshot"
	"github.com/docketdb/docket/internal/vfs"
	"github.com/docketdb/docket/internal/vlog"
	"github.com/docketdb/docket/wal"
)

// storage is where a DB's committed batches go and what makes them
// durable, one implementation per way of opening a DB: a directory's log
// (diskStorage, Open), nowhere (memoryStorage, OpenInMemory), nowhere
// because nothing is written (readOnlyStorage, OpenReadOnly), and a
// replicated log that made the commands durable before they were applied
// (replicatedStorage, OpenReplicated). The commit path asks it instead of
// testing which way the DB was opened.
//
// append runs with core.mu held and does no I/O; every other method runs
// with core.mu released (see "Locks" in doc.go).
type storage interface {
	// writable is nil when the storage takes batches, ErrReadOnly when not.
	writable() error
	// logged reports whether append keeps the batches it is given, and so
	// whether a batch is worth encoding and a commit has a log to wait for
	// (durable) or to share a wait on (Deferred, the pipeline).
	logged() bool
	// append adds batch seq, encoded as data, to the log, without waiting
	// for it to be written. It returns the bytes it adds to the log.
	append(seq uint64, data []byte) (int64, error)
	// durable returns once batch seq is as durable as Options.Durability
	// promises; gathered says the caller's commits are all in
	// (wal.Log.SyncGathered). An error wrapping wal.ErrClosed or
	// vlog.ErrClosed means the storage was closed meanwhile; any other
	// stops the engine.
	durable(seq uint64, gathered bool) error
	// sync makes every batch up to seq durable whatever the options say
	// (the SyncInterval ticker).
	sync(seq uint64) error
	// snapshots reports whether the storage keeps snapshots of the state
	// (background snapshots, Checkpoint, the final one at Close).
	snapshots() bool
	// snapshot writes img as a snapshot and truncates the log behind the
	// older of the two kept. Call with core.snapMu held.
	snapshot(img *index.Image) (snapshot.Info, error)
	// readBarrier returns once a read made after it sees every write
	// acknowledged before it (nil at once but on a replicated DB).
	readBarrier(ctx context.Context) error
	// stats adds the log's counters to s.
	stats(s *Stats)
	// close releases the storage's files and lock; failed says the engine failed, so
	// what was appended and not written is abandoned, not written.
	close(failed bool) error
}

// memoryStorage keeps nothing: OpenInMemory.
type memoryStorage struct{}

func (memoryStorage) writable() error                              { return nil }
func (memoryStorage) logged() bool                                 { return false }
func (memoryStorage) append(uint64, []byte) (int64, error)         { return 0, nil }
func (memoryStorage) durable(uint64, bool) error                   { return nil }
func (memoryStorage) sync(uint64) error                            { return nil }
func (memoryStorage) snapshots() bool                              { return false }
func (memoryStorage) snapshot(*index.Image) (snapshot.Info, error) { return snapshot.Info{}, nil }
func (memoryStorage) readBarrier(context.Context) error            { return nil }
func (memoryStorage) stats(*Stats)                                 {}
func (memoryStorage) close(bool) error                             { return nil }

// readOnlyStorage is a directory recovered to be read (OpenReadOnly): it
// holds the directory's lock, shared, and takes no batch.
type readOnlyStorage struct {
	memoryStorage
	lock vfs.File // nil when the directory has no LOCK file
	vals *values  // the value log, read only (nil when there is none)
}

func (readOnlyStorage) writable() error { return ErrReadOnly }

func (r readOnlyStorage) close(bool) error {
	if r.vals != nil {
		r.vals.log.Close()
	}
	if r.lock != nil {
		r.lock.Close()
	}
	return nil
}

// replicatedStorage is a DB opened with OpenReplicated: the replicated log
// made every command durable before any node applied it, so the batches
// applied here are kept nowhere, and reads wait for its barrier.
type replicatedStorage struct {
	memoryStorage
	repl Replicator
}

func (r replicatedStorage) readBarrier(ctx context.Context) error {
	if StaleReads(ctx) {
		return nil
	}
	return r.repl.ReadBarrier(ctx)
}

// diskStorage is a data directory open for writing (Open): its log, its
// snapshots, its value log and its lock, held exclusively.
type diskStorage struct {
	fsys       vfs.FS
	snapDir    string
	log        *wal.Log
	lock       vfs.File
	durability Durability
	failpoint  func(string) error
	// vals is the value log (values.go), nil where every value stays in
	// memory; set once it is open.
	vals *values
	// fail stops the engine (core.failLocked).
	fail func(error) error
}

func (d *diskStorage) writable() error { return nil }
func (d *diskStorage) logged() bool    { return true }
func (d *diskStorage) snapshots() bool { return true }

func (d *diskStorage) readBarrier(context.Context) error { return nil }

func (d *diskStorage) append(seq uint64, data []byte) (int64, error) {
	return int64(len(data)), d.log.Append(seq, data)
}

// durable makes batch seq as durable as Durability says; the values it
// refers to reach the value log first (wal.Options.BeforeWrite).
func (d *diskStorage) durable(seq uint64, gathered bool) error {
	switch {
	case d.durability != SyncAlways:
		return d.log.FlushTo(seq)
	case gathered:
		return d.log.SyncGathered(seq)
	default:
		return d.log.Sync(seq)
	}
}

// sync is one tick of syncLoop: no commit waits for it, so the log's
// leader waits for no committers (SyncGathered).
func (d *diskStorage) sync(seq uint64) error {
	if err := d.syncValues(); err != nil {
		return err
	}
	return d.log.SyncGathered(seq)
}

func (d *diskStorage) snapshot(img *index.Image) (snapshot.Info, error) {
	return recovery.WriteSnapshot(d.fsys, d.snapDir, img, d.failpoint, d.log, d.syncValues, d.fail)
}

// syncValues makes the values appended so far durable.
func (d *diskStorage) syncValues() error {
	if d.vals == nil {
		return nil
	}
	return d.vals.log.Sync()
}

func (d *diskStorage) stats(s *Stats) {
	ls := d.log.Stats()
	s.LogSyncs, s.LogBytes, s.LogGroups = ls.Syncs, ls.BytesWritten, ls.Groups
	s.LogSyncTime = time.Duration(ls.SyncNanos)
	s.LogGathers, s.LogGatherMisses = ls.Gathers, ls.GatherMisses
}

// close closes the log, then the value log, then releases the directory:
// no file of it is open once another process can take the lock.
func (d *diskStorage) close(failed bool) error {
	closeLog := d.log.Close
	if failed {
		// What was appended and not written was not acknowledged, and may
		// refer to values the value log failed to write.
		closeLog = d.log.Abandon
	}
	err := closeLog()
	if d.vals != nil {
		if cerr := d.vals.log.Close(); err == nil {
			err = cerr
		}
	}
	d.lock.Close()
	return err
}

// errStorageClosed reports whether err says the storage was closed under
// a call (a commit racing with Close).
func errStorageClosed(err error) bool {
	return errors.Is(err, wal.ErrClosed) || errors.Is(err, vlog.ErrClosed)
}
