package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/docketdb/docket/engine/internal/recovery"
	"github.com/docketdb/docket/engine/internal/valuelog"
	"github.com/docketdb/docket/engine/internal/verify"
	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/internal/vfs"
)

// The offline checks and their reports are package verify's.
type (
	// CheckReport is what Check found in a data directory.
	CheckReport = verify.CheckReport
	// SnapshotCheck is what Check found in one snapshot file.
	SnapshotCheck = recovery.SnapshotCheck
	// LogCheck is what Check found in the write-ahead log.
	LogCheck = verify.LogCheck
	// LogDamage locates a bad spot in a log segment file.
	LogDamage = verify.LogDamage
	// ValuesCheck is what a check of the value log found.
	ValuesCheck = verify.ValuesCheck
	// ValueDamage is a value in the value log that cannot be read back.
	ValueDamage = verify.ValueDamage
	// SalvageReport says what Salvage kept and what it lost.
	SalvageReport = verify.SalvageReport
)

// Check verifies a data directory without changing it and without taking
// its lock, by running the recovery Open runs (package recovery) over the
// files as they are: it returns nil exactly when Open would succeed (a torn
// tail, which Open cuts, is reported in Log.Torn, not as an error), an error
// wrapping ErrCorrupt when Open would refuse the data, and any other error
// (a missing path, a permission error, not a docket directory) as it is.
// Damage Open gets past (an unreadable newest snapshot with an older one to
// fall back to, damaged log records a snapshot covers) is listed in the
// report's Snapshots and Log.Covered. After the replay every index is
// checked against the records, every record of the value log against its
// checksums, and every value the state refers to is read back: one that
// does not read (Values.Lost, naming its task) is an error wrapping
// ErrCorrupt although Open would succeed, since that task has lost it.
// Damage no task refers to (a torn tail) is listed in Values.Damage.
func Check(dir string) (CheckReport, error) { return checkFS(vfs.Default, dir) }

// checkFS is Check on fsys.
func checkFS(fsys vfs.FS, dir string) (CheckReport, error) { return verify.Check(fsys, dir, offline) }

// Repair cuts a torn log tail the way Open does, keeping a copy of the
// damaged segment, and removes leftover temporary snapshot files. It refuses
// a directory that is open, and damage that Open would refuse (see Salvage).
// A value the state refers to that does not read back from the value log is
// an error wrapping ErrCorrupt naming its task: Salvage drops such tasks.
func Repair(dir string) (string, error) { return verify.Repair(dir, offline) }

// Salvage makes a directory that Open refuses because of damage in the log
// after the newest good snapshot openable again, by keeping the longest
// valid prefix of the log after that snapshot: the damaged segment is copied
// aside and cut, later segments are moved aside (nothing is deleted), and
// the report says exactly which batches were lost and how many tasks they
// changed. Open never does this on its own. Then every value the state
// refers to is read back from the value log: a task one of whose values
// does not (a flipped bit, a file lost or cut) is deleted, and listed in
// Dropped with its file and offset. It is deleted rather than dead-lettered:
// a dead task without its payload would be redriven, or its result read,
// with bytes that are not its own; deleting it makes the loss explicit, as
// for the lost batches. The directory then verifies clean. A directory
// Open accepts whose values all read is repaired as Repair does and nothing
// is lost. It refuses a directory that
// is open, damage it cannot get past (no snapshot reads and the log does not
// reach back to the first batch), and leaves the directory as it was then.
func Salvage(dir string) (SalvageReport, error) { return verify.Salvage(dir, offline) }

// offline is what the offline checks need of the engine.
var offline = verify.Env{Apply: applyBatch, Refs: stateRefs, Drop: dropTasks}

// stateRefs lists every reference to the value log store holds.
func stateRefs(store *index.Store) []verify.ValueRef { return valuelog.Refs(store) }

// dropTasks opens dir and deletes the tasks ids, whatever their state, as
// Cancel does (a task waiting on one is released as for a cancel).
func dropTasks(dir string, ids []uint64) error {
	db, err := Open(dir, Options{Logger: slog.New(slog.DiscardHandler), SnapshotBytes: -1})
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := db.dropTask(id); err != nil && !errors.Is(err, ErrNotFound) {
			db.Close()
			return fmt.Errorf("task %d: %w", id, err)
		}
	}
	return db.Close()
}

// dropTask cancels task id in its own queue.
func (d *DB) dropTask(id uint64) error {
	c := d.c
	c.mu.Lock()
	t, ok := c.store.Task(id)
	var q index.QueueKey
	if ok {
		q = t.Queue.Key
	}
	c.mu.Unlock()
	if !ok {
		return ErrNotFound
	}
	return d.Queue(Namespace(q.Namespace), q.Name).Cancel(context.Background(), id)
}

// verifyValues reads back every value the state refers to
// (valuelog.Log.Verify).
func (c *core) verifyValues() error {
	if c.vals == nil {
		return nil
	}
	c.mu.Lock()
	refs := stateRefs(c.store)
	c.mu.Unlock()
	return c.vals.Verify(refs)
}
