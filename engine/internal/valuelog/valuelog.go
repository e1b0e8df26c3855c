// Package valuelog is the engine's use of the value log (package vlog): a
// payload, result or progress record of at least Log.Threshold bytes is
// written there when its batch commits, and the state (and so the log's
// batches and every snapshot) holds a reference to it instead of its
// bytes. Claim, Get, List and Search read the bytes back when they return
// them, outside the engine lock.
//
// Ordering: a value is appended under the engine lock, before the batch
// that refers to it is encoded; the log's durability syncs (or flushes)
// the value log before the log, so no logged batch refers to a value that
// a crash can take while the batch survives. A reader that meets a value
// not yet written (vlog.ErrUnsynced: its batch is applied but its round
// not synced) flushes the value log and reads again; one that meets a
// value moved by compaction (vlog.ErrMissing: the file went) looks the
// reference up again. A value that cannot be read (damage, an I/O error)
// fails its task, not the call that read it (unreadable.go).
//
// What it needs of the engine is the narrow Host; it imports no engine
// type.
package valuelog

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/docketdb/docket/dockettype"
	"github.com/docketdb/docket/engine/internal/verify"
	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/internal/vfs"
	"github.com/docketdb/docket/internal/vlog"
)

// Host is what the value log's use needs of the engine.
type Host interface {
	// Locked runs fn with the state under the engine lock. With write set
	// it first checks that the engine takes writes, and returns why not
	// without running fn.
	Locked(write bool, fn func(st *index.Store)) error
	// Live sets keep[i] for each record of recs the state still refers
	// to, under one hold of the engine lock.
	Live(recs []vlog.Record, keep []bool)
	// Commit commits ms in a batch of its own and waits for it to be
	// durable.
	Commit(ctx context.Context, ms []index.Mutation) error
	// Fail stops the engine after err, a failure of the value log, and
	// returns the error calls get from then on.
	Fail(err error) error
}

// Log is the value log of a DB on disk.
type Log struct {
	VLog      *vlog.Log
	Threshold int  // from this size a value goes to the log; negative: none does
	Durable   bool // Durability is SyncAlways: Sync, not Flush
	host      Host
	compactMu sync.Mutex // one compaction at a time
}

// Open opens the value log in dir, for host's state (recovered already;
// the log reads no value). With the threshold off a directory with no
// value log opens none (nil): only one that has one keeps its values there.
func Open(fsys vfs.FS, dir string, threshold int, durable bool, fileSize int64, host Host) (*Log, error) {
	if threshold < 0 {
		if _, err := fsys.Stat(dir); err != nil {
			return nil, nil
		}
	}
	l, err := vlog.Open(dir, vlog.Options{FS: fsys, FileSize: fileSize})
	if err != nil {
		return nil, err
	}
	return &Log{VLog: l, Threshold: threshold, Durable: durable, host: host}, nil
}

// OpenReadOnly opens the value log in dir to read values, without
// creating anything; a directory with none (nil) has no references to read.
func OpenReadOnly(fsys vfs.FS, dir string, host Host) (*Log, error) {
	if _, err := fsys.Stat(dir); err != nil {
		return nil, nil
	}
	l, err := vlog.Open(dir, vlog.Options{FS: fsys})
	if err != nil {
		return nil, err
	}
	return &Log{VLog: l, host: host}, nil
}

// OutOfLine moves the large values of batch b into the value log, in
// place: each mutation that would put one in memory gets a reference to
// it instead. Call with the engine lock held, before b is checked,
// encoded and applied.
func (v *Log) OutOfLine(b *index.Batch) error {
	if v.Threshold < 0 {
		return nil // off: the log only serves the values already in it
	}
	for i := range b.Mutations {
		m := &b.Mutations[i]
		switch m.Kind {
		case index.MutPutTask:
			// The record is new, made by the planner for this batch and
			// stored by nothing yet: its payload reference is set in place
			// (WithRef would copy the record for every large payload).
			t := m.Task
			if len(t.Payload()) >= v.Threshold {
				r, err := v.VLog.Append(t.ID, vlog.Payload, t.Payload())
				if err != nil {
					return err
				}
				t.SetPayloadRef(index.ValueRef(r))
			}
			if x := t.Extra; x != nil {
				if len(x.Result) >= v.Threshold {
					r, err := v.VLog.Append(t.ID, vlog.Result, x.Result)
					if err != nil {
						return err
					}
					t = t.WithRef(index.ValueResult, index.ValueRef(r))
				}
				if len(x.Progress) >= v.Threshold {
					r, err := v.VLog.Append(t.ID, vlog.Progress, x.Progress)
					if err != nil {
						return err
					}
					t = t.WithRef(index.ValueProgress, index.ValueRef(r))
				}
			}
			m.Task = t
		case index.MutUpdateTask:
			u := &m.Update
			if u.Flags&index.UpdResult != 0 && len(u.Result) >= v.Threshold {
				r, err := v.VLog.Append(u.ID, vlog.Result, u.Result)
				if err != nil {
					return err
				}
				u.Result, u.ResultRef = nil, index.ValueRef(r)
			}
			if u.Flags&index.UpdProgress != 0 && len(u.Progress) >= v.Threshold {
				r, err := v.VLog.Append(u.ID, vlog.Progress, u.Progress)
				if err != nil {
					return err
				}
				u.Progress, u.ProgressRef = nil, index.ValueRef(r)
			}
		}
	}
	return nil
}

// Borrows reports whether payload p goes to the value log when its batch
// commits (which copies it), so that a local commit may plan it as the
// caller's bytes.
func (v *Log) Borrows(p []byte) bool {
	return v.Threshold >= 0 && len(p) >= v.Threshold && len(p) > 0
}

// Sync makes the values appended so far as durable as the log is about
// to make the batches that refer to them.
func (v *Log) Sync() error {
	if v.Durable {
		return v.VLog.Sync()
	}
	return v.VLog.Flush()
}

// Bytes is the size of the value log's files.
func (v *Log) Bytes() int64 {
	var n int64
	for _, f := range v.VLog.Files() {
		n += f.Size
	}
	return n
}

// Want is a value a call returns that the state holds by reference: the
// I-th item of the call's answer, whose value of Kind lives at Ref.
type Want struct {
	I    int
	ID   uint64
	Kind index.ValueKind
	Ref  index.ValueRef
}

// Wants appends what of task t, the i-th item of an answer, lives in the
// value log: its payload, and with all its result and progress. Call with
// the engine lock held.
func Wants(ws []Want, i int, t *index.Task, all bool) []Want {
	if r := t.PayloadRef(); !r.IsZero() {
		ws = append(ws, Want{i, t.ID, index.ValuePayload, r})
	}
	if t.Extra == nil || t.Extra.Refs == nil {
		return ws
	}
	if r := t.Extra.ProgressRef(); !r.IsZero() {
		ws = append(ws, Want{i, t.ID, index.ValueProgress, r})
	}
	if r := t.Extra.ResultRef(); all && !r.IsZero() {
		ws = append(ws, Want{i, t.ID, index.ValueResult, r})
	}
	return ws
}

// LeaseWants lists the values of leases held by reference. Call with the
// engine lock held, while planning the claim: a task enqueued by the same
// batch has its values in line in its lease already.
func LeaseWants(st *index.Store, ls []dockettype.Lease, ws []Want) []Want {
	for i := range ls {
		if t, ok := st.Task(ls[i].ID); ok {
			ws = Wants(ws, i, t, false)
		}
	}
	return ws
}

// VlogKind is the value log's kind of a value of kind k.
var VlogKind = [...]vlog.Kind{index.ValuePayload: vlog.Payload, index.ValueResult: vlog.Result,
	index.ValueProgress: vlog.Progress, index.ValueKV: vlog.KVValue}

var indexKind = [...]index.ValueKind{vlog.Payload: index.ValuePayload, vlog.Result: index.ValueResult,
	vlog.Progress: index.ValueProgress, vlog.KVValue: index.ValueKV}

// RefOf is the reference st holds for the value of kind of task owner
// (zero for none). Call with the engine lock held.
func RefOf(st *index.Store, owner uint64, kind vlog.Kind) index.ValueRef {
	t, ok := st.Task(owner)
	if !ok {
		return index.ValueRef{}
	}
	switch kind {
	case vlog.Payload:
		return t.PayloadRef()
	case vlog.Result:
		return t.Ex().ResultRef()
	case vlog.Progress:
		return t.Ex().ProgressRef()
	}
	return index.ValueRef{}
}

// ReadAll reads the values ws name, calling set with each. A value moved
// by a compaction meanwhile is looked up again. It returns the values it
// could not read (unreadable.go): those whose task ended or changed
// meanwhile, and those the value log cannot return. The error is for the
// call as a whole: a closed or failed DB.
func (v *Log) ReadAll(ws []Want, set func(w *Want, b []byte)) ([]Bad, error) {
	var bad []Bad
	for k := range ws {
		w := &ws[k]
		b, err := v.Read(w)
		if err == nil {
			set(w, b)
			continue
		}
		bv, ok := unreadable(w, err)
		if !ok {
			return bad, err
		}
		bad = append(bad, bv)
	}
	return bad, nil
}

// ErrGone is a value whose task ended or changed while it was being read.
var ErrGone = fmt.Errorf("%w: the task changed while its value was read", dockettype.ErrNotFound)

// Read reads the value w names.
func (v *Log) Read(w *Want) ([]byte, error) {
	for try := 0; ; try++ {
		b, err := v.VLog.Read(vlog.Ref(w.Ref), w.ID, VlogKind[w.Kind], nil)
		switch {
		case err == nil:
			return b, nil
		case errors.Is(err, vlog.ErrUnsynced) && try < 3:
			// Its batch is applied, its round not written yet.
			if ferr := v.VLog.Flush(); ferr != nil {
				return nil, v.host.Fail(ferr)
			}
		case errors.Is(err, vlog.ErrMissing) && try < 3:
			// Compaction moved it and removed its file: look it up again.
			var r index.ValueRef
			v.host.Locked(false, func(st *index.Store) { r = RefOf(st, w.ID, VlogKind[w.Kind]) })
			if r.IsZero() {
				return nil, fmt.Errorf("task %d: %w", w.ID, ErrGone)
			}
			w.Ref = r
		default:
			return nil, &readError{kind: w.Kind, id: w.ID, ref: w.Ref, err: err}
		}
	}
}

// FillLeases reads the values of ls that LeaseWants listed, and returns
// those it could not read: Drop settles their leases.
func (v *Log) FillLeases(ls []dockettype.Lease, ws []Want) ([]Bad, error) {
	return v.ReadAll(ws, func(w *Want, b []byte) {
		switch w.Kind {
		case index.ValuePayload:
			ls[w.I].Payload = b
		case index.ValueProgress:
			ls[w.I].Progress = b
		}
	})
}

// FillInfos reads the values of infos that Wants listed. A value whose
// task ended meanwhile is left out (the task is shown as it was, less that
// value); so is one that cannot be read, and the task's Unreadable names
// the damage, and note is told. It returns those, for a call about one
// task to report.
func (v *Log) FillInfos(infos []dockettype.TaskInfo, ws []Want, note func(b *Bad, t *dockettype.TaskInfo)) ([]Bad, error) {
	bad, err := v.ReadAll(ws, func(w *Want, b []byte) {
		switch w.Kind {
		case index.ValuePayload:
			infos[w.I].Payload = b
		case index.ValueProgress:
			infos[w.I].Progress = b
		case index.ValueResult:
			infos[w.I].Result = b
		}
	})
	if err != nil {
		return nil, err
	}
	n := 0
	for k := range bad {
		b := &bad[k]
		if b.Gone {
			continue
		}
		bad[n] = *b
		n++
		t := &infos[b.W.I]
		if t.Unreadable != "" {
			t.Unreadable += "; "
		}
		t.Unreadable += b.Err.Error()
		note(b, t)
	}
	return bad[:n], nil
}

// Refs lists every reference to the value log st holds.
func Refs(st *index.Store) []verify.ValueRef {
	var out []verify.ValueRef
	var ws []Want
	st.TasksFrom(0, false, func(t *index.Task) bool {
		ws = Wants(ws[:0], 0, t, true)
		for _, w := range ws {
			out = append(out, verify.ValueRef{ID: t.ID, Q: t.Queue.Key, Kind: w.Kind, VK: VlogKind[w.Kind], Ref: w.Ref})
		}
		return true
	})
	return out
}

// Verify reads back every value refs name, outside the engine lock as Get
// does: an error wrapping ErrCorrupt names the first task whose value does
// not read. A value whose task ended meanwhile is passed over.
func (v *Log) Verify(refs []verify.ValueRef) error {
	var lost []verify.ValueDamage
	for _, r := range refs {
		w := Want{ID: r.ID, Kind: r.Kind, Ref: r.Ref}
		_, err := v.Read(&w)
		switch {
		case err == nil, errors.Is(err, ErrGone):
		case verify.IsValueDamage(err):
			lost = append(lost, verify.LostValue(r, err))
		default:
			return err
		}
	}
	return verify.LostErr(lost)
}
