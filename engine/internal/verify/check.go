// Package verify holds the offline checks of a data directory: Check
// (verify without changing a byte), Repair (cut a torn tail, as Open does)
// and Salvage (keep the longest valid prefix of a damaged log and drop the
// tasks whose values do not read back), and their reports. Each runs the
// recovery Open runs (package recovery), so that they cannot disagree
// about a directory. Package engine documents them (engine.Check,
// engine.Repair, engine.Salvage) and keeps every name.
package verify

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/engine/internal/recovery"
	"github.com/docketdb/docket/internal/flock"
	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/internal/snapshot"
	"github.com/docketdb/docket/internal/vfs"
	"github.com/docketdb/docket/wal"
)

// Env is what the offline checks need of the engine.
type Env struct {
	// Apply is the engine's one step from a logged batch to the state.
	Apply recovery.Apply
	// Refs lists every reference to the value log that store holds.
	Refs func(store *index.Store) []ValueRef
	// Drop opens dir and deletes the tasks ids, whatever their state, as
	// Cancel does.
	Drop func(dir string, ids []uint64) error
}

// LogCheck is what Check found in the write-ahead log.
type LogCheck struct {
	// Segments is the number of segment files.
	Segments int
	// FirstSeq and LastSeq bound the valid records; with no records
	// FirstSeq is LastSeq+1. In a corrupt log they stop where the damage
	// starts.
	FirstSeq, LastSeq uint64
	// Records is the number of valid records and Bytes their size on disk.
	Records uint64
	Bytes   int64
	// Torn is the torn tail (a write a crash interrupted, never
	// acknowledged) that Open cuts, or nil.
	Torn *LogDamage
	// Corrupt is the damage that makes Open refuse the directory, or nil.
	Corrupt *LogDamage
	// Covered lists damaged records before the snapshot recovery starts
	// from: Open gets past them, since the snapshot holds their effect.
	Covered []LogDamage
}

// LogDamage locates a bad spot in a log segment file.
type LogDamage struct {
	File   string // path of the segment file
	Offset int64  // where the first bad record starts
	Size   int64  // bytes from Offset to the end of the file
	Reason string
}

// logCheckOf is the log's own report as Check reports it.
func logCheckOf(r wal.CheckReport) LogCheck {
	damage := func(d *wal.Damage) *LogDamage {
		if d == nil {
			return nil
		}
		return &LogDamage{File: d.File, Offset: d.Offset, Size: d.Size, Reason: d.Reason}
	}
	l := LogCheck{
		Segments: r.Segments, FirstSeq: r.FirstSeq, LastSeq: r.LastSeq, Records: r.Records, Bytes: r.Bytes,
		Torn: damage(r.Torn), Corrupt: damage(r.Corrupt),
	}
	for i := range r.Covered {
		l.Covered = append(l.Covered, *damage(&r.Covered[i]))
	}
	return l
}

// CheckReport is what Check found in a data directory.
type CheckReport struct {
	Dir       string
	Snapshots []recovery.SnapshotCheck
	Log       LogCheck
	// LoadedFrom is the snapshot recovery would start from ("" for none).
	LoadedFrom string
	Seq        uint64 // last batch after replay
	// Refused counts replayed batches whose assertions no longer held: they
	// applied nothing (a refusal is an outcome, not damage).
	Refused int
	Tasks   int
	Queues  int
	// Values is what the check of the value log found: every record's
	// checksums, and every reference of the state read back.
	Values ValuesCheck
}

// Print writes the report for a person.
func (r CheckReport) Print(w io.Writer) {
	fmt.Fprintf(w, "directory %s\n", r.Dir)
	for _, s := range r.Snapshots {
		status := "ok"
		if s.Err != nil {
			status = "BAD: " + s.Err.Error()
		}
		fmt.Fprintf(w, "snapshot %s: seq %d, %d records: %s\n", filepath.Base(s.Path), s.Seq, s.Records, status)
	}
	l := r.Log
	fmt.Fprintf(w, "log: %d segments, records %d..%d (%d records, %d bytes)\n", l.Segments, l.FirstSeq, l.LastSeq, l.Records, l.Bytes)
	if l.Torn != nil {
		fmt.Fprintf(w, "log: torn tail in %s at offset %d (%d bytes): %s; open or repair cuts it\n",
			filepath.Base(l.Torn.File), l.Torn.Offset, l.Torn.Size, l.Torn.Reason)
	}
	if l.Corrupt != nil {
		fmt.Fprintf(w, "log: CORRUPT in %s at offset %d: %s\n", filepath.Base(l.Corrupt.File), l.Corrupt.Offset, l.Corrupt.Reason)
	}
	if r.LoadedFrom != "" {
		fmt.Fprintf(w, "recovery starts from %s\n", filepath.Base(r.LoadedFrom))
	}
	fmt.Fprintf(w, "state after replay: last batch %d, %d tasks in %d queues\n", r.Seq, r.Tasks, r.Queues)
	if r.Refused > 0 {
		fmt.Fprintf(w, "replay refused %d batches whose assertions no longer held\n", r.Refused)
	}
	if r.Values.Files > 0 || r.Values.Refs > 0 {
		r.Values.Print(w)
	}
}

// Check is engine.Check on fsys: it verifies the data directory dir
// without changing it and without taking its lock.
func Check(fsys vfs.FS, dir string, env Env) (CheckReport, error) {
	rep := CheckReport{Dir: dir}
	b, lrep, err := recovery.InPlace(fsys, dir, nil, true, env.Apply)
	rep.Log = logCheckOf(lrep)
	if b != nil {
		rep.Snapshots = b.Snaps
		rep.LoadedFrom = b.Path
	}
	if err != nil {
		return rep, err
	}
	store := b.Store
	rep.Refused = b.Refused
	rep.Seq, rep.Tasks = store.Seq(), store.Len()
	store.Queues(func(*index.Queue) bool { rep.Queues++; return true })
	if err := store.Verify(); err != nil {
		return rep, fmt.Errorf("%w: indexes after replay: %w", dockettype.ErrCorrupt, err)
	}
	if rep.Values, err = checkValues(fsys, dir, env.Refs(store)); err != nil {
		return rep, err
	}
	return rep, LostErr(rep.Values.Lost)
}

// lockDir takes the directory's lock for an offline change.
func lockDir(dir string) (vfs.File, error) {
	if err := recovery.IsDocketDir(vfs.Default, dir); err != nil {
		return nil, err
	}
	lock, err := vfs.Default.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	if err := vfs.Default.Lock(lock, true); err != nil {
		lock.Close()
		if errors.Is(err, flock.ErrHeld) {
			return nil, fmt.Errorf("%w: %s", dockettype.ErrLocked, dir)
		}
		return nil, err
	}
	return lock, nil
}

// Repair is engine.Repair.
func Repair(dir string, env Env) (string, error) {
	lock, err := lockDir(dir)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := snapshot.RemoveTemp(filepath.Join(dir, "snap")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	b, err := recovery.LoadBase(vfs.Default, filepath.Join(dir, "snap"), nil, false)
	if err != nil {
		return "", err
	}
	rep, err := wal.RepairFrom(filepath.Join(dir, "wal"), b.From())
	if err != nil {
		return "", recovery.WrapStorage(err)
	}
	if err := repairedValues(dir, env); err != nil {
		return "", err
	}
	if rep.Cut == nil {
		return fmt.Sprintf("log records %d..%d: nothing to repair", rep.FirstSeq, rep.LastSeq), nil
	}
	return fmt.Sprintf("cut %d bytes of torn tail from %s at offset %d (%s); copy kept in %s; log records %d..%d",
		rep.Cut.Size, rep.Cut.File, rep.Cut.Offset, rep.Cut.Reason, rep.Broken, rep.FirstSeq, rep.LastSeq), nil
}

// SalvageReport says what Salvage kept and what it lost.
type SalvageReport struct {
	Dir string
	// Snapshot is the snapshot the kept log continues ("" for none).
	Snapshot string
	// FirstSeq..LastSeq are the log records kept.
	FirstSeq, LastSeq uint64
	// LostFirst..LostLast are the batches dropped (none when LostFirst is
	// 0): every one from the first damaged record to the highest one any
	// file still shows.
	LostFirst, LostLast uint64
	// Readable is how many of the lost batches still verify; Tasks is how
	// many distinct tasks those change (NewTasks of them created there).
	// The others are unreadable: what they changed is unknown.
	Readable, Tasks, NewTasks int
	// Damage says where the valid log ended.
	Damage string
	// Kept lists the copies of everything cut or moved aside.
	Kept []string
	// Dropped lists the values of the recovered state that do not read
	// back from the value log (a flipped bit, a lost or cut file): their
	// tasks were deleted, since a task cannot run or report without them.
	Dropped []ValueDamage
}

// Lost is the number of batches dropped.
func (r SalvageReport) Lost() uint64 {
	if r.LostFirst == 0 {
		return 0
	}
	return r.LostLast - r.LostFirst + 1
}

// Print writes the report for a person.
func (r SalvageReport) Print(w io.Writer) {
	for _, d := range r.Dropped {
		fmt.Fprintf(w, "DROPPED task %d (%s/%s): its %s does not read back from %s at offset %d: %s\n",
			d.Task, d.Namespace, d.Queue, d.Kind, d.File, d.Offset, d.Reason)
	}
	if r.LostFirst == 0 {
		if len(r.Dropped) > 0 {
			fmt.Fprintf(w, "%s: log records %d..%d kept; %d tasks dropped for their values\n", r.Dir, r.FirstSeq, r.LastSeq, len(ValuesCheck{Lost: r.Dropped}.LostTasks()))
			return
		}
		fmt.Fprintf(w, "%s: nothing lost; log records %d..%d kept\n", r.Dir, r.FirstSeq, r.LastSeq)
		return
	}
	fmt.Fprintf(w, "damage: %s\n", r.Damage)
	fmt.Fprintf(w, "kept: log records %d..%d", r.FirstSeq, r.LastSeq)
	if r.Snapshot != "" {
		fmt.Fprintf(w, " after snapshot %s", filepath.Base(r.Snapshot))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "LOST: batches %d..%d (%d batches; %d still readable, changing %d tasks, %d of them new; %d unreadable)\n",
		r.LostFirst, r.LostLast, r.Lost(), r.Readable, r.Tasks, r.NewTasks, r.Lost()-uint64(r.Readable))
	for _, k := range r.Kept {
		fmt.Fprintf(w, "kept aside: %s\n", k)
	}
}

// Salvage is engine.Salvage.
func Salvage(dir string, env Env) (SalvageReport, error) {
	rep := SalvageReport{Dir: dir}
	lock, err := lockDir(dir)
	if err != nil {
		return rep, err
	}
	defer lock.Close()
	if err := snapshot.RemoveTemp(filepath.Join(dir, "snap")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return rep, err
	}
	b, err := recovery.LoadBase(vfs.Default, filepath.Join(dir, "snap"), nil, false)
	if err != nil {
		return rep, err
	}
	rep.Snapshot = b.Path
	walDir := filepath.Join(dir, "wal")
	// Refuse before changing anything when the log cannot continue the
	// snapshot whatever is cut.
	if lrep, err := wal.CheckFrom(walDir, b.From()); err != nil && !errors.Is(err, wal.ErrCorrupt) {
		return rep, err
	} else if err := b.Decide(lrep.FirstSeq, max(lrep.LastSeq, b.Store.Seq()), nil); err != nil {
		return rep, err
	}
	wrep, err := wal.Salvage(walDir, b.From())
	if err != nil {
		return rep, recovery.WrapStorage(err)
	}
	rep.FirstSeq, rep.LastSeq = wrep.FirstSeq, wrep.LastSeq
	rep.LostFirst, rep.LostLast, rep.Kept = wrep.LostFirst, wrep.LostLast, wrep.Kept
	if wrep.Damage != nil {
		rep.Damage = fmt.Sprintf("%s at offset %d: %s", wrep.Damage.File, wrep.Damage.Offset, wrep.Damage.Reason)
	}
	tasks, created := map[uint64]bool{}, map[uint64]bool{}
	dec := index.NewDecoder(index.NewStore())
	var batch index.Batch
	for _, r := range wrep.Readable {
		if dec.Batch(r.Data, &batch) != nil {
			continue
		}
		rep.Readable++
		for _, m := range batch.Mutations {
			switch m.Kind {
			case index.MutPutTask:
				if m.Task != nil {
					tasks[m.Task.ID], created[m.Task.ID] = true, true
				}
			case index.MutUpdateTask, index.MutDeleteTask:
				tasks[m.Update.ID] = true
			}
		}
	}
	rep.Tasks, rep.NewTasks = len(tasks), len(created)
	rb, _, err := recovery.InPlace(vfs.Default, dir, nil, false, env.Apply)
	if err != nil {
		return rep, fmt.Errorf("salvaged, but the directory still does not recover: %w", err)
	}
	vrep, err := checkValues(vfs.Default, dir, env.Refs(rb.Store))
	if err != nil {
		return rep, err
	}
	if len(vrep.Lost) == 0 {
		return rep, nil
	}
	// Open takes the lock itself.
	lock.Close()
	rep.Dropped = vrep.Lost
	if err := env.Drop(dir, vrep.LostTasks()); err != nil {
		return rep, fmt.Errorf("dropping the tasks whose values do not read back: %w", err)
	}
	if _, err := Check(vfs.Default, dir, env); err != nil {
		return rep, fmt.Errorf("salvaged, but the directory still does not verify: %w", err)
	}
	return rep, nil
}
