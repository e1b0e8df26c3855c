package engine

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/docketdb/docket/internal/index"
	"github.com/docketdb/docket/internal/vlog"
)

// DefaultValueThreshold is Options.ValueThreshold when it is 0.
const DefaultValueThreshold = 1024

// values is the value log of a DB on disk: a payload, result or progress
// record of at least Options.ValueThreshold bytes is written there when its
// batch commits, and the state (and so the log's batches and every
// snapshot) holds a reference to it instead of its bytes. Claim, Get, List
// and Search read the bytes back when they return them, outside the engine
// lock.
//
// Ordering: a value is appended under mu, in logAndApply, before the batch
// that refers to it is encoded; durable syncs (or flushes) the value log
// before the log, so no logged batch refers to a value that a crash can
// take while the batch survives. A reader that meets a value not yet
// written (ErrUnsynced: its batch is applied but its round not synced)
// flushes the value log and reads again; one that meets a value moved by
// compaction (ErrMissing: the file went) looks the reference up again.
type values struct {
	log       *vlog.Log
	threshold int
	durable   bool // Durability is SyncAlways: Sync, not Flush
}

func (c *core) valueDir() string { return filepath.Join(c.dir, "vlog") }

// openValues opens the value log of a DB on disk. Call once the state is
// recovered; the log reads no value.
func (c *core) openValues() error {
	if c.opts.ValueThreshold < 0 || c.dir == "" || c.readOnly || c.repl != nil {
		return nil
	}
	l, err := vlog.Open(c.valueDir(), vlog.Options{FS: c.fs(), FileSize: c.opts.valueFileSize})
	if err != nil {
		return wrapStorage(err)
	}
	c.vals = &values{log: l, threshold: c.opts.ValueThreshold, durable: c.opts.Durability == SyncAlways}
	return nil
}

// openValuesReadOnly opens the value log to read values, without creating
// anything; a directory with none has no references to read.
func (c *core) openValuesReadOnly() error {
	if _, err := c.fs().Stat(c.valueDir()); err != nil {
		return nil
	}
	l, err := vlog.Open(c.valueDir(), vlog.Options{FS: c.fs()})
	if err != nil {
		return wrapStorage(err)
	}
	c.vals = &values{log: l}
	return nil
}

// outOfLine moves the large values of batch b into the value log, in
// place: each mutation that would put one in memory gets a reference to
// it instead. Call with mu held, before b is checked, encoded and applied.
func (v *values) outOfLine(b *index.Batch) error {
	for i := range b.Mutations {
		m := &b.Mutations[i]
		switch m.Kind {
		case index.MutPutTask:
			t := m.Task
			if len(t.Payload()) >= v.threshold {
				r, err := v.log.Append(t.ID, vlog.Payload, t.Payload())
				if err != nil {
					return err
				}
				t = t.WithRef(index.ValuePayload, index.ValueRef(r))
			}
			if x := t.Extra; x != nil {
				if len(x.Result) >= v.threshold {
					r, err := v.log.Append(t.ID, vlog.Result, x.Result)
					if err != nil {
						return err
					}
					t = t.WithRef(index.ValueResult, index.ValueRef(r))
				}
				if len(x.Progress) >= v.threshold {
					r, err := v.log.Append(t.ID, vlog.Progress, x.Progress)
					if err != nil {
						return err
					}
					t = t.WithRef(index.ValueProgress, index.ValueRef(r))
				}
			}
			m.Task = t
		case index.MutUpdateTask:
			u := &m.Update
			if u.Flags&index.UpdResult != 0 && len(u.Result) >= v.threshold {
				r, err := v.log.Append(u.ID, vlog.Result, u.Result)
				if err != nil {
					return err
				}
				u.Result, u.ResultRef = nil, index.ValueRef(r)
			}
			if u.Flags&index.UpdProgress != 0 && len(u.Progress) >= v.threshold {
				r, err := v.log.Append(u.ID, vlog.Progress, u.Progress)
				if err != nil {
					return err
				}
				u.Progress, u.ProgressRef = nil, index.ValueRef(r)
			}
		}
	}
	return nil
}

// sync makes the values appended so far as durable as the log is about to
// make the batches that refer to them.
func (v *values) sync() error {
	if v.durable {
		return v.log.Sync()
	}
	return v.log.Flush()
}

// want is a value a call returns that the state holds by reference: the
// i-th item of the call's answer, whose value of kind lives at ref.
type want struct {
	i    int
	id   uint64
	kind index.ValueKind
	ref  index.ValueRef
}

// wants appends what of task t, the i-th item of an answer, lives in the
// value log: its payload, and with all its result and progress. Call with
// mu held.
func wants(ws []want, i int, t *index.Task, all bool) []want {
	if r := t.PayloadRef(); !r.IsZero() {
		ws = append(ws, want{i, t.ID, index.ValuePayload, r})
	}
	if t.Extra == nil || t.Extra.Refs == nil {
		return ws
	}
	if r := t.Extra.ProgressRef(); !r.IsZero() {
		ws = append(ws, want{i, t.ID, index.ValueProgress, r})
	}
	if r := t.Extra.ResultRef(); all && !r.IsZero() {
		ws = append(ws, want{i, t.ID, index.ValueResult, r})
	}
	return ws
}

var vlogKind = [...]vlog.Kind{index.ValuePayload: vlog.Payload, index.ValueResult: vlog.Result,
	index.ValueProgress: vlog.Progress, index.ValueKV: vlog.KVValue}

// readValues reads the values ws name, calling set with each. A value
// moved by a compaction meanwhile is looked up again. One whose task is
// gone meanwhile is ErrNotFound when strict (a lease whose payload cannot
// be read is not handed out), and left unset otherwise (a listing shows
// the task as it was, less that value).
func (c *core) readValues(ws []want, strict bool, set func(w *want, b []byte)) error {
	for k := range ws {
		w := &ws[k]
		b, err := c.readValue(w)
		switch {
		case err == nil:
			set(w, b)
		case errors.Is(err, errGone) && !strict:
		default:
			return err
		}
	}
	return nil
}

// errGone is a value whose task ended or changed while it was being read.
var errGone = fmt.Errorf("%w: the task changed while its value was read", ErrNotFound)

// readValue reads the value w names.
func (c *core) readValue(w *want) ([]byte, error) {
	v := c.vals
	for try := 0; ; try++ {
		b, err := v.log.Read(vlog.Ref(w.ref), w.id, vlogKind[w.kind], nil)
		switch {
		case err == nil:
			return b, nil
		case errors.Is(err, vlog.ErrUnsynced) && try < 3:
			// Its batch is applied, its round not written yet.
			if ferr := v.log.Flush(); ferr != nil {
				return nil, c.failLocked(ferr)
			}
		case errors.Is(err, vlog.ErrMissing) && try < 3:
			// Compaction moved it and removed its file: look it up again.
			if !c.relook(w) {
				return nil, fmt.Errorf("task %d: %w", w.id, errGone)
			}
		default:
			return nil, fmt.Errorf("docket: the %s of task %d: %w", w.kind, w.id, err)
		}
	}
}

// relook refreshes w's reference from the state; false if its task or
// value is gone.
func (c *core) relook(w *want) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.store.Task(w.id)
	if !ok {
		return false
	}
	var r index.ValueRef
	switch w.kind {
	case index.ValuePayload:
		r = t.PayloadRef()
	case index.ValueResult:
		r = t.Ex().ResultRef()
	case index.ValueProgress:
		r = t.Ex().ProgressRef()
	}
	if r.IsZero() {
		return false
	}
	w.ref = r
	return true
}

// leaseWants lists the values of leases held by reference. Call with mu
// held, while planning the claim: a task enqueued by the same batch has
// its values in line in its lease already.
func (c *core) leaseWants(ls []Lease, ws []want) []want {
	for i := range ls {
		if t, ok := c.store.Task(ls[i].ID); ok {
			ws = wants(ws, i, t, false)
		}
	}
	return ws
}

// fillLeases reads the values of ls that leaseWants listed.
func (c *core) fillLeases(ls []Lease, ws []want) error {
	return c.readValues(ws, true, func(w *want, b []byte) {
		switch w.kind {
		case index.ValuePayload:
			ls[w.i].Payload = b
		case index.ValueProgress:
			ls[w.i].Progress = b
		}
	})
}

// fillInfos reads the values of infos that wants listed.
func (c *core) fillInfos(infos []TaskInfo, ws []want) error {
	return c.readValues(ws, false, func(w *want, b []byte) {
		switch w.kind {
		case index.ValuePayload:
			infos[w.i].Payload = b
		case index.ValueProgress:
			infos[w.i].Progress = b
		case index.ValueResult:
			infos[w.i].Result = b
		}
	})
}
