package verify

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/docketdb/docket/dockettype"
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
	Namespace  dockettype.Namespace
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

// LostErr is the error of a check that found lost, the values the state
// refers to that do not read back (nil for none).
func LostErr(lost []ValueDamage) error {
	if len(lost) == 0 {
		return nil
	}
	more := ""
	if n := len(lost) - 1; n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	return fmt.Errorf("%w: %d values the state refers to do not read back: %s%s", dockettype.ErrCorrupt, len(lost), lost[0], more)
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

// ValueRef is one reference of the state to the value log, for a check.
type ValueRef struct {
	ID   uint64
	Q    index.QueueKey
	Kind index.ValueKind
	VK   vlog.Kind // Kind as the value log names it
	Ref  index.ValueRef
}

// checkValues reads back every value refs names from the value log in dir
// and checks every record of it, without changing a byte.
func checkValues(fsys vfs.FS, dir string, refs []ValueRef) (ValuesCheck, error) {
	rep := ValuesCheck{Refs: len(refs)}
	vdir := filepath.Join(dir, "vlog")
	if _, err := fsys.Stat(vdir); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return rep, err
		}
		// No value log: every reference is lost.
		for _, r := range refs {
			rep.Lost = append(rep.Lost, LostValue(r, errors.New("the value log directory is missing")))
		}
		return rep, nil
	}
	// The directory exists: Open creates nothing and reads no value.
	l, err := vlog.Open(vdir, vlog.Options{FS: fsys})
	if err != nil {
		return rep, recovery.WrapStorage(err)
	}
	defer l.Close()
	for _, f := range l.Files() {
		rep.Files++
		rep.Bytes += f.Synced
	}
	damage, err := l.Check()
	if err != nil {
		return rep, recovery.WrapStorage(err)
	}
	type at struct {
		file uint32
		off  int64
	}
	lost := map[at]bool{}
	for _, r := range refs {
		_, err := l.Read(vlog.Ref(r.Ref), r.ID, r.VK, nil)
		if err == nil {
			continue
		}
		if !IsValueDamage(err) {
			return rep, recovery.WrapStorage(err)
		}
		rep.Lost = append(rep.Lost, LostValue(r, err))
		lost[at{r.Ref.File, r.Ref.Off}] = true
	}
	for _, d := range damage {
		if lost[at{d.File, d.Off}] {
			continue // reported with its task
		}
		vd := ValueDamage{File: FileName(d.File), Offset: d.Off, Size: d.Size, Torn: d.Torn, Reason: d.Err.Error()}
		if d.HeaderOK {
			vd.Task, vd.Kind = d.Owner, d.Kind.String()
		}
		rep.Damage = append(rep.Damage, vd)
	}
	return rep, nil
}

// IsValueDamage says whether a Read failed because of the bytes on disk
// (or their absence), as opposed to an I/O error that says nothing about
// them.
func IsValueDamage(err error) bool {
	return errors.Is(err, vlog.ErrCorrupt) || errors.Is(err, vlog.ErrMissing) ||
		errors.Is(err, vlog.ErrMismatch) || errors.Is(err, vlog.ErrBadRef) || errors.Is(err, vlog.ErrUnsynced)
}

// LostValue is the damage of reference r, whose value read back with err.
func LostValue(r ValueRef, err error) ValueDamage {
	return ValueDamage{File: FileName(r.Ref.File), Offset: r.Ref.Off, Referenced: true,
		Task: r.ID, Namespace: dockettype.Namespace(r.Q.Namespace), Queue: r.Q.Name, Kind: r.Kind.String(), Reason: err.Error()}
}

// FileName is the name of value log file n (vlog's naming).
func FileName(n uint32) string { return fmt.Sprintf("%010d.vlog", n) }

// repairedValues checks, after Repair, that every value the recovered
// state refers to reads back: an error wrapping ErrCorrupt names the
// first task that lost one.
func repairedValues(dir string, env Env) error {
	b, _, err := recovery.InPlace(vfs.Default, dir, nil, false, env.Apply)
	if err != nil {
		return err
	}
	v, err := checkValues(vfs.Default, dir, env.Refs(b.Store))
	if err != nil {
		return err
	}
	return LostErr(v.Lost)
}
