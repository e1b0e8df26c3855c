package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"

	"github.com/docketdb/docket/engine/internal/recovery"
	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/internal/vfs"
	"github.com/docketdb/docket/internal/vlog"
)

// ValueDamage is a value in the value log that cannot be read back: a
// record that fails its checksums, a torn tail, a file that is missing or
// shorter than a reference needs. Task, Namespace, Queue and Kind are set
// when a task of the state refers to the value (Referenced), or when the
// record's header still names its owner.
type ValueDamage struct {
	File   string // the value log file's name, as 0000000003.vlog
	Offset int64  // the record's offset in the file
	Size   int64  // bytes the damage spans (0 when unknown: a missing file)
	// Referenced says that a task of the recovered state refers to the
	// value: that task has lost it. Damage no task refers to (the torn tail
	// a crash leaves after values whose batches it also took, a record a
	// compaction copied away) loses nothing.
	Referenced bool
	Task       uint64
	Namespace  Namespace
	Queue      string
	Kind       string // payload, result, progress
	Torn       bool   // the tail of a file, as a crash during a write leaves it
	Reason     string
}

func (d ValueDamage) String() string {
	where := fmt.Sprintf("%s offset %d", d.File, d.Offset)
	switch {
	case d.Referenced:
		return fmt.Sprintf("the %s of task %d (%s/%s) in %s: %s", d.Kind, d.Task, d.Namespace, d.Queue, where, d.Reason)
	case d.Torn:
		return fmt.Sprintf("torn tail in %s (%d bytes), no task refers to it: %s", where, d.Size, d.Reason)
	case d.Task != 0:
		return fmt.Sprintf("damaged %s record of task %d in %s (%d bytes), no task refers to it: %s", d.Kind, d.Task, where, d.Size, d.Reason)
	}
	return fmt.Sprintf("damaged record in %s (%d bytes), no task refers to it: %s", where, d.Size, d.Reason)
}

// ValuesCheck is what a check of the value log found.
type ValuesCheck struct {
	Files int   // files of the value log
	Bytes int64 // their size
	Refs  int   // references the state holds
	// Lost lists the values the state refers to that do not read back,
	// by task id; Damage the other damaged records (no task has lost
	// anything by them).
	Lost, Damage []ValueDamage
}

// Print writes the value log's part of a report.
func (v ValuesCheck) Print(w io.Writer) {
	fmt.Fprintf(w, "value log: %d files, %d bytes, %d values referenced\n", v.Files, v.Bytes, v.Refs)
	for _, d := range v.Damage {
		fmt.Fprintf(w, "value log: %s\n", d)
	}
	for _, d := range v.Lost {
		fmt.Fprintf(w, "value log: LOST %s\n", d)
	}
}

// lostErr is the error of a check that found values the state has lost.
func (v ValuesCheck) lostErr() error {
	if len(v.Lost) == 0 {
		return nil
	}
	more := ""
	if n := len(v.Lost) - 1; n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	return fmt.Errorf("%w: %d values the state refers to do not read back: %s%s", ErrCorrupt, len(v.Lost), v.Lost[0], more)
}

// LostTasks lists the ids of the tasks that lost a value, in order, once each.
func (v ValuesCheck) LostTasks() []uint64 {
	var ids []uint64
	for _, d := range v.Lost {
		ids = append(ids, d.Task)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// valueRef is one reference of the state, for a check.
type valueRef struct {
	id   uint64
	q    index.QueueKey
	kind index.ValueKind
	ref  index.ValueRef
}

// stateRefs lists every reference to the value log store holds.
func stateRefs(store *index.Store) []valueRef {
	var out []valueRef
	var ws []want
	store.TasksFrom(0, false, func(t *index.Task) bool {
		ws = wants(ws[:0], 0, t, true)
		for _, w := range ws {
			out = append(out, valueRef{id: t.ID, q: t.Queue.Key, kind: w.kind, ref: w.ref})
		}
		return true
	})
	return out
}

// checkValues reads back every value refs names from the value log in dir
// and checks every record of it, without changing a byte.
func checkValues(fsys vfs.FS, dir string, refs []valueRef) (ValuesCheck, error) {
	rep := ValuesCheck{Refs: len(refs)}
	vdir := filepath.Join(dir, "vlog")
	if _, err := fsys.Stat(vdir); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return rep, err
		}
		// No value log: every reference is lost.
		for _, r := range refs {
			rep.Lost = append(rep.Lost, lostValue(r, errors.New("the value log directory is missing")))
		}
		return rep, nil
	}
	// The directory exists: Open creates nothing and reads no value.
	l, err := vlog.Open(vdir, vlog.Options{FS: fsys})
	if err != nil {
		return rep, wrapStorage(err)
	}
	defer l.Close()
	for _, f := range l.Files() {
		rep.Files++
		rep.Bytes += f.Synced
	}
	damage, err := l.Check()
	if err != nil {
		return rep, wrapStorage(err)
	}
	type at struct {
		file uint32
		off  int64
	}
	lost := map[at]bool{}
	for _, r := range refs {
		_, err := l.Read(vlog.Ref(r.ref), r.id, vlogKind[r.kind], nil)
		if err == nil {
			continue
		}
		if !isValueDamage(err) {
			return rep, wrapStorage(err)
		}
		rep.Lost = append(rep.Lost, lostValue(r, err))
		lost[at{r.ref.File, r.ref.Off}] = true
	}
	for _, d := range damage {
		if lost[at{d.File, d.Off}] {
			continue // reported with its task
		}
		vd := ValueDamage{File: vlogFileName(d.File), Offset: d.Off, Size: d.Size, Torn: d.Torn, Reason: d.Err.Error()}
		if d.HeaderOK {
			vd.Task, vd.Kind = d.Owner, d.Kind.String()
		}
		rep.Damage = append(rep.Damage, vd)
	}
	return rep, nil
}

// isValueDamage says whether a Read failed because of the bytes on disk
// (or their absence), as opposed to an I/O error that says nothing about
// them.
func isValueDamage(err error) bool {
	return errors.Is(err, vlog.ErrCorrupt) || errors.Is(err, vlog.ErrMissing) ||
		errors.Is(err, vlog.ErrMismatch) || errors.Is(err, vlog.ErrBadRef) || errors.Is(err, vlog.ErrUnsynced)
}

func lostValue(r valueRef, err error) ValueDamage {
	return ValueDamage{File: vlogFileName(r.ref.File), Offset: r.ref.Off, Referenced: true,
		Task: r.id, Namespace: Namespace(r.q.Namespace), Queue: r.q.Name, Kind: r.kind.String(), Reason: err.Error()}
}

// vlogFileName is the name of value log file n (vlog's naming).
func vlogFileName(n uint32) string { return fmt.Sprintf("%010d.vlog", n) }

// repairedValues checks, after Repair, that every value the recovered
// state refers to reads back: an error wrapping ErrCorrupt names the
// first task that lost one.
func repairedValues(dir string) error {
	b, _, err := recovery.InPlace(vfs.Default, dir, nil, false, applyBatch)
	if err != nil {
		return err
	}
	v, err := checkValues(vfs.Default, dir, stateRefs(b.Store))
	if err != nil {
		return err
	}
	return v.lostErr()
}

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

// droppedTasks is the number of distinct tasks of ds.
func droppedTasks(ds []ValueDamage) []uint64 { return ValuesCheck{Lost: ds}.LostTasks() }

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

// verifyValues reads back every value the state refers to, outside the
// lock as Get does: an error wrapping ErrCorrupt names the first task whose
// value does not read. A value whose task ended meanwhile is passed over.
func (c *core) verifyValues() error {
	if c.vals == nil {
		return nil
	}
	c.mu.Lock()
	refs := stateRefs(c.store)
	c.mu.Unlock()
	var lost []ValueDamage
	for _, r := range refs {
		w := want{id: r.id, kind: r.kind, ref: r.ref}
		_, err := c.readValue(&w)
		switch {
		case err == nil, errors.Is(err, errGone):
		case isValueDamage(err):
			lost = append(lost, lostValue(r, err))
		default:
			return err
		}
	}
	return ValuesCheck{Lost: lost}.lostErr()
}
